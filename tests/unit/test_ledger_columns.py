"""The column-by-column BK_LEDGERS builder gives exactly the rows of the row-by-row decoder.

Large scans (the live scan and the snapshot source) build the ledgers table column by column; every
znode value a cluster can hold (the three format versions, optional fields absent, several ensembles,
custom metadata that is not UTF-8, damaged bytes, a deleted node) must come out as the row
``ledger_row`` gives, errors included.
"""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.protocol.states import ZnodeStat

from ledgerlens import schemas
from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens.sandbox import wire
from ledgerlens.sources.zookeeper import LedgerColumns, ledger_row

ROOT = "/ledgers"
BOOKIES = ["bk-1:3181", "bk-2:3181", "bk-3:3181"]


def _md(**over: Any) -> bk.LedgerMetadataFormat:
    args: dict[str, Any] = {
        "ensemble": BOOKIES[:2],
        "write_quorum": 2,
        "ack_quorum": 2,
        "length": 4096,
        "last_entry_id": 41,
        "ctime_ms": 1_700_000_000_000,
        "custom": {
            "application": "pulsar",
            "component": "managed-ledger",
            "pulsar/managed-ledger": "t/ns/persistent/a%20topic",
        },
        "ctoken": 7,
    }
    args.update(over)
    return wire.ledger_metadata(**args)


def _bare_v3() -> bytes:
    """v3 without the optional fields: no ack quorum, last entry, ctime, digest or custom metadata."""
    md = bk.LedgerMetadataFormat(quorumSize=3, ensembleSize=3, length=0, state=bk.LedgerMetadataFormat.OPEN)
    md.segment.add(firstEntryId=0, ensembleMember=BOOKIES)
    return wire.bk_metadata_v3(md)


VALUES: dict[str, bytes | None] = {
    "v3": wire.bk_metadata_v3(_md()),
    "v3 bare": _bare_v3(),
    "v3 several ensembles": wire.bk_metadata_v3(
        _md(ensembles=[(0, BOOKIES[:2]), (10, [BOOKIES[0], BOOKIES[2]]), (20, BOOKIES[1:])])
    ),
    "v3 binary custom value": wire.bk_metadata_v3(_md(custom={"pulsar/x": b"\xff\xfe", "application": "p"})),
    "v3 schema ledger": wire.bk_metadata_v3(
        _md(custom={"application": "pulsar", "component": "schema", "pulsar/schemaId": "t/ns/s"})
    ),
    "v3 one-byte length": wire.bk_metadata_v3(_md(custom={}, ctoken=None)),
    "v3 three-byte length": wire.bk_metadata_v3(_md(custom={"big": "x" * 20_000})),
    "v3 in recovery": wire.bk_metadata_v3(_md(state="IN_RECOVERY", digest="HMAC", password=b"secret")),
    "v3 trailing bytes": wire.bk_metadata_v3(_md()) + b"\x00\x01",
    "v3 truncated": wire.bk_metadata_v3(_md())[:-5],
    "v3 required field missing": wire.bk_header(3) + wire.varint(2) + b"\x28\x01",
    "v3 garbage body": wire.bk_header(3) + wire.varint(4) + b"\xff\xff\xff\xff",
    "v2": wire.bk_metadata_v2(_md()),
    "v1": wire.bk_metadata_v1(_md()),
    "unknown version": wire.bk_header(9) + b"whatever",
    "no header": b"not metadata at all",
    "empty": b"",
    "deleted": None,
}


def _stat(i: int) -> ZnodeStat:
    return ZnodeStat(0, 0, 1_600_000_000_000 + i, 1_650_000_000_000 + i, i, 0, 0, 0, 0, 0, 0)


def _full(row: dict[str, Any]) -> dict[str, Any]:
    """Every column of the table, absent ones null."""
    return dict(zip(schemas.BK_LEDGERS.names, schemas.to_row(schemas.BK_LEDGERS, row), strict=True))


def _expected(path: str, data: bytes | None, stat: ZnodeStat) -> dict[str, Any]:
    return _full(ledger_row(path, ROOT, data, stat))


def _normalize(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if isinstance(out.get("custom_metadata"), list):  # Arrow hands a map out as (key, value) pairs
        out["custom_metadata"] = dict(out["custom_metadata"])
    return out


@pytest.mark.parametrize("case", list(VALUES))
def test_each_value_gives_the_row_decoders_row(case: str) -> None:
    i = list(VALUES).index(case)
    path = wire.ledger_path(1000 + i, ROOT)
    cols = LedgerColumns()
    cols.add(path, ROOT, None, VALUES[case], _stat(i).ctime, _stat(i).mtime, _stat(i).version)
    got = [_normalize(r) for r in cols.take().to_pylist()]
    want = _normalize(_expected(path, VALUES[case], _stat(i)))
    assert got == [want]
    assert cols.errors == (1 if want["error"] else 0)


def test_a_batch_of_every_kind_and_paths_in_both_layouts() -> None:
    cols = LedgerColumns()
    want = []
    for i, data in enumerate([*VALUES.values()] * 3):
        lid = (1000 + i) if i % 2 else (2**40 + i)  # short and long (hierarchical) layouts
        path = wire.ledger_path(lid, ROOT)
        stat = _stat(i)
        cols.add(path, ROOT, lid if i % 3 else None, data, stat.ctime, stat.mtime, stat.version)
        want.append(_normalize(_expected(path, data, stat)))
    denied = {"path": ROOT + "/00/0000/L0001", "ledger_id": 1, "error": "NoAuthError"}
    cols.add_row(denied)
    want.append(_full(denied))
    batch = cols.take()
    assert [_normalize(r) for r in batch.to_pylist()] == want
    assert len(cols) == 0 and cols.take().num_rows == 0  # taken: the builder starts empty again


def test_a_path_outside_the_layout_is_an_error_row() -> None:
    cols = LedgerColumns()
    cols.add(ROOT + "/00/0000/L12", ROOT, None, VALUES["v3"], 1, 2, 3)
    (row,) = cols.take().to_pylist()
    assert row["ledger_id"] is None and "not a ledger path" in row["error"]
