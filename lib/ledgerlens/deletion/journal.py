"""The deletion journal: JSON lines, each carrying the hash of the line before it.

Every approval, every publish, every deletion intent and every outcome (deleted, already gone,
refused, retried, dead-lettered) is one line::

    {"seq": 7, "prev": "<sha256 of line 6>", "at_ms": ..., "type": "outcome", ...}

Line 0 has ``prev`` = 64 zeros. Editing any line breaks the next line's ``prev``; removing lines
at the end is caught by the head file ``<journal>.head`` (``{"seq", "hash"}`` of the last line
written, replaced atomically after each append): a journal shorter than its head, or whose line at
the head's ``seq`` has another hash, is truncated or rewritten. Lines past the head are accepted
(a writer stopped between its append and its head update).

Appends take an exclusive ``flock`` on ``<journal>.lock``, so several deleters on one host may share
a journal. One append writes many lines with one ``write`` and one ``fsync`` (group commit).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerlens.errors import LedgerLensError
from ledgerlens.runtime.outdir import write_atomic

GENESIS = "0" * 64


class JournalError(LedgerLensError):
    """A journal that cannot be read or written."""


class JournalTampered(JournalError):
    """A journal whose hash chain or head does not hold: edited, truncated or reordered."""


def line_hash(line: bytes) -> str:
    """SHA-256 (hex) of one journal line, without its newline."""
    return hashlib.sha256(line).hexdigest()


@dataclass(frozen=True)
class Head:
    """The last line a journal vouches for."""

    seq: int
    hash: str


class Journal:
    """An append-only, hash-chained JSON-lines file.

    Parameters
    ----------
    path
        The journal file (created on first append); ``path.head`` and ``path.lock`` live beside it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.head_path = self.path.with_name(self.path.name + ".head")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        # incremental verification: how far the file was checked and the chain state there
        self._checked_offset = 0
        self._checked_seq = -1
        self._checked_hash = GENESIS
        self._mutex = threading.RLock()  # threads of one process share this object's read position

    # -- reading ---------------------------------------------------------------------------------

    def _read_head(self) -> Head | None:
        try:
            raw = json.loads(self.head_path.read_text())
            return Head(int(raw["seq"]), str(raw["hash"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise JournalTampered(f"{self.head_path}: unreadable head ({e})") from e

    def verify(self) -> int:
        """Check the whole chain and the head; returns the number of lines. Raises JournalTampered."""
        with self._mutex:
            self._checked_offset, self._checked_seq, self._checked_hash = 0, -1, GENESIS
            list(self._scan(verify_only=True))
            return self._checked_seq + 1

    def records(self) -> list[dict[str, Any]]:
        """Every record, the whole chain verified first (JournalTampered otherwise)."""
        with self._mutex:
            self._checked_offset, self._checked_seq, self._checked_hash = 0, -1, GENESIS
            return list(self._scan(verify_only=False))

    def new_records(self) -> list[dict[str, Any]]:
        """Records appended since the last :meth:`records` / :meth:`new_records` / append, verified."""
        with self._mutex:
            return list(self._scan(verify_only=False))

    def _scan(self, *, verify_only: bool) -> Iterator[dict[str, Any]]:
        head = self._read_head()
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            if head is not None:
                raise JournalTampered(
                    f"{self.path}: missing, but its head vouches for line {head.seq}"
                ) from None
            return
        with f:
            f.seek(self._checked_offset)
            seq, prev = self._checked_seq, self._checked_hash
            offset = self._checked_offset
            head_seen = head is None or head.seq <= seq
            if head is not None and head.seq <= seq and offset > 0 and head.seq == seq and head.hash != prev:
                raise JournalTampered(f"{self.path}: line {seq} does not match the head")
            for raw in f:
                if not raw.endswith(b"\n"):
                    raise JournalTampered(f"{self.path}: line {seq + 1} is cut short (no newline)")
                line = raw[:-1]
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    raise JournalTampered(f"{self.path}: line {seq + 1} is not JSON ({e})") from e
                if not isinstance(rec, dict) or rec.get("seq") != seq + 1:
                    raise JournalTampered(f"{self.path}: line {seq + 1} has seq {rec.get('seq')!r}")
                if rec.get("prev") != prev:
                    raise JournalTampered(
                        f"{self.path}: line {seq + 1} does not chain to line {seq} (edited or reordered)"
                    )
                seq += 1
                prev = line_hash(line)
                offset += len(raw)
                if head is not None and seq == head.seq:
                    if prev != head.hash:
                        raise JournalTampered(
                            f"{self.path}: line {seq} differs from what the head vouches for"
                        )
                    head_seen = True
                self._checked_offset, self._checked_seq, self._checked_hash = offset, seq, prev
                if not verify_only:
                    yield rec
            if not head_seen:
                assert head is not None
                raise JournalTampered(
                    f"{self.path}: has {seq + 1} lines but its head vouches for line {head.seq} (truncated)"
                )

    # -- writing ---------------------------------------------------------------------------------

    def append(self, records: Sequence[Mapping[str, Any]]) -> list[Head]:
        """Append records (one write, one fsync) under the lock; returns each line's (seq, hash).

        The chain is verified from the head before writing: a tampered journal is never extended.
        """
        if not records:
            return []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._mutex, open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                seq, prev = self._tail()
                out: list[Head] = []
                chunks: list[bytes] = []
                now = int(time.time() * 1000)
                for r in records:
                    seq += 1
                    body = {k: v for k, v in r.items() if k not in ("seq", "prev")}
                    body.setdefault("at_ms", now)
                    line = json.dumps(
                        {"seq": seq, "prev": prev, **body}, sort_keys=True, separators=(",", ":"), default=str
                    ).encode()
                    if b"\n" in line:
                        raise JournalError("a journal record may not contain a raw newline")
                    prev = line_hash(line)
                    chunks.append(line + b"\n")
                    out.append(Head(seq, prev))
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    data = b"".join(chunks)
                    written = 0
                    while written < len(data):
                        written += os.write(fd, data[written:])
                    os.fsync(fd)
                finally:
                    os.close(fd)
                write_atomic(self.head_path, json.dumps({"seq": seq, "hash": prev}) + "\n")
                return out
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _tail(self) -> tuple[int, str]:
        """(seq, hash) of the last line, verifying lines not yet verified by this object."""
        if not self.path.exists():
            if self._read_head() is not None:
                raise JournalTampered(f"{self.path}: missing, but its head exists")
            return -1, GENESIS
        size = self.path.stat().st_size
        if size < self._checked_offset:
            raise JournalTampered(f"{self.path}: shrank from {self._checked_offset} to {size} bytes")
        list(self._scan(verify_only=True))
        return self._checked_seq, self._checked_hash


def now_ms() -> int:
    """Epoch milliseconds."""
    return int(time.time() * 1000)
