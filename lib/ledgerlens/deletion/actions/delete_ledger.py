"""``delete_ledger``: remove an orphan ledger's znode, with the version just read (BookKeeper's own
way: the bookies' garbage collector reclaims the entries). The rules ``verify_ledgers`` applies are
listed in :mod:`ledgerlens.deletion.verify`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from ledgerlens.deletion.actions.base import Action, ActionContext, Work
from ledgerlens.deletion.outcomes import Outcome
from ledgerlens.deletion.references import ReferenceIndex
from ledgerlens.deletion.verify import (
    ALREADY_GONE,
    DELETE,
    IN_USE,
    MISMATCH,
    RETRY,
    LiveReader,
    Node,
    Verdict,
    _Absent,
    _err,
    _index_verdict,
    _tenant_verdict,
    _unreadable,
    get_many,
    tenant_of_ml,
)
from ledgerlens.errors import LedgerLensError
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.paths import ledger_path
from ledgerlens.formats.references import owners_of


def _node_verdict(
    node: Node | _Absent | Exception, exp: Mapping[str, Any], path: str
) -> Verdict | dict[str, str]:
    """The ledger's BookKeeper custom metadata when its node is as planned, else the verdict."""
    if isinstance(node, _Absent):
        return Verdict(ALREADY_GONE, "ledger znode absent")
    if isinstance(node, Exception):
        return Verdict(RETRY, f"ledger znode unreadable: {_err(node)}")
    if node.version != int(exp["znode_version"]):
        return Verdict(
            MISMATCH,
            f"ledger metadata changed since the plan "
            f"(znode version {node.version}, plan {exp['znode_version']})",
        )
    try:
        custom = decode_ledger_metadata(node.data, path=path).custom_text()
    except LedgerLensError as e:
        return Verdict(MISMATCH, f"ledger metadata does not decode any more: {e}")
    if dict(sorted(custom.items())) != dict(exp.get("custom_metadata") or {}):
        return Verdict(MISMATCH, "BookKeeper custom metadata differs from the plan")
    if custom.get("application") != "pulsar":
        return Verdict(MISMATCH, "ledger has no Pulsar custom metadata")
    return custom


_Claimed = tuple[set[str], set[str], list[str | None]]  # managed ledgers, schema ids, their tenants


def _claimed_owners(custom: Mapping[str, str] | None) -> _Claimed:
    """The owners a ledger's custom metadata names, and their tenants (None: unknown)."""
    if custom is None:
        return set(), set(), []
    m, s = owners_of(custom)
    ts: list[str | None] = [tenant_of_ml(x) for x in sorted(m)]
    ts += [x.split("/", 1)[0] if "/" in x else None for x in sorted(s)]
    if not m and not s:
        ts = [None]
    return m, s, ts


def _reference_verdict(
    item: Mapping[str, Any],
    lid: int,
    owners: _Claimed,
    live_mls: Mapping[str, tuple[set[int], dict[str, Any]] | Exception],
    live_schemas: Mapping[str, set[int] | Exception],
) -> Verdict | None:
    """IN_USE when a live owner the ledger names references it (or may: a compaction in flight);
    the unreadable verdict when an owner cannot be read; else None."""
    m, s, _ = owners
    for ml in sorted(m):
        got = live_mls[ml]
        if isinstance(got, Exception):
            return _unreadable(f"managed ledger {ml}", got, "cannot prove the ledger unreferenced")
        refs, info = got
        if lid in refs:
            return Verdict(IN_USE, f"referenced by managed ledger {ml} (ledger list or a cursor)")
        component = (item.get("finding") or {}).get("component")
        if (
            component == "compacted-ledger"
            and info["compaction_open"]
            and (info["compacted"] is None or lid > int(info["compacted"]))
        ):
            return Verdict(
                IN_USE, f"may be the compacted ledger of {ml}: the __compaction cursor ledger is open"
            )
    for sid in sorted(s):
        got_s = live_schemas[sid]
        if isinstance(got_s, Exception):
            return _unreadable(f"schema {sid}", got_s, "cannot read the locator")
        if lid in got_s:
            return Verdict(IN_USE, f"referenced by the schema locator of {sid}")
    return None


def verify_ledgers(
    items: Sequence[Mapping[str, Any]],
    reader: LiveReader,
    deleted_tenants: Iterable[str] = (),
    index: ReferenceIndex | None = None,
) -> list[tuple[Verdict, Node | None]]:
    """Verdicts for approved ``delete_ledger`` items, with the ledger node read (for the version).

    ``index`` is the deleter's current reference index (every reference of the Pulsar stores);
    without it only the owners the ledger's custom metadata names are read (tests of one rule).
    """
    deleted = set(deleted_tenants)
    paths = [ledger_path(int(i["expected"]["ledger_id"]), reader.roots.ledgers) for i in items]
    nodes = get_many(reader.bk, paths)
    # what each live ledger claims, to know which owners to read
    checked = [
        _node_verdict(nodes[path], item["expected"], path) for item, path in zip(items, paths, strict=True)
    ]
    owners = [_claimed_owners(None if isinstance(c, Verdict) else c) for c in checked]
    mls = {x for m, _, _ in owners for x in m}
    schema_ids = {x for _, s, _ in owners for x in s}
    tenants = {t for _, _, ts in owners for t in ts if t}
    live_tenants = reader.tenants(sorted(tenants)) if tenants else {}
    live_mls = reader.managed_ledgers(sorted(mls)) if mls else {}
    live_schemas = reader.schemas(sorted(schema_ids)) if schema_ids else {}

    out: list[tuple[Verdict, Node | None]] = []
    for item, path, check, owned in zip(items, paths, checked, owners, strict=True):
        if isinstance(check, Verdict):
            out.append((check, None))
            continue
        node = nodes[path]
        assert isinstance(node, Node)
        lid = int(item["expected"]["ledger_id"])
        decided = _tenant_verdict(owned[2], live_tenants, deleted, index)
        if decided is None:
            decided = _index_verdict(index, lid, owned[0] | owned[1])
        if decided is None:
            decided = _reference_verdict(item, lid, owned, live_mls, live_schemas)
        out.append(
            (decided or Verdict(DELETE, "unreferenced and unchanged", {"znode_version": node.version}), node)
        )
    return out


class DeleteLedger(Action):
    name = "delete_ledger"
    uses_index = True

    def verify(self, ctx: ActionContext, group: Sequence[Work], deleted: Sequence[str]) -> None:
        items = [w.item for w in group if w.item is not None]
        for w, (verdict, node) in zip(
            group, verify_ledgers(items, ctx.reader, deleted, ctx.index), strict=True
        ):
            w.decide(verdict, node)

    def execute(self, ctx: ActionContext, work: Sequence[Work]) -> None:
        pending = []
        for w in work:
            path = ledger_path(int(w.item["expected"]["ledger_id"]), ctx.roots.ledgers)  # type: ignore[index]
            pending.append((w, ctx.reader.bk.delete_async(path, version=w.act.version)))
        for w, res in pending:
            try:
                res.get(timeout=30)
                w.outcome = Outcome.DELETED
                w.reason = f"ledger znode removed at version {w.act.version}"
            except NoNodeError:
                w.outcome, w.reason = Outcome.ALREADY_GONE, "ledger znode vanished just before the delete"
            except BadVersionError:
                w.fail("ledger znode changed between verification and delete")
            except Exception as e:  # noqa: BLE001 - connection loss / session expiry: verified again on retry
                w.fail(f"delete failed: {type(e).__name__}: {e}"[:300])
