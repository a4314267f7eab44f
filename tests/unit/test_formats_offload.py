from __future__ import annotations

import struct
import uuid

import pytest

from ledgerlens.errors import DecodeError
from ledgerlens.formats.offload import (
    BlockEntry,
    OffloadIndexEntry,
    OffloadKey,
    decode_data_block_header,
    decode_offload_index,
    iter_block_entries,
    ledger_object_keys,
    parse_offload_key,
    streaming_object_keys,
)
from ledgerlens.formats.uuids import uuid_from_bits, uuid_to_bits
from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens.proto import managed_ledger_pb2 as ml

pytestmark = pytest.mark.unit

UUID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def test_uuid_bits():
    # Java: new UUID(-1L, 0L).toString()
    assert uuid_from_bits(-1, 0) == "ffffffff-ffff-ffff-0000-000000000000"
    assert uuid_from_bits(0, 1) == "00000000-0000-0000-0000-000000000001"
    assert uuid_from_bits(0x3FA85F6457174562, -0x4C03D369C099505A) == UUID
    msb, lsb = uuid_to_bits(UUID)
    assert (msb, lsb) == (0x3FA85F6457174562, -0x4C03D369C099505A)
    for _ in range(20):
        u = str(uuid.uuid4())
        m, low = uuid_to_bits(u)
        assert -(1 << 63) <= m < 1 << 63 and -(1 << 63) <= low < 1 << 63
        assert uuid_from_bits(m, low) == u
    with pytest.raises(DecodeError):
        uuid_to_bits("nope")


def test_keys():
    assert ledger_object_keys(UUID, 12345) == (f"{UUID}-ledger-12345", f"{UUID}-ledger-12345-index")
    assert streaming_object_keys(UUID) == (UUID, f"{UUID}-index")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (f"{UUID}-ledger-12345", OffloadKey(UUID, 12345, "data", "ledger")),
        (f"{UUID}-ledger-3000000000-index", OffloadKey(UUID, 3000000000, "index", "ledger")),
        (UUID, OffloadKey(UUID, None, "data", "streaming")),
        (f"{UUID}-index", OffloadKey(UUID, None, "index", "streaming")),
        (f"{UUID}-ledger-", None),
        (f"{UUID}-ledger-12-data", None),
        (f"{UUID}x", None),
        (f"prefix/{UUID}-ledger-1", None),
        ("3fa85f64-5717-4562-b3fc-2c963f66afa", None),
        ("README.txt", None),
        ("", None),
    ],
)
def test_parse_offload_key(key, expected):
    assert parse_offload_key(key) == expected


# ---- data blocks -----------------------------------------------------------------------------

KEY = f"{UUID}-ledger-7"


def build_block(
    entries: list[tuple[int, bytes]], first: int, size: int, streaming_ledger: int | None = None
) -> bytes:
    if streaming_ledger is None:
        head = struct.pack(">Iqqq", 0xFBDBABCB, 128, size, first)
    else:
        head = struct.pack(">Iqqqq", 0x26A66D32, 128, size, first, streaming_ledger)
    head = head.ljust(128, b"\x00")
    body = b"".join(struct.pack(">iq", len(data), eid) + data for eid, data in entries)
    block = head + body
    pad = size - len(block)
    assert pad >= 0
    return block + (b"\xfe\xdc\xde\xad" * (pad // 4 + 1))[:pad]


def test_block_round_trip():
    entries = [(10, b"hello"), (11, b""), (12, b"x" * 100)]
    block = build_block(entries, 10, 400)
    h = decode_data_block_header(block, key=KEY)
    assert (h.layout, h.header_length, h.block_length, h.first_entry_id, h.ledger_id) == (
        "ledger",
        128,
        400,
        10,
        None,
    )
    assert list(iter_block_entries(block, key=KEY)) == [BlockEntry(e, d) for e, d in entries]


def test_streaming_block():
    block = build_block([(0, b"a")], 0, 200, streaming_ledger=55)
    h = decode_data_block_header(block, key=UUID)
    assert (h.layout, h.magic, h.ledger_id) == ("streaming", 0x26A66D32, 55)
    assert [e.entry_id for e in iter_block_entries(block, key=UUID)] == [0]


def test_block_exactly_full_and_odd_padding():
    block = build_block([(1, b"abc")], 1, 128 + 15)
    assert len(list(iter_block_entries(block, key=KEY))) == 1
    block = build_block([(1, b"abc")], 1, 128 + 15 + 6)
    assert len(list(iter_block_entries(block, key=KEY))) == 1


def check_error(fn, data, key, *fragments):
    with pytest.raises(DecodeError) as info:
        fn(data, key=key)
    assert info.value.where == key
    assert key in str(info.value)
    for fragment in fragments:
        assert fragment in info.value.problem
    return info.value


def test_block_errors():
    good = build_block([(1, b"abcdef")], 1, 300)
    check_error(decode_data_block_header, b"\x00\x01\x02\x03" + good[4:], KEY, "magic 0x00010203")
    check_error(decode_data_block_header, good[:20], KEY, "truncated")
    check_error(decode_data_block_header, b"\xfb", KEY, "truncated")
    bad_len = struct.pack(">Iqqq", 0xFBDBABCB, 128, 50, 0).ljust(128, b"\0")
    check_error(decode_data_block_header, bad_len, KEY, "smaller")
    # entry running past the block end
    cut = good[: 128 + 12 + 3]
    with pytest.raises(DecodeError) as info:
        list(iter_block_entries(cut, key=KEY))
    assert info.value.where == KEY and "runs past" in info.value.problem


# ---- index objects ---------------------------------------------------------------------------


def v1_index(meta: bytes, entries: list[tuple[int, int, int]], object_length: int = 10_000) -> bytes:
    body = struct.pack(">ii", len(entries), len(meta)) + meta
    body += b"".join(struct.pack(">qiq", *e) for e in entries)
    total = 4 + 4 + 8 + 8 + len(body)
    return struct.pack(">Iiqq", 0xDE47DE47, total, object_length, 128) + body


def bk_meta() -> bytes:
    md = bk.LedgerMetadataFormat(
        quorumSize=2,
        ensembleSize=2,
        ackQuorumSize=2,
        length=4096,
        lastEntryId=99,
        state=bk.LedgerMetadataFormat.CLOSED,
        digestType=bk.LedgerMetadataFormat.CRC32C,
        ctime=5,
    )
    md.segment.add(ensembleMember=["b1:3181", "b2:3181"], firstEntryId=0)
    md.customMetadata.add(key="ManagedLedgerName", value=b"t/ns/persistent/x")
    return md.SerializeToString()


def test_index_v1_round_trip():
    ikey = f"{UUID}-ledger-7-index"
    data = v1_index(bk_meta(), [(0, 1, 0), (50, 2, 5000)])
    idx = decode_offload_index(data, key=ikey)
    assert idx.version == 1
    assert (idx.index_block_length, idx.data_object_length, idx.data_header_length) == (
        len(data),
        10_000,
        128,
    )
    (ledger,) = idx.ledgers
    assert ledger.ledger_id == 7
    assert ledger.ledger_info is None
    assert ledger.metadata.state == "CLOSED"
    assert ledger.metadata.last_entry_id == 99
    assert ledger.metadata.custom_text() == {"ManagedLedgerName": "t/ns/persistent/x"}
    assert ledger.entries == (OffloadIndexEntry(0, 1, 0), OffloadIndexEntry(50, 2, 5000))
    # unknown key: ledger id unknown
    assert decode_offload_index(data, key="other").ledgers[0].ledger_id is None


def v2_index(ledgers: list[tuple[int, bytes, list[tuple[int, int, int]]]]) -> bytes:
    body = b""
    for ledger_id, meta, entries in ledgers:
        body += struct.pack(">qii", ledger_id, len(entries), len(meta)) + meta
        body += b"".join(struct.pack(">qiq", *e) for e in entries)
    return struct.pack(">Iiqq", 0x3D1FB0BC, 24 + len(body), 99_999, 128) + body


def test_index_v2_round_trip():
    li1 = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=7, entries=100, size=4096, timestamp=1).SerializeToString()
    li2 = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=3_000_000_000, entries=1).SerializeToString()
    data = v2_index([(7, li1, [(0, 1, 0), (60, 2, 3000)]), (3_000_000_000, li2, [(0, 3, 6000)])])
    idx = decode_offload_index(data, key=f"{UUID}-index")
    assert idx.version == 2
    assert [lg.ledger_id for lg in idx.ledgers] == [7, 3_000_000_000]
    assert idx.ledgers[0].ledger_info.size == 4096
    assert idx.ledgers[0].metadata is None
    assert idx.ledgers[1].entries == (OffloadIndexEntry(0, 3, 6000),)
    empty = decode_offload_index(v2_index([]), key="k")
    assert empty.ledgers == ()


def test_index_errors():
    ikey = f"{UUID}-ledger-7-index"
    good = v1_index(bk_meta(), [(0, 1, 0), (50, 2, 5000)])
    check_error(decode_offload_index, b"\x00\x00\x00\x01" + good[4:], ikey, "magic 0x00000001")
    check_error(decode_offload_index, good[:3], ikey, "truncated")
    check_error(decode_offload_index, good[:20], ikey, "truncated")
    check_error(decode_offload_index, good[:-1], ikey, "index entry 1")
    check_error(decode_offload_index, good[:40], ikey, "segment metadata")
    check_error(decode_offload_index, v1_index(b"\xff\xff", []), ikey, "LedgerMetadataFormat")
    neg = struct.pack(">Iiqq", 0xDE47DE47, 0, 0, 128) + struct.pack(">ii", -1, 0)
    check_error(decode_offload_index, neg, ikey, "negative")
    li = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=7).SerializeToString()
    v2 = v2_index([(7, li, [(0, 1, 0)])])
    check_error(decode_offload_index, v2[:-2], "k2", "truncated")
    check_error(decode_offload_index, v2 + b"\x00\x00", "k2", "ledger header")
    missing = ml.ManagedLedgerInfo.LedgerInfo(entries=1).SerializePartialToString()
    check_error(decode_offload_index, v2_index([(7, missing, [])]), "k2", "ledgerId")
