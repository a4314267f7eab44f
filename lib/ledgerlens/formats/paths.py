"""ZooKeeper layout of BookKeeper ledgers (FORMATS.md section 3).

Hierarchical (hybrid) layout: ids below ``2147483647`` use the short path ``/ab/cdef/Lghij`` of
``%010d``; larger ids use the long path ``/abc/defg/hijk/lmno/Lpqrs`` of ``%019d``.
"""

from __future__ import annotations

import re

from ledgerlens.errors import DecodeError

DEFAULT_ROOT = "/ledgers"
INT_MAX = 2147483647
MAX_LEDGER_ID = (1 << 63) - 1

SPECIAL_ZNODES = frozenset(
    {"available", "cookies", "LAYOUT", "INSTANCEID", "underreplication", "idgen", "idgen-long"}
)
_LEVEL1 = re.compile(r"[0-9]{2,3}")
_SHORT = re.compile(r"([0-9]{2})/([0-9]{4})/L([0-9]{4})")
_LONG = re.compile(r"([0-9]{3})/([0-9]{4})/([0-9]{4})/([0-9]{4})/L([0-9]{4})")


def _check_id(ledger_id: int) -> None:
    if not isinstance(ledger_id, int) or isinstance(ledger_id, bool) or not 0 <= ledger_id <= MAX_LEDGER_ID:
        raise DecodeError(str(ledger_id), "not a ledger id (must be an int in 0..2^63-1)")


def _root(root: str) -> str:
    return root.rstrip("/")


def short_ledger_path(ledger_id: int, root: str = DEFAULT_ROOT) -> str:
    """Return the legacy (short) hierarchical path of a ledger: ``root/ab/cdef/Lghij``."""
    _check_id(ledger_id)
    s = f"{ledger_id:010d}"
    if len(s) != 10:
        raise DecodeError(str(ledger_id), "ledger id does not fit the short (10-digit) hierarchical path")
    return f"{_root(root)}/{s[0:2]}/{s[2:6]}/L{s[6:10]}"


def long_ledger_path(ledger_id: int, root: str = DEFAULT_ROOT) -> str:
    """Return the long hierarchical path of a ledger: ``root/abc/defg/hijk/lmno/Lpqrs``."""
    _check_id(ledger_id)
    s = f"{ledger_id:019d}"
    return f"{_root(root)}/{s[0:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:19]}"


def ledger_path(ledger_id: int, root: str = DEFAULT_ROOT) -> str:
    """Return the znode path of a ledger as the (hybrid) hierarchical ledger manager stores it.

    Parameters
    ----------
    ledger_id : int
        Non-negative ledger id.
    root : str
        The ledgers root, ``/ledgers`` by default.
    """
    if isinstance(ledger_id, int) and ledger_id < INT_MAX:
        return short_ledger_path(ledger_id, root)
    return long_ledger_path(ledger_id, root)


def ledger_id_from_path(path: str, root: str = DEFAULT_ROOT) -> int:
    """Return the ledger id of a ledger znode path (short or long layout).

    Raises
    ------
    DecodeError
        When ``path`` is not a ledger path under ``root``.
    """
    prefix = _root(root) + "/"
    if not path.startswith(prefix):
        raise DecodeError(path, f"not a ledger path: not under {_root(root)!r}")
    rest = path[len(prefix) :]
    m = _SHORT.fullmatch(rest) or _LONG.fullmatch(rest)
    if m is None:
        raise DecodeError(
            path, "not a ledger path: expected /NN/NNNN/LNNNN or /NNN/NNNN/NNNN/NNNN/LNNNN under the root"
        )
    value = int("".join(m.groups()))
    if value > MAX_LEDGER_ID:
        raise DecodeError(path, f"ledger id {value} is larger than 2^63-1")
    return value


def is_special_znode(name: str) -> bool:
    """True for the non-ledger children of the ledgers root (``available``, ``cookies``, ``ID-*``...)."""
    return name in SPECIAL_ZNODES or name.startswith("ID-")


def is_ledger_level1(name: str) -> bool:
    """True for a first-level directory of ledger paths (2 digits short, 3 digits long)."""
    return _LEVEL1.fullmatch(name) is not None
