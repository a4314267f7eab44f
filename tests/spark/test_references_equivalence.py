"""One definition of "referenced", two evaluators: the audit's Spark transforms over the inventory
columns and ``ledgerlens.formats.references`` over decoded records must name the same ledgers.

The cursors and schema locators are real wire bytes (the project's protos), turned into inventory
rows by the collector's own row builders, so both sides start from what a scan reads.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledgerlens.audit.references import cursor_references as spark_cursor_references
from ledgerlens.audit.references import schema_references as spark_schema_references
from ledgerlens.formats import references as refs
from ledgerlens.formats.managed_ledger import decode_cursor
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens.inventory import schemas
from ledgerlens.inventory.rows import cursor_row, schema_rows
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.proto import schema_storage_pb2 as sspb

pytestmark = [pytest.mark.spark]

ML = "t/ns/persistent/x"


def _cursors() -> list[tuple[str, bytes]]:
    """(cursor name, znode bytes): every way a cursor names (or seems to name) a ledger."""
    out = []
    c = mlpb.ManagedCursorInfo(cursorsLedgerId=11, markDeleteLedgerId=3, markDeleteEntryId=1)
    out.append(("sub", c.SerializeToString()))
    c = mlpb.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=3, markDeleteEntryId=1)
    out.append(("idle", c.SerializeToString()))
    c = mlpb.ManagedCursorInfo(cursorsLedgerId=12, markDeleteLedgerId=3, markDeleteEntryId=1)
    c.properties.add(name="CompactedTopicLedger", value=13)
    out.append(("__compaction", c.SerializeToString()))
    c = mlpb.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=3, markDeleteEntryId=1)
    c.properties.add(name="CompactedTopicLedger", value=-1)  # none recorded
    c.properties.add(name="other", value=99)  # a long property that is not a ledger
    out.append(("props", c.SerializeToString()))
    c = mlpb.ManagedCursorInfo(cursorsLedgerId=14, markDeleteLedgerId=3, markDeleteEntryId=1)
    for key, value in (
        ("#pulsar.internal.delayed.bucket_1_5", "15"),
        ("#pulsar.internal.delayed.bucket_6_9", " 16 "),
        ("#pulsar.internal.delayed.bucket_10_12", "not-a-number"),
        ("#pulsar.internal.delayed.bucket_13_14", "-3"),
        ("unrelated", "17"),
    ):
        c.cursorProperties.add(name=key, value=value)
    out.append(("delayed", c.SerializeToString()))
    return out


def _locator() -> bytes:
    loc = sspb.SchemaLocator()
    loc.info.version, loc.info.position.ledgerId, loc.info.position.entryId, loc.info.hash = 2, 22, 0, b"h"
    for version, lid in ((0, 20), (1, 21)):
        e = loc.index.add(version=version, hash=b"h")
        e.position.ledgerId, e.position.entryId = lid, 0
    return loc.SerializeToString()


def test_cursor_and_schema_references_agree(spark: Any) -> None:
    rows, python = [], set()
    for name, data in _cursors():
        path = f"/managed-ledgers/{ML}/{name}"
        rows.append(cursor_row(ML, name, path, data, None))
        python |= {
            (r.ledger_id, r.component, r.key) for r in refs.cursor_references(decode_cursor(data, path=path))
        }
    frame = schemas.local_frame(spark, schemas.CURSORS, rows)
    got = {
        (r["ledger_id"], r["ref_component"], r["ref_key"]) for r in spark_cursor_references(frame).collect()
    }
    assert got == python
    assert {lid for lid, _, _ in got} == {11, 12, 13, 14, 15, 16}

    data = _locator()
    srows = schema_rows("t/ns/x", "/schemas/t/ns/x", data, None)
    sframe = schemas.local_frame(spark, schemas.SCHEMA_LEDGERS, srows)
    got_s = {r["ledger_id"] for r in spark_schema_references(sframe).collect()}
    want = {r.ledger_id for r in refs.schema_references(decode_schema_locator(data, path="/schemas/t/ns/x"))}
    assert got_s == want == {20, 21, 22}
