"""Offload decoders on objects of an independent writer (tests/offload_writer.py), and fuzzed bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import offload_writer as w
from ledgerlens.errors import DecodeError, UnknownVersionError
from ledgerlens.formats.offload import (
    block_spans,
    decode_data_block_header,
    decode_offload_index,
    decode_user_metadata,
    iter_block_entries,
)

pytestmark = pytest.mark.unit

ML = "tenant/ns/persistent/topic"
KEY = "3fa85f64-5717-4562-b3fc-2c963f66afa6-ledger-7"


def _entries(n: int, size: int = 40) -> list[bytes]:
    return [bytes([i % 251]) * (size + i % 7) for i in range(n)]


def test_per_ledger_object_round_trip() -> None:
    entries = _entries(30)
    written = w.data_object([(7, 0, entries)], block_size=512)
    meta = w.ledger_metadata(last_entry_id=29, length=sum(map(len, entries)), managed_ledger=ML)
    index = decode_offload_index(w.index_v1(written, meta), key=KEY + "-index")
    assert index.version == 1 and index.data_object_length == len(written.data)
    led = index.ledgers[0]
    assert led.ledger_id == 7 and led.metadata is not None and led.metadata.last_entry_id == 29
    assert [(e.entry_id, e.part_id, e.offset) for e in led.entries] == [b[1:] for b in written.blocks]
    spans = block_spans(index, key=KEY)
    assert [s.part_id for s in spans] == list(range(1, len(written.blocks) + 1))
    assert spans[-1].last_entry_id == 29 and sum(s.length for s in spans) == len(written.data)
    got: list[bytes] = []
    for s in spans:
        blk = written.data[s.offset : s.offset + s.length]
        h = decode_data_block_header(blk, key=KEY)
        assert (h.layout, h.first_entry_id, h.block_length) == ("ledger", s.first_entry_id, s.length)
        ids = [e.entry_id for e in iter_block_entries(blk, key=KEY)]
        assert ids == list(range(s.first_entry_id, (s.last_entry_id or 0) + 1))
        got += [e.data for e in iter_block_entries(blk, key=KEY)]
    assert got == entries


def test_streaming_segment_spanning_and_splitting_ledgers() -> None:
    # one segment: the tail of ledger 10 (entries 5..19), all of ledger 11, the head of ledger 12
    runs = [(10, 5, _entries(15)), (11, 0, _entries(8)), (12, 0, _entries(4))]
    written = w.data_object(runs, block_size=400, streaming=True)
    infos = {lid: w.ledger_info(lid, len(e) + first, 999) for lid, first, e in runs}
    index = decode_offload_index(w.index_v2(written, infos), key="u-index")
    assert index.version == 2 and [x.ledger_id for x in index.ledgers] == [10, 11, 12]
    assert index.ledgers[0].ledger_info is not None and index.ledgers[0].ledger_info.entries == 20
    spans = block_spans(index, key="u", last_entry_ids={10: 19, 11: 7, 12: 3})
    assert [s.ledger_id for s in spans] == [b[0] for b in written.blocks]
    for s in spans:
        h = decode_data_block_header(written.data[s.offset : s.offset + 128], key="u")
        assert h.layout == "streaming" and h.ledger_id == s.ledger_id and h.first_entry_id == s.first_entry_id
    assert spans[0].first_entry_id == 5


def test_block_spans_refuse_overlap() -> None:
    written = w.data_object([(7, 0, _entries(30))], block_size=512)
    written.blocks[1] = (7, written.blocks[1][1], written.blocks[1][2], 0)  # second block at offset 0
    raw = w.index_v1(written, w.ledger_metadata(last_entry_id=29, length=1))
    with pytest.raises(DecodeError, match="overlap"):
        block_spans(decode_offload_index(raw, key=KEY), key=KEY)


def test_user_metadata() -> None:
    m = decode_user_metadata(w.user_metadata(managed_ledger=ML, cluster="east", role="data"), key=KEY)
    assert (m.format_version, m.cluster_name, m.managed_ledger, m.role) == ("1", "east", ML, "data")
    with pytest.raises(UnknownVersionError, match="format version '2'"):
        decode_user_metadata({"S3ManagedLedgerOffloaderFormatVersion": "2"}, key=KEY)
    assert decode_user_metadata({}, key=KEY).format_version is None


# --- fuzz: only the decoders' typed error ---------------------------------------------------------

_ENTRIES = _entries(12)
_WRITTEN = w.data_object([(7, 0, _ENTRIES)], block_size=256)
_V1 = w.index_v1(_WRITTEN, w.ledger_metadata(last_entry_id=11, length=500, managed_ledger=ML))
_V2 = w.index_v2(
    w.data_object([(7, 0, _ENTRIES), (8, 0, _ENTRIES)], block_size=256, streaming=True),
    {7: w.ledger_info(7, 12, 500), 8: w.ledger_info(8, 12, 500)},
)
_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode_everything(data: bytes) -> None:
    try:
        index = decode_offload_index(data, key=KEY)
        block_spans(index, key=KEY)
    except DecodeError:
        pass
    try:
        decode_data_block_header(data, key=KEY)
        list(iter_block_entries(data, key=KEY))
    except DecodeError:
        pass


@_FUZZ
@given(st.sampled_from([_V1, _V2, _WRITTEN.data[:256]]), st.integers(0, 2000))
def test_truncated_objects_raise_only_decode_error(good: bytes, cut: int) -> None:
    _decode_everything(good[: cut % (len(good) + 1)])


@_FUZZ
@given(
    st.sampled_from([_V1, _V2, _WRITTEN.data[:256]]),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_corrupted_bytes_raise_only_decode_error(good: bytes, flips: list[tuple[int, int]]) -> None:
    data = bytearray(good)
    for pos, value in flips:
        data[pos % len(data)] = value
    _decode_everything(bytes(data))


@_FUZZ
@given(
    st.sampled_from([0xDE47DE47, 0x3D1FB0BC, 0xFBDBABCB, 0x26A66D32]),
    st.binary(max_size=300),
)
def test_random_bytes_after_a_valid_magic_raise_only_decode_error(magic: int, rest: bytes) -> None:
    _decode_everything(struct.pack(">I", magic) + rest)


@_FUZZ
@given(st.dictionaries(st.text(max_size=40), st.text(max_size=40), max_size=6))
def test_user_metadata_fuzz(meta: dict[str, str]) -> None:
    try:
        decode_user_metadata(meta, key=KEY)
    except DecodeError:
        pass
