"""Kafka KIP-405 ``__remote_log_metadata`` record values: decode (and encode, for tests and benches).

FORMATS.md section 8. A value is ``uvarint frame version (1)``, ``uvarint api key``, ``uvarint
version`` and the message body in Kafka's flexible-version encoding: big-endian integers, compact
strings and bytes (``uvarint(len + 1)``, 0 = null), UUIDs as two int64 (most significant first),
and every struct, nested ones included, closed by its tagged fields (``uvarint count`` then
``uvarint tag, uvarint size, bytes`` each). Nested structs' tagged fields are skipped; the record's
own are kept as read (Kafka 4.x brokers write tag 0 of a segment metadata record, KIP-1058's
``TxnIndexEmpty``, when the segment has no transaction index).

Kafka prints a UUID as URL-safe base64 without padding (22 characters); object keys of the remote
storage plugins use that form, so records carry it too.
"""

from __future__ import annotations

import base64
import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledgerlens.errors import DecodeError, UnknownVersionError

__all__ = [
    "FRAME_VERSION",
    "METADATA_TOPIC",
    "MetadataRecord",
    "PARTITION_DELETE_STATES",
    "SEGMENT_STATES",
    "PartitionDeleteRecord",
    "RemoteLogRecord",
    "SegmentRecord",
    "SegmentSnapshotRecord",
    "SegmentUpdateRecord",
    "TopicIdPartition",
    "decode_record",
    "encode_record",
    "uuid_from_bytes",
    "uuid_to_bytes",
]

FRAME_VERSION = 1

METADATA_TOPIC = "__remote_log_metadata"
"""The topic the metadata manager writes these records to (``remote.log.metadata.topic``)."""


@dataclass(frozen=True)
class MetadataRecord:
    """One record of the metadata topic as read: where it is, when, and its value bytes."""

    partition: int
    offset: int
    timestamp_ms: int | None
    value: bytes | None


# RemoteLogSegmentState and RemotePartitionDeleteState, by id.
SEGMENT_STATES: tuple[str, ...] = (
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "DELETE_SEGMENT_FINISHED",
)
PARTITION_DELETE_STATES: tuple[str, ...] = (
    "DELETE_PARTITION_MARKED",
    "DELETE_PARTITION_STARTED",
    "DELETE_PARTITION_FINISHED",
)

API_SEGMENT, API_UPDATE, API_PARTITION_DELETE, API_SNAPSHOT = 0, 1, 2, 3
_KNOWN_VERSIONS = {API_SEGMENT: (0,), API_UPDATE: (0,), API_PARTITION_DELETE: (0,), API_SNAPSHOT: (0,)}
_MAX_COLLECTION = 1 << 24  # leader epochs or tagged fields per struct: more is corrupt input


def uuid_from_bytes(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()`` of 16 bytes: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_to_bytes(text: str) -> bytes:
    """The 16 bytes of a Kafka UUID string; ``ValueError`` when it is not one."""
    if len(text) != 22:
        raise ValueError(f"not a Kafka UUID (22 base64 characters): {text!r}")
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16 or uuid_from_bytes(raw) != text:
        raise ValueError(f"not a Kafka UUID: {text!r}")
    return raw


@dataclass(frozen=True)
class TopicIdPartition:
    """A user topic's partition, named and identified (a re-created topic has a new id)."""

    topic: str
    topic_id: str
    partition: int


@dataclass(frozen=True)
class _OfPartition:
    tip: TopicIdPartition


@dataclass(frozen=True)
class _SegmentMetadata:
    """The fields a segment's metadata record and a snapshot entry of it share, in record order."""

    segment_id: str
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]  # (leader epoch, start offset), in record order
    segment_size: int
    custom_metadata: bytes | None
    state: str
    tagged_fields: tuple[tuple[int, bytes], ...] = ()  # the record's own, as read (tag, bytes)


# A dataclass takes its bases' fields last base first: ``tip``, then the segment's.
@dataclass(frozen=True)
class SegmentRecord(_SegmentMetadata, _OfPartition):
    """``RemoteLogSegmentMetadataRecord`` (api key 0): a segment enters COPY_SEGMENT_STARTED."""


@dataclass(frozen=True)
class SegmentUpdateRecord:
    """``RemoteLogSegmentMetadataUpdateRecord`` (api key 1): a segment's state changes."""

    tip: TopicIdPartition
    segment_id: str
    broker_id: int
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: str
    tagged_fields: tuple[tuple[int, bytes], ...] = ()  # the record's own, as read (tag, bytes)


@dataclass(frozen=True)
class PartitionDeleteRecord:
    """``RemotePartitionDeleteMetadataRecord`` (api key 2): a partition's remote data is deleted."""

    tip: TopicIdPartition
    broker_id: int
    event_timestamp_ms: int
    state: str
    tagged_fields: tuple[tuple[int, bytes], ...] = ()  # the record's own, as read (tag, bytes)


@dataclass(frozen=True)
class SegmentSnapshotRecord(_SegmentMetadata):
    """``RemoteLogSegmentMetadataSnapshotRecord`` (api key 3): a broker's local snapshot entry."""


RemoteLogRecord = SegmentRecord | SegmentUpdateRecord | PartitionDeleteRecord | SegmentSnapshotRecord

_I8, _I32, _I64 = struct.Struct(">b"), struct.Struct(">i"), struct.Struct(">q")


class _Reader:
    """A cursor over one value; every read failure is a :class:`DecodeError` naming ``where``."""

    __slots__ = ("buf", "pos", "where")

    def __init__(self, buf: bytes, where: str) -> None:
        self.buf = buf
        self.pos = 0
        self.where = where

    def fail(self, problem: str) -> DecodeError:
        return DecodeError(self.where, f"{problem} at byte {self.pos} of {len(self.buf)}")

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise self.fail(f"truncated: {what} needs {n} bytes, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def uvarint(self, what: str) -> int:
        value, shift = 0, 0
        buf, pos = self.buf, self.pos
        while True:
            if pos >= len(buf):
                self.pos = pos
                raise self.fail(f"truncated: varint {what}")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                self.pos = pos
                raise self.fail(f"varint {what} longer than 5 bytes")
        self.pos = pos
        if value > 0xFFFFFFFF:
            raise self.fail(f"varint {what} out of range")
        return value

    def int8(self, what: str) -> int:
        return int(_I8.unpack(self.take(1, what))[0])

    def int32(self, what: str) -> int:
        return int(_I32.unpack(self.take(4, what))[0])

    def int64(self, what: str) -> int:
        return int(_I64.unpack(self.take(8, what))[0])

    def uuid(self, what: str) -> str:
        return uuid_from_bytes(self.take(16, what))

    def string(self, what: str) -> str:
        n = self.uvarint(f"{what} length")
        if n == 0:
            raise self.fail(f"{what} is null")
        raw = self.take(n - 1, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not UTF-8 ({e.reason})") from None

    def nullable_bytes(self, what: str) -> bytes | None:
        n = self.uvarint(f"{what} length")
        return None if n == 0 else self.take(n - 1, what)

    def tagged_fields(self, what: str) -> tuple[tuple[int, bytes], ...]:
        count = self.uvarint(f"{what} tagged field count")
        if count > _MAX_COLLECTION:
            raise self.fail(f"{what}: {count} tagged fields")
        out = []
        for _ in range(count):
            tag = self.uvarint(f"{what} tag")
            out.append((tag, self.take(self.uvarint(f"{what} tagged field size"), f"{what} tagged field")))
        return tuple(out)

    def leader_epochs(self, what: str) -> tuple[tuple[int, int], ...]:
        n = self.uvarint(f"{what} length")
        if n == 0:
            raise self.fail(f"{what} is null")
        if n - 1 > _MAX_COLLECTION or (n - 1) * 13 > len(self.buf) - self.pos:
            raise self.fail(f"truncated: {n - 1} leader epochs announced")
        out = []
        for _ in range(n - 1):
            epoch = self.int32("LeaderEpoch")
            offset = self.int64("Offset")
            self.tagged_fields("SegmentLeaderEpochEntry")
            out.append((epoch, offset))
        return tuple(out)

    def topic_id_partition(self, what: str = "TopicIdPartition") -> TopicIdPartition:
        name = self.string("topic Name")
        topic_id = self.uuid("topic Id")
        partition = self.int32("Partition")
        self.tagged_fields(what)
        return TopicIdPartition(name, topic_id, partition)

    def segment_uuid(self, what: str) -> str:
        """The segment id of a ``RemoteLogSegmentId`` (after its ``TopicIdPartition``)."""
        seg = self.uuid(what)
        self.tagged_fields("RemoteLogSegmentId")
        return seg

    def segment_state(self, what: str) -> str:
        return self._state(SEGMENT_STATES, what)

    def partition_delete_state(self, what: str) -> str:
        return self._state(PARTITION_DELETE_STATES, what)

    def _state(self, names: tuple[str, ...], what: str) -> str:
        value = self.int8(what)
        if not 0 <= value < len(names):
            self.pos -= 1
            raise self.fail(f"unknown {what} {value}")
        return names[value]


def decode_record(value: bytes, where: str = "__remote_log_metadata") -> RemoteLogRecord:
    """Decode one ``__remote_log_metadata`` record value.

    ``where`` names the record (topic, partition and offset) in errors.

    Raises
    ------
    UnknownVersionError
        Frame version other than 1, an api key other than 0-3, or a record version this release
        does not read.
    DecodeError
        Truncated or corrupt bytes, an unknown state, or trailing bytes.
    """
    if value is None:
        raise DecodeError(where, "null record value (a tombstone)")
    r = _Reader(bytes(value), where)
    frame = r.uvarint("frame version")
    if frame != FRAME_VERSION:
        raise UnknownVersionError(where, f"unknown frame version {frame} (expected {FRAME_VERSION})")
    api = r.uvarint("api key")
    version = r.uvarint("version")
    if api not in _KNOWN_VERSIONS:
        raise UnknownVersionError(where, f"unknown api key {api} (known: 0-3)")
    if version not in _KNOWN_VERSIONS[api]:
        raise UnknownVersionError(where, f"unknown version {version} of api key {api}")
    cls, layout = _LAYOUTS[api]
    record: RemoteLogRecord = cls(*[read(r, what) for _, what, read, _ in layout])  # in field order
    tagged = r.tagged_fields("record")
    if r.pos != len(r.buf):
        raise r.fail(f"{len(r.buf) - r.pos} trailing bytes")
    return dataclasses.replace(record, tagged_fields=tagged) if tagged else record


# -- encoding (tests, benchmarks and the fixtures that plant records) --------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _uvarint(len(raw) + 1) + raw


def _nullable_bytes(b: bytes | None) -> bytes:
    return b"\x00" if b is None else _uvarint(len(b) + 1) + b


def _tip(t: TopicIdPartition) -> bytes:
    return _string(t.topic) + uuid_to_bytes(t.topic_id) + _I32.pack(t.partition) + b"\x00"


def _epochs(epochs: tuple[tuple[int, int], ...]) -> bytes:
    return _uvarint(len(epochs) + 1) + b"".join(_I32.pack(e) + _I64.pack(o) + b"\x00" for e, o in epochs)


def encode_record(record: RemoteLogRecord) -> bytes:
    """The record value Kafka's serde writes for ``record`` (frame version 1, version 0)."""
    api = _API_OF[type(record)]
    body = b"".join(write(getattr(record, attr)) for attr, _, _, write in _LAYOUTS[api][1])
    tagged = _uvarint(len(record.tagged_fields)) + b"".join(
        _uvarint(tag) + _uvarint(len(value)) + value for tag, value in record.tagged_fields
    )
    return _uvarint(FRAME_VERSION) + _uvarint(api) + _uvarint(0) + body + tagged


# -- each record's body, field by field in wire order (its dataclass's field order) ----------------------
# (attribute, Kafka's field name for errors, read, write)
_Field = tuple[str, str, Callable[[_Reader, str], Any], Callable[[Any], bytes]]


def _segment_state(state: str) -> bytes:
    return _I8.pack(SEGMENT_STATES.index(state))


def _partition_delete_state(state: str) -> bytes:
    return _I8.pack(PARTITION_DELETE_STATES.index(state))


def _segment_uuid(segment_id: str) -> bytes:
    return uuid_to_bytes(segment_id) + b"\x00"


_TIP: _Field = ("tip", "TopicIdPartition", _Reader.topic_id_partition, _tip)
_SEGMENT_ID: _Field = ("segment_id", "segment Id", _Reader.segment_uuid, _segment_uuid)
_BROKER: _Field = ("broker_id", "BrokerId", _Reader.int32, _I32.pack)
_EVENT_TIME: _Field = ("event_timestamp_ms", "EventTimestampMs", _Reader.int64, _I64.pack)
_CUSTOM: _Field = ("custom_metadata", "CustomMetadata", _Reader.nullable_bytes, _nullable_bytes)
_STATE: _Field = ("state", "RemoteLogSegmentState", _Reader.segment_state, _segment_state)
_SEGMENT_BODY: tuple[_Field, ...] = (
    ("start_offset", "StartOffset", _Reader.int64, _I64.pack),
    ("end_offset", "EndOffset", _Reader.int64, _I64.pack),
    _BROKER,
    ("max_timestamp_ms", "MaxTimestampMs", _Reader.int64, _I64.pack),
    _EVENT_TIME,
    ("leader_epochs", "SegmentLeaderEpochs", _Reader.leader_epochs, _epochs),
    ("segment_size", "SegmentSizeInBytes", _Reader.int32, _I32.pack),
    _CUSTOM,
    _STATE,
)
_LAYOUTS: dict[int, tuple[type[RemoteLogRecord], tuple[_Field, ...]]] = {
    API_SEGMENT: (SegmentRecord, (_TIP, _SEGMENT_ID, *_SEGMENT_BODY)),
    API_UPDATE: (SegmentUpdateRecord, (_TIP, _SEGMENT_ID, _BROKER, _EVENT_TIME, _CUSTOM, _STATE)),
    API_PARTITION_DELETE: (
        PartitionDeleteRecord,
        (
            _TIP,
            _BROKER,
            _EVENT_TIME,
            ("state", "RemotePartitionDeleteState", _Reader.partition_delete_state, _partition_delete_state),
        ),
    ),
    API_SNAPSHOT: (
        SegmentSnapshotRecord,
        (("segment_id", "SegmentId", _Reader.uuid, uuid_to_bytes), *_SEGMENT_BODY),
    ),
}
_API_OF = {cls: api for api, (cls, _) in _LAYOUTS.items()}


# -- which metadata partition holds a user partition's records ----------------------------------------
_M32 = 0xFFFFFFFF


def _murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (32-bit, seed 0x9747b28c) as an unsigned 32-bit value."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & _M32
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & _M32
        k ^= k >> r
        k = (k * m) & _M32
        h = ((h * m) & _M32) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & _M32
    h ^= h >> 13
    h = (h * m) & _M32
    h ^= h >> 15
    return h


def _java_int(v: int) -> int:
    v &= _M32
    return v - (1 << 32) if v >= 1 << 31 else v


def metadata_partition(topic_id: str, partition: int, num_partitions: int) -> int:
    """The ``__remote_log_metadata`` partition of a user partition (``RemoteLogMetadataTopicPartitioner``).

    ``toPositive(murmur2(int32BE(Objects.hash(topicId.lsb, topicId.msb, partition)))) % n``.
    """
    raw = uuid_to_bytes(topic_id)
    msb, lsb = struct.unpack(">qq", raw)

    def long_hash(x: int) -> int:
        x &= (1 << 64) - 1
        return _java_int(x ^ (x >> 32))

    h = 1
    for part in (long_hash(lsb), long_hash(msb), _java_int(partition)):
        h = _java_int(31 * h + part)
    return (_murmur2(struct.pack(">i", h)) & 0x7FFFFFFF) % num_partitions
