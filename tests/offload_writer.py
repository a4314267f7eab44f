"""An offload object writer for tests, written from the format facts (FORMATS.md section 6) alone.

It shares no code with ``ledgerlens.formats.offload`` (the decoders under test): headers, entry
framing, padding and both index versions are packed here with ``struct``; only the protobuf
messages embedded in index objects use the project's generated classes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens.proto import managed_ledger_pb2 as mlpb

HEADER = 128
PAD = b"\xfe\xdc\xde\xad"
LEDGER_BLOCK = 0xFBDBABCB
STREAM_BLOCK = 0x26A66D32
INDEX_V1 = 0xDE47DE47
INDEX_V2 = 0x3D1FB0BC


def block(first_entry: int, entries: list[bytes], size: int, *, ledger_id: int | None = None) -> bytes:
    """One block: 128-byte header, ``[len][entry id][bytes]`` entries, ``FEDCDEAD`` padding to ``size``."""
    if ledger_id is None:
        head = struct.pack(">Iqqq", LEDGER_BLOCK, HEADER, size, first_entry)
    else:
        head = struct.pack(">Iqqqq", STREAM_BLOCK, HEADER, size, first_entry, ledger_id)
    body = b"".join(struct.pack(">iq", len(e), first_entry + i) + e for i, e in enumerate(entries))
    out = head.ljust(HEADER, b"\0") + body
    if len(out) > size:
        raise ValueError(f"entries of {len(out)} bytes do not fit a block of {size}")
    rest = size - len(out)
    return out + (PAD * (rest // 4 + 1))[:rest]


@dataclass
class Written:
    """A data object and where its blocks are: (ledger id, first entry, part, offset) per block."""

    data: bytes
    blocks: list[tuple[int, int, int, int]] = field(default_factory=list)


def data_object(
    ledgers: list[tuple[int, int, list[bytes]]], *, block_size: int, streaming: bool = False
) -> Written:
    """Pack ``(ledger id, first entry id, entries)`` runs into blocks of ``block_size`` (one per part).

    A block holds as many whole entries as fit; streaming blocks carry their ledger id.
    """
    out = Written(b"")
    chunks: list[bytes] = []
    offset = 0
    part = 1
    for ledger_id, first, entries in ledgers:
        i = 0
        while i < len(entries):
            used = HEADER
            j = i
            while j < len(entries) and used + 12 + len(entries[j]) <= block_size:
                used += 12 + len(entries[j])
                j += 1
            if j == i:
                raise ValueError(f"entry {first + i} does not fit a block of {block_size}")
            b = block(first + i, entries[i:j], block_size, ledger_id=ledger_id if streaming else None)
            chunks.append(b)
            out.blocks.append((ledger_id, first + i, part, offset))
            offset += len(b)
            part += 1
            i = j
    out.data = b"".join(chunks)
    return out


def ledger_metadata(
    *, last_entry_id: int, length: int, state: str = "CLOSED", managed_ledger: str | None = None
) -> bytes:
    """Binary BookKeeper ``LedgerMetadataFormat`` as the offloader embeds it (no header, no prefix)."""
    m = bk.LedgerMetadataFormat()
    m.quorumSize = 1
    m.ackQuorumSize = 1
    m.ensembleSize = 1
    m.length = length
    m.lastEntryId = last_entry_id
    m.state = getattr(bk.LedgerMetadataFormat, state)
    m.ctime = 1_700_000_000_000
    m.digestType = bk.LedgerMetadataFormat.CRC32C
    seg = m.segment.add()
    seg.firstEntryId = 0
    seg.ensembleMember.append("127.0.0.1:3181")
    if managed_ledger is not None:
        kv = m.customMetadata.add()
        kv.key = "pulsar/managed-ledger"
        kv.value = managed_ledger.encode()
    return m.SerializeToString()


def index_v1(written: Written, metadata: bytes) -> bytes:
    """A V1 index object of a per-ledger data object."""
    entries = b"".join(struct.pack(">qiq", first, part, off) for _, first, part, off in written.blocks)
    total = 4 + 4 + 8 + 8 + 4 + 4 + len(metadata) + len(entries)
    head = struct.pack(
        ">Iiqqii", INDEX_V1, total, len(written.data), HEADER, len(written.blocks), len(metadata)
    )
    return head + metadata + entries


def ledger_info(ledger_id: int, entries: int, size: int) -> bytes:
    """Binary managed-ledger ``LedgerInfo``."""
    li = mlpb.ManagedLedgerInfo.LedgerInfo()
    li.ledgerId = ledger_id
    li.entries = entries
    li.size = size
    li.timestamp = 1_700_000_000_000
    return li.SerializeToString()


def index_v2(written: Written, infos: dict[int, bytes]) -> bytes:
    """A V2 (streaming segment) index object: per ledger its LedgerInfo and its blocks."""
    body = b""
    for ledger_id, info in infos.items():
        mine = [(first, part, off) for lid, first, part, off in written.blocks if lid == ledger_id]
        body += struct.pack(">qii", ledger_id, len(mine), len(info)) + info
        body += b"".join(struct.pack(">qiq", *b) for b in mine)
    total = 4 + 4 + 8 + 8 + len(body)
    return struct.pack(">Iiqq", INDEX_V2, total, len(written.data), HEADER) + body


def user_metadata(
    *, managed_ledger: str | None, cluster: str | None = "test-cluster", role: str | None = None
) -> dict[str, str]:
    """User metadata as the offloader sets it (S3 lower-cases the keys)."""
    meta = {
        "s3managedledgeroffloaderformatversion": "1",
        "s3managedledgeroffloadersoftwareversion": "4.0.8",
        "s3managedledgeroffloadersoftwaregitsha": "0" * 40,
    }
    if cluster is not None:
        meta["pulsarclustername"] = cluster
    if role is not None:
        meta["role"] = role
    if managed_ledger is not None:
        meta["ManagedLedgerName"] = managed_ledger
    return meta
