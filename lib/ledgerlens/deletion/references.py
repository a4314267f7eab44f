"""The deleter's reference scan: everything the Pulsar stores reference, read at deletion time.

The deleter may only delete what nothing the audit reads could name (DESIGN.md, "The deleter's
check is a superset of the audit's"). Reading every managed ledger for every item is too slow, and
reading only the owner a ledger's custom metadata names misses a ledger another managed ledger
lists. So each deleter run reads, once, every reference the Pulsar stores hold (the same pipelined,
rate-limited reads as the audit's scan; what references what is ``ledgerlens.formats.references``):

- every managed-ledger node (ledger list, offload contexts) and each of its cursors (cursor
  ledger, ``CompactedTopicLedger``, delayed-index bucket properties);
- every schema locator;
- the tenants (``/admin/policies``).

Nodes whose references are unknown (do not decode, cannot be read, ``NoAuth``, a subtree that
cannot be listed, a managed-ledger node emptied by an edit) are kept as *unprovable* names: an
item any of them could own is refused (``skipped_unprovable``), never deleted.

An index older than ``max_age_s`` is read again before it is used (``ReferenceScanner``); right
before each delete the deleter also reads the item's own nodes live (``ledgerlens.deletion.verify``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ledgerlens.errors import LedgerLensError
from ledgerlens.formats import managed_ledger as mlf
from ledgerlens.formats import references as refs
from ledgerlens.formats.names import decode_component
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens.sources.zk_client import NodeRead, PipelinedReader, ScanStats
from ledgerlens.sources.zookeeper import find_managed_ledgers

__all__ = ["DEFAULT_ROOTS", "ReferenceIndex", "ReferenceScanner", "Roots", "scan_references"]

DEFAULT_MAX_AGE_S = 300.0  # an index older than this is read again before an item is verified


@dataclass(frozen=True)
class Roots:
    """Where the metadata lives (BookKeeper and Pulsar may be different stores)."""

    ledgers: str = "/ledgers"
    managed_ledgers: str = "/managed-ledgers"
    schemas: str = "/schemas"
    tenants: str = "/admin/policies"


DEFAULT_ROOTS = Roots()


@dataclass
class ReferenceIndex:
    """What the Pulsar stores referenced when they were read (``started``: the read's start).

    ``ledgers``: ledger id -> the node that references it (and by what role); ``uuids``: offload
    uuid -> the managed-ledger node naming it; ``managed_ledgers``: the names that exist (with the
    store's ML root); ``unprovable``: a managed-ledger name, schema id or name prefix ("" for
    everything) -> why its references are unknown; ``compaction``: managed ledger -> (its
    ``__compaction`` cursor ledger is open, the compacted ledger it records).
    """

    started: float  # time.monotonic() when the read began
    started_ms: int
    seconds: float = 0.0
    ledgers: dict[int, str] = field(default_factory=dict)
    uuids: dict[str, str] = field(default_factory=dict)
    managed_ledgers: dict[str, str] = field(default_factory=dict)
    unprovable: dict[str, str] = field(default_factory=dict)
    compaction: dict[str, tuple[bool, int | None]] = field(default_factory=dict)
    tenants: set[str] = field(default_factory=set)
    schemas: set[str] = field(default_factory=set)  # schema ids with a locator
    stats: ScanStats = field(default_factory=ScanStats)

    def owned_tenants(self) -> set[str]:
        """Tenants with a tenant node, a managed ledger or a schema in the stores (the audit's
        ownership rule, ``audit/ownership.py``)."""
        named = {n.split("/", 1)[0] for n in (*self.managed_ledgers, *self.schemas)}
        return self.tenants | {t for t in named if t}

    def age(self) -> float:
        """Seconds since this read began."""
        return time.monotonic() - self.started

    def unprovable_for(self, names: Iterable[str]) -> tuple[str, str] | None:
        """(name, why) of the first unprovable entry that covers one of ``names`` (a managed-ledger
        name or schema id, or a prefix of one), or None."""
        for n in names:
            for key, why in self.unprovable.items():
                if key == "" or n == key or n.startswith(key + "/"):
                    return key or "(every managed ledger)", why
        return None

    def summary(self) -> dict[str, Any]:
        """Counts for logs and the journal."""
        return {
            "managed_ledgers": len(self.managed_ledgers),
            "referenced_ledgers": len(self.ledgers),
            "offload_uuids": len(self.uuids),
            "unprovable": len(self.unprovable),
            "reads": self.stats.reads,
            "seconds": round(self.seconds, 3),
        }


def _problem(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


def _first(index: dict[Any, str], key: Any, where: str) -> None:
    index.setdefault(key, where)


_T = TypeVar("_T")


def _decoded(idx: ReferenceIndex, name: str, r: NodeRead, decode: Callable[..., _T]) -> _T | None:
    """The node ``r`` decoded, or None with ``name`` unprovable (unreadable, or does not decode)."""
    if r.error is not None:
        idx.unprovable[name] = f"{r.path}: cannot read ({_problem(r.error)})"
        return None
    try:
        return decode(r.data or b"", path=r.path)
    except LedgerLensError as e:
        idx.unprovable[name] = f"{r.path}: does not decode ({e})"
        return None


def _scan_tenants(reader: PipelinedReader, roots: Roots, idx: ReferenceIndex) -> None:
    """The store's own list of tenants (ownership); a store without the node has none."""
    for r in reader.children([roots.tenants]):
        if r.error is not None:
            idx.unprovable[""] = f"{roots.tenants}: cannot list tenants ({_problem(r.error)})"
        idx.tenants.update(r.children or ())


def _namespace_prefixes(reader: PipelinedReader, mlroot: str, idx: ReferenceIndex) -> list[str]:
    """``tenant/namespace`` of every namespace under the managed-ledger root."""
    prefixes: list[str] = []
    for r in list(reader.children([mlroot])):
        if r.error is not None:
            idx.unprovable[""] = f"{mlroot}: cannot list ({_problem(r.error)})"
            continue
        for r2 in reader.children([f"{mlroot}/{t}" for t in sorted(r.children or ())]):
            rel = r2.path[len(mlroot) + 1 :]
            if r2.error is not None:
                idx.unprovable[rel] = f"{r2.path}: cannot list ({_problem(r2.error)})"
                continue
            prefixes.extend(f"{rel}/{n}" for n in sorted(r2.children or ()))
    return prefixes


def _scan_managed_ledgers(
    reader: PipelinedReader, mlroot: str, idx: ReferenceIndex
) -> dict[str, tuple[str, str]]:
    """Every managed-ledger node's references; returns its cursors' paths -> (managed ledger, node)."""
    errors: list[tuple[str, dict[str, Any]]] = []
    names = find_managed_ledgers(reader, mlroot, _namespace_prefixes(reader, mlroot, idx), errors)
    for _table, row in errors:
        idx.unprovable[str(row["managed_ledger"])] = f"{row['path']}: {row['error']}"
    cursor_paths: dict[str, tuple[str, str]] = {}
    by_path = {f"{mlroot}/{n}": n for n in names}
    # data and children in two passes: each batches into multiRead requests (one op kind a request)
    datas = {r.path: r for r in reader.get(list(by_path))}
    kids = {r.path: r for r in reader.children(list(by_path))}
    for path, ml in by_path.items():
        if path not in datas:
            continue  # deleted between the listing and the read: references nothing
        idx.managed_ledgers[ml] = mlroot
        r = datas[path]
        rec = _decoded(idx, ml, r, mlf.decode_managed_ledger)
        if rec is None:
            continue
        version = int(r.stat.version) if r.stat is not None else None
        if refs.is_emptied(rec, version):
            idx.unprovable[ml] = f"{path}: emptied (0 bytes, rewritten at znode version {version})"
        for ref in refs.managed_ledger_references(rec):
            _first(idx.ledgers, ref.ledger_id, f"{path} (ledger list)")
        for u in refs.offload_uuids(rec):
            _first(idx.uuids, u, path)
        k = kids.get(path)
        if k is None or k.error is not None or k.children is None:
            why = _problem(k.error) if k is not None and k.error is not None else "vanished"
            idx.unprovable[ml] = f"{path}: cannot list cursors ({why})"
            continue
        for c in sorted(k.children):
            cursor_paths[f"{path}/{c}"] = (ml, c)
    return cursor_paths


def _scan_cursors(
    reader: PipelinedReader, cursor_paths: dict[str, tuple[str, str]], idx: ReferenceIndex
) -> None:
    """Every cursor's references, and the state of each ``__compaction`` cursor."""
    for r in reader.get(list(cursor_paths)):
        ml, node = cursor_paths[r.path]
        cur = _decoded(idx, ml, r, mlf.decode_cursor)
        if cur is None:
            continue
        for ref in refs.cursor_references(cur):
            _first(idx.ledgers, ref.ledger_id, f"{r.path} ({ref.key or ref.component})")
        if _cursor_name(node) == refs.COMPACTION_CURSOR:
            idx.compaction[ml] = (cur.cursors_ledger_id >= 0, cur.compacted_ledger_id)


def _scan_schemas(reader: PipelinedReader, roots: Roots, idx: ReferenceIndex) -> None:
    """Every schema locator's references: /schemas/<tenant>/<namespace>/<topic>."""
    sroot = roots.schemas.rstrip("/")
    level = [sroot]
    for depth in range(2):
        nxt: list[str] = []
        for r in reader.children(level):
            rel = r.path[len(sroot) + 1 :]
            if r.error is not None:
                idx.unprovable[rel if depth else ""] = f"{r.path}: cannot list ({_problem(r.error)})"
                continue
            nxt.extend(f"{r.path}/{c}" for c in sorted(r.children or ()))
        level = nxt
    locators: list[str] = []
    for r in reader.children(level):
        if r.error is not None:
            idx.unprovable[r.path[len(sroot) + 1 :]] = f"{r.path}: cannot list ({_problem(r.error)})"
            continue
        locators.extend(f"{r.path}/{c}" for c in sorted(r.children or ()))
    for r in reader.get(locators):
        sid = r.path[len(sroot) + 1 :]
        idx.schemas.add(sid)
        loc = _decoded(idx, sid, r, decode_schema_locator)
        for ref in refs.schema_references(loc) if loc is not None else ():
            _first(idx.ledgers, ref.ledger_id, f"{r.path} (schema locator)")


def scan_references(
    reader: PipelinedReader, roots: Roots = DEFAULT_ROOTS, *, into: ReferenceIndex | None = None
) -> ReferenceIndex:
    """Read every reference of one Pulsar store (see the module docstring); ``into`` merges a
    second store into an index."""
    idx = into or ReferenceIndex(started=time.monotonic(), started_ms=int(time.time() * 1000))
    t0 = time.monotonic()
    reader.stats = idx.stats
    mlroot = roots.managed_ledgers.rstrip("/")
    _scan_tenants(reader, roots, idx)
    _scan_cursors(reader, _scan_managed_ledgers(reader, mlroot, idx), idx)
    _scan_schemas(reader, roots, idx)
    idx.seconds += time.monotonic() - t0
    return idx


def _cursor_name(node: str) -> str:
    try:
        return decode_component(node)
    except LedgerLensError:
        return node


class ReferenceScanner:
    """The deleter's current :class:`ReferenceIndex` over its Pulsar stores.

    :meth:`current` returns an index whose read began at most ``max_age_s`` ago. Past half that age
    a new read starts in the background while the workers keep the current one; only an index
    older than ``max_age_s`` (or none yet) makes them wait for the new one.
    """

    def __init__(
        self,
        clients: Sequence[Any],
        roots: Roots = DEFAULT_ROOTS,
        *,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        max_in_flight: int = 200,
        rate_limit: float | None = None,
        on_scan: Any = None,
    ) -> None:
        self.clients = list(clients)
        self.roots = roots
        self.max_age_s = max_age_s
        self.max_in_flight = max_in_flight
        self.rate_limit = rate_limit
        self.on_scan = on_scan  # called with each new index (journal, progress)
        self._index: ReferenceIndex | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._reading = False
        self._error: BaseException | None = None
        self.scans = 0

    def current(self) -> ReferenceIndex:
        """An index whose read began at most ``max_age_s`` ago, or the first whose read began after
        this call (a read slower than ``max_age_s`` must still end the wait)."""
        asked = time.monotonic()
        with self._changed:
            while True:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                idx = self._index
                if idx is not None and (idx.age() <= self.max_age_s or idx.started >= asked):
                    if idx.age() > self.max_age_s / 2:
                        self._start_read()
                    return idx
                self._start_read()
                self._changed.wait(timeout=1.0)

    def _start_read(self) -> None:  # under the lock
        if not self._reading:
            self._reading = True
            threading.Thread(target=self._read, name="reference-scan", daemon=True).start()

    def _read(self) -> None:
        try:
            idx = self._scan()
            with self._changed:
                self._index = idx
        except BaseException as e:  # noqa: BLE001 - handed to the workers waiting for an index
            with self._changed:
                self._error = e
        finally:
            with self._changed:
                self._reading = False
                self._changed.notify_all()

    def _scan(self) -> ReferenceIndex:
        idx: ReferenceIndex | None = None
        multi = max(1, min(100, self.max_in_flight // 4))  # multiRead batches, as the audit's scan
        for client in self.clients:
            reader = PipelinedReader(
                client, max_in_flight=self.max_in_flight, rate_limit=self.rate_limit, multi_read=multi
            )
            idx = scan_references(reader, self.roots, into=idx)
        assert idx is not None
        self.scans += 1
        if self.on_scan is not None:
            self.on_scan(idx)
        return idx
