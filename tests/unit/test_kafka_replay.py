from __future__ import annotations

import pytest

from ledgerlens.formats.kafka_remote_keys import parse_remote_key, segment_keys
from ledgerlens.formats.kafka_remote_log import (
    PartitionDeleteRecord,
    RemoteLogRecord,
    SegmentRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    encode_record,
)
from ledgerlens.kafka.replay import (
    MetadataRecord,
    is_valid_partition_transition,
    is_valid_segment_transition,
    replay,
)

pytestmark = pytest.mark.unit

TIP = TopicIdPartition("orders-eu", "iYl9Hp8LSAW_iFzq0vZvdQ", 3)
S1, S2 = "q3WO9JacQb-0BMzWqgp4Ig", "3GVlldE1Rhqo3o0xCziXxA"


def seg(sid: str, start: int, end: int, ms: int = 1000) -> SegmentRecord:
    epochs = ((0, start),)
    return SegmentRecord(TIP, sid, start, end, 1, ms - 10, ms, epochs, 100, None, "COPY_SEGMENT_STARTED")


def upd(sid: str, state: str, ms: int) -> SegmentUpdateRecord:
    return SegmentUpdateRecord(TIP, sid, 1, ms, None, state)


def run(*records: RemoteLogRecord | bytes | None):
    rows = [
        MetadataRecord(7, i, 5000 + i, r if isinstance(r, bytes) or r is None else encode_record(r))
        for i, r in enumerate(records)
    ]
    return replay(rows)


def test_transition_rules():
    assert is_valid_segment_transition(None, "COPY_SEGMENT_STARTED")
    assert not is_valid_segment_transition(None, "COPY_SEGMENT_FINISHED")
    assert is_valid_segment_transition("COPY_SEGMENT_STARTED", "DELETE_SEGMENT_STARTED")
    assert is_valid_segment_transition("COPY_SEGMENT_FINISHED", "COPY_SEGMENT_FINISHED")
    assert not is_valid_segment_transition("COPY_SEGMENT_FINISHED", "COPY_SEGMENT_STARTED")
    assert not is_valid_segment_transition("DELETE_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED")
    assert not is_valid_segment_transition("DELETE_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED")
    assert is_valid_partition_transition(None, "DELETE_PARTITION_MARKED")
    assert not is_valid_partition_transition(None, "DELETE_PARTITION_FINISHED")
    assert is_valid_partition_transition("DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")


def test_lifecycle_folds_to_current_state():
    st = run(
        seg(S1, 0, 99, 1000),
        upd(S1, "COPY_SEGMENT_FINISHED", 1100),
        seg(S2, 100, 199, 2000),
        upd(S1, "DELETE_SEGMENT_STARTED", 3000),
        upd(S1, "DELETE_SEGMENT_FINISHED", 3100),
    )
    rows = {r["segment_id"]: r for r in st.segment_rows()}
    assert rows[S1]["state"] == "DELETE_SEGMENT_FINISHED"
    assert (rows[S1]["copy_started_ms"], rows[S1]["copy_finished_ms"], rows[S1]["delete_finished_ms"]) == (
        1000,
        1100,
        3100,
    )
    assert rows[S1]["records"] == 4 and rows[S1]["metadata_offset"] == 4
    assert rows[S2]["state"] == "COPY_SEGMENT_STARTED"
    assert rows[S2]["leader_epochs"] == [{"epoch": 0, "offset": 100}]
    assert st.events == []
    part = st.partitions[(TIP.topic_id, TIP.partition)]
    assert (part["records"], part["segments"], part["live_segments"], part["live_bytes"]) == (5, 2, 1, 100)


def test_illegal_transitions_are_reported_and_dropped():
    st = run(
        seg(S1, 0, 99),
        upd(S1, "COPY_SEGMENT_FINISHED", 1100),
        upd(S1, "COPY_SEGMENT_STARTED", 1200),  # updates may never go back to COPY_SEGMENT_STARTED
        seg(S1, 0, 99),  # a second metadata record for a finished segment
        upd(S1, "DELETE_SEGMENT_FINISHED", 1300),  # skips DELETE_SEGMENT_STARTED
        upd(S2, "COPY_SEGMENT_FINISHED", 1400),  # never announced
    )
    [row] = list(st.segment_rows())
    assert row["state"] == "COPY_SEGMENT_FINISHED"  # the manager drops every illegal event
    kinds = [(e["kind"], e["metadata_offset"], e["from_state"], e["to_state"]) for e in st.events]
    assert kinds == [
        ("illegal_transition", 2, "COPY_SEGMENT_FINISHED", "COPY_SEGMENT_STARTED"),
        ("illegal_transition", 3, "COPY_SEGMENT_FINISHED", "COPY_SEGMENT_STARTED"),
        ("illegal_transition", 4, "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_FINISHED"),
        ("unknown_segment", 5, None, "COPY_SEGMENT_FINISHED"),
    ]
    assert all(e["topic"] == "orders-eu" and e["partition"] == 3 for e in st.events)


def test_retried_copy_start_is_a_self_transition():
    st = run(seg(S1, 0, 99, 1000), seg(S1, 0, 99, 1500))
    assert st.events == []
    [row] = list(st.segment_rows())
    assert row["copy_started_ms"] == 1500 and row["records"] == 2


def test_partition_delete_states():
    st = run(
        seg(S1, 0, 99),
        PartitionDeleteRecord(TIP, 1, 2000, "DELETE_PARTITION_MARKED"),
        PartitionDeleteRecord(TIP, 1, 2100, "DELETE_PARTITION_STARTED"),
        PartitionDeleteRecord(TIP, 1, 2200, "DELETE_PARTITION_FINISHED"),
        PartitionDeleteRecord(TIP, 1, 2300, "DELETE_PARTITION_STARTED"),
    )
    [row] = list(st.segment_rows())
    assert row["partition_delete_state"] == "DELETE_PARTITION_STARTED"
    assert [(e["kind"], e["from_state"], e["to_state"]) for e in st.events] == [
        ("illegal_transition", "DELETE_PARTITION_FINISHED", "DELETE_PARTITION_STARTED")
    ]


def test_corrupt_values_become_events_with_their_offset():
    good = encode_record(seg(S1, 0, 99))
    st = run(good[:-4], b"\x00\x00\x00", None, seg(S2, 0, 9))
    assert [(e["kind"], e["metadata_partition"], e["metadata_offset"]) for e in st.events] == [
        ("corrupt", 7, 0),
        ("corrupt", 7, 1),
        ("corrupt", 7, 2),
    ]
    assert "truncated" in st.events[0]["problem"]
    assert "frame version 0" in st.events[1]["problem"]
    assert st.records == 4 and len(st.segments) == 1


def test_key_layouts():
    keys = segment_keys("s3-plugin", "orders-eu", TIP.topic_id, 3, 1950, S1, prefix="tiered/")
    assert keys["log"] == f"tiered/orders-eu-{TIP.topic_id}/3/00000000000000001950-{S1}.log"
    for role, key in keys.items():
        k = parse_remote_key(key, "s3-plugin", "tiered/")
        assert k is not None and (k.topic, k.topic_id, k.partition, k.start_offset, k.segment_id, k.role) == (
            "orders-eu",
            TIP.topic_id,
            3,
            1950,
            S1,
            role,
        )
    local = segment_keys("local", "orders-eu", TIP.topic_id, 3, 1950, S1)
    assert local["index"] == f"orders-eu-3-{TIP.topic_id}/00000000000000001950-{S1}.index"
    k = parse_remote_key(local["timeindex"], "local")
    assert k is not None and (k.topic, k.partition, k.role) == ("orders-eu", 3, "timeindex")
    assert parse_remote_key(f"orders-eu-3-{TIP.topic_id}/00000000000000001950-{S1}.snapshot", "local")
    assert parse_remote_key("other/thing.log", "s3-plugin") is None
    assert parse_remote_key(keys["log"], "s3-plugin", "elsewhere/") is None
    assert parse_remote_key(f"orders-eu-{TIP.topic_id}/x/1-{S1}.log", "s3-plugin") is None
    with pytest.raises(ValueError):
        parse_remote_key("a", "gcs-mystery")


def test_client_uuid_in_kafkas_text_form():
    import struct

    from confluent_kafka import Uuid

    from ledgerlens.sources.kafka_metadata import kafka_uuid

    msb, lsb = struct.unpack(">qq", bytes.fromhex("897d1e9f0b4805bf885cead2f66f7500"))
    # the client prints standard base64 ("iX0enwtIBb+IXOrS9m91AA"); Kafka and object keys use URL-safe
    assert kafka_uuid(Uuid(msb, lsb)) == "iX0enwtIBb-IXOrS9m91AA"
