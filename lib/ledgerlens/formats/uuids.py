"""Java ``java.util.UUID`` as Pulsar stores it: two signed 64-bit halves (most, least significant).

The managed-ledger metadata (an offload context's ``uidMsb``/``uidLsb``) and the offload objects'
keys both name an offload by this UUID.
"""

from __future__ import annotations

import uuid as _uuid

from ledgerlens.errors import DecodeError

_U64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    value &= _U64
    return value - (1 << 64) if value >= 1 << 63 else value


def uuid_from_bits(msb: int, lsb: int) -> str:
    """Return Java ``new UUID(msb, lsb).toString()`` for two (signed or unsigned) 64-bit ints."""
    return str(_uuid.UUID(int=((msb & _U64) << 64) | (lsb & _U64)))


def uuid_to_bits(uuid: str) -> tuple[int, int]:
    """Return the signed (msb, lsb) pair of a UUID string, as Java ``UUID.fromString`` would.

    Raises
    ------
    DecodeError
        When ``uuid`` is not a UUID.
    """
    try:
        value = _uuid.UUID(uuid).int
    except (ValueError, AttributeError, TypeError) as exc:
        raise DecodeError(str(uuid), f"not a UUID: {exc}") from exc
    return _signed64(value >> 64), _signed64(value)
