"""Managed-ledger metadata: the ML znode, the cursor znodes and cursor-ledger entries.

Sources of truth: FORMATS.md section 1. ML and cursor znodes may carry the 0x4778 compression
envelope (:mod:`ledgerlens.formats.envelope`); cursor-ledger entries are always plain protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import Message

from ledgerlens.formats._proto import parse_binary, parse_binary_or_text
from ledgerlens.formats.envelope import unwrap
from ledgerlens.formats.uuids import uuid_from_bits
from ledgerlens.proto import managed_ledger_pb2 as pb

COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"
DELAYED_BUCKET_PREFIX = "#pulsar.internal.delayed.bucket_"


@dataclass(frozen=True)
class OffloadSegmentRecord:
    """One PIP-76 streaming offload segment of a ledger."""

    uuid: str | None
    complete: bool
    end_entry_id: int | None
    assigned_ms: int | None
    offloaded_ms: int | None
    driver: str | None


@dataclass(frozen=True)
class OffloadInfo:
    """The offload context of one ledger."""

    uuid: str | None
    complete: bool
    bookkeeper_deleted: bool
    timestamp_ms: int | None
    driver: str | None
    driver_properties: dict[str, str] = field(default_factory=dict)
    segments: tuple[OffloadSegmentRecord, ...] = ()

    @property
    def bucket(self) -> str | None:
        """The S3 bucket the offload driver wrote to, when recorded."""
        return self.driver_properties.get("bucket")


@dataclass(frozen=True)
class LedgerInfoRecord:
    """One ledger of a managed ledger."""

    ledger_id: int
    entries: int | None
    size: int | None
    timestamp_ms: int | None
    offload: OffloadInfo | None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ManagedLedgerRecord:
    """A decoded ``/managed-ledgers/<ml>`` znode."""

    compression: str
    ledgers: tuple[LedgerInfoRecord, ...]
    properties: dict[str, str]
    terminated: bool


@dataclass(frozen=True)
class CursorRecord:
    """A decoded ``/managed-ledgers/<ml>/<cursor>`` znode."""

    compression: str
    cursors_ledger_id: int
    mark_delete_ledger_id: int | None
    mark_delete_entry_id: int | None
    last_active_ms: int | None
    properties: dict[str, int]
    cursor_properties: dict[str, str]
    individual_deleted_ranges: int

    @property
    def compacted_ledger_id(self) -> int | None:
        """The compacted-topic ledger (``__compaction`` cursor), when recorded."""
        return self.properties.get(COMPACTED_LEDGER_PROPERTY)

    @property
    def delayed_bucket_ledgers(self) -> dict[str, int]:
        """PIP-195 bucket snapshot ledgers: cursor property key -> ledger id.

        Keys start with ``#pulsar.internal.delayed.bucket_``; values that are not a non-negative
        decimal integer are left out.
        """
        out: dict[str, int] = {}
        for key, value in self.cursor_properties.items():
            if not key.startswith(DELAYED_BUCKET_PREFIX):
                continue
            try:
                ledger_id = int(value.strip())
            except ValueError:
                continue
            if ledger_id >= 0:
                out[key] = ledger_id
        return out


@dataclass(frozen=True)
class PositionRecord:
    """One cursor-ledger entry (``PositionInfo``): the persisted mark-delete position."""

    ledger_id: int
    entry_id: int
    individual_deleted_ranges: int
    properties: dict[str, int]


def _opt(msg: Message, name: str) -> int | None:
    return getattr(msg, name) if msg.HasField(name) else None


def _uuid(msg: pb.OffloadContext | pb.OffloadSegment) -> str | None:
    if msg.HasField("uidMsb") or msg.HasField("uidLsb"):
        return uuid_from_bits(msg.uidMsb, msg.uidLsb)
    return None


def _driver(msg: pb.OffloadContext | pb.OffloadSegment) -> tuple[str | None, dict[str, str]]:
    if not msg.HasField("driverMetadata"):
        return None, {}
    meta = msg.driverMetadata
    return meta.name, {kv.key: kv.value for kv in meta.properties}


def offload_info(ctx: pb.OffloadContext) -> OffloadInfo:
    """The record of one parsed ``OffloadContext``."""
    driver, props = _driver(ctx)
    segments = tuple(
        OffloadSegmentRecord(
            uuid=_uuid(seg),
            complete=seg.complete,
            end_entry_id=_opt(seg, "endEntryId"),
            assigned_ms=_opt(seg, "assignedTimestamp"),
            offloaded_ms=_opt(seg, "offloadedTimestamp"),
            driver=_driver(seg)[0],
        )
        for seg in ctx.offloadSegment
    )
    return OffloadInfo(
        uuid=_uuid(ctx),
        complete=ctx.complete,
        bookkeeper_deleted=ctx.bookkeeperDeleted,
        timestamp_ms=_opt(ctx, "timestamp"),
        driver=driver,
        driver_properties=props,
        segments=segments,
    )


def _ledger_info(li: pb.ManagedLedgerInfo.LedgerInfo) -> LedgerInfoRecord:
    return LedgerInfoRecord(
        ledger_id=li.ledgerId,
        entries=_opt(li, "entries"),
        size=_opt(li, "size"),
        timestamp_ms=_opt(li, "timestamp"),
        offload=offload_info(li.offloadContext) if li.HasField("offloadContext") else None,
        properties={kv.key: kv.value for kv in li.properties},
    )


def decode_ledger_info(data: bytes, *, where: str) -> LedgerInfoRecord:
    """Decode one binary ``ManagedLedgerInfo.LedgerInfo`` (as stored in offload index V2 objects)."""
    return _ledger_info(parse_binary(pb.ManagedLedgerInfo.LedgerInfo, data, where=where))


def parse_managed_ledger_info(data: bytes, *, path: str) -> tuple[str, pb.ManagedLedgerInfo | None]:
    """The compression and the parsed ``ManagedLedgerInfo`` of a managed-ledger znode (None for 0
    bytes, a freshly created managed ledger): the one parse behind :func:`decode_managed_ledger` and
    the inventory's column builder (``inventory.rows.ManagedLedgerColumns``).

    Raises
    ------
    DecodeError
        Bad envelope, bytes that are neither binary nor TextFormat, missing required fields.
    """
    plain, compression = unwrap(data, path=path)
    if compression == "EMPTY":
        return compression, None
    if compression == "NONE":
        return compression, parse_binary_or_text(pb.ManagedLedgerInfo, plain, where=path)
    return compression, parse_binary(pb.ManagedLedgerInfo, plain, where=path)


def decode_managed_ledger(data: bytes, *, path: str) -> ManagedLedgerRecord:
    """Decode a managed-ledger znode (``ManagedLedgerInfo``).

    Parameters
    ----------
    data : bytes
        The znode value; 0 bytes is a freshly created, empty managed ledger.
    path : str
        The znode path, used in errors.

    Returns
    -------
    ManagedLedgerRecord
        Compression ``"EMPTY"`` for 0 bytes, else the envelope codec or ``"NONE"``.

    Raises
    ------
    DecodeError
        Bad envelope, bytes that are neither binary nor TextFormat, missing required fields.
    """
    compression, info = parse_managed_ledger_info(data, path=path)
    if info is None:
        return ManagedLedgerRecord(compression=compression, ledgers=(), properties={}, terminated=False)
    ledgers = tuple(_ledger_info(li) for li in info.ledgerInfo)
    return ManagedLedgerRecord(
        compression=compression,
        ledgers=ledgers,
        properties={kv.key: kv.value for kv in info.properties},
        terminated=info.HasField("terminatedPosition"),
    )


def decode_cursor(data: bytes, *, path: str) -> CursorRecord:
    """Decode a cursor znode (``ManagedCursorInfo``).

    Parameters
    ----------
    data : bytes
        The znode value. Empty bytes are an error: ``cursorsLedgerId`` is required.
    path : str
        The znode path, used in errors.

    Returns
    -------
    CursorRecord

    Raises
    ------
    DecodeError
        Bad envelope, undecodable bytes, missing required fields.
    """
    plain, compression = unwrap(data, path=path)
    if compression == "NONE":
        info = parse_binary_or_text(pb.ManagedCursorInfo, plain, where=path)
    else:
        # "EMPTY" lands here too: parsing b"" reports the missing cursorsLedgerId.
        info = parse_binary(pb.ManagedCursorInfo, plain, where=path)
    return CursorRecord(
        compression=compression,
        cursors_ledger_id=info.cursorsLedgerId,
        mark_delete_ledger_id=_opt(info, "markDeleteLedgerId"),
        mark_delete_entry_id=_opt(info, "markDeleteEntryId"),
        last_active_ms=_opt(info, "lastActive"),
        properties={p.name: p.value for p in info.properties},
        cursor_properties={p.name: p.value for p in info.cursorProperties},
        individual_deleted_ranges=len(info.individualDeletedMessages),
    )


def _ranges_from_long_arrays(pos: pb.PositionInfo) -> int:
    """Count contiguous runs of acked entries encoded as JDK BitSet long arrays (field 6)."""
    mask = (1 << 64) - 1
    runs = 0
    for item in pos.individualDeletedMessageRanges:
        carry = 0  # top bit of the previous word: a run may continue across words
        for word in item.values:
            word &= mask
            starts = word & ~(((word << 1) | carry) & mask)
            runs += starts.bit_count()
            carry = word >> 63
    return runs


def decode_position_info(data: bytes, *, where: str) -> PositionRecord:
    """Decode one cursor-ledger entry (``PositionInfo``).

    Parameters
    ----------
    data : bytes
        The entry payload, plain binary protobuf.
    where : str
        What the entry is (e.g. ``ledger 12/entry 3``), used in errors.

    Returns
    -------
    PositionRecord
        ``individual_deleted_ranges`` counts MessageRange items, or the acked runs of the
        BitSet long-array encoding when that is used.
    """
    pos = parse_binary(pb.PositionInfo, data, where=where)
    return PositionRecord(
        ledger_id=pos.ledgerId,
        entry_id=pos.entryId,
        individual_deleted_ranges=len(pos.individualDeletedMessages) + _ranges_from_long_arrays(pos),
        properties={p.name: p.value for p in pos.properties},
    )
