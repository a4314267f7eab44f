"""Shared helpers: parse protobuf bytes into a message with typed errors."""

from __future__ import annotations

from typing import TypeVar

from google.protobuf import text_format
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message

from ledgerlens.errors import DecodeError

M = TypeVar("M", bound=Message)


def parse_binary(cls: type[M], data: bytes, *, where: str) -> M:
    """Parse binary protobuf ``data`` as ``cls``; truncated or incomplete messages are DecodeErrors."""
    msg: M = cls()
    name = cls.DESCRIPTOR.name
    try:
        msg.ParseFromString(bytes(data))
    except (ProtobufDecodeError, ValueError, TypeError, RuntimeError) as exc:
        raise DecodeError(where, f"not a binary {name} protobuf ({len(data)} bytes): {exc}") from exc
    missing = msg.FindInitializationErrors()
    if missing:
        raise DecodeError(where, f"{name} lacks required fields: {', '.join(missing)}")
    return msg


def parse_text(cls: type[M], text: str, *, where: str) -> M:
    """Parse protobuf TextFormat ``text`` as ``cls``; errors and missing fields are DecodeErrors."""
    msg: M = cls()
    name = cls.DESCRIPTOR.name
    try:
        # allow_unknown_field: newer writers may carry fields this release does not know.
        text_format.Parse(text, msg, allow_unknown_field=True)
    except (text_format.ParseError, ValueError, TypeError, RuntimeError) as exc:
        raise DecodeError(where, f"not a TextFormat {name}: {exc}") from exc
    missing = msg.FindInitializationErrors()
    if missing:
        raise DecodeError(where, f"TextFormat {name} lacks required fields: {', '.join(missing)}")
    return msg


def printable_text(data: bytes) -> str | None:
    """Return ``data`` decoded when it is UTF-8 made of printable characters and whitespace."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.strip():
        return None
    if all(c.isprintable() or c in "\n\r\t" for c in text):
        return text
    return None


def parse_binary_or_text(cls: type[M], data: bytes, *, where: str) -> M:
    """Parse binary protobuf, falling back to TextFormat for printable bytes (pre-2020 clusters)."""
    try:
        return parse_binary(cls, data, where=where)
    except DecodeError as binary_error:
        text = printable_text(data)
        if text is None:
            raise
        try:
            return parse_text(cls, text, where=where)
        except DecodeError as text_error:
            raise DecodeError(
                where,
                f"neither binary nor TextFormat {cls.DESCRIPTOR.name}: binary: {binary_error.problem}; "
                f"text: {text_error.problem}",
            ) from text_error
