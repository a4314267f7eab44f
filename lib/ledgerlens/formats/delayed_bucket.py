"""PIP-195 delayed-message index buckets (FORMATS.md section 7): cursor property keys and snapshots.

A bucket is named by a cursor property ``#pulsar.internal.delayed.bucket_<start>_<end>`` whose
value is the snapshot ledger id. The snapshot ledger holds ``SnapshotMetadata`` in entry 0 (one
``SnapshotSegmentMetadata`` per segment: min/max schedule time and, per data ledger, a
RoaringBitmap of the delayed entry ids) and one ``SnapshotSegment`` (the delayed indexes) in each of
entries 1..n.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledgerlens.errors import DecodeError
from ledgerlens.formats._proto import parse_binary
from ledgerlens.proto import delayed_index_bucket_pb2 as pb

BUCKET_PROPERTY_PREFIX = "#pulsar.internal.delayed.bucket"
_DELIMITER = "_"


@dataclass(frozen=True)
class BucketKey:
    """The ledger range of a bucket, from its cursor property key."""

    start_ledger_id: int
    end_ledger_id: int


def parse_bucket_key(key: str) -> BucketKey | None:
    """``#pulsar.internal.delayed.bucket_<start>_<end>`` -> BucketKey; None for any other key.

    The broker splits the key on ``_`` and expects exactly three parts.
    """
    if not key.startswith(BUCKET_PROPERTY_PREFIX + _DELIMITER):
        return None
    parts = key.split(_DELIMITER)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return BucketKey(int(parts[1]), int(parts[2]))


def bucket_key(start_ledger_id: int, end_ledger_id: int) -> str:
    """The cursor property key of a bucket."""
    return f"{BUCKET_PROPERTY_PREFIX}{_DELIMITER}{start_ledger_id}{_DELIMITER}{end_ledger_id}"


@dataclass(frozen=True)
class SegmentMetadata:
    """One segment as entry 0 describes it: schedule-time range and delayed entries per data ledger."""

    segment: int  # 1-based: the snapshot entry id that holds the segment
    min_schedule_ms: int
    max_schedule_ms: int
    entries_by_ledger: dict[int, tuple[int, ...]]  # data ledger id -> delayed entry ids (sorted)
    bitmap_bytes: int

    @property
    def index_count(self) -> int:
        return sum(len(v) for v in self.entries_by_ledger.values())


@dataclass(frozen=True)
class DelayedIndex:
    """One delayed message: when it becomes deliverable and where it is."""

    timestamp_ms: int
    ledger_id: int
    entry_id: int


def _bitmap(data: bytes, where: str) -> tuple[int, ...]:
    from pyroaring import BitMap  # pyroaring: only for snapshot segments that hold bitmaps

    try:
        return tuple(BitMap.deserialize(bytes(data)))
    except (ValueError, OverflowError, MemoryError) as e:
        raise DecodeError(where, f"not a portable RoaringBitmap ({len(data)} bytes): {e}") from e


def decode_snapshot_metadata(data: bytes, *, where: str) -> list[SegmentMetadata]:
    """Decode entry 0 of a snapshot ledger into its segments, in order.

    Raises
    ------
    DecodeError
        Not a ``SnapshotMetadata``, a bitmap that does not decode, or min > max schedule time.
    """
    msg = parse_binary(pb.SnapshotMetadata, data, where=where)
    out = []
    for i, seg in enumerate(msg.metadata_list, start=1):
        entries = {
            int(lid): _bitmap(bm, f"{where} segment {i} ledger {lid}")
            for lid, bm in sorted(seg.delayed_index_bit_map.items())
        }
        if seg.min_schedule_timestamp > seg.max_schedule_timestamp:
            raise DecodeError(
                where,
                f"segment {i}: min schedule time {seg.min_schedule_timestamp} after max "
                f"{seg.max_schedule_timestamp}",
            )
        out.append(
            SegmentMetadata(
                segment=i,
                min_schedule_ms=int(seg.min_schedule_timestamp),
                max_schedule_ms=int(seg.max_schedule_timestamp),
                entries_by_ledger=entries,
                bitmap_bytes=sum(len(b) for b in seg.delayed_index_bit_map.values()),
            )
        )
    return out


def decode_snapshot_segment(data: bytes, *, where: str) -> list[DelayedIndex]:
    """Decode one segment entry (entries 1..n of a snapshot ledger)."""
    msg = parse_binary(pb.SnapshotSegment, data, where=where)
    return [DelayedIndex(int(i.timestamp), int(i.ledger_id), int(i.entry_id)) for i in msg.indexes]


def encode_snapshot(segments: list[list[DelayedIndex]]) -> list[bytes]:
    """Entry payloads of a snapshot ledger for ``segments`` (fixtures; the broker writes real ones)."""
    from pyroaring import BitMap  # pyroaring: fixtures only

    meta = pb.SnapshotMetadata()
    bodies = []
    for seg in segments:
        m = meta.metadata_list.add()
        m.min_schedule_timestamp = min(i.timestamp_ms for i in seg)
        m.max_schedule_timestamp = max(i.timestamp_ms for i in seg)
        by_ledger: dict[int, list[int]] = {}
        for i in seg:
            by_ledger.setdefault(i.ledger_id, []).append(i.entry_id)
        for lid, eids in by_ledger.items():
            m.delayed_index_bit_map[lid] = BitMap(eids).serialize()
        s = pb.SnapshotSegment()
        for i in seg:
            s.indexes.add(timestamp=i.timestamp_ms, ledger_id=i.ledger_id, entry_id=i.entry_id)
        bodies.append(s.SerializeToString())
    return [meta.SerializeToString(), *bodies]
