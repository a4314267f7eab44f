from __future__ import annotations

import struct
import uuid
import zlib
from typing import Any

import cramjam
import lz4.block
import pytest
import zstandard
from google.protobuf import text_format

from ledgerlens.errors import DecodeError
from ledgerlens.formats.managed_ledger import (
    CursorRecord,
    LedgerInfoRecord,
    ManagedLedgerRecord,
    OffloadInfo,
    PositionRecord,
    decode_cursor,
    decode_ledger_info,
    decode_managed_ledger,
    decode_position_info,
)
from ledgerlens.inventory import rows as rows_mod
from ledgerlens.inventory import schemas
from ledgerlens.inventory.rows import ManagedLedgerColumns, Times
from ledgerlens.proto import managed_ledger_pb2 as pb

pytestmark = pytest.mark.unit

ML_PATH = "/managed-ledgers/public/default/persistent/orders-partition-0"
CURSOR_PATH = ML_PATH + "/my-sub"
CODEC_IDS = {"NONE": 0, "LZ4": 1, "ZLIB": 2, "ZSTD": 3, "SNAPPY": 4}
UUID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def _bits(u: str) -> tuple[int, int]:
    value = uuid.UUID(u).int
    msb, lsb = value >> 64, value & ((1 << 64) - 1)

    def signed(x: int) -> int:
        return x - (1 << 64) if x >= 1 << 63 else x

    return signed(msb), signed(lsb)


def wrap(codec: str, plain: bytes) -> bytes:
    body = {
        "NONE": lambda b: b,
        "LZ4": lambda b: lz4.block.compress(b, store_size=False),
        "ZLIB": zlib.compress,
        "ZSTD": lambda b: zstandard.ZstdCompressor(level=3).compress(b),
        "SNAPPY": lambda b: bytes(cramjam.snappy.compress_raw(b)),
    }[codec](plain)
    meta = pb.ManagedInfoMetadata(compressionType=CODEC_IDS[codec], uncompressedSize=len(plain))
    m = meta.SerializeToString()
    return struct.pack(">Hi", 0x4778, len(m)) + m + body


def sample_ml() -> pb.ManagedLedgerInfo:
    info = pb.ManagedLedgerInfo()
    msb, lsb = _bits(UUID)
    first = info.ledgerInfo.add(ledgerId=10, entries=500, size=65536, timestamp=1_700_000_000_000)
    ctx = first.offloadContext
    ctx.uidMsb, ctx.uidLsb = msb, lsb
    ctx.complete = True
    ctx.bookkeeperDeleted = True
    ctx.timestamp = 1_700_000_100_000
    ctx.driverMetadata.name = "aws-s3"
    ctx.driverMetadata.properties.add(key="bucket", value="pulsar-offload")
    ctx.driverMetadata.properties.add(key="region", value="eu-west-1")
    seg = ctx.offloadSegment.add(uidMsb=1, uidLsb=-1, complete=False, assignedTimestamp=5, endEntryId=99)
    seg.driverMetadata.name = "aws-s3"
    second = info.ledgerInfo.add(ledgerId=11, entries=3)
    second.properties.add(key="pip-404", value="x")
    info.ledgerInfo.add(ledgerId=3_000_000_000)
    info.properties.add(key="owner", value="me")
    return info


def check_sample(rec: ManagedLedgerRecord) -> None:
    assert [li.ledger_id for li in rec.ledgers] == [10, 11, 3_000_000_000]
    first = rec.ledgers[0]
    assert (first.entries, first.size, first.timestamp_ms) == (500, 65536, 1_700_000_000_000)
    off = first.offload
    assert isinstance(off, OffloadInfo)
    assert off.uuid == UUID
    assert off.complete and off.bookkeeper_deleted
    assert off.timestamp_ms == 1_700_000_100_000
    assert off.driver == "aws-s3"
    assert off.bucket == "pulsar-offload"
    assert off.driver_properties["region"] == "eu-west-1"
    (seg,) = off.segments
    assert seg.uuid == "00000000-0000-0001-ffff-ffffffffffff"
    assert (seg.complete, seg.end_entry_id, seg.assigned_ms, seg.offloaded_ms, seg.driver) == (
        False,
        99,
        5,
        None,
        "aws-s3",
    )
    second = rec.ledgers[1]
    assert second.entries == 3 and second.size is None and second.timestamp_ms is None
    assert second.offload is None
    assert second.properties == {"pip-404": "x"}
    assert rec.properties == {"owner": "me"}
    assert rec.terminated is False


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_managed_ledger_round_trip(codec):
    plain = sample_ml().SerializeToString()
    data = plain if codec == "NONE" else wrap(codec, plain)
    rec = decode_managed_ledger(data, path=ML_PATH)
    assert rec.compression == codec
    check_sample(rec)


def test_managed_ledger_envelope_with_none_codec():
    rec = decode_managed_ledger(wrap("NONE", sample_ml().SerializeToString()), path=ML_PATH)
    assert rec.compression == "NONE"
    check_sample(rec)


def test_empty_managed_ledger():
    assert decode_managed_ledger(b"", path=ML_PATH) == ManagedLedgerRecord(
        compression="EMPTY", ledgers=(), properties={}, terminated=False
    )


def test_terminated():
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=1)
    info.terminatedPosition.ledgerId = 1
    info.terminatedPosition.entryId = 7
    assert decode_managed_ledger(info.SerializeToString(), path=ML_PATH).terminated


def test_offload_without_uuid():
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=1).offloadContext.complete = False
    off = decode_managed_ledger(info.SerializeToString(), path=ML_PATH).ledgers[0].offload
    assert off is not None
    assert off.uuid is None and off.driver is None and off.bucket is None and off.segments == ()


def test_offload_only_one_uid_set():
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=1).offloadContext.uidLsb = 1
    off = decode_managed_ledger(info.SerializeToString(), path=ML_PATH).ledgers[0].offload
    assert off.uuid == "00000000-0000-0000-0000-000000000001"


def test_legacy_text_format_managed_ledger():
    text = text_format.MessageToString(sample_ml())
    rec = decode_managed_ledger(text.encode(), path=ML_PATH)
    assert rec.compression == "NONE"
    check_sample(rec)


def test_legacy_text_format_cursor():
    text = "cursorsLedgerId: 42\nmarkDeleteLedgerId: 10\nmarkDeleteEntryId: 5\n"
    rec = decode_cursor(text.encode(), path=CURSOR_PATH)
    assert (rec.cursors_ledger_id, rec.mark_delete_ledger_id, rec.mark_delete_entry_id) == (42, 10, 5)


def check_error(fn, data, path, *fragments):
    with pytest.raises(DecodeError) as info:
        fn(data, path=path)
    assert info.value.where == path
    assert path in str(info.value)
    for fragment in fragments:
        assert fragment in info.value.problem
    return info.value


def test_truncated_managed_ledger():
    data = sample_ml().SerializeToString()
    check_error(decode_managed_ledger, data[:-3], ML_PATH, "ManagedLedgerInfo")


def test_managed_ledger_missing_required_ledger_id():
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(entries=5)
    check_error(decode_managed_ledger, info.SerializePartialToString(), ML_PATH, "ledgerId")


def test_garbage_text_mentions_both():
    err = check_error(decode_managed_ledger, b"hello world: this is not metadata", ML_PATH)
    assert "binary" in err.problem and "text" in err.problem


def test_binary_garbage():
    check_error(decode_managed_ledger, b"\xff\xfe\xfd\x00\x01", ML_PATH, "ManagedLedgerInfo")


def test_compressed_garbage_is_not_text_parsed():
    check_error(decode_managed_ledger, wrap("ZLIB", b"ledgerInfo { ledgerId: 3 }"), ML_PATH)


def test_bad_envelope_in_managed_ledger():
    data = wrap("ZLIB", sample_ml().SerializeToString())
    check_error(decode_managed_ledger, data[:-4], ML_PATH, "ZLIB")


def sample_cursor() -> pb.ManagedCursorInfo:
    cur = pb.ManagedCursorInfo(
        cursorsLedgerId=77, markDeleteLedgerId=10, markDeleteEntryId=499, lastActive=1_700_000_000_123
    )
    for i in range(3):
        r = cur.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId = 11
        r.lowerEndpoint.entryId = i * 10
        r.upperEndpoint.ledgerId = 11
        r.upperEndpoint.entryId = i * 10 + 5
    cur.properties.add(name="CompactedTopicLedger", value=1234)
    cur.properties.add(name="other", value=-1)
    cur.cursorProperties.add(name="#pulsar.internal.delayed.bucket_10_20", value="555")
    cur.cursorProperties.add(name="#pulsar.internal.delayed.bucket_21_30", value="3000000000")
    cur.cursorProperties.add(name="#pulsar.internal.delayed.bucket_31_40", value="not-a-number")
    cur.cursorProperties.add(name="#pulsar.internal.delayed.bucket_41_50", value="-1")
    cur.cursorProperties.add(name="#pulsar.internal.delayed.bucketX", value="7")
    cur.cursorProperties.add(name="user-prop", value="9")
    return cur


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_cursor_round_trip(codec):
    plain = sample_cursor().SerializeToString()
    data = plain if codec == "NONE" else wrap(codec, plain)
    rec = decode_cursor(data, path=CURSOR_PATH)
    assert isinstance(rec, CursorRecord)
    assert rec.compression == codec
    assert rec.cursors_ledger_id == 77
    assert (rec.mark_delete_ledger_id, rec.mark_delete_entry_id) == (10, 499)
    assert rec.last_active_ms == 1_700_000_000_123
    assert rec.properties == {"CompactedTopicLedger": 1234, "other": -1}
    assert rec.compacted_ledger_id == 1234
    assert rec.individual_deleted_ranges == 3
    assert rec.cursor_properties["user-prop"] == "9"
    assert rec.delayed_bucket_ledgers == {
        "#pulsar.internal.delayed.bucket_10_20": 555,
        "#pulsar.internal.delayed.bucket_21_30": 3_000_000_000,
    }


def test_minimal_cursor():
    rec = decode_cursor(pb.ManagedCursorInfo(cursorsLedgerId=-1).SerializeToString(), path=CURSOR_PATH)
    assert rec.cursors_ledger_id == -1
    assert rec.mark_delete_ledger_id is None and rec.mark_delete_entry_id is None
    assert rec.last_active_ms is None
    assert rec.compacted_ledger_id is None
    assert rec.delayed_bucket_ledgers == {}


def test_empty_cursor_is_error():
    check_error(decode_cursor, b"", CURSOR_PATH, "cursorsLedgerId")


def test_cursor_missing_required():
    data = pb.ManagedCursorInfo(markDeleteLedgerId=3).SerializePartialToString()
    check_error(decode_cursor, data, CURSOR_PATH, "cursorsLedgerId")


def test_cursor_missing_nested_required_in_envelope():
    cur = pb.ManagedCursorInfo(cursorsLedgerId=1)
    cur.properties.add(name="x")
    check_error(decode_cursor, wrap("LZ4", cur.SerializePartialToString()), CURSOR_PATH, "value")


def test_truncated_cursor():
    data = sample_cursor().SerializeToString()
    check_error(decode_cursor, data[:-2], CURSOR_PATH)


def test_cursor_bad_codec():
    data = bytearray(wrap("LZ4", sample_cursor().SerializeToString()))
    data[7] = 9  # compressionType value inside the metadata
    check_error(decode_cursor, bytes(data), CURSOR_PATH, "unknown codec value 9")


def test_position_info_ranges():
    pos = pb.PositionInfo(ledgerId=10, entryId=20)
    r = pos.individualDeletedMessages.add()
    r.lowerEndpoint.ledgerId = r.upperEndpoint.ledgerId = 10
    r.lowerEndpoint.entryId, r.upperEndpoint.entryId = 21, 30
    pos.properties.add(name="p", value=5)
    rec = decode_position_info(pos.SerializeToString(), where="ledger 77 entry 3")
    assert rec == PositionRecord(ledger_id=10, entry_id=20, individual_deleted_ranges=1, properties={"p": 5})


def test_position_info_long_arrays():
    pos = pb.PositionInfo(ledgerId=10, entryId=20)
    # bits 0-2, 5, 63-64 (run across words), 130 -> 4 runs
    words = [0b100111 | (1 << 63), 0b1, 1 << 2]
    signed = [w - (1 << 64) if w >= 1 << 63 else w for w in words]
    pos.individualDeletedMessageRanges.add(key=11, values=signed)
    pos.individualDeletedMessageRanges.add(key=12, values=[])
    rec = decode_position_info(pos.SerializeToString(), where="e")
    assert rec.individual_deleted_ranges == 4


def test_position_info_errors():
    with pytest.raises(DecodeError) as info:
        decode_position_info(pb.PositionInfo(ledgerId=1).SerializePartialToString(), where="ledger 5 entry 0")
    assert info.value.where == "ledger 5 entry 0"
    assert "entryId" in info.value.problem
    with pytest.raises(DecodeError):
        decode_position_info(b"\x08", where="x")


def test_decode_ledger_info():
    li = pb.ManagedLedgerInfo.LedgerInfo(ledgerId=9, entries=1, size=2, timestamp=3)
    assert decode_ledger_info(li.SerializeToString(), where="k") == LedgerInfoRecord(
        ledger_id=9, entries=1, size=2, timestamp_ms=3, offload=None, properties={}
    )


# -- the inventory's column builder ----------------------------------------------------------------
# ``inventory.rows.ManagedLedgerColumns`` reads the parsed protobuf directly (no record objects);
# these tests hold every column of MANAGED_LEDGERS and ML_LEDGERS equal to a projection of
# ``decode_managed_ledger``'s records, nulls included, on nodes of every shape.
ML = "public/default/persistent/orders-partition-0"
COL_PATH = f"/managed-ledgers/{ML}"
STAT = Times(ctime=1_700_000_000_000, mtime=1_700_000_500_000, version=7)


def expected(ml: str, path: str, data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The rows from the record decoder: the MANAGED_LEDGERS row and the ML_LEDGERS rows."""
    names = rows_mod._name_columns(ml)
    times = {"znode_ctime_ms": STAT.ctime, "znode_mtime_ms": STAT.mtime, "znode_version": STAT.version}
    row: dict[str, Any] = {"managed_ledger": ml, "path": path, **names, **times}
    try:
        rec = decode_managed_ledger(data, path=path)
    except Exception as e:  # noqa: BLE001
        return {**row, "error": str(e)}, []
    ls = rec.ledgers
    row.update(
        compression=rec.compression,
        ledger_count=len(ls),
        total_size=sum(li.size or 0 for li in ls),
        total_entries=sum(li.entries or 0 for li in ls),
        last_ledger_id=ls[-1].ledger_id if ls else None,
        terminated=rec.terminated,
        properties=rec.properties,
    )
    out = []
    for i, li in enumerate(ls):
        r = {
            "managed_ledger": ml,
            "tenant": names["tenant"],
            "namespace": names["namespace"],
            "ledger_id": li.ledger_id,
            "position": i,
            "is_last": i == len(ls) - 1,
            "entries": li.entries,
            "size": li.size,
            "timestamp_ms": li.timestamp_ms,
            "properties": li.properties,
        }
        off = li.offload
        if off is not None:
            for a in ("uuid", "complete", "bookkeeper_deleted", "timestamp_ms", "driver", "bucket"):
                r[f"offload_{a}"] = getattr(off, a)
            r["offload_segments"] = [
                {
                    "uuid": s.uuid,
                    "complete": s.complete,
                    "end_entry_id": s.end_entry_id,
                    "assigned_ms": s.assigned_ms,
                    "offloaded_ms": s.offloaded_ms,
                }
                for s in off.segments
            ]
        out.append(r)
    return row, out


def as_rows(table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with every column of the table (absent = null) and maps as Arrow hands them out."""
    out = []
    for r in rows:
        full = {f.name: r.get(f.name) for f in schemas.INVENTORY[table].fields}
        for k, v in full.items():
            if isinstance(v, dict):
                full[k] = list(v.items())
        out.append(full)
    return out


def taken(cols: ManagedLedgerColumns) -> dict[str, list[dict[str, Any]]]:
    got: dict[str, list[dict[str, Any]]] = {"managed_ledgers": [], "ml_ledgers": []}
    for table, batch in cols.take():
        got[table].extend(batch.to_pylist())
    return got


def terminated() -> bytes:
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=5, entries=1, size=10)
    info.terminatedPosition.ledgerId, info.terminatedPosition.entryId = 5, 0
    return info.SerializeToString()


def duplicate_properties() -> bytes:
    info = pb.ManagedLedgerInfo()
    li = info.ledgerInfo.add(ledgerId=1)
    li.properties.add(key="k", value="first")
    li.properties.add(key="k", value="second")
    info.properties.add(key="p", value="1")
    info.properties.add(key="p", value="2")
    return info.SerializeToString()


def offload_without_anything() -> bytes:
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=9).offloadContext.complete = False
    return info.SerializeToString()


NODES = {
    "binary": sample_ml().SerializeToString(),
    "zstd": wrap("ZSTD", sample_ml().SerializeToString()),
    "lz4": wrap("LZ4", sample_ml().SerializeToString()),
    "text": text_format.MessageToString(sample_ml()).encode(),
    "empty": b"",
    "no ledgers": pb.ManagedLedgerInfo(properties=[pb.KeyValue(key="x", value="y")]).SerializeToString(),
    "terminated": terminated(),
    "duplicate properties": duplicate_properties(),
    "bare offload context": offload_without_anything(),
    "truncated": sample_ml().SerializeToString()[:-3],
    "garbage": b"\xff\xfe\xfd\x00\x01",
    "bad envelope": wrap("ZLIB", sample_ml().SerializeToString())[:-4],
}


def test_columns_equal_the_record_decoder_on_every_shape():
    cols = ManagedLedgerColumns()
    want_ml: list[dict[str, Any]] = []
    want_li: list[dict[str, Any]] = []
    failed = 0
    for i, data in enumerate(NODES.values()):
        ml = f"{ML}-{i}"
        row, lis = expected(ml, f"{COL_PATH}-{i}", data)
        want_ml.append(row)
        want_li.extend(lis)
        ok = cols.add(ml, f"{COL_PATH}-{i}", data, STAT)
        assert ok == ("error" not in row), list(NODES)[i]
        failed += not ok
    assert failed == 3  # truncated, garbage, bad envelope
    got = taken(cols)
    assert got["managed_ledgers"] == as_rows("managed_ledgers", want_ml)
    assert got["ml_ledgers"] == as_rows("ml_ledgers", want_li)
    # the offload columns land on the offloaded ledgers' rows only
    offloaded = [r["ledger_id"] for r in got["ml_ledgers"] if r["offload_segments"] is not None]
    assert offloaded == [10, 10, 10, 10, 9]
    assert len(cols) == 0 and list(cols.take()) == []


def test_error_rows_given_as_dicts_keep_their_place():
    cols = ManagedLedgerColumns()
    cols.add(f"{ML}-a", f"{COL_PATH}-a", NODES["binary"], STAT)
    cols.add_row({"managed_ledger": f"{ML}-b", "path": f"{COL_PATH}-b", "error": "NoAuthError"})
    cols.add(f"{ML}-c", f"{COL_PATH}-c", NODES["terminated"], None)
    got = taken(cols)
    assert [r["managed_ledger"] for r in got["managed_ledgers"]] == [f"{ML}-a", f"{ML}-b", f"{ML}-c"]
    assert [r["error"] for r in got["managed_ledgers"]] == [None, "NoAuthError", None]
    assert got["managed_ledgers"][1]["properties"] is None  # no map for a node not read
    assert got["managed_ledgers"][2]["znode_version"] is None
    assert [r["ledger_id"] for r in got["ml_ledgers"]] == [10, 11, 3_000_000_000, 5]


def test_a_node_that_fails_midway_leaves_no_ledger_row(monkeypatch):
    """A failure after some of a node's ledgers were appended takes them back: the node is one
    error row, and the nodes before and after it keep exactly their own rows."""
    real = rows_mod.offload_info

    def failing(ctx: pb.OffloadContext) -> Any:
        if ctx.timestamp == 1:
            raise ValueError("boom")
        return real(ctx)

    monkeypatch.setattr(rows_mod, "offload_info", failing)
    info = pb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=1).properties.add(key="a", value="b")
    info.ledgerInfo.add(ledgerId=2).offloadContext.timestamp = 2
    info.ledgerInfo.add(ledgerId=3).offloadContext.timestamp = 1
    cols = ManagedLedgerColumns()
    assert cols.add(f"{ML}-a", f"{COL_PATH}-a", NODES["binary"], STAT)
    assert not cols.add(f"{ML}-bad", f"{COL_PATH}-bad", info.SerializeToString(), STAT)
    assert cols.add(f"{ML}-c", f"{COL_PATH}-c", NODES["terminated"], STAT)
    got = taken(cols)
    assert [r["error"] for r in got["managed_ledgers"]] == [None, "ValueError: boom", None]
    assert [r["ledger_id"] for r in got["ml_ledgers"]] == [10, 11, 3_000_000_000, 5]
    assert [r["properties"] for r in got["ml_ledgers"]] == [[], [("pip-404", "x")], [], []]
    assert [r["offload_uuid"] is not None for r in got["ml_ledgers"]] == [True, False, False, False]
