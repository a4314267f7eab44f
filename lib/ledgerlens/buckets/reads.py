"""Which bucket snapshots were read, and why the others were not, said once.

A ``bucket_snapshots`` row that could not be read carries its own error text. When the bookies are
down every row says the same thing (``connect failed: Connection refused`` for each bookie of each
ledger): :func:`read_summary` folds those rows into the bookies that could not be reached and one
sentence of what to do (:meth:`ReadSummary.markdown`), and leaves the other errors (a missing
snapshot ledger, a corrupt or still open one), which concern one ledger each, to
:func:`unreadable_table`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ledgerlens.report.text import human_bytes

__all__ = ["ReadSummary", "read_summary", "unreadable_table"]

UNREACHABLE = "unavailable"  # the error_kind of a snapshot no bookie of its ensemble answered for

# one attempt of ``EntryReadError``: "every copy failed (LABEL: PROBLEM; LABEL: PROBLEM)", where a
# LABEL is ``host:port`` or ``id (host:port)`` and an unreachable bookie's PROBLEM starts "connect"
_ATTEMPT = re.compile(
    r"(?:\(|; )(?P<bookie>[^;()]+?(?: \([^()]+\))?): "
    r"(?P<problem>connect (?:failed: [^;()]+|timed out after [0-9.]+s)"
    r"|not host:port and no /ledgers/available registration names an address)"
)


@dataclass(frozen=True)
class ReadSummary:
    """What the bookie reads of the bucket snapshots gave.

    ``unreachable``: the bookies (addresses as dialled) no read could connect to, and ``problems``
    what each connect said; ``unread_subscriptions``: subscriptions none of whose snapshots was read.
    """

    read: int
    unreadable: int
    snapshot_bytes: int
    subscriptions: list[tuple[str, str]]
    unread_subscriptions: list[tuple[str, str]]
    by_kind: dict[str, int] = field(default_factory=dict)
    unreachable: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def bookies_down(self) -> bool:
        """Nothing was read, and every snapshot failed because its bookies could not be reached."""
        return self.read == 0 and self.unreadable > 0 and set(self.by_kind) == {UNREACHABLE}

    def bookie_line(self) -> str:
        """One sentence: which bookies could not be reached, how, and what to do; '' when all were."""
        n = self.by_kind.get(UNREACHABLE, 0)
        if not n:
            return ""
        names = ", ".join(self.unreachable) or "the bookies of the snapshot ledgers"
        how = "; ".join(_plain(p) for p in self.problems)
        subs = len(self.unread_subscriptions)
        what = (
            f"none of the {_count(n, 'bucket snapshot')} of {_count(subs, 'subscription')} could be read"
            if self.bookies_down
            else f"{_count(n, 'bucket snapshot')} could not be read"
        )
        return (
            f"**Bookies unreachable: {names}**" + (f" ({how})" if how else "") + f": {what}. "
            "Start the bookies, or run this notebook on a machine that reaches them (the addresses come "
            "from the ledgers' ensembles and `/ledgers/available`), then run it again."
        )

    def markdown(self, title: str = "") -> str:
        """The read's one line: the bookie line alone when nothing was read, else the counts first."""
        if self.bookies_down:
            return self.bookie_line()
        if not self.read and not self.unreadable:
            return f"**{title}no delayed-index bucket** (no subscription of this cluster has sealed one)."
        line = (
            f"**{title}{self.read}** buckets read in **{len(self.subscriptions)}** subscriptions "
            f"({human_bytes(self.snapshot_bytes)} of snapshots)"
        )
        others = self.unreadable - self.by_kind.get(UNREACHABLE, 0)
        if others:
            line += f"; {others} could not be read (below)"
        line += "."
        bookies = self.bookie_line()
        return line + (" " + bookies if bookies else "")

    def as_dict(self) -> dict[str, Any]:
        """For ``report.record``: counts, the bookies that could not be reached, the unread subscriptions."""
        return {
            "read": self.read,
            "unreadable": self.unreadable,
            "by_kind": dict(self.by_kind),
            "unreachable": list(self.unreachable),
            "problems": list(self.problems),
            "bookies_down": self.bookies_down,
            "unread_subscriptions": [list(p) for p in self.unread_subscriptions],
        }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _plain(problem: str) -> str:
    """``connect failed: Connection refused`` -> ``connection refused``."""
    p = problem.removeprefix("connect failed: ").strip()
    return p[:1].lower() + p[1:]


def _unreachable(errors: pd.Series, ensembles: pd.Series) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The bookies named unreachable in the error texts (else the ensembles' ids), and the problems."""
    bookies: dict[str, None] = {}
    problems: dict[str, None] = {}
    for text in errors.dropna().astype(str):
        for m in _ATTEMPT.finditer(text):
            bookies[m.group("bookie").strip()] = None
            problems[m.group("problem").strip()] = None
    if not bookies:
        for ids in ensembles.dropna():
            bookies.update(dict.fromkeys(str(b) for b in ids))
    return tuple(sorted(bookies)), tuple(sorted(problems))


def _pairs(df: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(str(m), str(c)) for m, c in zip(df["managed_ledger"], df["cursor"], strict=True)})


def read_summary(snapshots: pd.DataFrame) -> ReadSummary:
    """Fold the ``bucket_snapshots`` rows (pandas) into what was read and why the rest was not."""
    if snapshots.empty:
        return ReadSummary(0, 0, 0, [], [])
    failed = snapshots["error"].notna() if "error" in snapshots else pd.Series(False, index=snapshots.index)
    ok, bad = snapshots[~failed], snapshots[failed]
    read_pairs = _pairs(ok)
    kinds = bad["error_kind"] if "error_kind" in bad else pd.Series(None, bad.index, dtype=object)
    kinds = kinds.fillna("error")  # a row without a kind is shown as it is (unreadable_table)
    down = bad[kinds == UNREACHABLE]
    ensembles = down["bookies"] if "bookies" in down else pd.Series(dtype=object)
    unreachable, problems = _unreachable(down["error"], ensembles) if len(down) else ((), ())
    return ReadSummary(
        read=len(ok),
        unreadable=len(bad),
        snapshot_bytes=int(pd.to_numeric(ok["snapshot_bytes"], errors="coerce").fillna(0).sum())
        if "snapshot_bytes" in ok
        else 0,
        subscriptions=read_pairs,
        unread_subscriptions=[p for p in _pairs(bad) if p not in set(read_pairs)],
        by_kind={str(k): int(n) for k, n in kinds.value_counts().items()},
        unreachable=unreachable,
        problems=problems,
    )


def unreadable_table(snapshots: pd.DataFrame) -> pd.DataFrame:
    """The snapshots that could not be read for a reason of their own (missing, corrupt, open): one
    row each. Those whose bookies could not be reached are left out (:meth:`ReadSummary.bookie_line`)."""
    cols = ["managed_ledger", "cursor", "ledger_id", "error_kind", "error"]
    if snapshots.empty or "error" not in snapshots:
        return pd.DataFrame(columns=cols)
    bad = snapshots[snapshots["error"].notna()]
    if "error_kind" in bad:
        bad = bad[bad["error_kind"].fillna("error") != UNREACHABLE]
    out = bad.reindex(columns=cols).reset_index(drop=True)
    return out.assign(error_kind=out["error_kind"].fillna("error"))
