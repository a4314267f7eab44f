"""The live re-verification every deletion must pass, right before it happens.

The plan was made from a snapshot; brokers kept working since. For each approved item the deleter
re-reads the live stores (pipelined, one batch of items at a time, nothing cached between batches)
and decides:

ledger (``delete_ledger``)
    - ledger znode absent: ``already_gone`` (success, PIP-186's idempotence);
    - znode version or BookKeeper custom metadata not what the plan recorded: ``skipped_mismatch``
      (a stale or forged message; the ledger was rewritten or is not the planned one);
    - owner tenant (of the managed ledger, schema, compacted or delayed topic the custom metadata
      names) neither in the Pulsar store (``/admin/policies/<tenant>``) nor an approved deleted
      tenant: ``skipped_mismatch`` (another cluster's ledger in a shared BookKeeper);
    - referenced by any reference the audit rules use: the managed ledger's ledger list, any of its
      cursors' cursor ledger, ``CompactedTopicLedger`` property and delayed-bucket properties, the
      schema locator; or possibly the compacted ledger the ``__compaction`` cursor ledger holds:
      ``skipped_in_use``;
    - a node that cannot be read or decoded: ``retry`` (not provable now; retried, then dead-lettered);
    - else ``delete`` with the znode version just read.

offload copy (``delete_object``)
    - every planned object absent: ``already_gone``;
    - size or ETag differs, user metadata names another managed ledger or another cluster:
      ``skipped_mismatch``; owner tenant not the audited cluster's: ``skipped_mismatch``;
    - the owner managed ledger references the copy's uuid: ``skipped_in_use``;
    - else ``delete`` (data and index objects of the plan, nothing else).

topic (``load_topic``)
    - managed ledger gone: ``skipped_mismatch``; tenant not ours: ``skipped_mismatch``; else ``load``.

Blind spot (the same as the audit's): a ledger referenced by a managed ledger other than the one
its custom metadata names is not looked for here; the audit, which reads them all, did not find one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgerlens.errors import LedgerLensError
from ledgerlens.formats import managed_ledger as mlf
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.names import parse_managed_ledger, schema_id_for_topic, topic_to_managed_ledger
from ledgerlens.formats.paths import ledger_path
from ledgerlens.formats.schema import decode_schema_locator

DELETE, ALREADY_GONE, IN_USE, MISMATCH, RETRY, LOAD = (
    "delete",
    "already_gone",
    "skipped_in_use",
    "skipped_mismatch",
    "retry",
    "load",
)
COMPACTION_CURSOR = "__compaction"


@dataclass(frozen=True)
class Roots:
    """Where the metadata lives (BookKeeper and Pulsar may be different stores)."""

    ledgers: str = "/ledgers"
    managed_ledgers: str = "/managed-ledgers"
    schemas: str = "/schemas"
    tenants: str = "/admin/policies"


@dataclass
class Verdict:
    """What to do with one item, and why."""

    decision: str
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
    from kazoo.exceptions import NoNodeError

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
    from kazoo.exceptions import NoNodeError

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
    from ledgerlens.redact import redact

    return redact(f"{type(e).__name__}: {e}")[:300]


def owners_of(custom: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """(managed ledgers, schema ids) a ledger's custom metadata ties it to."""
    mls: set[str] = set()
    schemas: set[str] = set()
    if custom.get("pulsar/managed-ledger"):
        mls.add(custom["pulsar/managed-ledger"])
    for key in ("pulsar/compactedTopic", "pulsar/delayedIndexTopic"):
        if custom.get(key):
            try:
                mls.add(topic_to_managed_ledger(custom[key]))
            except LedgerLensError:
                pass
    if custom.get("pulsar/schemaId"):
        schemas.add(custom["pulsar/schemaId"])
    for ml in list(mls):
        try:
            from ledgerlens.formats.names import managed_ledger_to_topic

            schemas.add(schema_id_for_topic(managed_ledger_to_topic(ml)))
        except LedgerLensError:
            pass
    return mls, schemas


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

    def __init__(self, bk: Any, pulsar: Any, roots: Roots = Roots()) -> None:
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
        """Per managed ledger: (referenced ids, {"uuids", "compaction_open", "compacted"}) or the error.

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
                out[m] = node if isinstance(node, Exception) else k  # type: ignore[assignment]
                continue
            refs: set[int] = set()
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
                    for li in rec.ledgers:
                        refs.add(li.ledger_id)
                        if li.offload is not None:
                            if li.offload.uuid:
                                info["uuids"].add(li.offload.uuid)
                            info["uuids"].update(s.uuid for s in li.offload.segments if s.uuid)
                for c in k if isinstance(k, list) else []:
                    cnode = cursors[f"{path}/{c}"]
                    if isinstance(cnode, Exception):
                        raise cnode
                    if isinstance(cnode, _Absent):
                        continue  # cursor deleted between list and read: it references nothing now
                    cur = mlf.decode_cursor(cnode.data, path=f"{path}/{c}")
                    if cur.cursors_ledger_id >= 0:
                        refs.add(cur.cursors_ledger_id)
                    if cur.compacted_ledger_id is not None:
                        refs.add(cur.compacted_ledger_id)
                    refs.update(cur.delayed_bucket_ledgers.values())
                    if c == COMPACTION_CURSOR:
                        info["compaction_open"] = cur.cursors_ledger_id >= 0
                        info["compacted"] = cur.compacted_ledger_id
            except Exception as e:  # noqa: BLE001 - undecodable or unreadable: cannot prove anything
                out[m] = e
                continue
            out[m] = (refs, info)
        return out

    def schemas(self, schema_ids: Iterable[str]) -> dict[str, set[int] | Exception]:
        ids = list(dict.fromkeys(schema_ids))
        got = get_many(self.pulsar, (f"{self.roots.schemas}/{s}" for s in ids))
        out: dict[str, set[int] | Exception] = {}
        for s in ids:
            path = f"{self.roots.schemas}/{s}"
            v = got[path]
            if isinstance(v, Exception):
                out[s] = v
            elif isinstance(v, _Absent):
                out[s] = set()
            else:
                try:
                    out[s] = set(decode_schema_locator(v.data, path=path).ledger_ids)
                except LedgerLensError as e:
                    out[s] = e
        return out


def _tenant_verdict(
    tenants: Iterable[str | None], live: Mapping[str, bool | Exception], deleted: set[str]
) -> Verdict | None:
    for t in tenants:
        if not t:
            return Verdict(MISMATCH, "owner tenant unknown: not proven to be this cluster's")
        state = live.get(t)
        if isinstance(state, Exception):
            return Verdict(RETRY, f"tenant {t}: cannot read ({_err(state)})")
        if not state and t not in deleted:
            return Verdict(MISMATCH, f"tenant {t!r} is not in the Pulsar store: another cluster's data")
    return None


def verify_ledgers(
    items: Sequence[Mapping[str, Any]], reader: LiveReader, deleted_tenants: Iterable[str] = ()
) -> list[tuple[Verdict, Node | None]]:
    """Verdicts for approved ``delete_ledger`` items, with the ledger node read (for the version)."""
    deleted = set(deleted_tenants)
    paths = [ledger_path(int(i["expected"]["ledger_id"]), reader.roots.ledgers) for i in items]
    nodes = get_many(reader.bk, paths)
    # what each live ledger claims, to know which owners to read
    claims: list[dict[str, str] | None] = []
    custom: dict[str, str] | None
    pre: list[Verdict | None] = []
    for item, path in zip(items, paths, strict=True):
        exp = item["expected"]
        node = nodes[path]
        claims.append(None)
        if isinstance(node, _Absent):
            pre.append(Verdict(ALREADY_GONE, "ledger znode absent"))
            continue
        if isinstance(node, Exception):
            pre.append(Verdict(RETRY, f"ledger znode unreadable: {_err(node)}"))
            continue
        if node.version != int(exp["znode_version"]):
            pre.append(
                Verdict(
                    MISMATCH,
                    f"ledger metadata changed since the plan "
                    f"(znode version {node.version}, plan {exp['znode_version']})",
                )
            )
            continue
        try:
            custom = decode_ledger_metadata(node.data, path=path).custom_text()
        except LedgerLensError as e:
            pre.append(Verdict(MISMATCH, f"ledger metadata does not decode any more: {e}"))
            continue
        if dict(sorted(custom.items())) != dict(exp.get("custom_metadata") or {}):
            pre.append(Verdict(MISMATCH, "BookKeeper custom metadata differs from the plan"))
            continue
        if custom.get("application") != "pulsar":
            pre.append(Verdict(MISMATCH, "ledger has no Pulsar custom metadata"))
            continue
        claims[-1] = custom
        pre.append(None)

    mls: set[str] = set()
    schema_ids: set[str] = set()
    tenants: set[str] = set()
    owners: list[tuple[set[str], set[str], list[str | None]]] = []
    for custom in claims:
        if custom is None:
            owners.append((set(), set(), []))
            continue
        m, s = owners_of(custom)
        ts: list[str | None] = [tenant_of_ml(x) for x in sorted(m)]
        ts += [x.split("/", 1)[0] if "/" in x else None for x in sorted(s)]
        if not m and not s:
            ts = [None]
        mls |= m
        schema_ids |= s
        tenants |= {t for t in ts if t}
        owners.append((m, s, ts))
    live_tenants = reader.tenants(sorted(tenants)) if tenants else {}
    live_mls = reader.managed_ledgers(sorted(mls)) if mls else {}
    live_schemas = reader.schemas(sorted(schema_ids)) if schema_ids else {}

    out: list[tuple[Verdict, Node | None]] = []
    for item, path, verdict, (m, s, ts) in zip(items, paths, pre, owners, strict=True):
        node = nodes[path]
        if verdict is not None:
            out.append((verdict, None))
            continue
        assert isinstance(node, Node)
        lid = int(item["expected"]["ledger_id"])
        tv = _tenant_verdict(ts, live_tenants, deleted)
        if tv is not None:
            out.append((tv, None))
            continue
        decided: Verdict | None = None
        for ml in sorted(m):
            got = live_mls[ml]
            if isinstance(got, Exception):
                decided = Verdict(
                    RETRY, f"managed ledger {ml}: cannot prove the ledger unreferenced ({_err(got)})"
                )
                break
            refs, info = got
            if lid in refs:
                decided = Verdict(IN_USE, f"referenced by managed ledger {ml} (ledger list or a cursor)")
                break
            component = (item.get("finding") or {}).get("component")
            if (
                component == "compacted-ledger"
                and info["compaction_open"]
                and (info["compacted"] is None or lid > int(info["compacted"]))
            ):
                decided = Verdict(
                    IN_USE, f"may be the compacted ledger of {ml}: the __compaction cursor ledger is open"
                )
                break
        if decided is None:
            for sid in sorted(s):
                got_s = live_schemas[sid]
                if isinstance(got_s, Exception):
                    decided = Verdict(RETRY, f"schema {sid}: cannot read the locator ({_err(got_s)})")
                    break
                if lid in got_s:
                    decided = Verdict(IN_USE, f"referenced by the schema locator of {sid}")
                    break
        out.append(
            (decided or Verdict(DELETE, "unreferenced and unchanged", {"znode_version": node.version}), node)
        )
    return out


def head_object(client: Any, bucket: str, key: str) -> dict[str, Any] | None | Exception:
    """HEAD an object: {"size", "etag", "metadata"}, None when absent, or the error."""
    from botocore.exceptions import BotoCoreError, ClientError

    from ledgerlens.sources.s3 import is_not_found

    try:
        resp = client.head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        return None if is_not_found(e) else e
    except (BotoCoreError, OSError) as e:
        return e
    return {
        "size": int(resp.get("ContentLength", -1)),
        "etag": resp.get("ETag"),
        "metadata": {k.lower(): v for k, v in (resp.get("Metadata") or {}).items()},
    }


def verify_objects(
    items: Sequence[Mapping[str, Any]],
    reader: LiveReader,
    s3: Any,
    *,
    bucket: str,
    cluster_name: str | None = None,
    deleted_tenants: Iterable[str] = (),
    max_in_flight: int = 16,
) -> list[tuple[Verdict, list[str]]]:
    """Verdicts for approved ``delete_object`` items, with the keys still present (to delete)."""
    from concurrent.futures import ThreadPoolExecutor

    deleted = set(deleted_tenants)
    flat = [(n, o["key"]) for n, i in enumerate(items) for o in i["expected"]["objects"]]
    with ThreadPoolExecutor(max_workers=max(1, max_in_flight)) as pool:
        heads = list(pool.map(lambda nk: head_object(s3, bucket, nk[1]), flat))
    head_of = {(n, k): h for (n, k), h in zip(flat, heads, strict=True)}

    pre: list[Verdict | None] = []
    present: list[list[str]] = []
    owner: list[str | None] = []
    for n, item in enumerate(items):
        exp = item["expected"]
        want_bucket = exp.get("bucket")
        keys: list[str] = []
        verdict: Verdict | None = None
        ml: str | None = exp.get("managed_ledger")
        if want_bucket and want_bucket != bucket:
            verdict = Verdict(MISMATCH, f"planned for bucket {want_bucket}, deleter runs on {bucket}")
        for o in exp["objects"] if verdict is None else []:
            h = head_of[(n, o["key"])]
            if h is None:
                continue
            if isinstance(h, Exception):
                verdict = Verdict(RETRY, f"HEAD {o['key']}: {_err(h)}")
                break
            if h["size"] != int(o["size"]) or h["etag"] != o["etag"]:
                verdict = Verdict(
                    MISMATCH,
                    f"{o['key']} changed since the plan (size {h['size']} etag {h['etag']}, "
                    f"plan {o['size']} {o['etag']})",
                )
                break
            meta_ml = h["metadata"].get("managedledgername")
            if meta_ml and ml and meta_ml != ml:
                verdict = Verdict(MISMATCH, f"{o['key']} belongs to managed ledger {meta_ml}, not {ml}")
                break
            ml = ml or meta_ml
            meta_cluster = h["metadata"].get("pulsarclustername")
            if cluster_name and meta_cluster and meta_cluster != cluster_name:
                verdict = Verdict(
                    MISMATCH, f"{o['key']} was written by cluster {meta_cluster}, not {cluster_name}"
                )
                break
            keys.append(o["key"])
        if verdict is None and not keys:
            verdict = Verdict(ALREADY_GONE, "every planned object is absent")
        if verdict is None and not ml:
            verdict = Verdict(MISMATCH, "owner managed ledger unknown: not proven to be this cluster's")
        pre.append(verdict)
        present.append(keys)
        owner.append(ml)

    mls = sorted({m for m, v in zip(owner, pre, strict=True) if m and v is None})
    tenants = sorted({t for t in (tenant_of_ml(m) for m in mls) if t})
    live_tenants = reader.tenants(tenants) if tenants else {}
    live_mls = reader.managed_ledgers(mls) if mls else {}
    out: list[tuple[Verdict, list[str]]] = []
    for item, verdict, keys, ml in zip(items, pre, present, owner, strict=True):
        if verdict is not None:
            out.append((verdict, []))
            continue
        assert ml is not None
        tv = _tenant_verdict([tenant_of_ml(ml)], live_tenants, deleted)
        if tv is not None:
            out.append((tv, []))
            continue
        got = live_mls[ml]
        if isinstance(got, Exception):
            out.append(
                (Verdict(RETRY, f"managed ledger {ml}: cannot prove the copy unreferenced ({_err(got)})"), [])
            )
            continue
        _, info = got
        if item["expected"]["uuid"] in info["uuids"]:
            out.append((Verdict(IN_USE, f"offload context of managed ledger {ml} references it"), []))
            continue
        out.append((Verdict(DELETE, "unreferenced and unchanged", {"keys": keys}), keys))
    return out


def verify_loads(
    items: Sequence[Mapping[str, Any]], reader: LiveReader, deleted_tenants: Iterable[str] = ()
) -> list[Verdict]:
    """Verdicts for approved ``load_topic`` items."""
    mls = [str(i["expected"]["managed_ledger"]) for i in items]
    nodes = get_many(reader.pulsar, (f"{reader.roots.managed_ledgers}/{m}" for m in mls))
    tenants = sorted({t for t in (tenant_of_ml(m) for m in mls) if t})
    live = reader.tenants(tenants) if tenants else {}
    out = []
    for m in mls:
        node = nodes[f"{reader.roots.managed_ledgers}/{m}"]
        tv = _tenant_verdict([tenant_of_ml(m)], live, set(deleted_tenants))
        if tv is not None:
            out.append(tv)
        elif isinstance(node, Exception):
            out.append(Verdict(RETRY, f"managed ledger {m}: {_err(node)}"))
        elif isinstance(node, _Absent):
            out.append(Verdict(MISMATCH, f"managed ledger {m} is gone: nothing to load"))
        else:
            out.append(Verdict(LOAD, "topic exists"))
    return out
