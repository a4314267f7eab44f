"""BookKeeper ledger metadata: the value of ``/ledgers/.../L<id>`` (FORMATS.md section 2).

A header ``BookieMetadataFormatVersion\\t<n>\\n`` is followed by: v1 text lines (BK 4.0), v2 protobuf
TextFormat (BK 4.2+), or v3 varint32-delimited binary ``LedgerMetadataFormat`` (BK 4.9+).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from ledgerlens.errors import DecodeError, UnknownVersionError
from ledgerlens.formats._proto import parse_binary, parse_text
from ledgerlens.proto import bookkeeper_pb2 as pb

HEADER_KEY = b"BookieMetadataFormatVersion\t"
SUPPORTED_VERSIONS = (1, 2, 3)
INVALID_ENTRY_ID = -1
_V1_IN_RECOVERY = -102

_STATES = {1: "OPEN", 2: "IN_RECOVERY", 3: "CLOSED"}
_DIGESTS = {1: "CRC32", 2: "HMAC", 3: "CRC32C", 4: "DUMMY"}


@dataclass(frozen=True)
class LedgerMetadata:
    """Decoded BookKeeper ledger metadata.

    ``format_version`` is the header version (1, 2, 3), or 0 for headerless binary metadata
    (offload index V1 segment metadata).
    """

    format_version: int
    state: str  # "OPEN" | "IN_RECOVERY" | "CLOSED"
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    length: int
    last_entry_id: int
    ctime_ms: int | None
    digest_type: str | None  # "CRC32" | "HMAC" | "CRC32C" | "DUMMY"
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    custom_metadata: dict[str, bytes] = field(default_factory=dict)
    ctoken: int | None = None
    password: bytes = field(default=b"", repr=False)  # HMAC key material: never printed

    @property
    def bookies(self) -> list[str]:
        """Distinct bookie ids of all ensembles, in first-seen order."""
        return list(dict.fromkeys(b for _, members in self.ensembles for b in members))

    def custom_text(self) -> dict[str, str]:
        """Custom metadata as text; values that are not UTF-8 become ``"base64:<b64>"``."""
        out: dict[str, str] = {}
        for key, value in self.custom_metadata.items():
            try:
                out[key] = value.decode("utf-8")
            except UnicodeDecodeError:
                out[key] = "base64:" + base64.b64encode(value).decode("ascii")
        return out


def _from_proto(msg: pb.LedgerMetadataFormat, version: int, path: str) -> LedgerMetadata:
    state = _STATES.get(msg.state)
    if state is None:  # pragma: no cover - proto2 closed enums drop unknown values
        raise DecodeError(path, f"unknown ledger state {msg.state}")
    digest = None
    if msg.HasField("digestType"):
        digest = _DIGESTS.get(msg.digestType)
    return LedgerMetadata(
        format_version=version,
        state=state,
        ensemble_size=msg.ensembleSize,
        write_quorum=msg.quorumSize,
        ack_quorum=msg.ackQuorumSize if msg.HasField("ackQuorumSize") else msg.quorumSize,
        length=msg.length,
        last_entry_id=msg.lastEntryId if msg.HasField("lastEntryId") else INVALID_ENTRY_ID,
        ctime_ms=msg.ctime if msg.HasField("ctime") else None,
        digest_type=digest,
        ensembles=tuple((seg.firstEntryId, tuple(seg.ensembleMember)) for seg in msg.segment),
        custom_metadata={e.key: bytes(e.value) for e in msg.customMetadata},
        ctoken=msg.cToken if msg.HasField("cToken") else None,
        password=bytes(msg.password),
    )


def ledger_metadata_from_binary(data: bytes, *, path: str, format_version: int = 0) -> LedgerMetadata:
    """Decode a binary ``LedgerMetadataFormat`` without header or length prefix.

    This is what offload index V1 objects and the file-system offloader store.
    """
    return _from_proto(parse_binary(pb.LedgerMetadataFormat, data, where=path), format_version, path)


def _read_header(data: bytes, path: str) -> tuple[int, int]:
    if not data.startswith(HEADER_KEY):
        raise DecodeError(path, f"not a BookKeeper ledger metadata header (starts with {bytes(data[:28])!r})")
    start = len(HEADER_KEY)
    newline = data.find(b"\n", start, start + 11)
    digits = data[start:newline] if newline >= 0 else b""
    if newline < 0 or not digits or not digits.isdigit():
        raise DecodeError(
            path, f"BookKeeper metadata header has no version number: {bytes(data[start : start + 11])!r}"
        )
    return int(digits), newline + 1


def _decode_varint32(data: bytes, pos: int, path: str) -> tuple[int, int]:
    result = 0
    for shift in range(0, 35, 7):
        if pos >= len(data):
            raise DecodeError(path, "v3 metadata truncated inside its varint length prefix")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFFFFFF, pos
    raise DecodeError(path, "v3 metadata length prefix is not a valid varint32")


def _int(text: str, what: str, path: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise DecodeError(path, f"v1 metadata: {what} {text.strip()!r} is not an integer") from None


def _decode_v1(body: bytes, path: str) -> LedgerMetadata:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(path, f"v1 metadata is not UTF-8 text: {exc}") from exc
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 3:
        raise DecodeError(path, f"v1 metadata has {len(lines)} lines, need at least 3")
    quorum = _int(lines[0], "quorumSize", path)
    ensemble_size = _int(lines[1], "ensembleSize", path)
    length = _int(lines[2], "length", path)
    state = "OPEN"
    last_entry_id = INVALID_ENTRY_ID
    ensembles: list[tuple[int, tuple[str, ...]]] = []
    for number, line in enumerate(lines[3:], start=4):
        parts = line.strip().split("\t")
        if len(parts) == 2 and parts[1] == "CLOSED":
            value = _int(parts[0], f"closing line {number}", path)
            if value == _V1_IN_RECOVERY:
                state = "IN_RECOVERY"
            else:
                state, last_entry_id = "CLOSED", value
            continue
        if len(parts) < 2:
            raise DecodeError(
                path, f"v1 metadata line {number} is not 'firstEntryId<TAB>bookie...': {line!r}"
            )
        ensembles.append((_int(parts[0], f"firstEntryId on line {number}", path), tuple(parts[1:])))
    return LedgerMetadata(
        format_version=1,
        state=state,
        ensemble_size=ensemble_size,
        write_quorum=quorum,
        ack_quorum=quorum,
        length=length,
        last_entry_id=last_entry_id,
        ctime_ms=None,
        digest_type=None,
        ensembles=tuple(ensembles),
        custom_metadata={},
        ctoken=None,
    )


def decode_ledger_metadata(data: bytes, *, path: str) -> LedgerMetadata:
    """Decode the value of a BookKeeper ledger znode.

    Parameters
    ----------
    data : bytes
        The znode value, starting with ``BookieMetadataFormatVersion\\t<n>\\n``.
    path : str
        The znode path, used in errors.

    Returns
    -------
    LedgerMetadata

    Raises
    ------
    UnknownVersionError
        A format version other than 1, 2, 3.
    DecodeError
        No header, or a body that does not decode.
    """
    data = bytes(data)
    version, pos = _read_header(data, path)
    body = data[pos:]
    if version == 1:
        return _decode_v1(body, path)
    if version == 2:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(path, f"v2 metadata is not UTF-8 text: {exc}") from exc
        return _from_proto(parse_text(pb.LedgerMetadataFormat, text, where=path), 2, path)
    if version == 3:
        size, start = _decode_varint32(data, pos, path)
        if start + size > len(data):
            raise DecodeError(
                path, f"v3 metadata declares {size} bytes but only {len(data) - start} follow the prefix"
            )
        return ledger_metadata_from_binary(data[start : start + size], path=path, format_version=3)
    raise UnknownVersionError(
        path, f"BookKeeper metadata format version {version} is not supported (known: 1, 2, 3)"
    )
