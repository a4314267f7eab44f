"""Read ZooKeeper metadata fast and gently: pipelined kazoo reads, bounded and rate limited.

A :class:`PipelinedReader` keeps up to ``max_in_flight`` asynchronous reads outstanding on one
kazoo session and never issues more than ``rate_limit`` reads per second (a token bucket), because
sequential reads are client-bound (NOTES.md) and unthrottled bulk reads expire sessions. The
scanners walk one part of the key space (the work item of one Spark task), decode every node with
the ``ledgerlens.formats`` readers and yield plain dict rows of the inventory schemas
(``ledgerlens.schemas``), or for the ledgers, which number millions, Arrow record batches built
column by column (:class:`LedgerColumns`). A node that does not decode or cannot be read becomes one row with
``error`` and ``path`` set; a node that vanished between listing and reading is skipped.
"""

from __future__ import annotations

import functools
import re
import struct
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from ledgerlens import schemas
from ledgerlens.config import ZooKeeperAuth, ZooKeeperSource
from ledgerlens.errors import DecodeError, SourceError
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.managed_ledger import decode_cursor, decode_managed_ledger
from ledgerlens.formats.names import decode_component, parse_managed_ledger
from ledgerlens.formats.paths import is_ledger_level1, is_special_znode, ledger_id_from_path
from ledgerlens.formats.policies import decode_namespace_policies
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens.sources.base import BOOKKEEPER_STAGES, PULSAR_STAGES, InventorySource, Row
from ledgerlens.sources.reach import RateLimiter

__all__ = [
    "LiveZooKeeper",
    "NodeRead",
    "PipelinedReader",
    "RateLimiter",
    "ScanStats",
    "connect",
    "find_managed_ledgers",
    "scan_ledgers",
    "scan_managed_ledgers",
    "scan_policies",
    "scan_schemas",
    "scan_tenants",
]

# Errors worth retrying on the same path: the session or connection hiccupped, the node is fine.
_TRANSIENT = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, ConnectionClosedError)
_RETRIES = 5
_LEAF = re.compile(r"L\d+")


def connect(hosts: str, *, timeout_s: float = 30.0, auth: ZooKeeperAuth | None = None) -> KazooClient:
    """A started read-only kazoo client, or :class:`SourceError` naming the server.

    ``auth`` (credentials by reference) is applied to the session: digest ``auth_data`` or SASL.
    """
    options = auth.kazoo_options() if auth is not None else {}
    client = KazooClient(hosts=hosts, timeout=timeout_s, read_only=True, **options)  # type: ignore[arg-type]
    try:
        client.start(timeout=timeout_s)
    except NoAuthError as e:  # kazoo checks the chroot on start
        client.stop()
        client.close()
        raise SourceError(
            f"zookeeper {hosts}", "not authorized (NoAuthError): check the ZooKeeper credentials (auth)"
        ) from e
    except Exception as e:  # KazooTimeoutError, socket errors, bad host strings
        client.close()
        raise SourceError(f"zookeeper {hosts}", f"cannot connect: {type(e).__name__}: {e}") from e
    return client


@dataclass(slots=True)
class NodeRead:
    """The outcome of reading one znode: data and stat and/or children, or the error."""

    path: str
    data: bytes | None = None
    stat: ZnodeStat | None = None
    children: list[str] | None = None
    error: Exception | None = None


@dataclass
class ScanStats:
    """Counters a scan keeps beside its rows (reads, vanished nodes, skipped znodes, errors)."""

    reads: int = 0
    vanished: int = 0
    skipped: int = 0
    errors: int = 0
    retries: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "reads": self.reads,
            "vanished": self.vanished,
            "skipped": self.skipped,
            "errors": self.errors,
            "retries": self.retries,
        }


@dataclass
class _Pending:
    path: str
    ops: list[Any]  # IAsyncResult, one per requested operation (data, children)
    want_data: bool
    want_children: bool


class PipelinedReader:
    """Pipelined ``get_async`` / ``get_children_async`` over one kazoo client.

    At most ``max_in_flight`` operations are outstanding and at most ``rate_limit`` are issued per
    second. Results come back in input order (ZooKeeper answers a session in order, so this costs
    nothing). A node that no longer exists is skipped
    (counted in ``stats.vanished``); connection hiccups are retried; any other error (``NoAuth``
    included) is returned in :attr:`NodeRead.error`.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        max_in_flight: int = 200,
        rate_limit: float | None = None,
        stats: ScanStats | None = None,
        multi_read: int = 0,
    ) -> None:
        self.client = client
        self.max_in_flight = max(1, int(max_in_flight))
        self.limiter = RateLimiter(rate_limit)
        self.stats = stats if stats is not None else ScanStats()
        self.multi_read = max(0, int(multi_read))

    # -- public API ----------------------------------------------------------------------------
    def get(self, paths: Iterable[str]) -> Iterator[NodeRead]:
        """Data and stat of every path."""
        return self.read(paths, data=True, children=False)

    def get_replies(self, paths: Iterable[str]) -> Iterator[NodeRead | MultiReadReply]:
        """Data and stat of every path, as :meth:`get`, but each answered multiRead request comes
        whole and undecoded (a :class:`MultiReadReply`, for a compiled decoder); single reads (no
        multiRead, or a request that failed) still come as :class:`NodeRead`."""
        if self.multi_read > 1:
            return self._batched(paths, True, replies=True)
        return self._ordered(paths, True, False)

    def children(self, paths: Iterable[str]) -> Iterator[NodeRead]:
        """Children of every path."""
        return self.read(paths, data=False, children=True)

    def read(self, paths: Iterable[str], *, data: bool = True, children: bool = False) -> Iterator[NodeRead]:
        """Data and/or children of every path, pipelined."""
        if self.multi_read > 1 and data != children:
            return cast(Iterator[NodeRead], self._batched(paths, data))  # no replies: only NodeRead
        return self._ordered(paths, data, children)

    # -- engine --------------------------------------------------------------------------------
    def _submit(self, path: str, want_data: bool, want_children: bool) -> _Pending:
        k = int(want_data) + int(want_children)
        self.limiter.acquire(k)
        ops = []
        if want_data:
            ops.append(self.client.get_async(path))
        if want_children:
            ops.append(self.client.get_children_async(path))
        self.stats.reads += k
        return _Pending(path, ops, want_data, want_children)

    def _finish(self, p: _Pending) -> NodeRead | None:
        out = NodeRead(p.path)
        i = 0
        for kind, wanted in (("data", p.want_data), ("children", p.want_children)):
            if not wanted:
                continue
            op = p.ops[i]
            i += 1
            try:
                value = op.get()
            except NoNodeError:
                self.stats.vanished += 1
                return None
            except _TRANSIENT:
                try:
                    value = self._retry(p.path, kind)
                except NoNodeError:
                    self.stats.vanished += 1
                    return None
                except Exception as e:  # noqa: BLE001 - captured per path
                    out.error = e
                    continue
            except Exception as e:  # noqa: BLE001 - NoAuthError and friends, captured per path
                out.error = e
                continue
            if kind == "data":
                out.data, out.stat = value
            else:
                out.children = list(value)
        return out

    def _retry(self, path: str, kind: str) -> Any:
        """Re-read one path synchronously after a connection hiccup; SourceError when it persists."""
        delay = 0.1
        for attempt in range(_RETRIES):
            self.stats.retries += 1
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            try:
                self.limiter.acquire(1)
                return self.client.get(path) if kind == "data" else self.client.get_children(path)
            except _TRANSIENT as e:
                if attempt == _RETRIES - 1:
                    raise SourceError(
                        f"zookeeper {self.client.hosts}",
                        f"{path}: {type(e).__name__} after {_RETRIES} retries",
                    ) from e
        raise AssertionError("unreachable")

    def _ordered(self, paths: Iterable[str], want_data: bool, want_children: bool) -> Iterator[NodeRead]:
        window = deque[_Pending]()
        in_flight = 0
        k = int(want_data) + int(want_children)
        for path in paths:
            while window and in_flight + k > self.max_in_flight:
                p = window.popleft()
                in_flight -= len(p.ops)
                r = self._finish(p)
                if r is not None:
                    yield r
            window.append(self._submit(path, want_data, want_children))
            in_flight += k
        while window:
            r = self._finish(window.popleft())
            if r is not None:
                yield r

    def _batched(
        self, paths: Iterable[str], want_data: bool, *, replies: bool = False
    ) -> Iterator[NodeRead | MultiReadReply]:
        """Ordered reads grouped ``multi_read`` at a time into ZooKeeper 3.6+ ``multiRead`` requests.

        One request (and one kazoo round of Python overhead) serves a whole group; per-path errors
        come back per path. A server without multiRead makes the reader fall back to single reads.
        """
        window: deque[tuple[list[str], Any]] = deque()
        in_flight = 0
        op = _GET_DATA if want_data else _GET_CHILDREN
        chroot = self.client.chroot or ""  # multiRead bypasses kazoo's own chroot handling

        def submit(group: list[str]) -> None:
            nonlocal in_flight
            self.limiter.acquire(len(group))
            result = self.client.handler.async_result()
            full = [chroot + p for p in group] if chroot else group
            self.client._call((_UndecodedMultiRead if replies else _MultiRead)(op, full), result)
            self.stats.reads += len(group)
            window.append((group, result))
            in_flight += len(group)

        def finish() -> Iterator[NodeRead | MultiReadReply]:
            nonlocal in_flight
            group, result = window.popleft()
            in_flight -= len(group)
            try:
                values = result.get()
            except Exception:  # noqa: BLE001 - whole request refused (old server) or connection hiccup
                if not isinstance(result.exception, _TRANSIENT):
                    self.multi_read = 0  # no multiRead here: single reads from now on
                yield from self._ordered(group, want_data, not want_data)
                return
            if replies:
                yield MultiReadReply(group, *values)
                return
            for path, value in zip(group, values, strict=True):
                if isinstance(value, NoNodeError):
                    self.stats.vanished += 1
                elif isinstance(value, Exception):
                    yield NodeRead(path, error=value)
                elif want_data:
                    yield NodeRead(path, data=value[0], stat=value[1])
                else:
                    yield NodeRead(path, children=value)

        group: list[str] = []
        for path in paths:
            group.append(path)
            if len(group) >= self.multi_read:
                while window and in_flight + len(group) > self.max_in_flight:
                    yield from finish()
                if self.multi_read:
                    submit(group)
                else:
                    yield from self._ordered(group, want_data, not want_data)
                group = []
        if group:
            if self.multi_read:
                submit(group)
            else:
                yield from self._ordered(group, want_data, not want_data)
        while window:
            yield from finish()


# -- ZooKeeper 3.6+ multiRead (opcode 22) over kazoo's connection ---------------------------------
_GET_DATA, _GET_CHILDREN = 4, 8
_MULTI_HEADER = struct.Struct("!iBi")
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")


class _MultiRead:
    """A ``multiRead`` request of getData or getChildren ops, in kazoo's request protocol."""

    type = 22

    def __init__(self, op: int, paths: list[str]) -> None:
        self.op = op
        self.paths = paths

    def serialize(self) -> bytes:
        out = bytearray()
        head = _MULTI_HEADER.pack(self.op, False, -1)
        for p in self.paths:
            raw = p.encode("utf-8")
            out += head
            out += _INT.pack(len(raw))
            out += raw
            out += b"\x00"  # no watch
        out += _MULTI_HEADER.pack(-1, True, -1)
        return bytes(out)

    def deserialize(self, buf: bytes, offset: int) -> Any:
        results: list[Any] = []
        while (item := _multi_read_result(buf, offset)) is not None:
            value, offset = item
            results.append(value)
        return results


class _UndecodedMultiRead(_MultiRead):
    """A ``multiRead`` whose reply is handed on undecoded: ``(reply, offset of the first result)``."""

    def deserialize(self, buf: bytes, offset: int) -> tuple[bytes, int]:
        return bytes(buf), offset


def _multi_read_result(buf: bytes, offset: int) -> tuple[Any, int] | None:
    """The result at ``offset`` of a multiRead reply and the offset after it; None at the end.

    A result is ``(data, stat)`` (getData), a list of names (getChildren) or the error's exception.
    """
    from kazoo.exceptions import EXCEPTIONS

    kind, done, _ = _MULTI_HEADER.unpack_from(buf, offset)
    offset += 9
    if done:
        return None
    if kind == _GET_DATA:
        (n,) = _INT.unpack_from(buf, offset)
        offset += 4
        data = buf[offset : offset + n] if n >= 0 else b""
        offset += max(n, 0)
        return (data, ZnodeStat._make(_STAT.unpack_from(buf, offset))), offset + _STAT.size
    if kind == _GET_CHILDREN:
        (count,) = _INT.unpack_from(buf, offset)
        offset += 4
        names = []
        for _ in range(max(count, 0)):
            (n,) = _INT.unpack_from(buf, offset)
            offset += 4
            names.append(buf[offset : offset + n].decode("utf-8"))
            offset += n
        return names, offset
    (code,) = _INT.unpack_from(buf, offset)  # -1: ErrorResult
    return EXCEPTIONS[code](), offset + 4


@dataclass(slots=True)
class MultiReadReply:
    """A multiRead reply of getData results, undecoded: ``paths`` in order, their results in
    ``reply`` from byte ``offset`` (``PipelinedReader.get_replies``)."""

    paths: list[str]
    reply: bytes
    offset: int


# -- helpers -----------------------------------------------------------------------------------
def _join(*parts: str) -> str:
    return "/" + "/".join(p.strip("/") for p in parts if p.strip("/"))


def _error_text(e: BaseException) -> str:
    if isinstance(e, DecodeError):
        return str(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _stat_times(stat: ZnodeStat | None) -> dict[str, Any]:
    if stat is None:
        return {}
    return {"znode_ctime_ms": stat.ctime, "znode_mtime_ms": stat.mtime, "znode_version": stat.version}


def _enum_name(v: Any) -> str | None:
    if v is None:
        return None
    name = getattr(v, "name", None)
    return name if isinstance(name, str) else str(v)


# -- /ledgers ----------------------------------------------------------------------------------
# FORMATS.md section 4: Pulsar's custom metadata keys -> bk_ledgers columns.
CUSTOM_METADATA_COLUMNS = {
    "application": "application",
    "component": "component",
    "pulsar/managed-ledger": "managed_ledger",
    "pulsar/cursor": "cursor",
    "pulsar/schemaId": "schema_id",
    "pulsar/compactedTopic": "compacted_topic",
    "pulsar/delayedIndexBucketKey": "bucket_key",
    "pulsar/delayedIndexTopic": "delayed_topic",
    "pulsar/delayedIndexCursor": "delayed_cursor",
}


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


def ledger_row(path: str, root: str, data: bytes | None, stat: ZnodeStat | None) -> dict[str, Any]:
    """One BK_LEDGERS row from a ledger znode's bytes and stat (decode errors become ``error``)."""
    row: dict[str, Any] = {"path": path, **_stat_times(stat)}
    try:
        row["ledger_id"] = ledger_id_from_path(path, root)
        md = decode_ledger_metadata(data or b"", path=path)
    except Exception as e:  # noqa: BLE001 - DecodeError, or a decoder bug: keep the row, name the path
        row["error"] = _error_text(e)
        return row
    custom = md.custom_text()
    row.update(
        format_version=md.format_version,
        state=_enum_name(md.state),
        ensemble_size=md.ensemble_size,
        write_quorum=md.write_quorum,
        ack_quorum=md.ack_quorum,
        length=md.length,
        last_entry_id=md.last_entry_id,
        ctime_ms=md.ctime_ms if md.ctime_ms is not None else (stat.ctime if stat else None),
        digest_type=_enum_name(md.digest_type),
        bookies=list(md.bookies),
        custom_metadata=custom,
    )
    for key, column in CUSTOM_METADATA_COLUMNS.items():
        if key in custom:
            row[column] = custom[key]
    return row


_V3_HEADER = b"BookieMetadataFormatVersion\t3\n"
_LEDGER_STATES = {1: "OPEN", 2: "IN_RECOVERY", 3: "CLOSED"}
_LEDGER_DIGESTS = {1: "CRC32", 2: "HMAC", 3: "CRC32C", 4: "DUMMY"}
_LEDGER_NESTED = ("bookies", "custom_metadata")  # built from flat value lists


class LedgerColumns:
    """BK_LEDGERS rows built column by column, for scans of millions of ledgers.

    The v3 metadata every BookKeeper since 4.9 writes goes straight from the protobuf into column
    lists (no metadata object, no row dict, bookies and custom metadata as flat value lists);
    anything else (v1, v2 text, a decode error, custom metadata that is not UTF-8) goes through
    :func:`ledger_row`, so both paths give the same row. :meth:`take` hands out the rows so far as
    one Arrow record batch of the inventory schema.

    The common case (clean v3 metadata) is decoded by compiled code when it is built
    (``ledgerlens.formats._ledgerwire``, a C extension ``make setup`` compiles): the same rows,
    0.7 instead of 5.8 µs per ledger. It declines anything unusual, which then takes the Python path.
    ``compiled=False`` keeps to Python.
    """

    BATCH_ROWS = 8192  # rows per record batch its callers take
    _SCALARS = tuple(f.name for f in schemas.BK_LEDGERS.fields if f.name not in _LEDGER_NESTED)
    # the compiled appender's column order: these scalars, then one column per custom metadata key
    _COMPILED_SCALARS = (
        "ledger_id", "path", "format_version", "state", "ensemble_size", "write_quorum", "ack_quorum",
        "length", "last_entry_id", "ctime_ms", "znode_ctime_ms", "znode_mtime_ms", "znode_version",
        "digest_type", "error",
    )  # fmt: skip

    def __init__(self, *, compiled: bool = True) -> None:
        from ledgerlens.proto.bookkeeper_pb2 import LedgerMetadataFormat

        self._message = LedgerMetadataFormat
        self._appender = _compiled_appender() if compiled else None
        self.errors = 0
        self._reset()

    @property
    def compiled(self) -> bool:
        """True when the compiled decoder takes the common case."""
        return self._appender is not None

    def _reset(self) -> None:
        self._cols: dict[str, list[Any]] = {c: [] for c in self._SCALARS}
        self._bookies: list[str] = []
        self._bookie_ends: list[int] = [0]
        self._bookies_null: list[bool] = []
        self._keys: list[str] = []
        self._values: list[str] = []
        self._custom_ends: list[int] = [0]
        self._custom_null: list[bool] = []
        self._fast = None
        if self._appender is not None:
            self._fast = self._appender(
                tuple(self._cols[c] for c in self._COMPILED_SCALARS),
                tuple(k.encode() for k in CUSTOM_METADATA_COLUMNS),
                tuple(self._cols[c] for c in CUSTOM_METADATA_COLUMNS.values()),
                (self._bookies, self._bookie_ends, self._bookies_null, self._keys, self._values)
                + (self._custom_ends, self._custom_null),
                tuple(_LEDGER_STATES[i] for i in (1, 2, 3)),
                tuple(_LEDGER_DIGESTS[i] for i in (1, 2, 3, 4)),
            )

    def __len__(self) -> int:
        return len(self._cols["path"])

    def add_row(self, row: dict[str, Any]) -> None:
        """Append a row given as a dict (absent columns are null)."""
        for c, values in self._cols.items():
            values.append(row.get(c))
        bookies = row.get("bookies")
        self._bookies_null.append(bookies is None)
        self._bookies.extend(bookies or ())
        self._bookie_ends.append(len(self._bookies))
        custom = row.get("custom_metadata")
        self._custom_null.append(custom is None)
        if custom:
            self._keys.extend(custom)
            self._values.extend(custom.values())
        self._custom_ends.append(len(self._keys))
        if row.get("error"):
            self.errors += 1

    def add(
        self,
        path: str,
        root: str,
        ledger_id: int | None,
        data: bytes | None,
        ctime: int,
        mtime: int,
        version: int,
    ) -> None:
        """Append the row of one ledger znode (``ledger_id`` None: parsed from ``path``)."""
        if self._fast is not None and self._fast.add(path, root, ledger_id, data, ctime, mtime, version):
            return
        try:
            if data is None or not data.startswith(_V3_HEADER):
                raise ValueError
            if ledger_id is None:
                ledger_id = ledger_id_from_path(path, root)
            size, start = data[30], 31  # the varint32 length prefix: one or two bytes in practice
            if size & 0x80:
                second = data[31]
                if second & 0x80:
                    raise ValueError  # three bytes or more: the general decoder
                size, start = (size & 0x7F) | second << 7, 32
            if start + size != len(data):
                raise ValueError
            msg = self._message()
            msg.ParseFromString(data[start:])
            if not msg.IsInitialized():
                raise ValueError
            state = _LEDGER_STATES[msg.state]
            custom = {e.key: e.value.decode("utf-8") for e in msg.customMetadata}
            segments = msg.segment
            if len(segments) == 1:
                bookies = dict.fromkeys(segments[0].ensembleMember)
            else:
                bookies = dict.fromkeys(b for seg in segments for b in seg.ensembleMember)
            has = msg.HasField
        except Exception:  # noqa: BLE001 - not the common case: the general decoder names the problem
            stat = ZnodeStat(0, 0, ctime, mtime, version, 0, 0, 0, 0, 0, 0)
            self.add_row(ledger_row(path, root, data, stat))
            return
        c = self._cols
        c["ledger_id"].append(ledger_id)
        c["path"].append(path)
        c["format_version"].append(3)
        c["state"].append(state)
        c["ensemble_size"].append(msg.ensembleSize)
        c["write_quorum"].append(msg.quorumSize)
        c["ack_quorum"].append(msg.ackQuorumSize if has("ackQuorumSize") else msg.quorumSize)
        c["length"].append(msg.length)
        c["last_entry_id"].append(msg.lastEntryId if has("lastEntryId") else -1)
        c["ctime_ms"].append(msg.ctime if has("ctime") else ctime)
        c["znode_ctime_ms"].append(ctime)
        c["znode_mtime_ms"].append(mtime)
        c["znode_version"].append(version)
        c["digest_type"].append(_LEDGER_DIGESTS.get(msg.digestType) if has("digestType") else None)
        c["error"].append(None)
        get = custom.get
        for key, column in CUSTOM_METADATA_COLUMNS.items():
            c[column].append(get(key))
        self._bookies.extend(bookies)
        self._bookie_ends.append(len(self._bookies))
        self._bookies_null.append(False)
        self._keys.extend(custom)
        self._values.extend(custom.values())
        self._custom_ends.append(len(self._keys))
        self._custom_null.append(False)

    def add_reply(self, reply: MultiReadReply, root: str) -> Iterator[NodeRead]:
        """Append the rows of a multiRead reply with the compiled decoder; yields, in order, each read
        it does not take (an error, a vanished node, a value only the Python decoder reads) for the
        caller to handle before the rest are appended. Needs the compiled decoder (:attr:`compiled`)."""
        fast = self._fast
        if fast is None:
            raise ValueError("LedgerColumns.add_reply: the compiled decoder is not in use")
        index, offset = 0, reply.offset
        while index < len(reply.paths):
            index, offset, stopped = fast.add_reads(reply.reply, offset, reply.paths, index, root)
            if not stopped:
                return
            item = _multi_read_result(reply.reply, offset)
            if item is None:
                ends = f"{reply.paths[index]}: the multiRead reply ends before its result"
                raise SourceError("zookeeper", ends)
            value, offset = item
            path = reply.paths[index]
            index += 1
            if isinstance(value, Exception):
                yield NodeRead(path, error=value)
            else:
                yield NodeRead(path, data=value[0], stat=value[1])

    def take(self) -> pa.RecordBatch:
        """The rows added since the last call, as one record batch; the builder starts empty again."""
        arrow = _ARROW_BK_LEDGERS()
        text = pa.string()
        bookies = pa.ListArray.from_arrays(
            pa.array(self._bookie_ends, type=pa.int32()),
            pa.array(self._bookies, type=text),
            mask=pa.array(self._bookies_null, type=pa.bool_()),
        )
        custom = pa.MapArray.from_arrays(
            pa.array(self._custom_ends, type=pa.int32()),
            pa.array(self._keys, type=text),
            pa.array(self._values, type=text),
            mask=pa.array(self._custom_null, type=pa.bool_()),
        )
        nested = {"bookies": bookies, "custom_metadata": custom}
        arrays = [
            nested[f.name] if f.name in nested else pa.array(self._cols[f.name], type=f.type) for f in arrow
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=arrow)


@functools.cache
def _compiled_appender() -> Any:
    """The compiled decoder's ``Appender`` type; None where it is not built (Python alone)."""
    try:
        from ledgerlens.formats._ledgerwire import Appender
    except ImportError:
        return None
    return Appender


@functools.cache
def _ARROW_BK_LEDGERS() -> pa.Schema:  # noqa: N802 - a constant built on first use
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schemas.BK_LEDGERS)


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
            for declined in cols.add_reply(r, root):
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


# -- /managed-ledgers --------------------------------------------------------------------------
MANAGED_LEDGERS_T, ML_LEDGERS_T, CURSORS_T = "managed_ledgers", "ml_ledgers", "cursors"
_DOMAINS = ("persistent",)


def _name_columns(ml_name: str) -> dict[str, Any]:
    try:
        n = parse_managed_ledger(ml_name)
    except Exception:  # noqa: BLE001 - an odd name still gets a row; tenant/namespace from the path
        parts = ml_name.split("/")
        ns = "/".join(parts[: parts.index("persistent")]) if "persistent" in parts else None
        return {"tenant": parts[0] if parts else None, "namespace": ns, "topic": None}
    return {"tenant": n.tenant, "namespace": n.namespace, "topic": n.topic}


def find_managed_ledgers(
    reader: PipelinedReader, root: str, prefixes: Iterable[str], errors: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """ML names under the namespace prefixes (v2 ``t/ns/persistent/x``, v1 ``t/c/ns/persistent/x``)."""

    def fail(prefix: str, r: NodeRead) -> None:
        problem = _error_text(r.error or Exception("unknown"))
        row: dict[str, Any] = {"managed_ledger": prefix, "path": r.path, "error": f"cannot list: {problem}"}
        row.update(_name_columns(prefix + "/persistent/x"))
        row["topic"] = None
        errors.append((MANAGED_LEDGERS_T, row))

    rel = {_join(root, p): p.strip("/") for p in prefixes}
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
    reld = {_join(root, p): p for p in domain_nodes}
    for r in reader.children(list(reld)):
        if r.error is not None:
            fail(reld[r.path].rsplit("/", 1)[0], r)
            continue
        names.extend(f"{reld[r.path]}/{t}" for t in sorted(r.children or ()))
    return names


def managed_ledger_rows(
    ml_name: str, path: str, data: bytes | None, stat: ZnodeStat | None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The MANAGED_LEDGERS row and the ML_LEDGERS rows of one ML node."""
    names = _name_columns(ml_name)
    row: dict[str, Any] = {"managed_ledger": ml_name, "path": path, **names, **_stat_times(stat)}
    try:
        ml = decode_managed_ledger(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        row["error"] = _error_text(e)
        yield MANAGED_LEDGERS_T, row
        return
    ledgers = ml.ledgers
    row.update(
        compression=_enum_name(ml.compression),
        ledger_count=len(ledgers),
        total_size=sum(li.size or 0 for li in ledgers),
        total_entries=sum(li.entries or 0 for li in ledgers),
        last_ledger_id=ledgers[-1].ledger_id if ledgers else None,
        terminated=bool(ml.terminated),
        properties=dict(ml.properties),
    )
    yield MANAGED_LEDGERS_T, row
    base = {"managed_ledger": ml_name, "tenant": names["tenant"], "namespace": names["namespace"]}
    last = len(ledgers) - 1
    for i, li in enumerate(ledgers):
        lr = dict(
            base,
            ledger_id=li.ledger_id,
            position=i,
            is_last=i == last,
            entries=li.entries,
            size=li.size,
            timestamp_ms=li.timestamp_ms,
            properties=dict(li.properties),
        )
        off = li.offload
        if off is not None:
            lr.update(
                offload_uuid=off.uuid,
                offload_complete=off.complete,
                offload_bookkeeper_deleted=off.bookkeeper_deleted,
                offload_timestamp_ms=off.timestamp_ms,
                offload_driver=off.driver,
                offload_bucket=off.bucket,
                offload_segments=[
                    {
                        "uuid": s.uuid,
                        "complete": s.complete,
                        "end_entry_id": s.end_entry_id,
                        "assigned_ms": s.assigned_ms,
                        "offloaded_ms": s.offloaded_ms,
                    }
                    for s in off.segments
                ],
            )
        yield ML_LEDGERS_T, lr


def cursor_row(
    ml_name: str, node: str, path: str, data: bytes | None, stat: ZnodeStat | None
) -> dict[str, Any]:
    """One CURSORS row from a cursor znode (``node`` is its URL-encoded name)."""
    names = _name_columns(ml_name)
    row: dict[str, Any] = {
        "managed_ledger": ml_name,
        "tenant": names["tenant"],
        "namespace": names["namespace"],
        "cursor_node": node,
        "path": path,
        **_stat_times(stat),
    }
    try:
        row["cursor"] = decode_component(node)
    except Exception:  # noqa: BLE001 - keep the raw name
        row["cursor"] = node
    try:
        c = decode_cursor(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        row["error"] = _error_text(e)
        return row
    row.update(
        compression=_enum_name(c.compression),
        cursors_ledger_id=c.cursors_ledger_id,
        mark_delete_ledger_id=c.mark_delete_ledger_id,
        mark_delete_entry_id=c.mark_delete_entry_id,
        last_active_ms=c.last_active_ms,
        properties=dict(c.properties),
        cursor_properties=dict(c.cursor_properties),
        individual_deleted_ranges=c.individual_deleted_ranges,
    )
    return row


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
    for r in reader.read(list(by_path), data=True, children=True):
        ml_name = by_path[r.path]
        if r.error is not None and r.data is None:
            reader.stats.errors += 1
            row = {"managed_ledger": ml_name, "path": r.path, "error": _error_text(r.error)}
            row.update(_stat_times(r.stat), **_name_columns(ml_name))
            yield MANAGED_LEDGERS_T, row
            continue
        for table, row in managed_ledger_rows(ml_name, r.path, r.data, r.stat):
            if row.get("error"):
                reader.stats.errors += 1
            yield table, row
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


# -- /schemas ----------------------------------------------------------------------------------
def schema_rows(
    schema_id: str, path: str, data: bytes | None, stat: ZnodeStat | None
) -> list[dict[str, Any]]:
    """SCHEMA_LEDGERS rows of one locator: one per index entry, plus ``info`` if not in the index."""
    parts = schema_id.split("/")
    base: dict[str, Any] = {
        "schema_id": schema_id,
        "path": path,
        "tenant": parts[0],
        "namespace": "/".join(parts[:2]) if len(parts) >= 2 else None,
        "znode_mtime_ms": stat.mtime if stat else None,
    }
    try:
        loc = decode_schema_locator(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        return [dict(base, error=_error_text(e))]
    latest = loc.latest
    rows = []
    seen = set()
    for entry in loc.index:
        seen.add((entry.version, entry.ledger_id, entry.entry_id))
        rows.append(
            dict(
                base,
                version=entry.version,
                ledger_id=entry.ledger_id,
                entry_id=entry.entry_id,
                is_latest=latest is not None and entry.version == latest.version,
            )
        )
    if latest is not None and (latest.version, latest.ledger_id, latest.entry_id) not in seen:
        rows.append(
            dict(
                base,
                version=latest.version,
                ledger_id=latest.ledger_id,
                entry_id=latest.entry_id,
                is_latest=True,
            )
        )
    return rows


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


# -- /admin/policies ---------------------------------------------------------------------------
def policy_row(namespace: str, path: str, data: bytes | None) -> dict[str, Any]:
    """One NAMESPACE_POLICIES row from a policies znode."""
    row: dict[str, Any] = {"tenant": namespace.split("/")[0], "namespace": namespace, "path": path}
    try:
        p = decode_namespace_policies(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        row["error"] = _error_text(e)
        return row
    row.update(
        retention_minutes=p.retention_minutes,
        retention_mb=p.retention_mb,
        offload_deletion_lag_ms=p.offload_deletion_lag_ms,
        offload_threshold_bytes=p.offload_threshold_bytes,
        offload_driver=p.offload_driver,
        offload_bucket=p.offload_bucket,
        deleted=p.deleted,
    )
    return row


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
class LiveZooKeeper(InventorySource):
    """A live ZooKeeper ensemble: pipelined, rate-limited reads of the stages it is given.

    ``stages`` says which part of the metadata this store holds: BookKeeper's (``bk_ledgers``),
    Pulsar's (``managed_ledgers``, ``schema_ledgers``, ``namespace_policies``) or both.
    """

    zk: ZooKeeperSource
    provides: tuple[str, ...] = BOOKKEEPER_STAGES + PULSAR_STAGES
    kind: str = "zk"

    @property
    def stages(self) -> tuple[str, ...]:
        return self.provides

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
        roots = {
            "bk_ledgers": self.zk.ledgers_root,
            "managed_ledgers": self.zk.managed_ledgers_root,
            "schema_ledgers": self.zk.schemas_root,
            "namespace_policies": self.zk.policies_root,
        }
        return {**super().describe(), "roots": {s: roots[s] for s in self.stages if s in roots}}

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
                return namespace_partitions(client, self.zk.managed_ledgers_root, self.zk.max_in_flight)
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
