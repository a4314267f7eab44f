"""Schema storage: the ``/schemas/<schema id>`` locator and the schema ledger entries (FORMATS.md 5)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledgerlens.errors import DecodeError
from ledgerlens.formats._proto import parse_binary
from ledgerlens.proto import schema_storage_pb2 as pb


@dataclass(frozen=True)
class IndexEntryRecord:
    """One schema version: where its ``SchemaEntry`` is stored and the schema hash."""

    version: int
    ledger_id: int
    entry_id: int
    hash: bytes


@dataclass(frozen=True)
class SchemaLocatorRecord:
    """A decoded schema locator: the latest version and the index of all versions."""

    latest: IndexEntryRecord
    index: tuple[IndexEntryRecord, ...]

    @property
    def ledger_ids(self) -> list[int]:
        """Distinct ledger ids of every version (latest included), in first-seen order."""
        ids = [self.latest.ledger_id, *(e.ledger_id for e in self.index)]
        return [i for i in dict.fromkeys(ids) if i >= 0]


@dataclass(frozen=True)
class SchemaInfoRecord:
    """The ``SchemaInfo`` inside a schema entry."""

    schema_id: str
    user: str
    type: str
    schema: bytes
    timestamp_ms: int
    deleted: bool
    props: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SchemaEntryRecord:
    """A schema ledger entry: the schema info and the version index known when it was written."""

    info: SchemaInfoRecord
    index: tuple[IndexEntryRecord, ...]


def _index_entry(e: pb.IndexEntry) -> IndexEntryRecord:
    return IndexEntryRecord(
        version=e.version, ledger_id=e.position.ledgerId, entry_id=e.position.entryId, hash=bytes(e.hash)
    )


def decode_schema_locator(data: bytes, *, path: str) -> SchemaLocatorRecord:
    """Decode a ``/schemas/...`` node (binary ``SchemaLocator``).

    Raises
    ------
    DecodeError
        Bytes that are not a complete ``SchemaLocator``.
    """
    msg = parse_binary(pb.SchemaLocator, data, where=path)
    return SchemaLocatorRecord(latest=_index_entry(msg.info), index=tuple(_index_entry(e) for e in msg.index))


def decode_schema_entry(data: bytes, *, where: str) -> SchemaEntryRecord:
    """Decode entry 0 of a schema ledger: ``SchemaEntry`` and the ``SchemaInfo`` it carries.

    Raises
    ------
    DecodeError
        Either message incomplete or not protobuf.
    """
    entry = parse_binary(pb.SchemaEntry, data, where=where)
    try:
        info = parse_binary(pb.SchemaInfo, entry.schema_data, where=where)
    except DecodeError as exc:
        raise DecodeError(where, f"schema_data: {exc.problem}") from exc
    return SchemaEntryRecord(
        info=SchemaInfoRecord(
            schema_id=info.schema_id,
            user=info.user,
            type=pb.SchemaType.Name(info.type),
            schema=bytes(info.schema),
            timestamp_ms=info.timestamp,
            deleted=info.deleted,
            props={p.key: p.value for p in info.props},
        ),
        index=tuple(_index_entry(e) for e in entry.index),
    )
