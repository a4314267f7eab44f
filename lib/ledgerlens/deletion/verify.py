"""The live re-verification every deletion must pass, right before it happens: the live reads and
verdicts every action shares; each action's own check is in its module (``deletion.actions``).

The plan was made from a snapshot; brokers kept working since. The deleter's check is a superset of
the audit's: "referenced" is ``ledgerlens.formats.references``, applied to two reads of the live
stores, and an item is deleted only when both find it unreferenced and provable:

- the reference index (:mod:`ledgerlens.deletion.references`): every managed ledger, cursor and
  schema locator of the Pulsar stores, read at the start of the deleter run and again whenever it
  is older than its bound (default 5 minutes);
- right before the delete, the item's own nodes, pipelined per batch of items, nothing cached
  between batches: the ledger znode, the owners its custom metadata names (managed ledger and its
  cursors, schema locator), the owner tenant, the objects' HEAD.

ledger (``delete_ledger``)
    - ledger znode absent: ``already_gone`` (success, PIP-186's idempotence);
    - znode version or BookKeeper custom metadata not what the plan recorded: ``skipped_mismatch``
      (a stale or forged message; the ledger was rewritten or is not the planned one);
    - owner tenant not this cluster's by the audit's rule (its node ``/admin/policies/<tenant>``
      read live, or a managed ledger or schema of it in the reference index) nor an approved
      deleted tenant, or owner unknown: ``skipped_mismatch`` (another cluster's ledger);
    - any managed ledger's ledger list, any cursor's cursor ledger, ``CompactedTopicLedger`` or
      delayed-bucket property, any schema locator names it (index or live owner read), or it may be
      the compacted ledger the open ``__compaction`` cursor ledger holds: ``skipped_in_use``;
    - an owner whose references are unknown (emptied, does not decode, ``NoAuth``, a subtree that
      cannot be listed): ``skipped_unprovable``, with the node that made it so;
    - a node that cannot be read now (connection loss): ``retry``;
    - else ``delete`` with the znode version just read.

offload copy (``delete_object``)
    - every planned object absent: ``already_gone``;
    - size or ETag differs, user metadata names another managed ledger or another cluster, owner
      tenant not the audited cluster's: ``skipped_mismatch``;
    - any managed ledger's offload context names the copy's uuid: ``skipped_in_use``;
    - the owner managed ledger's references are unknown: ``skipped_unprovable``;
    - the copy is the only one of its data (the ledger's BookKeeper copy is gone, or a PIP-76
      segment whose ledgers are not known) while its managed ledger still exists:
      ``skipped_unprovable`` (deleted only once the managed ledger is proven deleted);
    - else ``delete`` (data and index objects of the plan, nothing else).

topic (``load_topic``)
    - managed ledger gone: ``skipped_mismatch``; tenant not ours: ``skipped_mismatch``; else ``load``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NoAuthError, NoNodeError

from ledgerlens.deletion.outcomes import Decision
from ledgerlens.deletion.references import DEFAULT_ROOTS, ReferenceIndex, Roots
from ledgerlens.errors import LedgerLensError
from ledgerlens.formats import managed_ledger as mlf
from ledgerlens.formats import references as refs
from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.formats.paths import ledger_path
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens.settings.redact import redact

DELETE, ALREADY_GONE, IN_USE, UNPROVABLE, MISMATCH, RETRY, LOAD = (
    Decision.DELETE,
    Decision.ALREADY_GONE,
    Decision.IN_USE,
    Decision.UNPROVABLE,
    Decision.MISMATCH,
    Decision.RETRY,
    Decision.LOAD,
)


class Unprovable(Exception):
    """A node whose references are unknown (emptied, does not decode, not readable by us)."""

    def __init__(self, node: str, why: str) -> None:
        super().__init__(f"{node}: {why}")
        self.node = node
        self.why = why


@dataclass
class Verdict:
    """What to do with one item, and why."""

    decision: Decision
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


class _Absent:
    """A node that does not exist."""


ABSENT = _Absent()


@dataclass(frozen=True)
class Node:
    """A znode read: its bytes and version."""

    data: bytes
    version: int


def get_many(client: Any, paths: Iterable[str]) -> dict[str, Node | _Absent | Exception]:
    """Pipelined reads: every path in flight at once; absent nodes map to ``ABSENT``."""
    wanted = list(dict.fromkeys(paths))
    pending = [(p, client.get_async(p)) for p in wanted]
    out: dict[str, Node | _Absent | Exception] = {}
    for p, res in pending:
        try:
            data, stat = res.get(timeout=30)
            out[p] = Node(data or b"", int(stat.version))
        except NoNodeError:
            out[p] = ABSENT
        except Exception as e:  # noqa: BLE001 - connection loss, session expiry, timeout: retry later
            out[p] = e
    return out


def children_many(client: Any, paths: Iterable[str]) -> dict[str, list[str] | _Absent | Exception]:
    """Pipelined child listings."""
    wanted = list(dict.fromkeys(paths))
    pending = [(p, client.get_children_async(p)) for p in wanted]
    out: dict[str, list[str] | _Absent | Exception] = {}
    for p, res in pending:
        try:
            out[p] = sorted(res.get(timeout=30))
        except NoNodeError:
            out[p] = ABSENT
        except Exception as e:  # noqa: BLE001
            out[p] = e
    return out


def _err(e: Exception) -> str:
    return redact(f"{type(e).__name__}: {e}")[:300]


def tenant_of_ml(ml: str) -> str | None:
    try:
        return parse_managed_ledger(ml).tenant
    except LedgerLensError:
        return None


class LiveReader:
    """Reads for one batch of items (fresh each batch; no cache survives a batch).

    ``bk`` reads ``/ledgers``; ``pulsar`` reads managed ledgers, schemas and tenants (the same client
    when one ZooKeeper holds both).
    """

    def __init__(self, bk: Any, pulsar: Any, roots: Roots = DEFAULT_ROOTS) -> None:
        self.bk = bk
        self.pulsar = pulsar
        self.roots = roots

    def tenants(self, tenants: Iterable[str]) -> dict[str, bool | Exception]:
        got = get_many(self.pulsar, (f"{self.roots.tenants}/{t}" for t in tenants))
        out: dict[str, bool | Exception] = {}
        for t in tenants:
            v = got[f"{self.roots.tenants}/{t}"]
            out[t] = v if isinstance(v, Exception) else not isinstance(v, _Absent)
        return out

    def managed_ledgers(self, mls: Iterable[str]) -> dict[str, tuple[set[int], dict[str, Any]] | Exception]:
        """Per managed ledger: (referenced ids, {"uuids", "compaction_open", "compacted", "exists"})
        or the error: :class:`Unprovable` when the references are unknown (emptied, undecodable,
        ``NoAuth``), another exception when the store could not be read now.

        A managed ledger whose node is gone references nothing (its cursors are its children).
        """
        mls = list(dict.fromkeys(mls))
        root = self.roots.managed_ledgers
        nodes = get_many(self.pulsar, (f"{root}/{m}" for m in mls))
        kids = children_many(self.pulsar, (f"{root}/{m}" for m in mls))
        cursor_paths = []
        for m in mls:
            k = kids[f"{root}/{m}"]
            if isinstance(k, list):
                cursor_paths += [f"{root}/{m}/{c}" for c in k]
        cursors = get_many(self.pulsar, cursor_paths)
        out: dict[str, tuple[set[int], dict[str, Any]] | Exception] = {}
        for m in mls:
            path = f"{root}/{m}"
            node, k = nodes[path], kids[path]
            if isinstance(node, Exception) or isinstance(k, Exception):
                err = node if isinstance(node, Exception) else k
                assert isinstance(err, Exception)
                out[m] = (
                    Unprovable(path, f"not readable ({_err(err)})") if isinstance(err, NoAuthError) else err
                )
                continue
            ids: set[int] = set()
            info: dict[str, Any] = {
                "uuids": set(),
                "compaction_open": False,
                "compacted": None,
                "exists": False,
            }
            try:
                if isinstance(node, Node):
                    info["exists"] = True
                    rec = mlf.decode_managed_ledger(node.data, path=path)
                    if refs.is_emptied(rec, node.version):
                        raise Unprovable(
                            path, f"emptied (0 bytes, rewritten at znode version {node.version})"
                        )
                    ids.update(r.ledger_id for r in refs.managed_ledger_references(rec))
                    info["uuids"] = refs.offload_uuids(rec)
                for c in k if isinstance(k, list) else []:
                    cpath = f"{path}/{c}"
                    cnode = cursors[cpath]
                    if isinstance(cnode, NoAuthError):
                        raise Unprovable(cpath, f"not readable ({_err(cnode)})")
                    if isinstance(cnode, Exception):
                        raise cnode
                    if isinstance(cnode, _Absent):
                        continue  # cursor deleted between list and read: it references nothing now
                    cur = mlf.decode_cursor(cnode.data, path=cpath)
                    ids.update(r.ledger_id for r in refs.cursor_references(cur))
                    if c == refs.COMPACTION_CURSOR:
                        info["compaction_open"] = cur.cursors_ledger_id >= 0
                        info["compacted"] = cur.compacted_ledger_id
            except LedgerLensError as e:  # does not decode: its references are unknown
                out[m] = Unprovable(getattr(e, "where", None) or path, f"does not decode ({e})")
                continue
            except Exception as e:  # noqa: BLE001 - Unprovable, or unreadable now: cannot prove anything
                out[m] = e
                continue
            out[m] = (ids, info)
        return out

    def schemas(self, schema_ids: Iterable[str]) -> dict[str, set[int] | Exception]:
        ids = list(dict.fromkeys(schema_ids))
        got = get_many(self.pulsar, (f"{self.roots.schemas}/{s}" for s in ids))
        out: dict[str, set[int] | Exception] = {}
        for s in ids:
            path = f"{self.roots.schemas}/{s}"
            v = got[path]
            if isinstance(v, NoAuthError):
                out[s] = Unprovable(path, f"not readable ({_err(v)})")
            elif isinstance(v, Exception):
                out[s] = v
            elif isinstance(v, _Absent):
                out[s] = set()
            else:
                try:
                    out[s] = {
                        r.ledger_id for r in refs.schema_references(decode_schema_locator(v.data, path=path))
                    }
                except LedgerLensError as e:
                    out[s] = Unprovable(path, f"does not decode ({e})")
        return out

    def ledger_nodes(self, ledger_ids: Iterable[int]) -> dict[int, bool | Exception]:
        """Whether each ledger's BookKeeper metadata znode exists (its BookKeeper copy)."""
        ids = list(dict.fromkeys(ledger_ids))
        got = get_many(self.bk, (ledger_path(i, self.roots.ledgers) for i in ids))
        out: dict[int, bool | Exception] = {}
        for i in ids:
            val = got[ledger_path(i, self.roots.ledgers)]
            out[i] = val if isinstance(val, Exception) else not isinstance(val, _Absent)
        return out


def _unreadable(what: str, e: Exception, retry_why: str) -> Verdict:
    """``skipped_unprovable`` for a node whose references are unknown, ``retry`` for a store that
    could not be read now."""
    if isinstance(e, Unprovable):
        return Verdict(UNPROVABLE, f"{what}: {e.why}", {"node": e.node})
    return Verdict(RETRY, f"{what}: {retry_why} ({_err(e)})")


def _index_verdict(
    index: ReferenceIndex | None, ledger_id: int | None, names: Iterable[str]
) -> Verdict | None:
    """What the reference index says of an item: in use, unprovable, or nothing against it."""
    if index is None:
        return None
    if ledger_id is not None and ledger_id in index.ledgers:
        node = index.ledgers[ledger_id]
        return Verdict(IN_USE, f"referenced by {node}", {"node": node})
    hit = index.unprovable_for(sorted(set(names)))
    if hit is not None:
        name, why = hit
        return Verdict(
            UNPROVABLE, f"references of {name} are unknown: {why}", {"node": why.split(": ", 1)[0]}
        )
    return None


def _tenant_verdict(
    tenants: Iterable[str | None],
    live: Mapping[str, bool | Exception],
    deleted: set[str],
    index: ReferenceIndex | None = None,
) -> Verdict | None:
    """The audit's ownership rule (``audit/ownership.py``): a tenant is this cluster's when its node
    (read live) or any of its managed ledgers or schemas (the reference index) is in the Pulsar store."""
    owned = index.owned_tenants() if index is not None else set()
    for t in tenants:
        if not t:
            return Verdict(MISMATCH, "owner tenant unknown: not proven to be this cluster's")
        state = live.get(t)
        if isinstance(state, Exception):
            return Verdict(RETRY, f"tenant {t}: cannot read ({_err(state)})")
        if not state and t not in deleted and t not in owned:
            return Verdict(MISMATCH, f"tenant {t!r} is not in the Pulsar store: another cluster's data")
    return None
