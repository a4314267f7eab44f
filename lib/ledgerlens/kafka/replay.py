"""Fold ``__remote_log_metadata`` records into the current state per segment and per partition.

The rules are those of Kafka's topic-based remote log metadata manager:

- a segment enters with a ``RemoteLogSegmentMetadataRecord`` in COPY_SEGMENT_STARTED; a second
  such record for a known segment is accepted only while the segment is still COPY_SEGMENT_STARTED
  (a self transition: retries and fail-over);
- an update moves a known segment along COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED ->
  DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED (COPY_SEGMENT_STARTED may go straight to
  DELETE_SEGMENT_STARTED; a self transition is valid); any other move is dropped by the manager,
  and here it is also reported (``illegal_transition``);
- an update for a segment the manager does not know (no metadata record, or already
  DELETE_SEGMENT_FINISHED, which the manager forgets) is dropped and reported (``unknown_segment``);
- a partition's delete state goes DELETE_PARTITION_MARKED -> STARTED -> FINISHED (self transitions
  valid); the manager stores any state it receives, and forgets the partition's segments at
  FINISHED. Here the segments stay in the output (their objects may remain) with the partition's
  delete state beside them; an out-of-order partition state is reported.

A user partition's records all go to one metadata partition, so replaying each metadata partition
alone in offset order (one Spark task each) gives the same state as replaying the whole topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ledgerlens.errors import DecodeError
from ledgerlens.formats.kafka_remote_log import (
    METADATA_TOPIC,
    MetadataRecord,
    PartitionDeleteRecord,
    RemoteLogRecord,
    SegmentRecord,
    SegmentSnapshotRecord,
    SegmentUpdateRecord,
    decode_record,
)

__all__ = [
    "METADATA_TOPIC",
    "MetadataRecord",
    "Replay",
    "is_valid_partition_transition",
    "is_valid_segment_transition",
    "replay",
]

_SEGMENT_NEXT = {
    "COPY_SEGMENT_STARTED": ("COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED"),
    "COPY_SEGMENT_FINISHED": ("DELETE_SEGMENT_STARTED",),
    "DELETE_SEGMENT_STARTED": ("DELETE_SEGMENT_FINISHED",),
    "DELETE_SEGMENT_FINISHED": (),
}
_PARTITION_NEXT = {
    "DELETE_PARTITION_MARKED": ("DELETE_PARTITION_STARTED",),
    "DELETE_PARTITION_STARTED": ("DELETE_PARTITION_FINISHED",),
    "DELETE_PARTITION_FINISHED": (),
}
# Event time of each state, by column of REMOTE_SEGMENTS.
_STATE_MS = {
    "COPY_SEGMENT_STARTED": "copy_started_ms",
    "COPY_SEGMENT_FINISHED": "copy_finished_ms",
    "DELETE_SEGMENT_STARTED": "delete_started_ms",
    "DELETE_SEGMENT_FINISHED": "delete_finished_ms",
}


def is_valid_segment_transition(src: str | None, target: str) -> bool:
    """Whether the manager accepts a segment moving from ``src`` (None: unknown) to ``target``."""
    if src is None:
        return target == "COPY_SEGMENT_STARTED"
    return src == target or target in _SEGMENT_NEXT[src]


def is_valid_partition_transition(src: str | None, target: str) -> bool:
    """Whether a partition delete state may move from ``src`` (None: never deleted) to ``target``."""
    if src is None:
        return target == "DELETE_PARTITION_MARKED"
    return src == target or target in _PARTITION_NEXT[src]


@dataclass
class Replay:
    """The folded state: REMOTE_SEGMENTS, REMOTE_PARTITIONS and REMOTE_LOG_EVENTS rows (dicts)."""

    segments: dict[tuple[str, int, str], dict[str, Any]] = field(default_factory=dict)
    partitions: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    records: int = 0
    snapshot_records: int = 0

    # -- helpers ------------------------------------------------------------------------------
    def _partition(self, rec: SegmentRecord | SegmentUpdateRecord | PartitionDeleteRecord) -> dict[str, Any]:
        key = (rec.tip.topic_id, rec.tip.partition)
        row = self.partitions.get(key)
        if row is None:
            row = {
                "topic": rec.tip.topic,
                "topic_id": rec.tip.topic_id,
                "partition": rec.tip.partition,
                "delete_state": None,
                "delete_state_ms": None,
                "records": 0,
                "segments": 0,
                "live_segments": 0,
                "live_bytes": 0,
                "first_event_ms": None,
                "last_event_ms": None,
                "metadata_partition": None,
            }
            self.partitions[key] = row
        return row

    def _event(
        self,
        kind: str,
        where: MetadataRecord,
        problem: str,
        rec: RemoteLogRecord | None = None,
        *,
        from_state: str | None = None,
        to_state: str | None = None,
    ) -> None:
        tip = getattr(rec, "tip", None)
        self.events.append(
            {
                "kind": kind,
                "metadata_partition": where.partition,
                "metadata_offset": where.offset,
                "timestamp_ms": where.timestamp_ms,
                "topic": tip.topic if tip else None,
                "topic_id": tip.topic_id if tip else None,
                "partition": tip.partition if tip else None,
                "segment_id": getattr(rec, "segment_id", None),
                "from_state": from_state,
                "to_state": to_state,
                "event_ms": getattr(rec, "event_timestamp_ms", None),
                "problem": problem,
            }
        )

    # -- the fold -------------------------------------------------------------------------------
    def apply(self, where: MetadataRecord, rec: RemoteLogRecord) -> None:
        """Fold one decoded record read at ``where``."""
        self.records += 1
        if isinstance(rec, SegmentSnapshotRecord):
            self.snapshot_records += 1  # brokers' local snapshot files, not topic records
            return
        part = self._partition(rec)
        part["records"] += 1
        part["metadata_partition"] = where.partition
        ev = rec.event_timestamp_ms
        part["first_event_ms"] = ev if part["first_event_ms"] is None else min(part["first_event_ms"], ev)
        part["last_event_ms"] = ev if part["last_event_ms"] is None else max(part["last_event_ms"], ev)
        if isinstance(rec, PartitionDeleteRecord):
            src = part["delete_state"]
            if not is_valid_partition_transition(src, rec.state):
                self._event(
                    "illegal_transition",
                    where,
                    f"partition delete state {src or 'none'} -> {rec.state}",
                    rec,
                    from_state=src,
                    to_state=rec.state,
                )
            # the manager stores whatever partition state it receives
            part["delete_state"] = rec.state
            part["delete_state_ms"] = rec.event_timestamp_ms
            return
        key = (rec.tip.topic_id, rec.tip.partition, rec.segment_id)
        seg = self.segments.get(key)
        if isinstance(rec, SegmentRecord):
            src = seg["state"] if seg is not None and seg["state"] != "DELETE_SEGMENT_FINISHED" else None
            if rec.state != "COPY_SEGMENT_STARTED" or not is_valid_segment_transition(src, rec.state):
                self._event(
                    "illegal_transition",
                    where,
                    f"segment metadata record in {rec.state} for a segment in {src or 'no state'}",
                    rec,
                    from_state=src,
                    to_state=rec.state,
                )
                if seg is not None:
                    seg["records"] += 1
                return
            records = seg["records"] if seg is not None else 0
            self.segments[key] = {
                "topic": rec.tip.topic,
                "topic_id": rec.tip.topic_id,
                "partition": rec.tip.partition,
                "segment_id": rec.segment_id,
                "state": rec.state,
                "start_offset": rec.start_offset,
                "end_offset": rec.end_offset,
                "broker_id": rec.broker_id,
                "max_timestamp_ms": rec.max_timestamp_ms,
                "segment_size": rec.segment_size,
                "leader_epochs": [{"epoch": e, "offset": o} for e, o in rec.leader_epochs],
                "copy_started_ms": rec.event_timestamp_ms,
                "copy_finished_ms": None,
                "delete_started_ms": None,
                "delete_finished_ms": None,
                "state_ms": rec.event_timestamp_ms,
                "records": records + 1,
                "metadata_partition": where.partition,
                "metadata_offset": where.offset,
            }
            if seg is None or seg["state"] == "DELETE_SEGMENT_FINISHED":
                part["segments"] += 1
            return
        # SegmentUpdateRecord
        if seg is None or seg["state"] == "DELETE_SEGMENT_FINISHED":
            self._event(
                "unknown_segment",
                where,
                f"update to {rec.state} for a segment "
                + ("already DELETE_SEGMENT_FINISHED" if seg is not None else "with no metadata record"),
                rec,
                from_state=seg["state"] if seg is not None else None,
                to_state=rec.state,
            )
            if seg is not None:
                seg["records"] += 1
            return
        seg["records"] += 1
        src = seg["state"]
        if rec.state == "COPY_SEGMENT_STARTED" or not is_valid_segment_transition(src, rec.state):
            self._event(
                "illegal_transition",
                where,
                f"segment update {src} -> {rec.state}",
                rec,
                from_state=src,
                to_state=rec.state,
            )
            return
        seg["state"] = rec.state
        seg["state_ms"] = rec.event_timestamp_ms
        seg[_STATE_MS[rec.state]] = rec.event_timestamp_ms
        seg["metadata_partition"] = where.partition
        seg["metadata_offset"] = where.offset

    def apply_bytes(self, where: MetadataRecord, metadata_topic: str = METADATA_TOPIC) -> None:
        """Decode and fold one record; a value that does not decode becomes a ``corrupt`` event."""
        name = f"{metadata_topic} partition {where.partition} offset {where.offset}"
        try:
            rec = decode_record(where.value, name) if where.value is not None else None
        except DecodeError as e:
            self.records += 1
            self._event("corrupt", where, e.problem)
            return
        if rec is None:
            self.records += 1
            self._event("corrupt", where, "null record value (a tombstone)")
            return
        self.apply(where, rec)

    def finish(self) -> None:
        """Count live segments and bytes per partition (call once, after the last record)."""
        for p in self.partitions.values():
            p["live_segments"] = 0
            p["live_bytes"] = 0
        for s in self.segments.values():
            if s["state"] != "DELETE_SEGMENT_FINISHED":
                p = self.partitions[(s["topic_id"], s["partition"])]
                p["live_segments"] += 1
                p["live_bytes"] += s["segment_size"] or 0

    def segment_rows(self) -> Iterator[dict[str, Any]]:
        """REMOTE_SEGMENTS rows, the partition's delete state joined on."""
        for s in self.segments.values():
            p = self.partitions[(s["topic_id"], s["partition"])]
            yield {**s, "partition_delete_state": p["delete_state"]}


def replay(records: Iterable[MetadataRecord], metadata_topic: str = METADATA_TOPIC) -> Replay:
    """Fold ``records`` (one metadata partition, or several, each in offset order) into a :class:`Replay`."""
    state = Replay()
    for r in records:
        state.apply_bytes(r, metadata_topic)
    state.finish()
    return state
