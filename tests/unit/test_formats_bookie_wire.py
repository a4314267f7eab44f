"""Bookie wire frames, stored-entry digests and write sets (FORMATS.md section 9)."""

from __future__ import annotations

import struct
import zlib

import pytest

from ledgerlens.errors import DecodeError, EntryDigestError
from ledgerlens.formats import bookie_wire as w
from ledgerlens.proto import bookie_protocol_pb2 as pb

pytestmark = pytest.mark.unit


def test_crc32c_is_castagnoli():
    # the standard check value of CRC-32C over "123456789"
    assert w.digest("CRC32C", b"1234", b"56789") == struct.pack(">I", 0xE3069283)


def test_crc32_is_ieee_written_as_int64():
    d = w.digest("CRC32", b"1234", b"56789")
    assert len(d) == 8 and struct.unpack(">q", d)[0] == zlib.crc32(b"123456789") == 0xCBF43926


@pytest.mark.parametrize("digest_type", ["CRC32C", "CRC32", "HMAC", "DUMMY"])
def test_entry_round_trip_and_corruption(digest_type):
    body = w.encode_entry(digest_type, 7, 3, 2, 1000, b"payload", password=b"secret")
    assert len(body) == 32 + w.DIGEST_LENGTHS[digest_type] + 7
    e = w.verify_entry(body, ledger_id=7, entry_id=3, digest_type=digest_type, password=b"secret")
    assert (e.ledger_id, e.entry_id, e.last_add_confirmed, e.length, e.payload) == (7, 3, 2, 1000, b"payload")
    flipped = body[:-1] + bytes([body[-1] ^ 1])
    if digest_type == "DUMMY":
        assert w.verify_entry(flipped, ledger_id=7, entry_id=3, digest_type="DUMMY").payload == b"payloae"
        return
    with pytest.raises(EntryDigestError) as info:
        w.verify_entry(
            flipped, ledger_id=7, entry_id=3, digest_type=digest_type, password=b"secret", bookie="b:1"
        )
    assert "ledger 7 entry 3" in str(info.value) and "bookie b:1" in str(info.value)
    assert "digest mismatch" in str(info.value)


def test_hmac_needs_the_ledger_password():
    body = w.encode_entry("HMAC", 1, 0, -1, 5, b"hello", password=b"right")
    with pytest.raises(EntryDigestError):
        w.verify_entry(body, ledger_id=1, entry_id=0, digest_type="HMAC", password=b"wrong")


def test_entry_ids_must_match_the_request():
    body = w.encode_entry("CRC32C", 1, 5, 4, 5, b"x")
    with pytest.raises(EntryDigestError, match="returned ledger 1 entry 5"):
        w.verify_entry(body, ledger_id=1, entry_id=6, digest_type="CRC32C")
    with pytest.raises(EntryDigestError, match="shorter"):
        w.verify_entry(body[:20], ledger_id=1, entry_id=5, digest_type="CRC32C")


def test_v3_read_request_never_fences():
    data = w.read_request_v3(9, 12, 3)
    (size,) = struct.unpack(">i", data[:4])
    assert size == len(data) - 4
    req = pb.Request()
    req.ParseFromString(data[4:])
    assert req.header.version == pb.VERSION_THREE and req.header.operation == pb.READ_ENTRY
    assert req.header.txnId == 9 and req.readRequest.ledgerId == 12 and req.readRequest.entryId == 3
    assert not req.readRequest.HasField("flag") and not req.readRequest.HasField("masterKey")


def test_v3_response_parses():
    resp = pb.Response(status=pb.EOK)
    resp.header.version, resp.header.operation, resp.header.txnId = pb.VERSION_THREE, pb.READ_ENTRY, 4
    resp.readResponse.status, resp.readResponse.ledgerId, resp.readResponse.entryId = pb.ENOENTRY, 1, 2
    reply = w.read_reply_v3(w.parse_response_v3(resp.SerializeToString(), where="x"))
    assert (reply.txn_id, reply.status, reply.ledger_id, reply.entry_id, reply.body) == (
        4,
        "ENOENTRY",
        1,
        2,
        None,
    )
    with pytest.raises(DecodeError, match="bookie 1.2.3.4:3181"):
        w.parse_response_v3(b"\x01\x02garbage", where="bookie 1.2.3.4:3181")


def test_v2_frames():
    data = w.read_request_v2(12, 3)
    assert data == struct.pack(">iiqq", 20, (2 << 24) | (2 << 16), 12, 3)
    body = w.encode_entry("CRC32C", 12, 3, 2, 9, b"abc")
    reply = w.read_reply_v2(struct.pack(">iiqq", (2 << 24) | (2 << 16), 0, 12, 3) + body, where="x")
    assert (reply.status, reply.ledger_id, reply.entry_id, reply.body) == ("EOK", 12, 3, body)
    missing = w.read_reply_v2(struct.pack(">iiqq", (2 << 24) | (2 << 16), 2, 12, 4), where="x")
    assert missing.status == "ENOENTRY" and missing.body is None
    with pytest.raises(DecodeError):
        w.read_reply_v2(b"\x00" * 10, where="x")


def test_write_set_round_robin_over_the_covering_ensemble():
    ensembles = ((0, ("a", "b", "c")), (10, ("a", "d", "c")))
    assert w.write_set(ensembles, 2, 0) == ["a", "b"]
    assert w.write_set(ensembles, 2, 2) == ["c", "a"]
    assert w.write_set(ensembles, 2, 11) == ["c", "a"]  # (11 + i) % 3 over the second ensemble
    assert w.write_set(ensembles, 3, 10) == ["d", "c", "a"]
