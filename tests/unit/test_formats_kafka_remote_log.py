from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerlens.errors import DecodeError, UnknownVersionError
from ledgerlens.formats.kafka_remote_log import (
    PartitionDeleteRecord,
    SegmentRecord,
    SegmentSnapshotRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    decode_record,
    encode_record,
    uuid_from_bytes,
    uuid_to_bytes,
)

pytestmark = pytest.mark.unit

TIP = TopicIdPartition("orders", "iYl9Hp8LSAW_iFzq0vZvdQ", 1)
SEG = "q3WO9JacQb-0BMzWqgp4Ig"

# The value of a RemoteLogSegmentMetadataRecord as a real Kafka 4.1.1 broker (LocalTieredStorage)
# wrote it for topic "tiered" partition 1 (__remote_log_metadata partition 0, offset 0). The
# integration test checks the same byte-for-byte round trip on every record a live broker writes.
REAL_SEGMENT = bytes.fromhex(
    "0100000774696572656489897d1e9f0b4805bf885cead2f66f750000000100ab758ef4969c41bfb404ccd6aa0a7822"
    "00000000000000000000000000000001f300000001000001a2092d5229000001a2092d52ec02000000000000000000"
    "0000000000019cd4000000"
)


def test_real_broker_record_decodes():
    r = decode_record(REAL_SEGMENT, "__remote_log_metadata partition 0 offset 0")
    assert isinstance(r, SegmentRecord)
    assert r.tip == TopicIdPartition("tiered", "iYl9Hp8LSAW_iFzq0vZvdQ", 1)
    assert r.segment_id == SEG
    assert (r.start_offset, r.end_offset, r.broker_id) == (0, 499, 1)
    assert r.leader_epochs == ((0, 0),)
    assert r.segment_size == 105684
    assert r.custom_metadata is None
    assert r.state == "COPY_SEGMENT_STARTED"
    assert encode_record(r) == REAL_SEGMENT


def test_uuid_text_is_kafkas():
    raw = bytes(range(16))
    text = uuid_from_bytes(raw)
    assert len(text) == 22 and "=" not in text
    assert uuid_to_bytes(text) == raw
    with pytest.raises(ValueError):
        uuid_to_bytes("short")


RECORDS = [
    SegmentRecord(
        TIP, SEG, 0, 99, 3, 1700, 1800, ((0, 0), (2, 50)), 4096, b"\x01\x02", "COPY_SEGMENT_STARTED"
    ),
    SegmentUpdateRecord(TIP, SEG, 3, 1900, None, "COPY_SEGMENT_FINISHED"),
    PartitionDeleteRecord(TIP, 3, 2000, "DELETE_PARTITION_MARKED"),
    SegmentSnapshotRecord(SEG, 0, 99, 3, 1700, 1800, ((0, 0),), 4096, None, "COPY_SEGMENT_FINISHED"),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip_every_record_type(record):
    data = encode_record(record)
    assert data[:2] == bytes([1, RECORDS.index(record)])
    assert decode_record(data) == record


def test_unknown_frame_version_api_key_and_version():
    data = encode_record(RECORDS[1])
    with pytest.raises(UnknownVersionError, match="frame version 0"):
        decode_record(b"\x00" + data[1:], "rlm p3 @17")
    with pytest.raises(UnknownVersionError, match="api key 9"):
        decode_record(data[:1] + b"\x09" + data[2:])
    with pytest.raises(UnknownVersionError, match="version 1 of api key 1"):
        decode_record(data[:2] + b"\x01" + data[3:])


def test_errors_name_the_record():
    data = encode_record(RECORDS[0])
    with pytest.raises(DecodeError) as e:
        decode_record(data[:-5], "__remote_log_metadata partition 7 offset 42")
    assert e.value.where == "__remote_log_metadata partition 7 offset 42"
    assert "truncated" in e.value.problem
    with pytest.raises(DecodeError, match="trailing"):
        decode_record(data + b"\x00")
    bad_state = data[:-2] + b"\x07" + data[-1:]
    with pytest.raises(DecodeError, match="unknown RemoteLogSegmentState 7"):
        decode_record(bad_state)
    with pytest.raises(DecodeError, match="tombstone"):
        decode_record(None)  # type: ignore[arg-type]


def test_tagged_fields():
    import dataclasses

    data = encode_record(RECORDS[2])
    # replace the record's empty tagged-field section with one unknown tagged field (tag 5, 3 bytes)
    tagged = data[:-1] + b"\x01\x05\x03abc"
    rec = decode_record(tagged)
    assert rec == dataclasses.replace(RECORDS[2], tagged_fields=((5, b"abc"),))
    assert encode_record(rec) == tagged
    # a Kafka 4.1 segment metadata record for a segment without a transaction index: TxnIndexEmpty
    seg = decode_record(encode_record(RECORDS[0])[:-1] + b"\x01\x00\x01\x01")
    assert seg.tagged_fields == ((0, b"\x01"),)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_fuzzed_bytes_never_crash(data):
    try:
        decode_record(data, "fuzz")
    except DecodeError as e:
        assert e.where == "fuzz"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(RECORDS), st.data())
def test_mutated_real_records_never_crash(record, data):
    raw = bytearray(encode_record(record))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        decode_record(bytes(raw[:cut]), "fuzz")
    except DecodeError:
        pass


def test_metadata_partition_matches_a_real_broker():
    from ledgerlens.formats.kafka_remote_log import metadata_partition

    # A Kafka 4.1.1 broker with 3 metadata partitions wrote topic iYl9Hp8LSAW_iFzq0vZvdQ's partition 1
    # to metadata partition 0 and its partition 0 to metadata partition 1.
    assert metadata_partition("iYl9Hp8LSAW_iFzq0vZvdQ", 1, 3) == 0
    assert metadata_partition("iYl9Hp8LSAW_iFzq0vZvdQ", 0, 3) == 1
    assert {metadata_partition(uuid_from_bytes(bytes([i]) * 16), i, 50) for i in range(200)} <= set(range(50))
