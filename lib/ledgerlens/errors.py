"""One exception tree for ledgerlens.

Every error names the object it is about (a metadata-store path, an S3 key, a server) and what is
wrong with it, so an on-call person can act on the message alone.
"""

from __future__ import annotations


class LedgerLensError(Exception):
    """Base of every error raised on purpose by ledgerlens."""


class DecodeError(LedgerLensError):
    """Bytes that do not decode as the format they should have.

    ``where`` is the znode path or object key, ``problem`` says what is wrong. The audit turns
    these into ``corrupt_metadata`` findings instead of failing the run.
    """

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class UnknownVersionError(DecodeError):
    """A format version (BookKeeper metadata, offload object) this release cannot read."""


class SourceError(LedgerLensError):
    """A server (ZooKeeper, S3, Pulsar) could not be reached or answered with an error."""

    def __init__(self, server: str, problem: str) -> None:
        super().__init__(f"{server}: {problem}")
        self.server = server
        self.problem = problem


class ConfigError(LedgerLensError):
    """A setting that is missing or malformed."""


class SandboxError(LedgerLensError):
    """A local sandbox component (ZooKeeper, S3 server, Pulsar) failed to start or stop."""
