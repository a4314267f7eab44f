from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.block
import pytest
import zstandard

from ledgerlens.errors import DecodeError
from ledgerlens.formats.envelope import MAGIC, unwrap
from ledgerlens.proto import managed_ledger_pb2 as pb

pytestmark = pytest.mark.unit

PATH = "/managed-ledgers/t/ns/persistent/topic"
CODEC_IDS = {"NONE": 0, "LZ4": 1, "ZLIB": 2, "ZSTD": 3, "SNAPPY": 4}


def compress(codec: str, plain: bytes) -> bytes:
    if codec == "NONE":
        return plain
    if codec == "LZ4":
        return lz4.block.compress(plain, store_size=False)
    if codec == "ZLIB":
        return zlib.compress(plain)
    if codec == "ZSTD":
        return zstandard.ZstdCompressor(level=3).compress(plain)
    if codec == "SNAPPY":
        return bytes(cramjam.snappy.compress_raw(plain))
    raise AssertionError(codec)


def envelope(codec_id: int, size: int, body: bytes, meta: bytes | None = None) -> bytes:
    if meta is None:
        meta = pb.ManagedInfoMetadata(compressionType=codec_id, uncompressedSize=size).SerializeToString()
    return struct.pack(">Hi", MAGIC, len(meta)) + meta + body


def wrap(codec: str, plain: bytes) -> bytes:
    return envelope(CODEC_IDS[codec], len(plain), compress(codec, plain))


def sample_plain() -> bytes:
    info = pb.ManagedLedgerInfo()
    for i in range(50):
        info.ledgerInfo.add(ledgerId=1000 + i, entries=100, size=12345, timestamp=1_700_000_000_000 + i)
    return info.SerializeToString()


def test_magic_bytes():
    assert MAGIC == 0x4778
    assert wrap("NONE", b"x")[:2] == b"\x47\x78"


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_round_trip_every_codec(codec):
    plain = sample_plain()
    assert unwrap(wrap(codec, plain), path=PATH) == (plain, codec)


def test_zstd_frame_without_content_size():
    plain = sample_plain()
    body = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(plain)
    assert unwrap(envelope(3, len(plain), body), path=PATH) == (plain, "ZSTD")


def test_plain_bytes_pass_through():
    plain = sample_plain()
    assert unwrap(plain, path=PATH) == (plain, "NONE")
    assert unwrap(b"\x47", path=PATH) == (b"\x47", "NONE")


def test_empty():
    assert unwrap(b"", path=PATH) == (b"", "EMPTY")


def test_accepts_memoryview_and_bytearray():
    plain = sample_plain()
    data = wrap("LZ4", plain)
    assert unwrap(bytearray(data), path=PATH)[0] == plain
    assert unwrap(memoryview(data), path=PATH)[0] == plain


def check_error(data: bytes, *fragments: str) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        unwrap(data, path=PATH)
    err = info.value
    assert err.where == PATH
    assert PATH in str(err)
    for fragment in fragments:
        assert fragment in err.problem
    return err


def test_short_header():
    check_error(b"\x47\x78\x00\x00", "truncated")


@pytest.mark.parametrize("size", [0, -5, 1000])
def test_bad_metadata_size(size):
    data = struct.pack(">Hi", MAGIC, size) + b"\x08\x01\x10\x05xyz"
    check_error(data, "metadata size")


def test_metadata_garbage():
    check_error(envelope(0, 3, b"abc", meta=b"\xff\xff\xff"), "metadata")


def test_metadata_missing_required():
    meta = pb.ManagedInfoMetadata(compressionType=1).SerializePartialToString()
    check_error(envelope(0, 0, b"abc", meta=meta), "uncompressedSize")


def test_bad_codec_id():
    # 08 07 = compressionType 7, 10 03 = uncompressedSize 3
    check_error(envelope(0, 0, b"abc", meta=b"\x08\x07\x10\x03"), "unknown codec value 7")


@pytest.mark.parametrize("codec", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_decompression_failure(codec):
    check_error(envelope(CODEC_IDS[codec], 100, b"\xff" * 7), codec, "failed")


@pytest.mark.parametrize("codec", ["NONE", "ZLIB", "ZSTD", "SNAPPY"])
def test_size_mismatch(codec):
    plain = sample_plain()
    check_error(envelope(CODEC_IDS[codec], len(plain) - 3, compress(codec, plain)), "declares")


def test_lz4_size_mismatch():
    plain = sample_plain()
    # lz4 refuses to decompress into a buffer of the wrong size: still a typed error
    check_error(envelope(1, len(plain) + 10, compress("LZ4", plain)), "LZ4")


def test_negative_uncompressed_size():
    check_error(envelope(0, -1, b""), "negative")
