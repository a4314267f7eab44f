"""Verify offload objects by reading little: each index object, and each data object's first header.

One *group* is what one offload wrote: ``<uuid>-ledger-<id>`` and its ``-index`` (PIP-17), or
``<uuid>`` and ``<uuid>-index`` (a PIP-76 streaming segment). A group costs two GETs: the whole
index object (a few hundred bytes per ledger) and the first :data:`DATA_BLOCK_HEADER_SIZE` bytes
of the data object; both answers carry the object's user metadata. ``deep`` streams every block
of the data object instead and checks each block header and every entry id and length.

The checks here need only the objects themselves (``problems`` of each OFFLOAD_SEGMENTS row, one
:class:`Problem` per failed check); the checks against the managed ledger's metadata are the
audit's (``ledgerlens.audit.rules.offload_objects``). Check names are part of the findings' evidence:

========================= ===============================================================
``user_metadata``         the format version is present and readable (``"1"``)
``index_decode``          the index object decodes (magic, version, lengths, metadata)
``index_version``         V1 for a per-ledger object, V2 (or V1) for a streaming segment
``index_length``          the index's own length field equals the object's size
``index_blocks``          blocks do not overlap; offsets, parts and entry ids increase
``index_coverage``        the blocks start at entry 0 and cover 0..lastEntryId (V1)
``index_state``           the embedded BookKeeper metadata says CLOSED (V1)
``data_header``           the first block header decodes (magic, lengths) and is of the object's layout
``data_length``           the data object is as long as the index says
``data_blocks``           the first block header matches the index's first block (entry, length)
``data_entries``          (deep) every block header and entry matches the index

The last three compare the data object with its index: when the index itself fails a check, the
audit blames the index, not the data object (:data:`RELATIVE_TO_INDEX`).
========================= ===============================================================
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ledgerlens.errors import DecodeError, LedgerLensError, UnknownVersionError
from ledgerlens.formats.offload import (
    DATA_BLOCK_HEADER_SIZE,
    INDEX_V1_MAGIC,
    BlockSpan,
    OffloadIndex,
    block_spans,
    decode_data_block_header,
    decode_offload_index,
    decode_user_metadata,
)

if TYPE_CHECKING:
    from ledgerlens.sources.s3 import ObjectRead

__all__ = [
    "CHECKS",
    "MAX_INDEX_BYTES",
    "RELATIVE_TO_INDEX",
    "Problem",
    "VerifyStats",
    "bounded_map",
    "group_key",
    "verify_group",
    "verify_objects",
]

CHECKS = (
    "user_metadata",
    "index_decode",
    "index_version",
    "index_length",
    "index_blocks",
    "index_coverage",
    "index_state",
    "data_header",
    "data_length",
    "data_blocks",
    "data_entries",
)
RELATIVE_TO_INDEX = ("data_length", "data_blocks", "data_entries")
MAX_INDEX_BYTES = 64 << 20  # an index of 64 MiB would describe millions of blocks: refuse to read it

_COLUMNS = (
    "bucket",
    "key",
    "uuid",
    "ledger_id",
    "role",
    "layout",
    "size",
    "last_modified_ms",
    "format_version",
    "managed_ledger",
    "cluster_name",
    "software_version",
    "meta_role",
    "index_version",
    "index_data_object_length",
    "ledgers",
    "blocks",
    "block_layout",
    "block_first_entry_id",
    "block_ledger_id",
    "block_length",
    "deep_checked",
    "deep_entries",
    "checks",
    "problems",
    "bytes_read",
    "error",
)  # fmt: skip  (schemas.OFFLOAD_SEGMENTS, checked by a test)
# a read that fails leaves the object unverified (``error``), never the whole task
_READ_ERRORS: tuple[type[BaseException], ...] = (LedgerLensError, BotoCoreError, ClientError, OSError)
T = TypeVar("T")
R = TypeVar("R")
D = TypeVar("D")  # what a decoder returns


@dataclass(frozen=True)
class Problem:
    """A failed check: its name (:data:`CHECKS`) and what was wrong."""

    check: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "detail": self.detail}


@dataclass
class VerifyStats:
    """Counters of a verification run: ``objects`` verified (read) in ``groups`` offloads with
    ``requests`` GETs; ``reused`` objects whose previous verdict held, ``not_verified`` beyond the
    request budget (``ledgerlens.offload.verdicts``)."""

    objects: int = 0
    groups: int = 0
    bytes_read: int = 0
    requests: int = 0
    problems: int = 0
    errors: int = 0
    reused: int = 0
    not_verified: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Row:
    obj: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    bytes_read: int = 0

    def check(self, name: str, problem: str | None = None) -> None:
        if name not in self.checks:
            self.checks.append(name)
        if problem is not None:
            self.problems.append(Problem(name, problem))

    def decoded(self, name: str, decode: Callable[..., D], data: Any) -> D | None:
        """``decode(data, key=<the object's key>)`` as the check ``name``: None when it raised
        ``DecodeError`` (the check's problem)."""
        self.check(name)
        try:
            return decode(data, key=self.obj["key"])
        except DecodeError as e:
            self.check(name, e.problem)
            return None

    def metadata(self, meta: dict[str, str]) -> None:
        key = self.obj["key"]
        self.check("user_metadata")
        try:
            m = decode_user_metadata(meta, key=key)
        except UnknownVersionError as e:
            self.check("user_metadata", e.problem)
            self.fields["format_version"] = meta.get("s3managedledgeroffloaderformatversion")
            return
        except DecodeError as e:
            self.check("user_metadata", e.problem)
            return
        if m.format_version is None:
            self.check("user_metadata", "no offloader format version in the user metadata")
        self.fields.update(
            format_version=m.format_version,
            managed_ledger=m.managed_ledger,
            cluster_name=m.cluster_name,
            software_version=m.software_version,
            meta_role=m.role,
        )

    def as_row(self) -> dict[str, Any]:
        o = self.obj
        row: dict[str, Any] = dict.fromkeys(_COLUMNS)
        row.update({k: o.get(k) for k in ("bucket", "key", "uuid", "ledger_id", "role", "layout", "size")})
        row["last_modified_ms"] = o.get("last_modified_ms")
        row.update(self.fields)
        row["checks"] = list(self.checks)
        row["problems"] = [p.as_dict() for p in self.problems]
        row["bytes_read"] = self.bytes_read
        return row


def _index_ledgers(index: OffloadIndex) -> list[dict[str, Any]]:
    out = []
    for led in index.ledgers:
        m, li = led.metadata, led.ledger_info
        entries = last = length = ctime = None
        state = ml = None
        if m is not None:
            last = m.last_entry_id
            entries = last + 1
            length, state, ctime = m.length, m.state, m.ctime_ms
            raw = m.custom_metadata.get("pulsar/managed-ledger")
            ml = raw.decode("utf-8", "replace") if raw is not None else None
        elif li is not None:
            entries, length = li.entries, li.size
            last = entries - 1 if entries is not None else None
        out.append(
            {
                "ledger_id": led.ledger_id,
                "entries": entries,
                "last_entry_id": last,
                "length": length,
                "state": state,
                "ctime_ms": ctime,
                "blocks": len(led.entries),
                "first_entry_id": led.entries[0].entry_id if led.entries else None,
                "managed_ledger": ml,
            }
        )
    return out


def _check_index(row: _Row, data: bytes, layout: str) -> tuple[OffloadIndex | None, list[BlockSpan]]:
    """Decode and check an index object; the decoded index and its blocks when usable."""
    index = row.decoded("index_decode", decode_offload_index, data)
    if index is None:
        return None, []
    row.fields.update(
        index_version=index.version,
        index_data_object_length=index.data_object_length,
        ledgers=_index_ledgers(index),
    )
    row.check("index_version")
    if layout == "ledger" and index.version != 1:
        row.check("index_version", f"a per-ledger offload index must be V1 (0x{INDEX_V1_MAGIC:08X}), got V2")
    row.check("index_length")
    if index.index_block_length != len(data):
        row.check(
            "index_length",
            f"the index says it is {index.index_block_length} bytes long, the object has {len(data)}",
        )
    if index.data_header_length != DATA_BLOCK_HEADER_SIZE:
        row.check(
            "index_decode",
            f"data header length {index.data_header_length}, expected {DATA_BLOCK_HEADER_SIZE}",
        )
    spans = row.decoded("index_blocks", block_spans, index) or []
    row.fields["blocks"] = len(spans)
    row.check("index_coverage")
    for led in index.ledgers:
        m = led.metadata
        if m is not None:
            if m.state != "CLOSED":
                row.check("index_state", f"the embedded ledger metadata says {m.state}, not CLOSED")
            else:
                row.check("index_state")
            first = led.entries[0].entry_id if led.entries else None
            if m.last_entry_id >= 0 and first != 0:
                row.check("index_coverage", f"the first block starts at entry {first}, not 0")
            if led.entries and led.entries[-1].entry_id > m.last_entry_id:
                row.check(
                    "index_coverage",
                    f"a block starts at entry {led.entries[-1].entry_id}, past the last entry "
                    f"{m.last_entry_id}",
                )
        elif not led.entries:
            row.check("index_coverage", f"ledger {led.ledger_id} has no block")
    if index.version == 2 and not index.ledgers:
        row.check("index_coverage", "the index names no ledger")
    return index, spans


def _check_head(row: _Row, head: bytes, spans: list[BlockSpan], layout: str) -> None:
    h = row.decoded("data_header", decode_data_block_header, head)
    if h is None:
        return
    row.fields.update(
        block_layout=h.layout,
        block_first_entry_id=h.first_entry_id,
        block_ledger_id=h.ledger_id,
        block_length=h.block_length,
    )
    if h.layout != layout:
        row.check("data_header", f"a {h.layout} block header in a {layout} object")
    if spans:
        row.check("data_blocks")
        first = spans[0]
        if first.offset != 0:
            row.check("data_blocks", f"the index's first block is at offset {first.offset}, not 0")
        elif h.first_entry_id != first.first_entry_id:
            row.check(
                "data_blocks",
                f"the first block starts at entry {h.first_entry_id}, the index says {first.first_entry_id}",
            )
        elif h.block_length != first.length:
            row.check(
                "data_blocks", f"the first block is {h.block_length} bytes, the index places {first.length}"
            )
        elif h.ledger_id is not None and h.ledger_id != first.ledger_id:
            row.check(
                "data_header", f"the first block is of ledger {h.ledger_id}, the index says {first.ledger_id}"
            )


def _read_exactly(body: Any, n: int) -> bytes:
    parts: list[bytes] = []
    left = n
    while left > 0:
        chunk = body.read(min(left, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _check_stream(row: _Row, body: Any, spans: list[BlockSpan], size: int) -> None:
    """Stream every block of a data object; check headers and entries against the index."""
    key = row.obj["key"]
    row.check("data_entries")
    entries = 0
    pos = 0
    try:
        for i, span in enumerate(spans):
            block = _read_exactly(body, span.length)
            row.bytes_read += len(block)
            if len(block) < span.length:
                row.check("data_entries", f"block {i + 1} (part {span.part_id}) ends at {pos + len(block)}")
                return
            h = decode_data_block_header(block, key=key)
            if h.first_entry_id != span.first_entry_id or h.block_length != span.length:
                row.check(
                    "data_entries",
                    f"block {i + 1} at offset {pos}: header says entry {h.first_entry_id}, "
                    f"{h.block_length} bytes; the index says entry {span.first_entry_id}, {span.length}",
                )
                return
            if h.ledger_id is not None and h.ledger_id != span.ledger_id:
                row.check(
                    "data_entries", f"block {i + 1} is of ledger {h.ledger_id}, index says {span.ledger_id}"
                )
                return
            expect = span.first_entry_id
            p = h.header_length
            while p + 4 <= len(block):
                (length,) = struct.unpack_from(">i", block, p)
                if length < 0:
                    break
                if p + 12 + length > len(block):
                    raise DecodeError(
                        key, f"block {i + 1}: entry {expect} of {length} bytes runs past the block"
                    )
                (entry_id,) = struct.unpack_from(">q", block, p + 4)
                if entry_id != expect:
                    row.check("data_entries", f"block {i + 1}: entry {entry_id} where {expect} was expected")
                    return
                expect += 1
                entries += 1
                p += 12 + length
            if span.last_entry_id is not None and expect - 1 != span.last_entry_id:
                row.check(
                    "data_entries",
                    f"block {i + 1} ends at entry {expect - 1}, the index says {span.last_entry_id}",
                )
                return
            pos += span.length
    except DecodeError as e:
        row.check("data_entries", e.problem)
        return
    finally:
        row.fields["deep_entries"] = entries
    row.fields["deep_checked"] = True


def _fetched(row: _Row, got: ObjectRead | None, stats: VerifyStats) -> ObjectRead | None:
    """The answer of one GET for ``row``: counted, its bytes and user metadata taken in; None (the
    row's error) when the object vanished since the listing."""
    stats.requests += 1
    if got is None:
        row.fields["error"] = "vanished since the listing"
        return None
    row.bytes_read += len(got.data)
    row.metadata(got.metadata)
    return got


def _fail_read(row: _Row, e: BaseException) -> None:
    row.fields["error"] = f"{row.obj['key']}: {e}" if row.obj["key"] not in str(e) else str(e)


def verify_group(
    client: Any,
    bucket: str,
    objects: list[dict[str, Any]],
    *,
    deep: bool = False,
    stats: VerifyStats | None = None,
) -> list[dict[str, Any]]:
    """Verify the objects of one offload (data and/or index); one OFFLOAD_SEGMENTS row each.

    ``objects`` are OFFLOAD_OBJECTS rows with the same uuid (and ledger id for the per-ledger
    layout). A read error is recorded in the row's ``error``, never raised.
    """
    from ledgerlens.sources.s3 import open_object, read_object  # boto3: only when objects are read

    stats = stats if stats is not None else VerifyStats()
    stats.groups += 1
    by_role = {o["role"]: _Row(o) for o in objects}
    index_row, data_row = by_role.get("index"), by_role.get("data")
    layout = objects[0].get("layout") or "ledger"
    spans: list[BlockSpan] = []
    index: OffloadIndex | None = None
    if index_row is not None:
        size = index_row.obj.get("size") or 0
        try:
            if size > MAX_INDEX_BYTES:
                index_row.check("index_decode", f"index object of {size} bytes, more than {MAX_INDEX_BYTES}")
            else:
                got = _fetched(index_row, read_object(client, bucket, index_row.obj["key"]), stats)
                if got is not None:
                    index, spans = _check_index(index_row, got.data, layout)
        except _READ_ERRORS as e:
            _fail_read(index_row, e)
    if data_row is not None:
        key = data_row.obj["key"]
        try:
            got = _fetched(
                data_row, read_object(client, bucket, key, start=0, end=DATA_BLOCK_HEADER_SIZE - 1), stats
            )
            if got is not None:
                size = got.size if got.size is not None else data_row.obj.get("size")
                if index is not None:
                    data_row.fields.update(
                        index_version=index.version,
                        index_data_object_length=index.data_object_length,
                        blocks=len(spans),
                    )
                    data_row.check("data_length")
                    if size != index.data_object_length:
                        data_row.check(
                            "data_length",
                            f"the data object is {size} bytes, its index says {index.data_object_length}",
                        )
                _check_head(data_row, got.data, spans, layout)
                if deep and spans and not data_row.problems:
                    body = open_object(client, bucket, key)
                    stats.requests += 1
                    if body is not None:
                        try:
                            _check_stream(data_row, body, spans, size or 0)
                        finally:
                            body.close()
        except _READ_ERRORS as e:
            _fail_read(data_row, e)
    rows = []
    for r in by_role.values():
        row = r.as_row()
        stats.objects += 1
        stats.bytes_read += r.bytes_read
        stats.problems += len(r.problems)
        stats.errors += row.get("error") is not None
        rows.append(row)
    return rows


def group_key(obj: dict[str, Any]) -> tuple[Any, ...]:
    """Objects with the same group key were written by one offload (data + index)."""
    if obj.get("layout") == "streaming" or obj.get("ledger_id") is None:
        return (obj["bucket"], obj["uuid"], None)
    return (obj["bucket"], obj["uuid"], obj["ledger_id"])


def bounded_map(fn: Callable[[T], R], items: Iterable[T], max_in_flight: int) -> Iterator[R]:
    """``map(fn, items)`` on a thread pool with at most ``max_in_flight`` calls at once, in order."""
    with ThreadPoolExecutor(max_workers=max(1, max_in_flight)) as pool:
        window: list[Future[R]] = []
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= 2 * max_in_flight:
                yield window.pop(0).result()
        for f in window:
            yield f.result()


def verify_objects(
    client: Any,
    objects: Iterable[dict[str, Any]],
    *,
    deep: bool = False,
    max_in_flight: int = 16,
    stats: VerifyStats | None = None,
) -> Iterator[dict[str, Any]]:
    """OFFLOAD_SEGMENTS rows for OFFLOAD_OBJECTS rows, groups verified ``max_in_flight`` at a time.

    The objects of one group must all be in ``objects`` (the collector partitions by uuid).
    """
    stats = stats if stats is not None else VerifyStats()
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for o in objects:
        groups.setdefault(group_key(o), []).append(o)
    shared = stats
    parts: list[VerifyStats] = []

    def one(g: list[dict[str, Any]]) -> list[dict[str, Any]]:
        s = VerifyStats()
        parts.append(s)
        return verify_group(client, g[0]["bucket"], g, deep=deep, stats=s)

    for rows in bounded_map(one, groups.values(), max_in_flight):
        yield from rows
    for s in parts:
        for k, v in s.as_dict().items():
            setattr(shared, k, getattr(shared, k) + v)
