from __future__ import annotations

import pytest

from ledgerlens.errors import DecodeError
from ledgerlens.formats.paths import (
    is_ledger_level1,
    is_special_znode,
    ledger_id_from_path,
    ledger_path,
    long_ledger_path,
    short_ledger_path,
)

pytestmark = pytest.mark.unit


# Worked examples of FORMATS.md section 3 (hierarchical/hybrid, root /ledgers).
@pytest.mark.parametrize(
    ("ledger_id", "path"),
    [
        (12345, "/ledgers/00/0001/L2345"),
        (3000000000, "/ledgers/000/0000/0030/0000/L0000"),
    ],
)
def test_worked_examples(ledger_id, path):
    assert ledger_path(ledger_id) == path
    assert ledger_id_from_path(path) == ledger_id


def test_boundary_int_max_uses_long_path():
    assert ledger_path(2147483646) == "/ledgers/21/4748/L3646"
    assert ledger_path(2147483647) == "/ledgers/000/0000/0021/4748/L3647"
    assert ledger_id_from_path("/ledgers/000/0000/0021/4748/L3647") == 2147483647
    assert ledger_id_from_path("/ledgers/21/4748/L3646") == 2147483646


def test_short_and_long_explicit():
    assert short_ledger_path(0) == "/ledgers/00/0000/L0000"
    assert long_ledger_path(12345) == "/ledgers/000/0000/0000/0001/L2345"
    assert ledger_id_from_path(long_ledger_path(12345)) == 12345
    assert short_ledger_path(9_999_999_999) == "/ledgers/99/9999/L9999"
    with pytest.raises(DecodeError):
        short_ledger_path(10_000_000_000)


def test_max_ledger_id():
    top = (1 << 63) - 1
    assert ledger_path(top) == "/ledgers/922/3372/0368/5477/L5807"
    assert ledger_id_from_path(ledger_path(top)) == top
    with pytest.raises(DecodeError):
        ledger_id_from_path("/ledgers/999/9999/9999/9999/L9999")


def test_custom_root():
    assert ledger_path(12345, root="/pulsar/ledgers/") == "/pulsar/ledgers/00/0001/L2345"
    assert ledger_id_from_path("/pulsar/ledgers/00/0001/L2345", root="/pulsar/ledgers") == 12345


@pytest.mark.parametrize("ledger_id", [0, 1, 99, 12345, 2147483646, 2147483647, 3000000000, 10**15])
def test_round_trip(ledger_id):
    assert ledger_id_from_path(ledger_path(ledger_id)) == ledger_id


@pytest.mark.parametrize(
    "path",
    [
        "/ledgers/00/0001/2345",
        "/ledgers/00/0001/L234",
        "/ledgers/00/0001",
        "/ledgers/available",
        "/other/00/0001/L2345",
        "/ledgers/00/0001/L2345/x",
        "/ledgers/0a/0001/L2345",
        "/ledgers/000/0001/L2345",
        "/ledgers/00/٠٠٠١/L2345",
    ],
)
def test_not_ledger_paths(path):
    with pytest.raises(DecodeError) as info:
        ledger_id_from_path(path)
    assert info.value.where == path


def test_negative_id():
    with pytest.raises(DecodeError):
        ledger_path(-1)


@pytest.mark.parametrize(
    "name",
    ["available", "cookies", "LAYOUT", "INSTANCEID", "underreplication", "idgen", "idgen-long", "ID-0001"],
)
def test_special(name):
    assert is_special_znode(name)


@pytest.mark.parametrize("name", ["00", "123", "L0001", "layout", "idgenx"])
def test_not_special(name):
    assert not is_special_znode(name)


def test_level1():
    assert is_ledger_level1("00") and is_ledger_level1("000") and is_ledger_level1("92")
    assert not is_ledger_level1("0") and not is_ledger_level1("0000") and not is_ledger_level1("ab")
    assert not is_ledger_level1("available")
