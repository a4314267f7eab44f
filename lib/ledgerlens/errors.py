"""One exception tree for ledgerlens.

Every error names the object it is about (a metadata-store path, an S3 key, a server) and what is
wrong with it, so an on-call person can act on the message alone.
"""

from __future__ import annotations


class LedgerLensError(Exception):
    """Base of every error raised on purpose by ledgerlens."""


class _ProblemError(LedgerLensError):
    """An error about one named thing: the message is ``"<subject>: <problem>"``."""

    def __init__(self, subject: str, problem: str) -> None:
        super().__init__(f"{subject}: {problem}")
        self.subject = subject
        self.problem = problem


class DecodeError(_ProblemError):
    """Bytes that do not decode as the format they should have.

    ``where`` is the znode path or object key, ``problem`` says what is wrong. The audit turns
    these into ``corrupt_metadata`` findings instead of failing the run.
    """

    @property
    def where(self) -> str:
        return self.subject


class UnknownVersionError(DecodeError):
    """A format version (BookKeeper metadata, offload object) this release cannot read."""


class SourceError(_ProblemError):
    """A server (ZooKeeper, S3, Pulsar) could not be reached or answered with an error (``server``)."""

    @property
    def server(self) -> str:
        return self.subject


class ConfigError(LedgerLensError):
    """A setting that is missing or malformed."""


class SandboxError(LedgerLensError):
    """A local sandbox component (ZooKeeper, S3 server, Pulsar) failed to start or stop."""


class BookieError(SourceError):
    """A bookie read failed. ``bookie`` is the address (or id), ``ledger_id`` / ``entry_id`` what was read.

    The message is one line: ``bookie 127.0.0.1:3181: ledger 12 entry 3: <problem>``.
    """

    def __init__(self, bookie: str, ledger_id: int | None, entry_id: int | None, problem: str) -> None:
        what = []
        if ledger_id is not None:
            what.append(f"ledger {ledger_id}")
        if entry_id is not None and entry_id >= 0:
            what.append(f"entry {entry_id}")
        where = f"bookie {bookie}" + (f": {' '.join(what)}" if what else "")
        super().__init__(where, problem)
        self.bookie = bookie
        self.ledger_id = ledger_id
        self.entry_id = entry_id


class BookieUnavailableError(BookieError):
    """The bookie refused the connection, did not answer within the timeout, or closed the connection."""


class EntryDigestError(BookieError):
    """An entry whose digest or ids do not match: corrupt on that bookie."""


class EntryNotFoundError(BookieError):
    """The bookie answered that the ledger or entry does not exist (``ENOLEDGER`` / ``ENOENTRY``)."""


class EntryReadError(BookieError):
    """No bookie of an entry's write set returned a good copy; ``attempts`` holds each bookie's error."""

    def __init__(self, ledger_id: int, entry_id: int, attempts: list[BookieError]) -> None:
        tried = "; ".join(f"{a.bookie}: {a.problem}" for a in attempts) or "no bookie to try"
        super().__init__(
            ",".join(a.bookie for a in attempts), ledger_id, entry_id, f"every copy failed ({tried})"
        )
        self.attempts = attempts

    @property
    def corrupt(self) -> bool:
        """Every bookie that answered returned a bad digest (no bookie was merely unreachable)."""
        return bool(self.attempts) and all(isinstance(a, EntryDigestError) for a in self.attempts)
