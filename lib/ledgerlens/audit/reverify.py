"""Re-verification of deletion-relevant findings against the live stores.

The inventory is a snapshot taken over minutes while brokers keep working. Before a finding that
could lead to a deletion (``orphan_*``) or that claims data loss (``missing_*``) is reported, the
pipeline checks it again, one targeted read per candidate, pipelined:

- ``orphan_ledger``: the ledger znode still exists and its owner node (managed ledger, cursor,
  schema locator) still does not reference it.
- ``missing_ledger``: the ledger znode is still absent and the referencing node still references it.
- ``orphan_offload_object``: the object still exists; its owner managed ledger, read from the
  object's user metadata, is not a blind spot and does not reference the object's uuid.
- ``missing_offload_object``: the object is still absent and the managed ledger still says the
  offload is complete with that uuid.

A candidate whose check cannot be done (node unreadable, owner undecodable) is dropped: silence
is safer than a false positive. Each drop is counted by kind and reason.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from ledgerlens.errors import LedgerLensError, SourceError
from ledgerlens.formats import managed_ledger as mlf
from ledgerlens.formats import references as refs
from ledgerlens.formats.names import encode_component, parse_managed_ledger, topic_to_managed_ledger
from ledgerlens.formats.offload import parse_offload_key
from ledgerlens.formats.paths import ledger_path
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens.settings.config import S3Source, ZooKeeperSource
from ledgerlens.sources.zk_client import PipelinedReader, connect
from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot

REVERIFY_S3_ATTEMPTS = 3  # per HEAD: a lost store fails the run in seconds, never a verdict

# A store re-verification reads: a live ZooKeeper, or a point-in-time source with ``reads()`` and
# the same root attributes (``sources.zk_snapshot.ZooKeeperSnapshot``).
Store = ZooKeeperSource | ZooKeeperSnapshot


REVERIFIED_KINDS = ("orphan_ledger", "missing_ledger", "orphan_offload_object", "missing_offload_object")
USER_METADATA_ML = "managedledgername"


@dataclass
class Verdicts:
    """Which candidates still hold, and why the others were dropped."""

    keep: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)  # "kind: reason" -> n

    def drop(self, row: dict[str, Any], reason: str) -> None:
        self.dropped[f"{row['kind']}: {reason}"] += 1


class _Reads:
    """Pipelined ZooKeeper reads: ``get_many(paths)`` -> {path: bytes | None (absent) | Exception}."""

    def __init__(self, zk: ZooKeeperSource) -> None:
        self.zk = zk

    def __enter__(self) -> _Reads:
        self.client = connect(self.zk.hosts, timeout_s=self.zk.timeout_s, auth=self.zk.auth)
        self.reader = PipelinedReader(
            self.client, max_in_flight=self.zk.max_in_flight, rate_limit=self.zk.rate_limit
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.stop()
        self.client.close()

    def get_many(self, paths: Iterable[str]) -> dict[str, Any]:
        wanted = list(dict.fromkeys(paths))
        out: dict[str, Any] = dict.fromkeys(wanted)  # vanished nodes are not returned: absent
        for node in self.reader.get(wanted):
            out[node.path] = node.error if node.error is not None else (node.data or b"")
        return out


def _owner_path(row: dict[str, Any], zk: Store) -> tuple[str, str] | None:
    """(node path, what it is) of the node that would reference an orphan ledger candidate."""
    comp = row.get("component")
    ml_root = zk.managed_ledgers_root
    ml = row.get("ml_owner") or row.get("managed_ledger")
    if comp == "schema" and row.get("schema_id"):
        return f"{zk.schemas_root}/{row['schema_id']}", "schema"
    if comp == "cursor" and ml and (row.get("cursor_node") or row.get("cursor")):
        node = row.get("cursor_node") or encode_component(row["cursor"])
        return f"{ml_root}/{ml}/{node}", "cursor"
    if comp == "managed-ledger" and ml:
        return f"{ml_root}/{ml}", "managed-ledger"
    if comp == "compacted-ledger" and row.get("compacted_topic"):
        return f"{ml_root}/{topic_to_managed_ledger(row['compacted_topic'])}/__compaction", "compaction"
    if comp == "delayed-index-bucket" and row.get("delayed_topic") and row.get("delayed_cursor"):
        ml = topic_to_managed_ledger(row["delayed_topic"])
        return f"{ml_root}/{ml}/{encode_component(row['delayed_cursor'])}", "bucket"
    return None


def _references(kind: str, data: bytes, path: str) -> set[int]:
    """Ledger ids a node references in the role it has for the finding
    (``ledgerlens.formats.references``)."""
    if kind == "managed-ledger":
        found = refs.managed_ledger_references(mlf.decode_managed_ledger(data, path=path))
    elif kind == "schema":
        found = refs.schema_references(decode_schema_locator(data, path=path))
    else:
        role = {"cursor": "cursor", "compaction": "compacted-ledger"}.get(kind, "delayed-index-bucket")
        found = (r for r in refs.cursor_references(mlf.decode_cursor(data, path=path)) if r.component == role)
    return {r.ledger_id for r in found}


_NODE_KIND = {
    "schema": "schema",
    "managed-ledger": "managed-ledger",
    "offload": "managed-ledger",
    "cursor": "cursor",
    "compacted-ledger": "compaction",
    "delayed-index-bucket": "bucket",
}


def _key(store: Any) -> str:
    """One reads session per store; two snapshot stores of one data directory (BookKeeper and Pulsar
    roles) differ by their stages: each one's replayed tree covers only its own roots."""
    if isinstance(store, ZooKeeperSource):
        return f"zk:{store.hosts}"
    return f"{store.location} {','.join(getattr(store, 'stages', ()))}"


def _open(store: Any) -> Any:
    """Point reads of a store: a live ZooKeeper session, or the store's own ``reads()`` (snapshots)."""
    return _Reads(store) if isinstance(store, ZooKeeperSource) else store.reads()


def _owner_verdict(
    r: dict[str, Any], owners: Sequence[dict[int, tuple[str, str] | None]], data: Sequence[dict[str, Any]]
) -> str | None:
    """Why an orphan candidate no longer holds in any Pulsar store, or None when it still does."""
    for own, got in zip(owners, data, strict=True):
        owner = own[id(r)]
        if owner is None:
            return "owner unknown"
        node = got.get(owner[0])
        if node is None:
            continue  # owner gone from this store
        if isinstance(node, Exception):
            return "owner node unreadable"
        try:
            refs = _references(owner[1], node, owner[0])
        except LedgerLensError:
            return "owner node does not decode"
        if int(r["ledger_id"]) in refs:
            return "referenced again since the scan"
    return None


def _live_tenants(pulsar_reads: Sequence[tuple[Store, Any]], tenants: Sequence[str]) -> set[str]:
    """The ``tenants`` that exist in at least one live Pulsar store (``audit/ownership.py``'s rule):
    a node under the policies, managed-ledgers or schemas root."""
    live: set[str] = set()
    for store, rd in pulsar_reads:
        nodes = {
            f"{root.rstrip('/')}/{t}": t
            for t in tenants
            if t not in live
            for root in (store.policies_root, store.managed_ledgers_root, store.schemas_root)
        }
        got = rd.get_many(nodes)
        live.update(t for p, t in nodes.items() if got.get(p) is not None)
    return live


def _as_foreign(r: dict[str, Any], kind: str = "foreign_ledger", ml: str | None = None) -> dict[str, Any]:
    """An orphan candidate whose tenant is in no live Pulsar store: a foreign (info) finding."""
    try:
        evidence = json.loads(r.get("evidence") or "{}")
    except ValueError:
        evidence = {}
    tenant = ml.split("/")[0] if ml else r.get("tenant")
    evidence.update(tenant=tenant, reason="tenant in none of the given Pulsar metadata stores (live)")
    out = {**r, "kind": kind, "severity": "info", "action": "none", "evidence": json.dumps(evidence)}
    if ml:
        out.update(managed_ledger=ml, tenant=tenant)
    return out


@dataclass
class _Run:
    """One re-verification: its verdicts, the stores it reads and what it may not judge."""

    v: Verdicts
    zk: Store
    bk_reads: Any  # point reads of the BookKeeper store ``zk``
    pulsar_reads: list[tuple[Store, Any]]  # each Pulsar store with its point reads
    deleted: set[str]
    blind_spots: Sequence[str]

    def blind(self, ml: str | None) -> bool:
        """Whether ``ml`` is a blind spot (without a name: whether there is any)."""
        if not ml:
            return bool(self.blind_spots)
        return any(b == "" or ml == b or ml.startswith(b + "/") for b in self.blind_spots)

    def ledger_node(self, got: dict[str, Any], r: dict[str, Any]) -> Any:
        """The candidate's ledger znode in ``got`` (None: absent)."""
        return got.get(ledger_path(int(r["ledger_id"]), self.zk.ledgers_root))


def reverify(
    candidates: Sequence[dict[str, Any]],
    zk: Store,
    s3: S3Source | None,
    *,
    blind_spots: Sequence[str] = (),
    s3_client_factory: Callable[[], Any] | None = None,
    pulsar: Sequence[Store] | None = None,
    deleted_tenants: Iterable[str] = (),
) -> Verdicts:
    """Check every candidate again; see the module docstring for what each check is.

    ``candidates`` are finding rows (dicts with the FINDINGS columns) joined with the owner
    columns of the ledger (``ml_owner``, ``cursor_node``, ``schema_id``, ``compacted_topic``,
    ``delayed_topic``, ``delayed_cursor``). ``blind_spots`` are managed-ledger names or prefixes
    whose metadata did not decode; ``""`` stands for every managed ledger. ``zk`` holds
    BookKeeper's ledgers; ``pulsar`` are the Pulsar metadata stores (default: ``zk`` itself); a
    snapshot store is read at its own point in time. An
    orphan ledger whose tenant exists in none of them (and is not in ``deleted_tenants``) is
    turned into ``foreign_ledger`` (``audit/ownership.py``).
    """
    v = Verdicts()
    if not candidates:
        return v
    stores = list(pulsar) if pulsar else [zk]
    deleted = set(deleted_tenants)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in candidates:
        by_kind.setdefault(row["kind"], []).append(row)

    with ExitStack() as stack:
        sessions: dict[str, Any] = {}
        for store in [zk, *stores]:
            if _key(store) not in sessions:
                sessions[_key(store)] = stack.enter_context(_open(store))
        pulsar_reads = [(store, sessions[_key(store)]) for store in stores]
        run = _Run(v, zk, sessions[_key(zk)], pulsar_reads, deleted, blind_spots)

        # Ledger existence for ledger findings; owner / referencing nodes in every Pulsar store.
        ledger_rows = by_kind.get("orphan_ledger", []) + by_kind.get("missing_ledger", [])
        got = run.bk_reads.get_many(ledger_path(int(r["ledger_id"]), zk.ledgers_root) for r in ledger_rows)
        orphans = by_kind.get("orphan_ledger", [])
        owners = [{id(r): _owner_path(r, store) for r in orphans} for store in stores]
        tenants = sorted({t for r in orphans if (t := r.get("tenant")) and t not in deleted})
        live_tenants = _live_tenants(pulsar_reads, tenants)
        owner_data: list[dict[str, Any]] = []
        for (_store, rd), own in zip(pulsar_reads, owners, strict=True):
            paths = [o[0] for o in own.values() if o]
            paths += [r["path"] for r in by_kind.get("missing_ledger", []) if r.get("path")]
            paths += [r["path"] for r in by_kind.get("missing_offload_object", []) if r.get("path")]
            owner_data.append(rd.get_many(paths))
        pgot: dict[str, Any] = {}  # Pulsar nodes: the first store that has the node
        for nodes in owner_data:
            for path, value in nodes.items():
                if pgot.get(path) is None:
                    pgot[path] = value

        _orphan_ledgers(run, orphans, got, live_tenants, owners, owner_data)
        _missing_ledgers(run, by_kind.get("missing_ledger", []), got, pgot)
        objects = by_kind.get("orphan_offload_object", []) + by_kind.get("missing_offload_object", [])
        if objects:
            if s3 is None:
                for r in objects:
                    v.drop(r, "no S3 source to re-verify against")
            else:
                _reverify_objects(run, by_kind, pgot, s3, s3_client_factory)
    return v


def _orphan_ledgers(
    run: _Run,
    orphans: Sequence[dict[str, Any]],
    got: dict[str, Any],
    live_tenants: set[str],
    owners: Sequence[dict[int, tuple[str, str] | None]],
    owner_data: Sequence[dict[str, Any]],
) -> None:
    """Each ``orphan_ledger`` candidate kept (or turned foreign) or dropped with its reason."""
    for r in orphans:
        node = run.ledger_node(got, r)
        if node is None:
            run.v.drop(r, "ledger deleted since the scan")
            continue
        if isinstance(node, Exception):
            run.v.drop(r, "ledger node unreadable at re-verification")
            continue
        tenant = r.get("tenant")
        if tenant not in run.deleted and tenant not in live_tenants:
            run.v.keep.append(_as_foreign(r))
            continue
        verdict = _owner_verdict(r, owners, owner_data)
        if verdict is None:
            run.v.keep.append(r)
        else:
            run.v.drop(r, verdict)


def _referencing_data(
    v: Verdicts, r: dict[str, Any], exists: bool, created: str, nodes: dict[str, Any], gone: str
) -> Any:
    """The bytes of the node that references a ``missing_*`` candidate, or None when the candidate
    is dropped: what it misses ``exists`` now (reason ``created``), or that node is absent or
    unreadable (reason ``gone``)."""
    if exists:
        v.drop(r, created)
        return None
    data = nodes.get(r.get("path") or "")
    if data is None or isinstance(data, Exception):
        v.drop(r, gone)
        return None
    return data


def _missing_ledgers(
    run: _Run, rows: Sequence[dict[str, Any]], got: dict[str, Any], pgot: dict[str, Any]
) -> None:
    """Each ``missing_ledger`` candidate kept while the ledger is still absent and still referenced."""
    for r in rows:
        exists = run.ledger_node(got, r) is not None
        data = _referencing_data(
            run.v,
            r,
            exists,
            "ledger exists (created after the scan)",
            pgot,
            "referencing node gone or unreadable",
        )
        if data is None:
            continue
        kind = _NODE_KIND.get(r.get("component") or "", "managed-ledger")
        try:
            refs = _references(kind, data, r["path"])
        except LedgerLensError:
            run.v.drop(r, "referencing node does not decode")
            continue
        if int(r["ledger_id"]) in refs:
            run.v.keep.append(r)
        else:
            run.v.drop(r, "no longer referenced")


def _ml_root(pulsar_reads: Sequence[tuple[Store, Any]]) -> str:
    return str(pulsar_reads[0][0].managed_ledgers_root) if pulsar_reads else "/managed-ledgers"


def _investigate(row: dict[str, Any], caveat: dict[str, Any]) -> dict[str, Any]:
    """The finding with action ``investigate`` and the caveat in its evidence."""
    try:
        ev = json.loads(row.get("evidence") or "{}")
    except ValueError:
        ev = {}
    if not isinstance(ev, dict):
        ev = {"value": ev}
    return {**row, "action": "investigate", "evidence": json.dumps({**ev, **caveat}, sort_keys=False)}


def _heads(rows: Sequence[dict[str, Any]], s3: S3Source, client: Any) -> dict[int, dict[str, str] | None]:
    """The user metadata of each row's object (None: absent), by ``id(row)``; HEADs in parallel, and
    none sent once one failed (the store is gone)."""
    from concurrent.futures import ThreadPoolExecutor

    from ledgerlens.sources.s3 import head_user_metadata

    failed = threading.Event()  # the store is gone: the HEADs not yet sent are not sent

    def head(r: dict[str, Any]) -> dict[str, str] | None:
        if failed.is_set():
            raise SourceError(f"s3 {s3.endpoint_url or 'aws'} bucket {s3.bucket}", "unreachable")
        try:
            return head_user_metadata(client, s3.bucket, r["object_key"])
        except Exception:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, s3.max_in_flight)) as pool:
        heads = list(pool.map(head, rows))
    return {id(r): h for r, h in zip(rows, heads, strict=True)}


@dataclass
class _ObjectOwners:
    """What the orphan offload objects' owners are now: each object's managed ledger (its user
    metadata), their tenants and which are live, the managed-ledger nodes, the BookKeeper copies."""

    ml_of: dict[int, str | None]
    tenants: set[str]
    live_tenants: set[str]
    ml_nodes: dict[str, Any]
    in_bk: dict[str, Any]


def _object_owners(
    run: _Run, orphans: Sequence[dict[str, Any]], head_of: dict[int, dict[str, str] | None]
) -> _ObjectOwners:
    """The owners of the ``orphans`` whose object still exists (``head_of``: their user metadata)."""
    owner_mls: dict[int, str | None] = {}
    for r in orphans:
        meta = head_of[id(r)]
        if meta is None:
            continue
        lowered = {k.lower(): val for k, val in meta.items()}
        owner_mls[id(r)] = lowered.get(USER_METADATA_ML)
    tenants = {ml.split("/")[0] for ml in owner_mls.values() if ml} - run.deleted
    live_tenants = _live_tenants(run.pulsar_reads, sorted(tenants))
    wanted = sorted({ml for ml in owner_mls.values() if ml and not run.blind(ml)})
    ml_nodes: dict[str, Any] = {}  # ML name -> its node in the first Pulsar store that has it
    for store, rd in run.pulsar_reads:
        nodes = rd.get_many(f"{store.managed_ledgers_root}/{w}" for w in wanted)
        for w in wanted:
            if ml_nodes.get(w) is None:
                ml_nodes[w] = nodes.get(f"{store.managed_ledgers_root}/{w}")
    # the BookKeeper copies of the orphans' ledgers: without one, an object is the only copy of its data
    lids = {
        k.ledger_id for r in orphans if (k := parse_offload_key(r["object_key"])) and k.ledger_id is not None
    }
    in_bk = run.bk_reads.get_many(ledger_path(i, run.zk.ledgers_root) for i in sorted(lids))
    return _ObjectOwners(owner_mls, tenants, live_tenants, ml_nodes, in_bk)


def _reverify_objects(
    run: _Run,
    by_kind: dict[str, list[dict[str, Any]]],
    got: dict[str, Any],
    s3: S3Source,
    s3_client_factory: Callable[[], Any] | None,
) -> None:
    from ledgerlens.sources.s3 import make_client

    client = s3_client_factory() if s3_client_factory else make_client(s3, max_attempts=REVERIFY_S3_ATTEMPTS)
    rows = by_kind.get("orphan_offload_object", []) + by_kind.get("missing_offload_object", [])
    head_of = _heads(rows, s3, client)
    orphans = by_kind.get("orphan_offload_object", [])
    owners = _object_owners(run, orphans, head_of)
    for r in orphans:
        if head_of[id(r)] is None:
            run.v.drop(r, "object deleted since the scan")
        else:
            _orphan_object(run, r, owners)
    for r in by_kind.get("missing_offload_object", []):
        _missing_object(run, r, head_of[id(r)] is not None, got)


def _orphan_object(run: _Run, r: dict[str, Any], owners: _ObjectOwners) -> None:
    """An ``orphan_offload_object`` candidate whose object still exists: kept (or turned foreign, or
    for a person to look at) unless its owner is a blind spot, unreadable or references it again."""
    ml = owners.ml_of.get(id(r))
    if run.blind(ml):
        why = "owner managed ledger is a blind spot" if ml else "owner unknown while blind spots exist"
        run.v.drop(r, why)
        return
    if ml and ml.split("/")[0] in owners.tenants - owners.live_tenants:
        run.v.keep.append(_as_foreign(r, "foreign_offload_object", ml))
        return
    if ml:
        data = owners.ml_nodes.get(ml)
        if isinstance(data, Exception):
            run.v.drop(r, "owner node unreadable")
            return
        if data is not None:
            checked = _against_owner(run, r, ml, data, owners.in_bk)
            if checked is None:
                return
            r = checked
        try:
            name = parse_managed_ledger(ml)
            r = {**r, "managed_ledger": ml, "tenant": name.tenant, "namespace": name.namespace}
        except LedgerLensError:
            r = {**r, "managed_ledger": ml}
    run.v.keep.append(r)


def _against_owner(
    run: _Run, r: dict[str, Any], ml: str, data: bytes, in_bk: dict[str, Any]
) -> dict[str, Any] | None:
    """An orphan object candidate judged against its owner's node ``data``: None when dropped (the
    node does not decode, or references the object again), else the row, for a person to look at
    (``investigate``) when the owner was emptied or the object is the only copy of its data."""
    try:
        rec = mlf.decode_managed_ledger(data, path=f"managed ledger {ml}")
    except LedgerLensError:
        run.v.drop(r, "owner node does not decode")
        return None
    key = parse_offload_key(r["object_key"])
    if key is not None and key.uuid in refs.offload_uuids(rec):
        run.v.drop(r, "referenced again since the scan")
        return None
    # the owner still exists: an emptied node, or an object that is the only copy of its
    # ledger's data, is for a person to look at, never a deletion (docs/audit-rules.md)
    lid = key.ledger_id if key is not None else None
    bk = in_bk.get(ledger_path(lid, run.zk.ledgers_root)) if lid is not None else None
    caveat: dict[str, Any] = {}
    if rec.compression == "EMPTY":
        caveat = {"owner_emptied": True, "owner_node": f"{_ml_root(run.pulsar_reads)}/{ml}"}
    elif bk is None or isinstance(bk, Exception):
        caveat = {"only_copy": True, "owner_node": f"{_ml_root(run.pulsar_reads)}/{ml}"}
    return _investigate(r, caveat) if caveat else r


def _missing_object(run: _Run, r: dict[str, Any], exists: bool, got: dict[str, Any]) -> None:
    """A ``missing_offload_object`` candidate kept while the object is still absent and its managed
    ledger still says that offload is complete."""
    data = _referencing_data(
        run.v,
        r,
        exists,
        "object exists (written after the scan)",
        got,
        "managed ledger node gone or unreadable",
    )
    if data is None:
        return
    try:
        rec = mlf.decode_managed_ledger(data, path=r["path"])
    except LedgerLensError:
        run.v.drop(r, "managed ledger node does not decode")
        return
    key = parse_offload_key(r["object_key"])
    still = any(
        li.offload is not None
        and key is not None
        and (
            (li.offload.complete and li.offload.uuid == key.uuid and li.ledger_id == r["ledger_id"])
            or any(s.complete and s.uuid == key.uuid for s in li.offload.segments)
        )
        for li in rec.ledgers
    )
    if still:
        run.v.keep.append(r)
    else:
        run.v.drop(r, "offload context changed since the scan")
