"""Writers of the real wire formats (FORMATS.md), independent of the decoders in ``ledgerlens.formats``.

The sandbox writes clusters with these; the tests read them back with the decoders, so a mistake
on either side shows up as a mismatch. Messages are built with the generated protobuf classes;
framing, envelopes, paths, names and object layouts are written here by hand.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import cramjam
import lz4.block
import zstandard
from google.protobuf import text_format

from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens.proto import managed_ledger_pb2 as ml

# --- BookKeeper ledger metadata -------------------------------------------------------------------

BK_VERSION_KEY = b"BookieMetadataFormatVersion"
INT_MAX = 2147483647
IN_RECOVERY_LAST_ENTRY = -102


def bk_header(version: int) -> bytes:
    """``BookieMetadataFormatVersion\\t<version>\\n``."""
    return BK_VERSION_KEY + b"\t" + str(version).encode() + b"\n"


def varint(n: int) -> bytes:
    """Unsigned protobuf varint."""
    # Written here, not taken from ledgerlens.formats (kafka_remote_log's private encoder): the sandbox's
    # writers stay independent of the package whose decoders they check.
    if n < 0:
        raise ValueError("varint of a negative number")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ledger_metadata(
    *,
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    length: int,
    last_entry_id: int,
    state: str = "CLOSED",
    ctime_ms: int | None = None,
    custom: Mapping[str, bytes | str] | None = None,
    digest: str = "CRC32C",
    password: bytes = b"",
    ensembles: Sequence[tuple[int, Sequence[str]]] | None = None,
    ctoken: int | None = None,
) -> bk.LedgerMetadataFormat:
    """A LedgerMetadataFormat as BookKeeper's client fills it (all always-written fields set)."""
    md = bk.LedgerMetadataFormat(
        quorumSize=write_quorum,
        ackQuorumSize=ack_quorum,
        ensembleSize=len(ensemble),
        length=length,
        lastEntryId=last_entry_id,
        state=bk.LedgerMetadataFormat.State.Value(state),
        digestType=bk.LedgerMetadataFormat.DigestType.Value(digest),
        password=password,
    )
    for first, members in ensembles or [(0, ensemble)]:
        md.segment.add(firstEntryId=first, ensembleMember=list(members))
    if ctime_ms is not None:
        md.ctime = ctime_ms
    for key, value in (custom or {}).items():
        md.customMetadata.add(key=key, value=value.encode() if isinstance(value, str) else value)
    if ctoken is not None:
        md.cToken = ctoken
    return md


def bk_metadata_v3(md: bk.LedgerMetadataFormat) -> bytes:
    """Format version 3: header, varint32 length, binary LedgerMetadataFormat."""
    body = md.SerializeToString()
    return bk_header(3) + varint(len(body)) + body


def bk_metadata_v2(md: bk.LedgerMetadataFormat) -> bytes:
    """Format version 2: header then protobuf TextFormat (v2 never writes cToken)."""
    copy = bk.LedgerMetadataFormat()
    copy.CopyFrom(md)
    copy.ClearField("cToken")
    return bk_header(2) + text_format.MessageToString(copy).encode()


def bk_metadata_v1(md: bk.LedgerMetadataFormat) -> bytes:
    """Format version 1 (BK 4.0 text lines); ctime and custom metadata cannot be expressed."""
    lines = [str(md.quorumSize), str(md.ensembleSize), str(md.length)]
    for seg in md.segment:
        lines.append("\t".join([str(seg.firstEntryId), *seg.ensembleMember]))
    if md.state == bk.LedgerMetadataFormat.IN_RECOVERY:
        lines.append(f"{IN_RECOVERY_LAST_ENTRY}\tCLOSED")
    elif md.state == bk.LedgerMetadataFormat.CLOSED:
        lines.append(f"{md.lastEntryId}\tCLOSED")
    return bk_header(1) + "\n".join(lines).encode()


def bk_metadata(md: bk.LedgerMetadataFormat, version: int = 3) -> bytes:
    """Serialize ``md`` in BookKeeper metadata format ``version`` (1, 2 or 3)."""
    writers = {1: bk_metadata_v1, 2: bk_metadata_v2, 3: bk_metadata_v3}
    if version not in writers:
        raise ValueError(f"BookKeeper metadata format version {version} has no writer")
    return writers[version](md)


# --- ZooKeeper ledger paths -----------------------------------------------------------------------


def short_ledger_path(ledger_id: int) -> str:
    """Legacy hierarchical path suffix: ``/00/0001/L2345``."""
    s = f"{ledger_id:010d}"
    return f"/{s[0:2]}/{s[2:6]}/L{s[6:10]}"


def long_ledger_path(ledger_id: int) -> str:
    """Long hierarchical path suffix: ``/000/0000/0030/0000/L0000``."""
    s = f"{ledger_id:019d}"
    return f"/{s[0:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:19]}"


def ledger_path(ledger_id: int, root: str = "/ledgers") -> str:
    """Hybrid hierarchical path (HierarchicalLedgerManager / PulsarLedgerManager)."""
    if ledger_id < 0:
        raise ValueError(f"negative ledger id {ledger_id}")
    suffix = short_ledger_path(ledger_id) if ledger_id < INT_MAX else long_ledger_path(ledger_id)
    return root.rstrip("/") + suffix


# --- Names ----------------------------------------------------------------------------------------

_URL_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.*_-")


def url_encode(component: str) -> str:
    """``java.net.URLEncoder.encode(s, UTF-8)``: ``[A-Za-z0-9.*_-]`` kept, space -> ``+``, rest ``%XX``."""
    # Not formats.names.encode_component: the audit encodes cursor paths with that one, and
    # tests/integration/test_sandbox.py checks the two against each other.
    out: list[str] = []
    for b in component.encode("utf-8"):
        if b in _URL_SAFE:
            out.append(chr(b))
        elif b == 0x20:
            out.append("+")
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


def managed_ledger_name(topic: str) -> str:
    """``persistent://tenant/ns/local`` -> ``tenant/ns/persistent/<URL-encoded local>`` (also v1 names)."""
    domain, sep, rest = topic.partition("://")
    if not sep:
        raise ValueError(f"topic {topic!r} has no domain")
    parts = rest.split("/")
    if len(parts) >= 4:  # v1: tenant/cluster/ns/local
        tenant, cluster, ns, local = parts[0], parts[1], parts[2], "/".join(parts[3:])
        return f"{tenant}/{cluster}/{ns}/{domain}/{url_encode(local)}"
    if len(parts) == 3:
        tenant, ns, local = parts
        return f"{tenant}/{ns}/{domain}/{url_encode(local)}"
    raise ValueError(f"topic {topic!r} is not tenant/namespace/local")


def schema_id(topic: str) -> str:
    """``TopicName.getSchemaName``: ``tenant/ns/<encoded base topic>`` (no domain, no partition suffix)."""
    _, _, rest = topic.partition("://")
    tenant, ns, local = rest.split("/", 2)
    base = local.rsplit("-partition-", 1)[0] if "-partition-" in local else local
    return f"{tenant}/{ns}/{url_encode(base)}"


def java_uuid(msb: int, lsb: int) -> str:
    """``java.util.UUID(msb, lsb).toString()`` for signed or unsigned 64-bit halves."""
    h = f"{msb & 0xFFFFFFFFFFFFFFFF:016x}{lsb & 0xFFFFFFFFFFFFFFFF:016x}"
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def signed64(n: int) -> int:
    """An unsigned 64-bit value as Java's signed long."""
    n &= 0xFFFFFFFFFFFFFFFF
    return n - (1 << 64) if n >= 1 << 63 else n


def uuid_bits(uuid_str: str) -> tuple[int, int]:
    """The (msb, lsb) signed longs of a UUID string (inverse of :func:`java_uuid`)."""
    h = uuid_str.replace("-", "")
    return signed64(int(h[:16], 16)), signed64(int(h[16:], 16))


# --- The 0x4778 compression envelope --------------------------------------------------------------

ENVELOPE_MAGIC = 0x4778
CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


def compress(codec: str, data: bytes) -> bytes:
    """Compress as Pulsar's airlift/JDK codecs do (LZ4 raw block, zlib-wrapped deflate, zstd frame
    level 3, raw snappy)."""
    if codec == "NONE":
        return data
    if codec == "LZ4":
        return bytes(lz4.block.compress(data, store_size=False))
    if codec == "ZLIB":
        return zlib.compress(data)
    if codec == "ZSTD":
        return bytes(zstandard.ZstdCompressor(level=3).compress(data))
    if codec == "SNAPPY":
        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(f"unknown compression codec {codec!r}")


def envelope(payload: bytes, codec: str) -> bytes:
    """Wrap a serialized ManagedLedgerInfo / ManagedCursorInfo in the 0x4778 envelope."""
    meta = ml.ManagedInfoMetadata(
        compressionType=ml.CompressionType.Value(codec), uncompressedSize=len(payload)
    ).SerializeToString()
    return struct.pack(">hi", ENVELOPE_MAGIC, len(meta)) + meta + compress(codec, payload)


def managed_info(message: ml.ManagedLedgerInfo | ml.ManagedCursorInfo, codec: str | None = None) -> bytes:
    """Value of an ML or cursor znode: plain binary protobuf, or enveloped when ``codec`` is given."""
    payload = message.SerializeToString()
    return payload if codec is None else envelope(payload, codec)


# --- Tiered storage (per-ledger offload, PIP-17) --------------------------------------------------

DATA_BLOCK_MAGIC = 0xFBDBABCB
DATA_HEADER_LENGTH = 128
BLOCK_END_PADDING = bytes.fromhex("FEDCDEAD")
INDEX_V1_MAGIC = 0xDE47DE47
ENTRY_OVERHEAD = 12  # int32 length + int64 entry id


def offload_data_key(uuid: str, ledger_id: int) -> str:
    """``<uuid>-ledger-<ledgerId>``."""
    return f"{uuid}-ledger-{ledger_id}"


def offload_index_key(uuid: str, ledger_id: int) -> str:
    """``<uuid>-ledger-<ledgerId>-index``."""
    return f"{uuid}-ledger-{ledger_id}-index"


@dataclass(frozen=True)
class IndexEntry:
    """One block of a data object: first entry id, 1-based multipart part number, byte offset."""

    first_entry_id: int
    part_id: int
    offset: int


def data_block(first_entry_id: int, entries: Sequence[tuple[int, bytes]], block_length: int) -> bytes:
    """One block: 128-byte header, ``[int32 len][int64 entryId][payload]`` entries, 0xFEDCDEAD padding."""
    body = b"".join(struct.pack(">iq", len(p), eid) + p for eid, p in entries)
    used = DATA_HEADER_LENGTH + len(body)
    if block_length < used:
        raise ValueError(f"block of {block_length} bytes cannot hold {used} bytes")
    header = struct.pack(">Iqqq", DATA_BLOCK_MAGIC, DATA_HEADER_LENGTH, block_length, first_entry_id)
    header += b"\0" * (DATA_HEADER_LENGTH - len(header))
    pad_len = block_length - used
    padding = (BLOCK_END_PADDING * (pad_len // 4 + 1))[:pad_len]
    return header + body + padding


def offload_data_object(
    entries: Sequence[tuple[int, bytes]], max_block_size: int = 64 * 1024
) -> tuple[bytes, list[IndexEntry]]:
    """A per-ledger data object (one block per multipart part) and its index entries.

    Blocks are filled up to ``max_block_size`` and padded; the last block is as long as its content
    rounded up to 4 bytes, so each block carries some padding as the broker's do.
    """
    blocks: list[bytes] = []
    index: list[IndexEntry] = []
    offset = 0
    i = 0
    while i < len(entries):
        chunk: list[tuple[int, bytes]] = []
        used = DATA_HEADER_LENGTH
        while i < len(entries) and (
            not chunk or used + ENTRY_OVERHEAD + len(entries[i][1]) <= max_block_size
        ):
            used += ENTRY_OVERHEAD + len(entries[i][1])
            chunk.append(entries[i])
            i += 1
        length = max_block_size if i < len(entries) and used <= max_block_size else used + 4 - used % 4
        block = data_block(chunk[0][0], chunk, length)
        index.append(IndexEntry(chunk[0][0], len(blocks) + 1, offset))
        blocks.append(block)
        offset += len(block)
    return b"".join(blocks), index


def offload_segment_metadata(md: bk.LedgerMetadataFormat) -> bytes:
    """Segment metadata as ``OffloadUtils.buildLedgerMetadataFormat`` writes it (no password, no header)."""
    copy = bk.LedgerMetadataFormat()
    copy.CopyFrom(md)
    copy.ClearField("password")
    copy.ClearField("cToken")
    return copy.SerializeToString()


def offload_index_v1(
    md: bk.LedgerMetadataFormat, index: Iterable[IndexEntry], data_object_length: int
) -> bytes:
    """Index object V1: magic 0xDE47DE47, lengths, segment metadata, sorted index entries."""
    meta = offload_segment_metadata(md)
    entries = sorted(index, key=lambda e: e.first_entry_id)
    total = 4 + 4 + 8 + 8 + 4 + 4 + len(meta) + len(entries) * 20
    head = struct.pack(
        ">Iiqqii", INDEX_V1_MAGIC, total, data_object_length, DATA_HEADER_LENGTH, len(entries), len(meta)
    )
    return head + meta + b"".join(struct.pack(">qiq", e.first_entry_id, e.part_id, e.offset) for e in entries)


def offload_user_metadata(
    role: str, managed_ledger: str, *, cluster: str = "sandbox", version: str = "4.0.4", git_sha: str = ""
) -> dict[str, str]:
    """Blob user metadata of a per-ledger offload object (keys lower-case, as S3/jclouds return them)."""
    return {
        "s3managedledgeroffloaderformatversion": "1",
        "s3managedledgeroffloadersoftwareversion": version,
        "s3managedledgeroffloadersoftwaregitsha": git_sha or "0" * 40,
        "pulsarclustername": cluster,
        "role": role,
        "managedledgername": managed_ledger,
    }


def pulsar_entry(
    payload: bytes, producer: str = "sandbox", sequence_id: int = 0, publish_ms: int = 0
) -> bytes:
    """A minimal Pulsar entry: ``[int32 metadataSize][MessageMetadata][payload]`` (no checksum).

    MessageMetadata is hand-encoded: producer_name (1), sequence_id (2), publish_time (3).
    """
    name = producer.encode()
    meta = b"\x0a" + varint(len(name)) + name + b"\x10" + varint(sequence_id) + b"\x18" + varint(publish_ms)
    return struct.pack(">i", len(meta)) + meta + payload
