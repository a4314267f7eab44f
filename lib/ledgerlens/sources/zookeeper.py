"""The live ZooKeeper as an inventory source: scanners over the client layer (``sources.zk_client``:
pipelined, rate-limited reads). Each scanner walks one part of the key space (the work item of one
Spark task) and yields the rows ``inventory.rows`` builds from each node (plain dicts of the inventory
schemas, or for the ledgers, which number millions, Arrow record batches built column by column). A
node that does not decode or cannot be read becomes one row with ``error`` and ``path`` set; a node
that vanished between listing and reading is skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from kazoo.client import KazooClient
from kazoo.exceptions import (
    NoNodeError,
)

from ledgerlens.errors import SourceError
from ledgerlens.formats.paths import is_ledger_level1, is_special_znode, ledger_id_from_path
from ledgerlens.inventory.rows import (
    CURSORS_T,
    MANAGED_LEDGERS_T,
    LedgerColumns,
    ManagedLedgerColumns,
    _error_text,
    _name_columns,
    _stat_times,
    cursor_row,
    ledger_row,
    policy_row,
    schema_rows,
)
from ledgerlens.settings.config import ZooKeeperSource
from ledgerlens.sources.base import BOOKKEEPER_STAGES, PULSAR_STAGES, MetadataStore, Row, stage_roots
from ledgerlens.sources.zk_client import (
    MultiReadReply,
    NodeRead,
    PipelinedReader,
    ScanStats,
    _multi_read_result,
    connect,
)

__all__ = [
    "LiveZooKeeper",
    "find_managed_ledgers",
    "scan_ledgers",
    "scan_managed_ledgers",
    "scan_policies",
    "scan_schemas",
    "scan_tenants",
]

_LEAF = re.compile(r"L\d+")


# -- helpers -----------------------------------------------------------------------------------
def _join(*parts: str) -> str:
    return "/" + "/".join(p.strip("/") for p in parts if p.strip("/"))


def _walk_ledger_leaves(
    reader: PipelinedReader, root: str, prefixes: Iterable[str], errors: list[dict[str, Any]]
) -> Iterator[str]:
    """Leaf paths ``.../L<digits>`` under ``root/<prefix>``, listed level by level (pipelined)."""
    frontier: list[str] = []
    for prefix in prefixes:
        first = prefix.strip("/").split("/", 1)[0]
        if is_special_znode(first) or not is_ledger_level1(first):
            reader.stats.skipped += 1
            continue
        frontier.append(_join(root, prefix))
    while frontier:
        deeper: list[str] = []
        for r in reader.children(frontier):
            if r.error is not None:
                errors.append({"path": r.path, "error": f"cannot list: {_error_text(r.error)}"})
                continue
            for name in sorted(r.children or ()):
                if _LEAF.fullmatch(name):
                    yield f"{r.path}/{name}"
                elif name.isdigit():
                    deeper.append(f"{r.path}/{name}")
                else:
                    reader.stats.skipped += 1
        frontier = deeper


def scan_ledgers(
    client: KazooClient | PipelinedReader, root: str, level1_names: Iterable[str], *, compiled: bool = True
) -> Iterator[pa.RecordBatch]:
    """BK_LEDGERS record batches for every ledger under ``root/<name>`` for each name.

    ``level1_names`` are level-1 node names (``00``, ``000``) or deeper prefixes of them
    (``00/0001``): the driver splits the key space that way. Short (2-digit) and long (3-digit)
    layouts are both walked to their ``L<digits>`` leaves; BookKeeper's special znodes are skipped.
    Rows are built column by column (:class:`LedgerColumns`; ``compiled=False``: Python alone).
    """
    reader = client if isinstance(client, PipelinedReader) else PipelinedReader(client)
    errors: list[dict[str, Any]] = []
    cols = LedgerColumns(compiled=compiled)

    def add(r: NodeRead) -> None:
        if isinstance(r.error, NoNodeError):  # deleted between listing and reading
            reader.stats.vanished += 1
        elif r.error is not None:
            row: dict[str, Any] = {"path": r.path, "error": _error_text(r.error)}
            try:
                row["ledger_id"] = ledger_id_from_path(r.path, root)
            except Exception:  # noqa: BLE001
                pass
            cols.add_row(row)
        elif r.stat is None:
            cols.add_row(ledger_row(r.path, root, r.data, None))
        else:
            st = r.stat
            cols.add(r.path, root, None, r.data, st.ctime, st.mtime, st.version)

    leaves = _walk_ledger_leaves(reader, root, level1_names, errors)
    # compiled: multiRead replies decoded straight into the columns, no Python object per ledger
    for r in reader.get_replies(leaves) if cols.compiled else reader.get(leaves):
        if isinstance(r, MultiReadReply):
            for declined in _add_reply(cols, r, root):
                add(declined)
        else:
            add(r)
        if len(cols) >= cols.BATCH_ROWS:
            reader.stats.errors += cols.errors
            cols.errors = 0
            yield cols.take()
    for row in errors:
        cols.add_row(row)
    reader.stats.errors += cols.errors
    if len(cols):
        yield cols.take()


_DOMAINS = ("persistent",)


RANGE_SEP = "\x00"  # ZooKeeper forbids the null character in node names: no name holds it
"""A partition of one large domain node's topics: ``<tenant/ns/persistent>\\0<lo>\\0<hi>``, the
topics ``lo <= name < hi`` in Python's string order (an empty bound is open)."""
ML_PARTITION_TOPICS = 2_000
"""A domain node (``tenant/ns/persistent``) of more topics than this is scanned in partitions of this
many (a namespace of 100,000 topics is 50 partitions, read in parallel like the ledger scan's)."""


def topic_range(domain: str, lo: str, hi: str) -> str:
    """The partition item of the topics ``lo <= name < hi`` under ``domain`` (see :data:`RANGE_SEP`)."""
    return f"{domain}{RANGE_SEP}{lo}{RANGE_SEP}{hi}"


def _in_range(name: str, lo: str, hi: str) -> bool:
    return lo <= name and (not hi or name < hi)


def find_managed_ledgers(
    reader: PipelinedReader, root: str, prefixes: Iterable[str], errors: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """ML names under the namespace prefixes (v2 ``t/ns/persistent/x``, v1 ``t/c/ns/persistent/x``)
    and the topic ranges of large domain nodes (:func:`topic_range`)."""

    def fail(prefix: str, r: NodeRead) -> None:
        problem = _error_text(r.error or Exception("unknown"))
        row: dict[str, Any] = {"managed_ledger": prefix, "path": r.path, "error": f"cannot list: {problem}"}
        row.update(_name_columns(prefix + "/persistent/x"))
        row["topic"] = None
        errors.append((MANAGED_LEDGERS_T, row))

    plain: list[str] = []
    ranges: dict[str, list[tuple[str, str]]] = {}  # domain node -> its ranges in this partition
    for p in prefixes:
        if RANGE_SEP in p:
            domain, lo, hi = p.split(RANGE_SEP)
            ranges.setdefault(domain.strip("/"), []).append((lo, hi))
        else:
            plain.append(p)
    rel = {_join(root, p): p.strip("/") for p in plain}
    domain_nodes: list[str] = []  # t/ns/persistent
    v1_namespaces: list[str] = []  # t/c/ns
    for r in reader.children(list(rel)):
        prefix = rel[r.path]
        if r.error is not None:
            fail(prefix, r)
            continue
        for name in sorted(r.children or ()):
            if name in _DOMAINS:
                domain_nodes.append(f"{prefix}/{name}")
            elif name != "non-persistent":
                v1_namespaces.append(f"{prefix}/{name}")
    if v1_namespaces:
        rel1 = {_join(root, p): p for p in v1_namespaces}
        for r in reader.children(list(rel1)):
            if r.error is not None:
                fail(rel1[r.path], r)
                continue
            domain_nodes.extend(f"{rel1[r.path]}/{d}" for d in sorted(r.children or ()) if d in _DOMAINS)
    names: list[str] = []
    reld = {_join(root, p): p for p in [*domain_nodes, *ranges]}
    for r in reader.children(list(reld)):
        domain = reld[r.path]
        mine = ranges.get(domain)
        if r.error is not None:
            if mine is None or any(not lo for lo, _ in mine):  # a split node's error: its first range's
                fail(domain.rsplit("/", 1)[0], r)
            continue
        kids = sorted(r.children or ())
        if mine is not None:
            kids = [t for t in kids if any(_in_range(t, lo, hi) for lo, hi in mine)]
        names.extend(f"{domain}/{t}" for t in kids)
    return names


def split_large_namespaces(
    client: KazooClient, root: str, prefixes: list[str], max_in_flight: int, per_partition: int
) -> list[str]:
    """The namespace prefixes, each v2 namespace whose domain node holds more than ``per_partition``
    topics replaced by ranges of that many topics (:func:`topic_range`; the first and last open, so
    that a topic created meanwhile falls in one); the others (v1 prefixes, small namespaces, those
    that cannot be listed) kept whole."""
    base = root.rstrip("/")
    reader = PipelinedReader(client, max_in_flight=max_in_flight)
    domains: dict[str, list[str]] = {}  # prefix -> its domain nodes, when those are all its children
    for r in reader.children([f"{base}/{p}" for p in prefixes]):
        kids = r.children
        if r.error is None and kids and all(k in _DOMAINS or k == "non-persistent" for k in kids):
            domains[r.path[len(base) + 1 :]] = [
                f"{r.path[len(base) + 1 :]}/{k}" for k in kids if k in _DOMAINS
            ]
    topics: dict[str, list[str]] = {}
    for r in reader.children([f"{base}/{d}" for ds in domains.values() for d in ds]):
        if r.error is None:
            topics[r.path[len(base) + 1 :]] = sorted(r.children or ())
    items: list[str] = []
    for p in prefixes:
        ds = domains.get(p)
        if not ds or any(d not in topics for d in ds) or all(len(topics[d]) <= per_partition for d in ds):
            items.append(p)
            continue
        for d in ds:
            bounds = topics[d][per_partition::per_partition]
            edges = ["", *bounds, ""]
            items.extend(topic_range(d, lo, hi) for lo, hi in zip(edges, edges[1:], strict=False))
    return items


def scan_managed_ledgers(
    client: KazooClient | PipelinedReader, root: str, namespace_prefixes: Iterable[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(table, row)`` pairs for MANAGED_LEDGERS, ML_LEDGERS and CURSORS under the prefixes.

    ``namespace_prefixes`` are ``tenant/ns`` (v2) or ``tenant/cluster`` (v1) paths relative to
    ``root``. Each ML node is read with its children (the cursors), then every cursor node.
    A subtree that cannot be listed gives one MANAGED_LEDGERS error row whose ``managed_ledger``
    is the subtree prefix; a cursor list that cannot be read gives one CURSORS error row.
    """
    reader = client if isinstance(client, PipelinedReader) else PipelinedReader(client)
    errors: list[tuple[str, dict[str, Any]]] = []
    names = find_managed_ledgers(reader, root, namespace_prefixes, errors)
    by_path = {_join(root, n): n for n in names}
    cursor_nodes: list[tuple[str, str]] = []  # (ml name, cursor node name)
    mls = ManagedLedgerColumns()
    for r in reader.read(list(by_path), data=True, children=True):
        ml_name = by_path[r.path]
        if len(mls) >= mls.BATCH_ROWS:
            yield from mls.take()
        if r.error is not None and r.data is None:
            reader.stats.errors += 1
            row = {"managed_ledger": ml_name, "path": r.path, "error": _error_text(r.error)}
            row.update(_stat_times(r.stat), **_name_columns(ml_name))
            mls.add_row(row)
            continue
        if not mls.add(ml_name, r.path, r.data, r.stat):
            reader.stats.errors += 1
        if r.children is None:  # data read, children not: the cursors of this ML are unknown
            reader.stats.errors += 1
            names_ = _name_columns(ml_name)
            yield (
                CURSORS_T,
                {
                    "managed_ledger": ml_name,
                    "tenant": names_["tenant"],
                    "namespace": names_["namespace"],
                    "path": r.path,
                    "error": f"cannot list cursors: {_error_text(r.error or Exception('unknown'))}",
                },
            )
            continue
        cursor_nodes.extend((ml_name, c) for c in sorted(r.children))
    yield from mls.take()
    cpaths = {_join(root, ml, c): (ml, c) for ml, c in cursor_nodes}
    for r in reader.get(list(cpaths)):
        ml_name, node = cpaths[r.path]
        if r.error is not None:
            reader.stats.errors += 1
            row = cursor_row(ml_name, node, r.path, None, None)
            row["error"] = _error_text(r.error)
            yield CURSORS_T, row
            continue
        row = cursor_row(ml_name, node, r.path, r.data, r.stat)
        if row.get("error"):
            reader.stats.errors += 1
        yield CURSORS_T, row
    for item in errors:
        reader.stats.errors += 1
        yield item


def scan_schemas(
    client: KazooClient | PipelinedReader, root: str, tenants: Iterable[str]
) -> Iterator[dict[str, Any]]:
    """SCHEMA_LEDGERS rows for every locator ``root/tenant/ns/topic`` of the tenants."""
    reader = client if isinstance(client, PipelinedReader) else PipelinedReader(client)
    tpaths = [_join(root, t) for t in tenants]
    ns_paths: list[str] = []
    for r in reader.children(tpaths):
        if r.error is not None:
            reader.stats.errors += 1
            t = r.path.rsplit("/", 1)[1]
            yield {
                "schema_id": t,
                "tenant": t,
                "path": r.path,
                "error": f"cannot list: {_error_text(r.error)}",
            }
            continue
        ns_paths.extend(f"{r.path}/{n}" for n in sorted(r.children or ()))
    loc_paths: list[str] = []
    for r in reader.children(ns_paths):
        if r.error is not None:
            reader.stats.errors += 1
            sid = r.path[len(root.rstrip("/")) + 1 :]
            yield {
                "schema_id": sid,
                "tenant": sid.split("/")[0],
                "namespace": sid,
                "path": r.path,
                "error": f"cannot list: {_error_text(r.error)}",
            }
            continue
        loc_paths.extend(f"{r.path}/{n}" for n in sorted(r.children or ()))
    for r in reader.get(loc_paths):
        sid = r.path[len(root.rstrip("/")) + 1 :]
        if r.error is not None:
            rows = [dict(schema_rows(sid, r.path, b"", None)[0], error=_error_text(r.error))]
        else:
            rows = schema_rows(sid, r.path, r.data, r.stat)
        for row in rows:
            if row.get("error"):
                reader.stats.errors += 1
            yield row


def scan_policies(client: KazooClient | PipelinedReader, root: str) -> Iterator[dict[str, Any]]:
    """NAMESPACE_POLICIES rows for ``root/tenant/ns`` (and v1 ``root/tenant/cluster/ns``).

    A level-2 node with children and no data is a v1 cluster node: its children are the namespaces.
    """
    reader = client if isinstance(client, PipelinedReader) else PipelinedReader(client)
    base = root.rstrip("/")
    top = next(iter(reader.children([root])), None)
    if top is None:
        return
    if top.error is not None:
        reader.stats.errors += 1
        yield {"path": root, "error": f"cannot list: {_error_text(top.error)}"}
        return
    level2: list[str] = []
    for r in reader.children([f"{base}/{t}" for t in sorted(top.children or ())]):
        if r.error is not None:
            reader.stats.errors += 1
            t = r.path.rsplit("/", 1)[1]
            yield {"tenant": t, "path": r.path, "error": f"cannot list: {_error_text(r.error)}"}
            continue
        level2.extend(f"{r.path}/{n}" for n in sorted(r.children or ()))
    frontier = level2
    depth = 2
    while frontier:
        deeper: list[str] = []
        for r in reader.read(frontier, data=True, children=depth == 2):
            ns = r.path[len(base) + 1 :]
            if r.error is not None and r.data is None:
                reader.stats.errors += 1
                yield {
                    "tenant": ns.split("/")[0],
                    "namespace": ns,
                    "path": r.path,
                    "error": _error_text(r.error),
                }
                continue
            if depth == 2 and r.children and not r.data:
                deeper.extend(f"{r.path}/{n}" for n in sorted(r.children))
                continue
            row = policy_row(ns, r.path, r.data)
            if row.get("error"):
                reader.stats.errors += 1
            yield row
        frontier, depth = deeper, depth + 1


# -- the live ZooKeeper source -------------------------------------------------------------------
_MULTI_READ_MAX = 100  # reads per ZooKeeper multiRead request (3.6+; single reads on older servers)


def _children(client: KazooClient, path: str) -> list[str] | None:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return None


def ledger_partitions(client: KazooClient, root: str, max_in_flight: int) -> list[str]:
    """Level-1 + level-2 prefixes of the ledgers root (level 3 too for the 3-digit long layout)."""
    base = root.rstrip("/")
    level1 = [n for n in _children(client, root) or () if not is_special_znode(n) and is_ledger_level1(n)]
    reader = PipelinedReader(client, max_in_flight=max_in_flight)
    items: list[str] = []
    frontier = level1
    for depth in (2, 3):
        deeper: list[str] = []
        for r in reader.children([f"{base}/{p}" for p in frontier]):
            rel = r.path[len(base) + 1 :]
            if r.error is not None or not r.children:
                items.append(rel)  # the task lists it again and rows the error (or finds nothing)
                continue
            kids = [f"{rel}/{c}" for c in sorted(r.children) if c.isdigit()]
            long_layout = len(rel.split("/", 1)[0]) == 3
            if depth == 2 and long_layout:
                deeper.extend(kids)
            else:
                items.extend(kids)
        frontier = deeper
        if not frontier:
            break
    return sorted(items)


def namespace_partitions(client: KazooClient, root: str, max_in_flight: int) -> list[str]:
    """``tenant/ns`` prefixes under a root; a tenant that cannot be listed stays a prefix itself."""
    base = root.rstrip("/")
    tenants = _children(client, root) or []
    items: list[str] = []
    for r in PipelinedReader(client, max_in_flight=max_in_flight).children([f"{base}/{t}" for t in tenants]):
        rel = r.path[len(base) + 1 :]
        if r.error is not None:
            items.append(rel)
        else:
            items.extend(f"{rel}/{n}" for n in sorted(r.children or ()))
    return items


def scan_tenants(reader: PipelinedReader, root: str, store: str) -> Iterator[dict[str, Any]]:
    """PULSAR_TENANTS rows: the tenants (children of the policies root) of one Pulsar store."""
    base = root.rstrip("/")
    for r in reader.children([root]):
        for t in sorted(r.children or ()):
            yield {"tenant": t, "path": f"{base}/{t}", "store": store}


@dataclass(frozen=True)
class LiveZooKeeper(MetadataStore):
    """A live ZooKeeper ensemble: pipelined, rate-limited reads of the stages it is given.

    ``stages`` says which part of the metadata this store holds: BookKeeper's (``bk_ledgers``),
    Pulsar's (``managed_ledgers``, ``schema_ledgers``, ``namespace_policies``) or both.
    """

    zk: ZooKeeperSource
    provides: tuple[str, ...] = BOOKKEEPER_STAGES + PULSAR_STAGES
    kind: str = "zk"

    @property
    def location(self) -> str:
        return f"zk:{self.zk.hosts}"

    @property
    def rate_limit(self) -> float | None:
        return self.zk.rate_limit

    @property
    def tasks(self) -> int | None:
        return self.zk.tasks

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "roots": stage_roots(self.zk, self.stages)}

    def _connect(self) -> KazooClient:
        return connect(self.zk.hosts, timeout_s=self.zk.timeout_s, auth=self.zk.auth)

    def check(self) -> None:
        client = self._connect()
        client.stop()
        client.close()

    def clusters(self) -> list[str] | None:
        if not any(s in PULSAR_STAGES for s in self.stages):
            return None
        client = self._connect()
        try:
            names = _children(client, self.zk.clusters_root) or []
        finally:
            client.stop()
            client.close()
        return sorted(c for c in names if c != "global")

    def plan(self, stage: str) -> list[str]:
        client = self._connect()
        try:
            if stage == "bk_ledgers":
                return ledger_partitions(client, self.zk.ledgers_root, self.zk.max_in_flight)
            if stage == "managed_ledgers":
                root, window = self.zk.managed_ledgers_root, self.zk.max_in_flight
                spaces = namespace_partitions(client, root, window)
                return split_large_namespaces(client, root, spaces, window, ML_PARTITION_TOPICS)
            if stage == "schema_ledgers":
                return _children(client, self.zk.schemas_root) or []
            if stage == "namespace_policies":
                return [self.zk.policies_root]  # a few thousand nodes at most: one task
            raise ValueError(f"{self.location}: no stage {stage!r}")
        finally:
            client.stop()
            client.close()

    def _multi(self) -> int:
        """Reads per multiRead request: at most 100, and at least 4 requests fit the in-flight window."""
        return max(1, min(_MULTI_READ_MAX, self.zk.max_in_flight // 4))

    def read(
        self, stage: str, partitions: Sequence[str], *, rate_limit: float | None, stats: Counter[str]
    ) -> Iterator[Row]:
        scan = ScanStats()
        client = self._connect()
        try:
            reader = PipelinedReader(
                client,
                max_in_flight=self.zk.max_in_flight,
                rate_limit=rate_limit,
                stats=scan,
                multi_read=self._multi() if stage != "namespace_policies" else 0,
            )
            if stage == "bk_ledgers":
                for batch in scan_ledgers(reader, self.zk.ledgers_root, partitions):
                    yield "bk_ledgers", batch
            elif stage == "managed_ledgers":
                yield from scan_managed_ledgers(reader, self.zk.managed_ledgers_root, partitions)
            elif stage == "schema_ledgers":
                for row in scan_schemas(reader, self.zk.schemas_root, partitions):
                    yield "schema_ledgers", row
            elif stage == "namespace_policies":
                for root in partitions:
                    for row in scan_policies(reader, root):
                        yield "namespace_policies", row
                    for row in scan_tenants(reader, root, self.location):
                        yield "pulsar_tenants", row
            else:
                raise ValueError(f"{self.location}: no stage {stage!r}")
        finally:
            client.stop()
            client.close()
            stats.update(scan.as_dict())


def _add_reply(cols: LedgerColumns, reply: MultiReadReply, root: str) -> Iterator[NodeRead]:
    """Append the rows of a multiRead reply with the compiled decoder; yields, in order, each read it
    does not take (an error, a vanished node, a value only the Python decoder reads) for the caller to
    handle before the rest are appended."""
    index, offset = 0, reply.offset
    while index < len(reply.paths):
        index, offset, stopped = cols.add_reads(reply.reply, offset, reply.paths, index, root)
        if not stopped:
            return
        item = _multi_read_result(reply.reply, offset)
        if item is None:
            raise SourceError(
                "zookeeper", f"{reply.paths[index]}: the multiRead reply ends before its result"
            )
        value, offset = item
        path = reply.paths[index]
        index += 1
        if isinstance(value, Exception):
            yield NodeRead(path, error=value)
        else:
            yield NodeRead(path, data=value[0], stat=value[1])
