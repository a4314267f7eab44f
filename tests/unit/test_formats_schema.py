from __future__ import annotations

import hashlib

import pytest

from ledgerlens.errors import DecodeError
from ledgerlens.formats.schema import (
    IndexEntryRecord,
    SchemaLocatorRecord,
    decode_schema_entry,
    decode_schema_locator,
)
from ledgerlens.proto import schema_storage_pb2 as pb

pytestmark = pytest.mark.unit

PATH = "/schemas/public/default/orders"


def index_entry(version: int, ledger_id: int, entry_id: int = 0, hash_: bytes = b"h") -> pb.IndexEntry:
    e = pb.IndexEntry(version=version, hash=hash_)
    e.position.ledgerId = ledger_id
    e.position.entryId = entry_id
    return e


def test_locator_round_trip():
    loc = pb.SchemaLocator()
    loc.info.CopyFrom(index_entry(2, 300, 0, b"\x01" * 32))
    loc.index.extend([index_entry(0, 100), index_entry(1, 200), index_entry(2, 300, 0, b"\x01" * 32)])
    rec = decode_schema_locator(loc.SerializeToString(), path=PATH)
    assert rec.latest == IndexEntryRecord(version=2, ledger_id=300, entry_id=0, hash=b"\x01" * 32)
    assert [e.ledger_id for e in rec.index] == [100, 200, 300]
    assert rec.ledger_ids == [300, 100, 200]


def test_ledger_ids_include_latest_not_in_index():
    rec = SchemaLocatorRecord(latest=IndexEntryRecord(1, 7, 0, b""), index=(IndexEntryRecord(0, 5, 0, b"x"),))
    assert rec.ledger_ids == [7, 5]


def test_locator_errors():
    loc = pb.SchemaLocator()
    loc.info.version = 1
    for data, fragment in [
        (loc.SerializePartialToString(), "position"),
        (b"", "info"),
        (b"\x0a\x10\x08", "SchemaLocator"),
    ]:
        with pytest.raises(DecodeError) as info:
            decode_schema_locator(data, path=PATH)
        assert info.value.where == PATH
        assert fragment in info.value.problem


def test_schema_entry_round_trip():
    schema = b'{"type":"record","name":"A","fields":[]}'
    info = pb.SchemaInfo(
        schema_id="public/default/orders",
        user="admin",
        type=pb.AVRO,
        schema=schema,
        timestamp=1_700_000_000_000,
        deleted=False,
    )
    info.props.add(key="k", value="v")
    entry = pb.SchemaEntry(schema_data=info.SerializeToString())
    entry.index.append(index_entry(0, -1, -1, hashlib.sha256(schema).digest()))
    rec = decode_schema_entry(entry.SerializeToString(), where="ledger 100 entry 0")
    assert rec.info.schema_id == "public/default/orders"
    assert rec.info.type == "AVRO"
    assert rec.info.schema == schema
    assert rec.info.props == {"k": "v"}
    assert rec.info.deleted is False
    assert rec.index[0].ledger_id == -1
    assert rec.index[0].hash == hashlib.sha256(schema).digest()


def test_schema_entry_bad_inner_info():
    entry = pb.SchemaEntry(schema_data=b"\x0a\x01a")
    with pytest.raises(DecodeError) as info:
        decode_schema_entry(entry.SerializeToString(), where="ledger 100 entry 0")
    assert info.value.where == "ledger 100 entry 0"
    assert "schema_data" in info.value.problem and "user" in info.value.problem
