"""The 0x4778 compression envelope around managed-ledger and cursor metadata.

Layout (FORMATS.md section 1): big-endian short magic ``0x4778``, int32 BE metadata size, that many
bytes of ``ManagedInfoMetadata`` (codec and uncompressed size), then the compressed protobuf.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.block
import zstandard
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError as ProtobufDecodeError

from ledgerlens.errors import DecodeError
from ledgerlens.proto import managed_ledger_pb2

MAGIC = 0x4778
_MAGIC_BYTES = struct.pack(">H", MAGIC)
_HEADER = 6

CODECS: dict[int, str] = {0: "NONE", 1: "LZ4", 2: "ZLIB", 3: "ZSTD", 4: "SNAPPY"}


def has_envelope(data: bytes) -> bool:
    """Return True when ``data`` starts with the envelope magic."""
    return len(data) >= 2 and data[:2] == _MAGIC_BYTES


def _decompress(codec: str, body: bytes, size: int) -> bytes:
    if codec == "NONE":
        return bytes(body)
    if codec == "LZ4":
        out: bytes = lz4.block.decompress(body, uncompressed_size=size)
        return out
    if codec == "ZLIB":
        return zlib.decompress(body)
    if codec == "ZSTD":
        # Frames written by airlift may omit the content size; bound the output by the declared size.
        return zstandard.ZstdDecompressor().decompress(body, max_output_size=max(size, 1))
    if codec == "SNAPPY":
        return bytes(cramjam.snappy.decompress_raw(body))
    raise AssertionError(codec)  # pragma: no cover - guarded by CODECS


def unwrap(data: bytes, *, path: str) -> tuple[bytes, str]:
    """Remove the compression envelope if there is one.

    Parameters
    ----------
    data : bytes
        The znode value.
    path : str
        Where the bytes came from, used in errors.

    Returns
    -------
    tuple[bytes, str]
        The plain protobuf bytes and the compression name (``"NONE"`` without an envelope,
        ``"EMPTY"`` for zero bytes).

    Raises
    ------
    DecodeError
        Short header, bad metadata size, unknown codec, decompression failure or size mismatch.
    """
    data = bytes(data)
    if not data:
        return b"", "EMPTY"
    if not has_envelope(data):
        return data, "NONE"
    if len(data) < _HEADER:
        raise DecodeError(path, f"compression envelope header truncated: {len(data)} bytes, need {_HEADER}")
    (meta_size,) = struct.unpack_from(">i", data, 2)
    if meta_size <= 0 or _HEADER + meta_size > len(data):
        raise DecodeError(
            path,
            f"compression envelope metadata size {meta_size} does not fit in {len(data) - _HEADER} "
            "bytes after the header",
        )
    meta = managed_ledger_pb2.ManagedInfoMetadata()
    try:
        meta.ParseFromString(data[_HEADER : _HEADER + meta_size])
    except ProtobufDecodeError as exc:
        raise DecodeError(path, f"compression envelope metadata does not parse: {exc}") from exc
    if not meta.HasField("compressionType"):
        # proto2 closed enum: an out-of-range codec value lands in the unknown fields.
        for field in unknown_fields.UnknownFieldSet(meta):
            if field.field_number == 1 and field.wire_type == 0:
                raise DecodeError(path, f"compression envelope has unknown codec value {field.data}")
    if not meta.IsInitialized():
        missing = ", ".join(meta.FindInitializationErrors())
        raise DecodeError(path, f"compression envelope metadata lacks required fields: {missing}")
    codec_id = meta.compressionType
    codec = CODECS.get(codec_id)
    if codec is None:
        raise DecodeError(path, f"compression envelope has unknown codec value {codec_id}")
    size = meta.uncompressedSize
    if size < 0:
        raise DecodeError(path, f"compression envelope declares negative uncompressed size {size}")
    body = data[_HEADER + meta_size :]
    try:
        plain = _decompress(codec, body, size)
    except Exception as exc:  # every codec library raises its own error types
        raise DecodeError(path, f"{codec} decompression of {len(body)} bytes failed: {exc}") from exc
    if len(plain) != size:
        raise DecodeError(
            path, f"{codec} decompressed to {len(plain)} bytes but the envelope declares {size}"
        )
    return plain, codec
