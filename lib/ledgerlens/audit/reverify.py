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
from concurrent.futures import ThreadPoolExecutor
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
from ledgerlens.report.kinds import severity_of
from ledgerlens.settings.config import S3Source, ZooKeeperSource
from ledgerlens.sources.zk_client import PipelinedReader, connect
from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot, read_many

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


def _tenant_nodes(store: Store, tenants: Iterable[str]) -> dict[str, str]:
    """{node path: tenant} of the nodes that make a tenant live in ``store`` (``audit/ownership.py``'s
    rule): a node under the policies, managed-ledgers or schemas root."""
    roots = (store.policies_root, store.managed_ledgers_root, store.schemas_root)
    return {f"{root.rstrip('/')}/{t}": t for t in tenants for root in roots}


def _as_foreign(r: dict[str, Any], kind: str = "foreign_ledger", ml: str | None = None) -> dict[str, Any]:
    """An orphan candidate whose tenant is in no live Pulsar store: a foreign (info) finding."""
    try:
        evidence = json.loads(r.get("evidence") or "{}")
    except ValueError:
        evidence = {}
    tenant = ml.split("/")[0] if ml else r.get("tenant")
    evidence.update(tenant=tenant, reason="tenant in none of the given Pulsar metadata stores (live)")
    out = {
        **r,
        "kind": kind,
        "severity": severity_of(kind),
        "action": "none",
        "evidence": json.dumps(evidence),
    }
    if ml:
        out.update(managed_ledger=ml, tenant=tenant)
    return out


@dataclass
class _Run:
    """One re-verification: its verdicts, the nodes it read and what it may not judge."""

    v: Verdicts
    zk: Store
    stores: list[Store]  # the Pulsar stores
    bk: dict[str, Any]  # BookKeeper nodes read: path -> bytes, None (absent) or the read's error
    pulsar: list[dict[str, Any]]  # the same, per Pulsar store
    deleted: set[str]
    blind_spots: Sequence[str]
    live_tenants: set[str] = field(default_factory=set)

    def blind(self, ml: str | None) -> bool:
        """Whether ``ml`` is a blind spot (without a name: whether there is any)."""
        if not ml:
            return bool(self.blind_spots)
        return any(b == "" or ml == b or ml.startswith(b + "/") for b in self.blind_spots)

    def ledger_node(self, r: dict[str, Any]) -> Any:
        """The candidate's ledger znode (None: absent)."""
        return self.bk.get(ledger_path(int(r["ledger_id"]), self.zk.ledgers_root))

    def first(self, paths: Sequence[str]) -> Any:
        """The node at ``paths[i]`` in the first Pulsar store ``i`` that has it (None: in none)."""
        for got, path in zip(self.pulsar, paths, strict=True):
            if got.get(path) is not None:
                return got[path]
        return None

    @property
    def ml_root(self) -> str:
        return str(self.stores[0].managed_ledgers_root) if self.stores else "/managed-ledgers"


def _read_once(requests: Sequence[tuple[Store, list[str]]], stack: ExitStack) -> list[dict[str, Any]]:
    """The nodes each (store, paths) request names, in one ``get_many`` per store: requests to one
    store (BookKeeper and Pulsar in one ZooKeeper) share its session, and the snapshot sources are
    read together, in one pass over each snapshot file, not once per question."""
    sessions: dict[str, tuple[Any, list[str]]] = {}
    snapshots: dict[str, tuple[ZooKeeperSnapshot, list[str]]] = {}
    for store, paths in requests:
        if isinstance(store, ZooKeeperSnapshot):
            snapshots.setdefault(_key(store), (store, []))[1].extend(paths)
            continue
        if _key(store) not in sessions:
            sessions[_key(store)] = (stack.enter_context(_open(store)), [])
        sessions[_key(store)][1].extend(paths)
    got = {k: rd.get_many(paths) for k, (rd, paths) in sessions.items()}
    got.update(zip(snapshots, read_many(list(snapshots.values())), strict=True))
    return [got[_key(store)] for store, _ in requests]


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

    orphans = by_kind.get("orphan_ledger", [])
    missing = by_kind.get("missing_ledger", [])
    orphan_objects = by_kind.get("orphan_offload_object", [])
    objects = orphan_objects + by_kind.get("missing_offload_object", [])
    from ledgerlens.sources.s3 import make_client  # boto3: only when there are objects to check

    with ExitStack() as stack:
        head_of: dict[int, dict[str, str] | None] = {}
        if objects and s3 is not None:  # first: the objects' owners are named in their metadata
            client = (
                s3_client_factory()
                if s3_client_factory
                else make_client(s3, max_attempts=REVERIFY_S3_ATTEMPTS)
            )
            head_of = _heads(objects, s3, client)
        object_ml = _object_mls(orphan_objects, head_of)
        owners = [{id(r): _owner_path(r, store) for r in orphans} for store in stores]
        tenants = {t for r in orphans if (t := r.get("tenant"))}
        tenants |= {ml.split("/")[0] for ml in object_ml.values() if ml}
        tenants -= deleted
        owner_mls = sorted({ml for ml in object_ml.values() if ml})
        lids = {
            k.ledger_id
            for r in orphan_objects
            if (k := parse_offload_key(r["object_key"])) and k.ledger_id is not None
        }
        # Every node the verdicts need, read in one pass per store.
        bk_paths = [ledger_path(int(r["ledger_id"]), zk.ledgers_root) for r in orphans + missing]
        bk_paths += [ledger_path(i, zk.ledgers_root) for i in sorted(lids)]
        requests: list[tuple[Store, list[str]]] = [(zk, bk_paths)]
        for store, own in zip(stores, owners, strict=True):
            paths = [o[0] for o in own.values() if o]
            paths += [r["path"] for r in missing + objects if r.get("path")]
            paths += list(_tenant_nodes(store, sorted(tenants)))
            paths += [f"{store.managed_ledgers_root}/{ml}" for ml in owner_mls]
            requests.append((store, paths))
        bk, *pulsar_got = _read_once(requests, stack)
    run = _Run(v, zk, stores, bk, pulsar_got, deleted, blind_spots)
    run.live_tenants = {
        t
        for store, got in zip(stores, pulsar_got, strict=True)
        for p, t in _tenant_nodes(store, sorted(tenants)).items()
        if got.get(p) is not None
    }
    _orphan_ledgers(run, orphans, owners)
    _missing_ledgers(run, missing)
    if objects and s3 is None:
        for r in objects:
            v.drop(r, "no S3 source to re-verify against")
    elif objects:
        for r in orphan_objects:
            if head_of[id(r)] is None:
                v.drop(r, "object deleted since the scan")
            else:
                _orphan_object(run, r, object_ml.get(id(r)))
        for r in by_kind.get("missing_offload_object", []):
            _missing_object(run, r, head_of[id(r)] is not None)
    return v


def _object_mls(
    orphans: Sequence[dict[str, Any]], head_of: dict[int, dict[str, str] | None]
) -> dict[int, str | None]:
    """The managed ledger each orphan object that still exists names in its user metadata."""
    out: dict[int, str | None] = {}
    for r in orphans:
        meta = head_of.get(id(r))
        if meta is not None:
            out[id(r)] = {k.lower(): val for k, val in meta.items()}.get(USER_METADATA_ML)
    return out


def _orphan_ledgers(
    run: _Run, orphans: Sequence[dict[str, Any]], owners: Sequence[dict[int, tuple[str, str] | None]]
) -> None:
    """Each ``orphan_ledger`` candidate kept (or turned foreign) or dropped with its reason."""
    for r in orphans:
        node = run.ledger_node(r)
        if node is None:
            run.v.drop(r, "ledger deleted since the scan")
            continue
        if isinstance(node, Exception):
            run.v.drop(r, "ledger node unreadable at re-verification")
            continue
        tenant = r.get("tenant")
        if tenant not in run.deleted and tenant not in run.live_tenants:
            run.v.keep.append(_as_foreign(r))
            continue
        verdict = _owner_verdict(r, owners, run.pulsar)
        if verdict is None:
            run.v.keep.append(r)
        else:
            run.v.drop(r, verdict)


def _referencing_data(run: _Run, r: dict[str, Any], exists: bool, created: str, gone: str) -> Any:
    """The bytes of the node that references a ``missing_*`` candidate (its ``path``, in the first
    Pulsar store that has it), or None when the candidate is dropped: what it misses ``exists`` now
    (reason ``created``), or that node is absent or unreadable (reason ``gone``)."""
    if exists:
        run.v.drop(r, created)
        return None
    data = run.first([r.get("path") or ""] * len(run.pulsar))
    if data is None or isinstance(data, Exception):
        run.v.drop(r, gone)
        return None
    return data


def _missing_ledgers(run: _Run, rows: Sequence[dict[str, Any]]) -> None:
    """Each ``missing_ledger`` candidate kept while the ledger is still absent and still referenced."""
    for r in rows:
        data = _referencing_data(
            run,
            r,
            run.ledger_node(r) is not None,
            "ledger exists (created after the scan)",
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
    from ledgerlens.sources.s3 import head_user_metadata  # boto3: only when there are objects to check

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


def _orphan_object(run: _Run, r: dict[str, Any], ml: str | None) -> None:
    """An ``orphan_offload_object`` candidate whose object still exists: kept (or turned foreign, or
    for a person to look at) unless its owner is a blind spot, unreadable or references it again."""
    if run.blind(ml):
        why = "owner managed ledger is a blind spot" if ml else "owner unknown while blind spots exist"
        run.v.drop(r, why)
        return
    tenant = ml.split("/")[0] if ml else None
    if tenant and tenant not in run.deleted and tenant not in run.live_tenants:
        run.v.keep.append(_as_foreign(r, "foreign_offload_object", ml))
        return
    if ml:
        data = run.first([f"{store.managed_ledgers_root}/{ml}" for store in run.stores])
        if isinstance(data, Exception):
            run.v.drop(r, "owner node unreadable")
            return
        if data is not None:
            checked = _against_owner(run, r, ml, data)
            if checked is None:
                return
            r = checked
        try:
            name = parse_managed_ledger(ml)
            r = {**r, "managed_ledger": ml, "tenant": name.tenant, "namespace": name.namespace}
        except LedgerLensError:
            r = {**r, "managed_ledger": ml}
    run.v.keep.append(r)


def _against_owner(run: _Run, r: dict[str, Any], ml: str, data: bytes) -> dict[str, Any] | None:
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
    bk = run.bk.get(ledger_path(lid, run.zk.ledgers_root)) if lid is not None else None
    caveat: dict[str, Any] = {}
    if rec.compression == "EMPTY":
        caveat = {"owner_emptied": True, "owner_node": f"{run.ml_root}/{ml}"}
    elif bk is None or isinstance(bk, Exception):
        caveat = {"only_copy": True, "owner_node": f"{run.ml_root}/{ml}"}
    return _investigate(r, caveat) if caveat else r


def _missing_object(run: _Run, r: dict[str, Any], exists: bool) -> None:
    """A ``missing_offload_object`` candidate kept while the object is still absent and its managed
    ledger still says that offload is complete."""
    data = _referencing_data(
        run, r, exists, "object exists (written after the scan)", "managed ledger node gone or unreadable"
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
