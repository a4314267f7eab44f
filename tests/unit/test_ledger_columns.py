"""The column-by-column BK_LEDGERS builder gives exactly the rows of the row-by-row decoder.

Large scans (the live scan and the snapshot source) build the ledgers table column by column; every
znode value a cluster can hold (the three format versions, optional fields absent, several ensembles,
custom metadata that is not UTF-8, damaged bytes, a deleted node) must come out as the row
``ledger_row`` gives, errors included. The compiled fast path (``formats/_ledgerwire.c``) must
append exactly what the Python path appends for any bytes, or decline them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.protocol.states import ZnodeStat

from ledgerlens.inventory import schemas
from ledgerlens.inventory.rows import LedgerColumns, ledger_row
from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens_sandbox import wire

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


# -- the compiled fast path (lib/ledgerlens/formats/_ledgerwire.c) ------------------------------------


def test_the_compiled_decoder_is_built_and_takes_the_common_case() -> None:
    from ledgerlens.formats import _ledgerwire  # built by `make setup` (pip install -e .)

    assert _ledgerwire.Appender is not None
    cols = LedgerColumns()
    assert cols.compiled
    stat = _stat(1)
    path = wire.ledger_path(77, ROOT)
    fast = cols._fast
    assert fast is not None and fast.add(path, ROOT, None, VALUES["v3"], stat.ctime, stat.mtime, 1)
    declined = (
        "v2",
        "v3 binary custom value",
        "v3 three-byte length",
        "v3 required field missing",
        "deleted",
    )
    for case in declined:
        assert not fast.add(path, ROOT, None, VALUES[case], stat.ctime, stat.mtime, 1), case
    assert len(cols) == 1  # declined values append nothing: the Python decoder takes them


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return wire.varint(number << 3 | wire_type) + payload


def _len(number: int, payload: bytes) -> bytes:
    return _field(number, 2, wire.varint(len(payload)) + payload)


def _int(number: int, value: int) -> bytes:
    return _field(number, 0, wire.varint(value & (2**64 - 1)))


_TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            "bk-1:3181",
            "bk-2:3181",
            "application",
            "component",
            "pulsar/managed-ledger",
            "pulsar/cursor",
            "pulsar",
            "managed-ledger",
            "t/ns/persistent/x",
        ]
    ),
    st.text(max_size=12),
).map(lambda s: s.encode("utf-8", "surrogatepass"))
_BLOB = st.one_of(_TEXT, st.binary(max_size=8))
_NUMBER = st.one_of(st.integers(-3, 5), st.integers(-(2**63), 2**64 - 1))


@st.composite
def _fields(draw: st.DrawFn) -> bytes:
    """One encoded LedgerMetadataFormat field, well formed or not."""
    kind = draw(st.integers(0, 9))
    if kind <= 3:  # a scalar: quorum, ensemble, length, last entry, state, digest, ack, ctime, cToken
        return _int(draw(st.sampled_from([1, 2, 3, 4, 5, 7, 9, 10, 12])), draw(_NUMBER))
    if kind == 4:  # a segment
        parts = [_len(1, m) for m in draw(st.lists(_TEXT, max_size=4))]
        if draw(st.booleans()) or draw(st.booleans()):
            parts.append(_int(2, draw(_NUMBER)))
        if draw(st.integers(0, 9)) == 0:
            parts.append(_int(draw(st.integers(3, 40)), 1))
        return _len(6, b"".join(draw(st.permutations(parts))))
    if kind == 5:  # a custom metadata entry
        parts = []
        if draw(st.integers(0, 5)):
            parts.append(_len(1, draw(_TEXT)))
        if draw(st.integers(0, 5)):
            parts.append(_len(2, draw(_BLOB)))
        return _len(11, b"".join(parts))
    if kind == 6:
        return _len(8, draw(st.binary(max_size=4)))  # password
    if kind == 7:  # an unknown field of any wire type
        number = draw(st.integers(13, 2**29 + 5))
        wt = draw(st.sampled_from([0, 1, 2, 5, 3]))
        payload = {0: wire.varint(5), 1: b"\0" * 8, 2: wire.varint(2) + b"ab", 5: b"\0" * 4, 3: b""}[wt]
        return _field(number, wt, payload)
    if kind == 8:  # a known field with the wrong wire type
        return _field(draw(st.sampled_from([1, 5, 6, 11])), draw(st.sampled_from([0, 1, 2, 5])), b"\x01" * 8)
    return draw(st.binary(max_size=6))  # noise


@st.composite
def _values(draw: st.DrawFn) -> bytes:
    required = [
        _int(1, draw(st.integers(1, 5))),
        _int(2, draw(st.integers(1, 5))),
        _int(3, draw(_NUMBER)),
        _int(5, draw(st.integers(1, 3))),
    ]
    if draw(st.integers(0, 7)) == 0:  # some required fields missing
        required = draw(st.lists(st.sampled_from(required), max_size=4))
    body = b"".join(draw(st.permutations([*required, *draw(st.lists(_fields(), max_size=8))])))
    prefix = wire.varint(len(body))
    if draw(st.integers(0, 9)) == 0:
        prefix = draw(st.sampled_from([wire.varint(len(body) + 1), b"\x80" + prefix, b""]))
    value = wire.bk_header(3) + prefix + body
    if draw(st.integers(0, 9)) == 0:
        value = value[: draw(st.integers(0, len(value)))]
    return value


_PATHS = st.one_of(
    st.integers(0, 2**63 - 1).map(lambda i: wire.ledger_path(i, ROOT)),
    st.sampled_from(
        [
            ROOT + "/00/0000/L12",
            ROOT + "/999/9999/9999/9999/L9999",
            "/other/00/0000/L0001",
            ROOT + "/0a/0000/L0001",
            ROOT + "//00/0000/L0001",
            ROOT + "/00/0000/L000١",
        ]
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(_PATHS, _values(), st.booleans(), st.sampled_from([ROOT, ROOT + "/", ROOT + "//"])),
        min_size=1,
        max_size=6,
    )
)
def test_the_compiled_path_appends_what_the_python_path_appends(rows: list) -> None:
    compiled, python = LedgerColumns(), LedgerColumns(compiled=False)
    assert compiled.compiled and not python.compiled
    for i, (path, value, known_id, root) in enumerate(rows):
        lid = 12345 if known_id else None
        for cols in (compiled, python):
            cols.add(path, root, lid, value, 1_600_000_000_000 + i, 1_650_000_000_000 + i, i)
    assert compiled.errors == python.errors
    assert compiled.take().to_pylist() == python.take().to_pylist()
