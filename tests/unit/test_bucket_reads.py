"""What the bucket-snapshot reads gave, said once: unreachable bookies named in one line."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from ledgerlens.buckets import read_summary, unreadable_table

pytestmark = pytest.mark.unit

ML = "t/ns/persistent/jobs"
A, B = "10.0.0.1:3181", "10.0.0.2:3181"
REFUSED = (
    "bookie {a},{b}: ledger {lid} entry 0: every copy failed ({a}: connect failed: Connection refused; "
    "{b}: connect failed: Connection refused)"
)


def _row(lid: int, cursor: str = "sub", **kw: Any) -> dict[str, Any]:
    row = {
        "managed_ledger": ML, "cursor": cursor, "ledger_id": lid, "start_ledger_id": lid - 10,
        "end_ledger_id": lid - 5, "snapshot_bytes": 2048, "bookies": ["bk-1:3181", "bk-2:3181"],
        "error_kind": None, "error": None,
    }  # fmt: skip
    row.update(kw)
    return row


def _down(lid: int, cursor: str = "sub", a: str = A, b: str = B) -> dict[str, Any]:
    return _row(
        lid, cursor, snapshot_bytes=None, error_kind="unavailable", error=REFUSED.format(a=a, b=b, lid=lid)
    )


def test_every_bookie_down_is_one_line_naming_the_addresses() -> None:
    rows = [_down(lid, cursor) for lid in range(100, 130) for cursor in ("a", "b")]
    summary = read_summary(pd.DataFrame(rows))
    assert summary.bookies_down and summary.read == 0 and summary.unreadable == 60
    assert summary.unreachable == ("10.0.0.1:3181", "10.0.0.2:3181")
    text = summary.markdown("prod ")
    assert "\n" not in text and text.lower().count("connection refused") == 1
    assert "10.0.0.1:3181, 10.0.0.2:3181" in text and "60 bucket snapshots of 2 subscriptions" in text
    assert "Start the bookies" in text
    assert summary.as_dict()["unread_subscriptions"] == [[ML, "a"], [ML, "b"]]
    assert unreadable_table(pd.DataFrame(rows)).empty  # no per-row wall of the same error


def test_some_read_some_not_counts_first_then_the_bookies_and_the_ledgers_of_their_own() -> None:
    rows = [
        _row(100),
        _row(101, snapshot_bytes=1024),
        _down(102, "other", a="bk-9 (10.0.0.9:3181)", b="10.0.0.8:3181"),
        _row(103, error_kind="missing", error="no ledger metadata at /ledgers/00/0000/L0103"),
    ]
    summary = read_summary(pd.DataFrame(rows))
    assert not summary.bookies_down and summary.read == 2 and summary.snapshot_bytes == 3072
    assert summary.subscriptions == [(ML, "sub")] and summary.unread_subscriptions == [(ML, "other")]
    assert summary.unreachable == ("10.0.0.8:3181", "bk-9 (10.0.0.9:3181)")
    text = summary.markdown()
    assert text.startswith("**2** buckets read in **1** subscriptions (3.0 KiB of snapshots)")
    assert "1 could not be read (below)" in text and "1 bucket snapshot could not be read" in text
    table = unreadable_table(pd.DataFrame(rows))
    assert list(table["ledger_id"]) == [103] and list(table["error_kind"]) == ["missing"]


def test_a_connect_timeout_and_an_empty_cluster() -> None:
    error = f"bookie {A}: ledger 7 entry 0: every copy failed ({A}: connect timed out after 5s)"
    summary = read_summary(pd.DataFrame([_row(7, error_kind="unavailable", error=error)]))
    assert summary.unreachable == ("10.0.0.1:3181",) and "(connect timed out after 5s)" in summary.markdown()
    empty = read_summary(pd.DataFrame(columns=list(_row(1))))
    assert not empty.bookies_down and "no delayed-index bucket" in empty.markdown()


def test_explorer_without_bookies_says_so_once_and_draws_nothing() -> None:
    from ledgerlens_widgets import BucketExplorer

    ex = BucketExplorer(pd.DataFrame([_down(lid) for lid in range(100, 120)]), subscription="sub")
    assert ex.value is not None and ex.value.buckets.empty
    assert ex.figures == {} and not ex.output.outputs  # no empty figures
    assert ex.summary.value.count(A) == 1 and ex.summary.value.lower().count("connection refused") == 1
    assert "<b>Bookies unreachable" in ex.summary.value
