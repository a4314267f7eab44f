"""Words and units people read: binary byte units, durations, times, severities.

Every view (report, widgets, CLI, figures) formats through these, so a size or an age reads the
same everywhere.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

SEVERITY_ORDER = ("critical", "warning", "info")
SEVERITY_COLORS = {"critical": "#c0392b", "warning": "#b9770e", "info": "#5d6d7e"}
"""Text-safe colours (contrast on white) by severity."""

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def is_missing(value: Any) -> bool:
    """None, NaN, ``pd.NA`` and ``pd.NaT`` are missing."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN, NaT
    except (TypeError, ValueError):  # pd.NA refuses bool()
        return True


def human_bytes(n: float | int | None) -> str:
    """``1536`` -> ``'1.5 KiB'`` (binary units); null or NaN -> ``''``."""
    if n is None or is_missing(n):
        return ""
    value = float(n)
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"  # pragma: no cover


def human_duration(seconds: float | int | None) -> str:
    """``90`` -> ``'1.5 min'``, ``7200`` -> ``'2.0 h'``, ``3 * 86400`` -> ``'3.0 d'``; null -> ``''``."""
    if seconds is None or is_missing(seconds):
        return ""
    s = float(seconds)
    if abs(s) < 60:
        return f"{s:.0f} s" if s == int(s) or abs(s) >= 10 else f"{s:.1f} s"
    if abs(s) < 3600:
        return f"{s / 60:.1f} min"
    if abs(s) < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def human_time(ms: int | None) -> str:
    """Epoch milliseconds -> ``'2026-11-22 03:00 UTC'``; null -> ``''``."""
    if ms is None or is_missing(ms):
        return ""
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def iso_time(ms: int | None) -> str:
    """Epoch milliseconds -> ``'2026-11-22T03:00:00Z'``; null -> ``''``."""
    if ms is None or is_missing(ms):
        return ""
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``plural(1, 'finding')`` -> ``'1 finding'``; ``plural(3, 'finding')`` -> ``'3 findings'``."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def severity_rank(severity: str | None) -> int:
    """critical -> 0, warning -> 1, info -> 2, anything else -> 3."""
    try:
        return SEVERITY_ORDER.index(str(severity))
    except ValueError:
        return len(SEVERITY_ORDER)


DATA_LOSS_KINDS = frozenset({"missing_ledger", "missing_offload_object", "remote_segment_missing_object"})
"""Kinds that, when critical, mean data is already gone (the metadata names storage that is not there)."""

ONLY_COPY_KINDS = frozenset({"corrupt_offload_object"})
"""Data loss when critical: the damaged object is the only copy (its BookKeeper copy is deleted)."""

IMPACT_TIERS = ("data loss", "critical", "warning", "info")


def impact_tier(kind: str | None, severity: str | None) -> int:
    """0 data loss, 1 other critical, 2 warning, 3 info, 4 anything else.

    Data loss: a critical finding of a kind in ``DATA_LOSS_KINDS`` or ``ONLY_COPY_KINDS`` (a
    ``missing_offload_object`` downgraded to warning, a corrupt object whose BookKeeper copy still
    exists, rank as warnings). Every view orders by this tier first, then bytes, largest first.
    """
    rank = severity_rank(severity)
    if rank == 0 and (kind in DATA_LOSS_KINDS or kind in ONLY_COPY_KINDS):
        return 0
    return rank + 1


def finite(value: Any) -> float | None:
    """A float, or None for missing / non-numeric values."""
    if value is None or is_missing(value):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
