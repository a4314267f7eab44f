"""Tiered-storage (jcloud offloader) object keys, data blocks and index objects.

FORMATS.md section 6. Per-ledger offload (PIP-17) writes ``<uuid>-ledger-<id>`` (data) and
``<uuid>-ledger-<id>-index``; streaming offload (PIP-76) writes ``<uuid>`` and ``<uuid>-index``.
All integers in the objects are big-endian.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from ledgerlens.errors import DecodeError, UnknownVersionError
from ledgerlens.formats.bookkeeper import LedgerMetadata, ledger_metadata_from_binary
from ledgerlens.formats.managed_ledger import LedgerInfoRecord, decode_ledger_info

DATA_BLOCK_MAGIC = 0xFBDBABCB
STREAMING_DATA_BLOCK_MAGIC = 0x26A66D32
DATA_BLOCK_HEADER_SIZE = 128
BLOCK_END_PADDING = bytes.fromhex("FEDCDEAD")
INDEX_V1_MAGIC = 0xDE47DE47
INDEX_V2_MAGIC = 0x3D1FB0BC


def ledger_object_keys(uuid: str, ledger_id: int) -> tuple[str, str]:
    """Return the (data, index) object keys of a per-ledger offload."""
    data = f"{uuid}-ledger-{ledger_id}"
    return data, f"{data}-index"


def streaming_object_keys(uuid: str) -> tuple[str, str]:
    """Return the (data, index) object keys of a PIP-76 streaming offload segment."""
    return uuid, f"{uuid}-index"


@dataclass(frozen=True)
class OffloadKey:
    """What an object key in the offload bucket names."""

    uuid: str
    ledger_id: int | None
    role: str  # "data" | "index"
    layout: str  # "ledger" | "streaming"


_UUID_RE = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_KEY_RE = re.compile(rf"^(?P<uuid>{_UUID_RE})(?:-ledger-(?P<ledger>\d+))?(?P<index>-index)?$")


def parse_offload_key(key: str) -> OffloadKey | None:
    """Parse an object key of the offload bucket.

    Returns
    -------
    OffloadKey or None
        None when the key is not an offload data or index object.
    """
    m = _KEY_RE.match(key)
    if m is None:
        return None
    ledger = m.group("ledger")
    return OffloadKey(
        uuid=m.group("uuid"),
        ledger_id=int(ledger) if ledger is not None else None,
        role="index" if m.group("index") else "data",
        layout="ledger" if ledger is not None else "streaming",
    )


# ---------------------------------------------------------------------------------------------
# Data objects


@dataclass(frozen=True)
class DataBlockHeader:
    """The 128-byte header at the start of every block (multipart part) of a data object."""

    magic: int
    layout: str  # "ledger" (0xFBDBABCB) | "streaming" (0x26A66D32)
    header_length: int
    block_length: int
    first_entry_id: int
    ledger_id: int | None  # streaming blocks only


@dataclass(frozen=True)
class BlockEntry:
    """One entry of a data block: the BookKeeper entry payload (no digest header)."""

    entry_id: int
    data: bytes


def decode_data_block_header(data: bytes, *, key: str) -> DataBlockHeader:
    """Decode the header of a data block.

    Parameters
    ----------
    data : bytes
        The block, or at least its first 128 bytes.
    key : str
        The object key, used in errors.

    Raises
    ------
    DecodeError
        Wrong magic, truncated header, inconsistent lengths.
    """
    data = bytes(data)
    if len(data) < 4:
        raise DecodeError(key, f"data block header truncated: {len(data)} bytes")
    (magic,) = struct.unpack_from(">I", data, 0)
    if magic == DATA_BLOCK_MAGIC:
        layout, used = "ledger", 28
    elif magic == STREAMING_DATA_BLOCK_MAGIC:
        layout, used = "streaming", 36
    else:
        raise DecodeError(
            key,
            f"not an offload data block: magic 0x{magic:08X}, expected 0x{DATA_BLOCK_MAGIC:08X} "
            f"or 0x{STREAMING_DATA_BLOCK_MAGIC:08X}",
        )
    if len(data) < used:
        raise DecodeError(key, f"data block header truncated: {len(data)} bytes, need {used}")
    header_length, block_length, first_entry_id = struct.unpack_from(">qqq", data, 4)
    ledger_id = struct.unpack_from(">q", data, 28)[0] if layout == "streaming" else None
    if header_length < used:
        raise DecodeError(key, f"data block header length {header_length} is smaller than {used}")
    if block_length < header_length:
        raise DecodeError(key, f"data block length {block_length} is smaller than its header {header_length}")
    return DataBlockHeader(
        magic=magic,
        layout=layout,
        header_length=header_length,
        block_length=block_length,
        first_entry_id=first_entry_id,
        ledger_id=ledger_id,
    )


def iter_block_entries(block: bytes, *, key: str) -> Iterator[BlockEntry]:
    """Yield the entries of one data block (header included in ``block``).

    Entries are ``[int32 length][int64 entryId][length bytes]``; a negative length (the
    ``0xFEDCDEAD`` padding) or the end of the block ends the list.

    Raises
    ------
    DecodeError
        Bad header, or an entry that runs past the end of the block.
    """
    block = bytes(block)
    header = decode_data_block_header(block, key=key)
    end = min(header.block_length, len(block))
    pos = header.header_length
    while pos + 4 <= end:
        (length,) = struct.unpack_from(">i", block, pos)
        if length < 0:
            return
        if pos + 12 + length > end:
            raise DecodeError(
                key,
                f"block at entry offset {pos}: entry of {length} bytes runs past the block end {end}",
            )
        (entry_id,) = struct.unpack_from(">q", block, pos + 4)
        yield BlockEntry(entry_id=entry_id, data=block[pos + 12 : pos + 12 + length])
        pos += 12 + length


# ---------------------------------------------------------------------------------------------
# Index objects


@dataclass(frozen=True)
class OffloadIndexEntry:
    """Where a block starts: first entry id, 1-based multipart part number, byte offset."""

    entry_id: int
    part_id: int
    offset: int


@dataclass(frozen=True)
class OffloadIndexLedger:
    """The index of one ledger in an index object.

    V1 carries BookKeeper metadata (``metadata``); V2 carries the managed-ledger ``LedgerInfo``
    (``ledger_info``). V1 does not store the ledger id: it is taken from the key when possible.
    """

    ledger_id: int | None
    metadata: LedgerMetadata | None
    ledger_info: LedgerInfoRecord | None
    entries: tuple[OffloadIndexEntry, ...]


@dataclass(frozen=True)
class OffloadIndex:
    """A decoded index object (V1 per-ledger, or V2 streaming/multi-ledger)."""

    version: int  # 1 | 2
    index_block_length: int
    data_object_length: int
    data_header_length: int
    ledgers: tuple[OffloadIndexLedger, ...]


_INDEX_HEADER = struct.Struct(">Iiqq")
_INDEX_ENTRY = struct.Struct(">qiq")


class _Reader:
    def __init__(self, data: bytes, key: str) -> None:
        self.data = data
        self.key = key
        self.pos = 0

    def take(self, fmt: struct.Struct | str, what: str) -> tuple[int, ...]:
        st = fmt if isinstance(fmt, struct.Struct) else struct.Struct(fmt)
        if self.pos + st.size > len(self.data):
            raise DecodeError(
                self.key,
                f"index object truncated reading {what} at offset {self.pos}: "
                f"need {st.size} bytes, {len(self.data) - self.pos} left",
            )
        values = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return values

    def raw(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError(
                self.key,
                f"index object truncated reading {what} ({n} bytes) at offset {self.pos}: "
                f"{len(self.data) - self.pos} left",
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def entries(self, count: int, what: str) -> tuple[OffloadIndexEntry, ...]:
        if count < 0:
            raise DecodeError(self.key, f"negative index entry count {count} for {what}")
        out = []
        for i in range(count):
            entry_id, part_id, offset = self.take(_INDEX_ENTRY, f"index entry {i} of {what}")
            out.append(OffloadIndexEntry(entry_id=entry_id, part_id=part_id, offset=offset))
        return tuple(out)


def decode_offload_index(data: bytes, *, key: str) -> OffloadIndex:
    """Decode an offload index object, V1 (``0xDE47DE47``) or V2 (``0x3D1FB0BC``).

    Parameters
    ----------
    data : bytes
        The whole index object.
    key : str
        The object key, used in errors and (V1) to know the ledger id.

    Raises
    ------
    DecodeError
        Wrong magic, truncated object, metadata that does not decode.
    """
    reader = _Reader(bytes(data), key)
    if len(reader.data) < 4:
        raise DecodeError(key, f"index object truncated: {len(reader.data)} bytes")
    (magic,) = struct.unpack_from(">I", reader.data, 0)
    if magic not in (INDEX_V1_MAGIC, INDEX_V2_MAGIC):
        raise DecodeError(
            key,
            f"not an offload index object: magic 0x{magic:08X}, expected 0x{INDEX_V1_MAGIC:08X} (V1) "
            f"or 0x{INDEX_V2_MAGIC:08X} (V2)",
        )
    _, block_length, object_length, header_length = reader.take(_INDEX_HEADER, "the header")
    if magic == INDEX_V1_MAGIC:
        count, meta_len = reader.take(">ii", "entry count and metadata length")
        if count < 0:
            raise DecodeError(key, f"negative index entry count {count}")
        meta = reader.raw(meta_len, "segment metadata")
        try:
            metadata = ledger_metadata_from_binary(meta, path=key)
        except DecodeError as exc:
            raise DecodeError(key, f"segment metadata: {exc.problem}") from exc
        parsed = parse_offload_key(key)
        ledger = OffloadIndexLedger(
            ledger_id=parsed.ledger_id if parsed is not None else None,
            metadata=metadata,
            ledger_info=None,
            entries=reader.entries(count, "the ledger"),
        )
        return OffloadIndex(1, block_length, object_length, header_length, (ledger,))
    ledgers = []
    while reader.pos < len(reader.data):
        ledger_id, count, meta_len = reader.take(">qii", "ledger header")
        what = f"ledger {ledger_id}"
        meta = reader.raw(meta_len, f"LedgerInfo of {what}")
        try:
            info = decode_ledger_info(meta, where=key)
        except DecodeError as exc:
            raise DecodeError(key, f"LedgerInfo of {what}: {exc.problem}") from exc
        ledgers.append(
            OffloadIndexLedger(
                ledger_id=ledger_id,
                metadata=None,
                ledger_info=info,
                entries=reader.entries(count, what),
            )
        )
    return OffloadIndex(2, block_length, object_length, header_length, tuple(ledgers))


# ---------------------------------------------------------------------------------------------
# Object user metadata

FORMAT_VERSION_KEY = "s3managedledgeroffloaderformatversion"
SOFTWARE_VERSION_KEY = "s3managedledgeroffloadersoftwareversion"
GIT_SHA_KEY = "s3managedledgeroffloadersoftwaregitsha"
CLUSTER_NAME_KEY = "pulsarclustername"
ROLE_KEY = "role"
MANAGED_LEDGER_KEY = "managedledgername"
SUPPORTED_FORMAT_VERSIONS = ("1",)


@dataclass(frozen=True)
class OffloadUserMetadata:
    """The user metadata the offloader puts on each object (keys lower-cased, as S3 returns them).

    ``format_version`` is None when the object carries no version key (the reader would refuse it).
    """

    format_version: str | None
    software_version: str | None
    git_sha: str | None
    cluster_name: str | None
    role: str | None
    managed_ledger: str | None
    other: dict[str, str]


def decode_user_metadata(metadata: dict[str, str], *, key: str) -> OffloadUserMetadata:
    """Decode an offload object's user metadata (``x-amz-meta-*``; keys compared lower-cased).

    Raises
    ------
    UnknownVersionError
        The format version is present but not one this release (and Pulsar's reader) accepts.
    DecodeError
        A key or value that is not a string.
    """
    lower: dict[str, str] = {}
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise DecodeError(key, f"user metadata entry {k!r}: {v!r} is not text")
        lower[k.lower()] = v
    version = lower.pop(FORMAT_VERSION_KEY, None)
    if version is not None and version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnknownVersionError(
            key,
            f"offloader format version {version!r}, this release reads "
            + ", ".join(SUPPORTED_FORMAT_VERSIONS),
        )
    role = lower.pop(ROLE_KEY, None)
    return OffloadUserMetadata(
        format_version=version,
        software_version=lower.pop(SOFTWARE_VERSION_KEY, None),
        git_sha=lower.pop(GIT_SHA_KEY, None),
        cluster_name=lower.pop(CLUSTER_NAME_KEY, None) or None,
        role=role,
        managed_ledger=lower.pop(MANAGED_LEDGER_KEY, None) or None,
        other=lower,
    )


# ---------------------------------------------------------------------------------------------
# Blocks and parts


@dataclass(frozen=True)
class BlockSpan:
    """One block of a data object as an index places it: multipart part, byte range, entries."""

    ledger_id: int | None
    part_id: int
    offset: int
    length: int
    first_entry_id: int
    last_entry_id: int | None  # None when the index does not say (last block of a streaming ledger)


def block_spans(
    index: OffloadIndex, *, key: str, last_entry_ids: dict[int | None, int] | None = None
) -> list[BlockSpan]:
    """Map every block of the data object an index describes: part, offset, length, entry range.

    Blocks are ordered by offset over all the index's ledgers; a block ends where the next one
    starts (the last one at ``index.data_object_length``). A block's last entry is the entry before
    the next block of the same ledger, or the ledger's last entry id from ``last_entry_ids`` (by
    default the V1 metadata's ``last_entry_id``).

    Raises
    ------
    DecodeError
        Two blocks at the same offset, offsets or part numbers that do not increase, a block past the
        end of the data object, entry ids that do not increase within a ledger.
    """
    last = dict(last_entry_ids or {})
    placed: list[tuple[int, int, int, int | None]] = []  # offset, part, first entry, ledger
    for led in index.ledgers:
        if led.metadata is not None and led.ledger_id not in last and led.metadata.last_entry_id >= 0:
            last[led.ledger_id] = led.metadata.last_entry_id
        prev: int | None = None
        for e in led.entries:
            if prev is not None and e.entry_id <= prev:
                raise DecodeError(
                    key, f"index entries of ledger {led.ledger_id} do not increase: {e.entry_id} after {prev}"
                )
            prev = e.entry_id
            placed.append((e.offset, e.part_id, e.entry_id, led.ledger_id))
    placed.sort()
    next_first: list[int | None] = [None] * len(placed)
    seen: dict[int | None, int] = {}
    for i in range(len(placed) - 1, -1, -1):
        next_first[i] = seen.get(placed[i][3])
        seen[placed[i][3]] = placed[i][2]
    spans: list[BlockSpan] = []
    for i, (offset, part, first, ledger) in enumerate(placed):
        if offset < 0:
            raise DecodeError(key, f"block of entry {first} at negative offset {offset}")
        end = placed[i + 1][0] if i + 1 < len(placed) else index.data_object_length
        if i + 1 < len(placed) and (placed[i + 1][0] == offset or placed[i + 1][1] <= part):
            raise DecodeError(
                key,
                f"blocks overlap: part {placed[i + 1][1]} at offset {placed[i + 1][0]} after part {part} "
                f"at offset {offset}",
            )
        if end <= offset:
            raise DecodeError(
                key, f"block part {part} at offset {offset} starts at or past the data object end {end}"
            )
        nxt = next_first[i]
        spans.append(
            BlockSpan(
                ledger_id=ledger,
                part_id=part,
                offset=offset,
                length=end - offset,
                first_entry_id=first,
                last_entry_id=nxt - 1 if nxt is not None else last.get(ledger),
            )
        )
    return spans
