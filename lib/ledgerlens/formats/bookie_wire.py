"""BookKeeper bookie wire frames and stored entries (FORMATS.md section 9): pure functions over bytes.

Frames are ``int32 BE length`` + payload. Protocol v3 payloads are one binary ``Request`` /
``Response`` (``proto/bookie_protocol.proto``); the pre-v3 (v2) read is a fixed binary layout. A
stored entry is ``ledgerId | entryId | lastAddConfirmed | length`` (four int64 BE), the digest
(CRC32C 4 bytes, CRC32 8, HMAC-SHA1 20, DUMMY 0) and the payload. Nothing here ever builds a
request with the fence flag: ledgerlens reads, it never fences, recovers or writes.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib
from dataclasses import dataclass

import crc32c as _crc32c

from ledgerlens.errors import DecodeError, EntryDigestError
from ledgerlens.formats._proto import parse_binary
from ledgerlens.proto import bookie_protocol_pb2 as pb

FRAME_HEADER = struct.Struct(">i")
ENTRY_HEADER = struct.Struct(">qqqq")
ENTRY_HEADER_LENGTH = ENTRY_HEADER.size  # 32
LAC_HEADER_LENGTH = 16
MAX_FRAME_BYTES = 5 * 1024 * 1024 + 1024  # the bookie's default nettyMaxFrameSizeBytes, plus headers
DIGEST_LENGTHS = {"CRC32C": 4, "CRC32": 8, "HMAC": 20, "MAC": 20, "DUMMY": 0}
LAST_ADD_CONFIRMED = -1  # entry id meaning "the entry at the last add confirmed"

# v2 (pre-v3) binary protocol
_V2_HEADER = struct.Struct(">iqq")  # header word, ledger id, entry id
_V2_RESPONSE = struct.Struct(">iiqq")  # header word, rc, ledger id, entry id
_V2_VERSION = 2
_V2_READ_ENTRY = 2
V2_STATUS = {0: "EOK", 1: "ENOLEDGER", 2: "ENOENTRY", 3: "EBADREQ", 4: "EIO", 5: "EUA", 6: "EBADVERSION"}

STATUS_NAMES = {v.number: v.name for v in pb.StatusCode.DESCRIPTOR.values}


@dataclass(frozen=True)
class ReadReply:
    """One READ_ENTRY answer: ``status`` by name (``EOK``, ``ENOENTRY``...), ``body`` the stored entry."""

    txn_id: int | None  # v3 only; v2 answers are matched by (ledger, entry)
    status: str
    ledger_id: int
    entry_id: int
    body: bytes | None


@dataclass(frozen=True)
class Entry:
    """A verified entry: its ids, the writer's last-add-confirmed, cumulative length and payload."""

    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    length: int
    payload: bytes


def frame(payload: bytes) -> bytes:
    """``int32 BE length`` + ``payload``."""
    return FRAME_HEADER.pack(len(payload)) + payload


# --- v3 ---------------------------------------------------------------------------------------


def _header(op: int, txn_id: int) -> pb.BKPacketHeader:
    return pb.BKPacketHeader(version=pb.VERSION_THREE, operation=op, txnId=txn_id)  # type: ignore[arg-type]


def read_request_v3(txn_id: int, ledger_id: int, entry_id: int) -> bytes:
    """A framed v3 READ_ENTRY request (no flag, no master key: never fences)."""
    req = pb.Request(header=_header(pb.READ_ENTRY, txn_id))
    req.readRequest.ledgerId = ledger_id
    req.readRequest.entryId = entry_id
    return frame(req.SerializeToString())


def read_lac_request_v3(txn_id: int, ledger_id: int) -> bytes:
    """A framed v3 READ_LAC request."""
    req = pb.Request(header=_header(pb.READ_LAC, txn_id))
    req.readLacRequest.ledgerId = ledger_id
    return frame(req.SerializeToString())


def start_tls_request_v3(txn_id: int) -> bytes:
    """A framed v3 START_TLS request (the TLS handshake follows its EOK answer)."""
    req = pb.Request(header=_header(pb.START_TLS, txn_id))
    req.startTLSRequest.SetInParent()
    return frame(req.SerializeToString())


def parse_response_v3(payload: bytes, *, where: str) -> pb.Response:
    """Parse one v3 ``Response`` frame payload; DecodeError naming ``where`` when it is not one."""
    return parse_binary(pb.Response, payload, where=where)


def read_reply_v3(resp: pb.Response) -> ReadReply:
    """The READ_ENTRY part of a v3 response (the packet status when the read part is absent)."""
    txn = resp.header.txnId
    if resp.HasField("readResponse"):
        r = resp.readResponse
        body = bytes(r.body) if r.HasField("body") else None
        return ReadReply(txn, STATUS_NAMES.get(r.status, str(r.status)), r.ledgerId, r.entryId, body)
    return ReadReply(txn, STATUS_NAMES.get(resp.status, str(resp.status)), -1, -1, None)


# --- v2 ---------------------------------------------------------------------------------------


def read_request_v2(ledger_id: int, entry_id: int) -> bytes:
    """A framed pre-v3 READ_ENTRY request, flags 0 (no fencing, so no master key)."""
    word = (_V2_VERSION << 24) | (_V2_READ_ENTRY << 16)
    return frame(_V2_HEADER.pack(word, ledger_id, entry_id))


def read_reply_v2(payload: bytes, *, where: str) -> ReadReply:
    """Parse a pre-v3 READ_ENTRY response frame payload."""
    if len(payload) < _V2_RESPONSE.size:
        raise DecodeError(where, f"v2 read response of {len(payload)} bytes, expected at least 24")
    word, rc, ledger_id, entry_id = _V2_RESPONSE.unpack_from(payload)
    op = (word >> 16) & 0xFF
    if op != _V2_READ_ENTRY:
        raise DecodeError(where, f"v2 response to operation {op}, expected READ_ENTRY ({_V2_READ_ENTRY})")
    body = payload[_V2_RESPONSE.size :] if rc == 0 else None
    return ReadReply(None, V2_STATUS.get(rc, f"rc={rc}"), ledger_id, entry_id, body)


# --- digests and entries ---------------------------------------------------------------------------


def mac_key(password: bytes) -> bytes:
    """The HMAC-SHA1 key of a ledger: ``SHA1("mac" + password)``."""
    return hashlib.sha1(b"mac" + password).digest()


def digest(digest_type: str, header: bytes, payload: bytes, password: bytes = b"") -> bytes:
    """The stored digest of an entry (``header`` = its first 32 bytes)."""
    if digest_type == "CRC32C":
        return struct.pack(">I", _crc32c.crc32c(payload, _crc32c.crc32c(header)))
    if digest_type == "CRC32":
        return struct.pack(">q", zlib.crc32(payload, zlib.crc32(header)))
    if digest_type in ("HMAC", "MAC"):
        h = hmac.new(mac_key(password), header, hashlib.sha1)
        h.update(payload)
        return h.digest()
    if digest_type == "DUMMY":
        return b""
    raise ValueError(f"unknown digest type {digest_type!r}")


def encode_entry(
    digest_type: str,
    ledger_id: int,
    entry_id: int,
    last_add_confirmed: int,
    length: int,
    payload: bytes,
    password: bytes = b"",
) -> bytes:
    """A stored entry as a bookie keeps it (for tests and fixtures; ledgerlens never writes to bookies)."""
    header = ENTRY_HEADER.pack(ledger_id, entry_id, last_add_confirmed, length)
    return header + digest(digest_type, header, payload, password) + payload


def verify_entry(
    body: bytes,
    *,
    ledger_id: int,
    entry_id: int,
    digest_type: str,
    password: bytes = b"",
    bookie: str = "",
) -> Entry:
    """Check a stored entry's ids and digest and return it.

    Raises
    ------
    EntryDigestError
        The ids do not match the request, the body is truncated, or the digest differs.
    """
    n = DIGEST_LENGTHS.get(digest_type)
    if n is None:
        raise ValueError(f"unknown digest type {digest_type!r}")

    def bad(problem: str) -> EntryDigestError:
        return EntryDigestError(bookie, ledger_id, entry_id, problem)

    if len(body) < ENTRY_HEADER_LENGTH + n:
        raise bad(f"entry of {len(body)} bytes is shorter than its header and {digest_type} digest")
    lid, eid, lac, length = ENTRY_HEADER.unpack_from(body)
    if (lid, eid) != (ledger_id, entry_id) and entry_id != LAST_ADD_CONFIRMED:
        raise bad(f"bookie returned ledger {lid} entry {eid}")
    header = body[:ENTRY_HEADER_LENGTH]
    stored = body[ENTRY_HEADER_LENGTH : ENTRY_HEADER_LENGTH + n]
    payload = body[ENTRY_HEADER_LENGTH + n :]
    want = digest(digest_type, header, payload, password)
    if not hmac.compare_digest(stored, want):
        raise bad(f"{digest_type} digest mismatch (stored {stored.hex()}, computed {want.hex()})")
    return Entry(lid, eid, lac, length, bytes(payload))


def verify_lac(
    body: bytes, *, ledger_id: int, digest_type: str, password: bytes = b"", bookie: str = ""
) -> int:
    """The last-add-confirmed of a READ_LAC ``lacBody`` (``ledgerId | lac | digest``), verified."""
    n = DIGEST_LENGTHS[digest_type]
    if len(body) < LAC_HEADER_LENGTH + n:
        raise EntryDigestError(bookie, ledger_id, -1, f"LAC body of {len(body)} bytes is truncated")
    lid, lac = struct.unpack_from(">qq", body)
    header = body[:LAC_HEADER_LENGTH]
    stored = body[LAC_HEADER_LENGTH : LAC_HEADER_LENGTH + n]
    if lid != ledger_id:
        raise EntryDigestError(bookie, ledger_id, -1, f"LAC body names ledger {lid}")
    if not hmac.compare_digest(stored, digest(digest_type, header, b"", password)):
        raise EntryDigestError(bookie, ledger_id, -1, f"{digest_type} digest mismatch on the LAC body")
    return int(lac)


# --- entry -> bookies -------------------------------------------------------------------------------


def ensemble_at(ensembles: tuple[tuple[int, tuple[str, ...]], ...], entry_id: int) -> tuple[str, ...]:
    """The ensemble that wrote ``entry_id``: the segment with the greatest ``firstEntryId <= entry_id``."""
    chosen: tuple[str, ...] | None = None
    for first, members in sorted(ensembles):
        if first <= max(entry_id, 0):
            chosen = members
    if chosen is None:
        raise ValueError(f"no ensemble covers entry {entry_id}")
    return chosen


def write_set(
    ensembles: tuple[tuple[int, tuple[str, ...]], ...], write_quorum: int, entry_id: int
) -> list[str]:
    """Bookie ids that store ``entry_id``, in the order a reader tries them (round-robin placement)."""
    members = ensemble_at(ensembles, entry_id)
    n = len(members)
    e = max(entry_id, 0)
    return [members[(e + i) % n] for i in range(min(write_quorum, n))]
