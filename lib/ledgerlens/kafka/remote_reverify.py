"""Re-verification of the Kafka findings that could lead to a deletion or that claim data loss.

The inventory is a snapshot: brokers keep copying and deleting segments while it is taken. Before
an object finding with action ``delete_object`` (orphan or deleted-partition object) or a
``remote_segment_missing_object`` is reported, it is checked again:

- the metadata records appended since the snapshot (from the end offsets read at the start to the
  end offsets now) are read; a candidate whose segment or topic id they mention is dropped (the
  metadata changed under it);
- the object is read again (HEAD, or stat in the local layout): an orphan candidate must still
  exist with the same size; a missing segment's object must still be absent.

A candidate whose check cannot be done is dropped: silence is safer than a false positive.
"""

from __future__ import annotations

import json
from typing import Any

from ledgerlens.audit.reverify import Verdicts
from ledgerlens.errors import LedgerLensError
from ledgerlens.kafka.replay import replay
from ledgerlens.sources.kafka_metadata import KafkaSource, PartitionRange, end_offsets, read_partition
from ledgerlens.sources.remote_storage import RemoteStore, object_exists, s3_client

__all__ = ["KAFKA_REVERIFIED_KINDS", "reverify_kafka"]

KAFKA_REVERIFIED_KINDS = (
    "remote_segment_orphan_object",
    "remote_segment_deleted_partition_object",
    "remote_segment_missing_object",
)


def _mentioned(source: KafkaSource, start: list[PartitionRange]) -> tuple[set[str], set[str]]:
    """Segment ids and topic ids named by records appended since ``start``."""
    before = {r.partition: r.high for r in start}
    segments: set[str] = set()
    topics: set[str] = set()
    for now in end_offsets(source):
        low = before.get(now.partition, now.low)
        if now.high <= low:
            continue
        st = replay(
            read_partition(source, PartitionRange(now.partition, low, now.high)), source.metadata_topic
        )
        segments.update(sid for (_, _, sid) in st.segments)
        segments.update(e["segment_id"] for e in st.events if e["segment_id"])
        topics.update(tid for (tid, _) in st.partitions)
    return segments, topics


def reverify_kafka(
    candidates: list[dict[str, Any]],
    source: KafkaSource | None,
    start: list[PartitionRange],
    store: RemoteStore | None,
) -> Verdicts:
    """Which candidate findings (FINDINGS rows as dicts, evidence parsed) still hold."""
    verdicts = Verdicts()
    if not candidates:
        return verdicts
    segments: set[str] = set()
    topics: set[str] = set()
    if source is not None:
        try:
            segments, topics = _mentioned(source, start)
        except LedgerLensError as e:
            for row in candidates:
                verdicts.drop(row, f"new metadata records unreadable ({e})")
            return verdicts
    client = None
    if store is not None and store.bucket:
        client = s3_client(store)
    for row in candidates:
        ev = json.loads(row.get("evidence") or "{}")
        if ev.get("segment_id") in segments:
            verdicts.drop(row, "metadata records about the segment arrived since the snapshot")
            continue
        if row["kind"] != "remote_segment_missing_object" and ev.get("topic_id") in topics:
            if row["kind"] == "remote_segment_deleted_partition_object" or ev.get("segment_state") is None:
                verdicts.drop(row, "metadata records about the topic arrived since the snapshot")
                continue
        if store is None:
            verdicts.drop(row, "no remote storage to re-read")
            continue
        try:
            exists, size = object_exists(store, row["object_key"], client)
        except LedgerLensError as e:
            verdicts.drop(row, f"object unreadable ({e.__class__.__name__})")
            continue
        if row["kind"] == "remote_segment_missing_object":
            if exists:
                verdicts.drop(row, "object present on re-read")
                continue
        elif not exists:
            verdicts.drop(row, "object gone on re-read")
            continue
        elif size != row.get("bytes"):
            verdicts.drop(row, "object changed on re-read")
            continue
        verdicts.keep.append(row)
    return verdicts
