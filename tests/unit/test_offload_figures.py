"""Offload figures and the topic picker, as data (no front end)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from ledgerlens.offload.figures import STATE_COLORS, bucket_totals_figure, ledger_timeline
from ledgerlens.offload.segments import LEDGER_COLUMNS, STATES
from ledgerlens_widgets import TopicPicker

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
H = 3_600_000
A = "t/ns/persistent/a"
B = "t/other/persistent/b"


def _ledger(ml: str, lid: int, state: str, **kw: Any) -> dict[str, Any]:
    t, ns = ml.split("/")[0], "/".join(ml.split("/")[:2])
    row = dict.fromkeys(LEDGER_COLUMNS)
    row.update(
        managed_ledger=ml, tenant=t, namespace=ns, ledger_id=lid, entries=50, size=1000 * lid,
        ctime_ms=NOW - (10 - lid) * H, timestamp_ms=NOW - (9 - lid) * H, state=state,
        object_keys=[f"u-ledger-{lid}", f"u-ledger-{lid}-index"] if "offload" in state else [],
        object_bytes=900 * lid if "offload" in state else 0, problems=[],
    )  # fmt: skip
    row.update(kw)
    return row


LEDGERS = pd.DataFrame(
    [
        _ledger(A, 1, "offloaded, deleted from BookKeeper"),
        _ledger(A, 2, "corrupt", object_keys=["u-ledger-2"], object_bytes=10),
        _ledger(A, 3, "offloaded"),
        _ledger(A, 4, "BookKeeper only", timestamp_ms=0),  # open
        _ledger(B, 7, "missing", ctime_ms=None),
    ]
)


def test_timeline_one_bar_per_ledger_colored_by_state() -> None:
    fig = ledger_timeline(LEDGERS, A, now_ms=NOW)
    states = [t.name for t in fig.data]
    assert states == [s for s in STATES if s in set(LEDGERS[LEDGERS.managed_ledger == A].state)]
    bars = {y: (t.name, x, t.marker.color) for t in fig.data for y, x in zip(t.y, t.x, strict=True)}
    assert set(bars) == {"ledger 1", "ledger 2", "ledger 3", "ledger 4"}
    assert bars["ledger 2"][0] == "corrupt" and bars["ledger 2"][2] == STATE_COLORS["corrupt"]
    assert bars["ledger 1"][1] == H  # created to closed
    assert bars["ledger 4"][1] == 6 * H  # open: until now
    hover = next(t for t in fig.data if t.name == "offloaded").hovertext[0]
    assert "50 entries" in hover and "2.9 KiB" in hover and "u-ledger-3-index" in hover


def test_timeline_without_ctime_starts_at_the_previous_close_and_empty_topic() -> None:
    fig = ledger_timeline(LEDGERS, B, now_ms=NOW)
    assert [t.name for t in fig.data] == ["missing"]
    empty = ledger_timeline(LEDGERS, "x/y/persistent/none", now_ms=NOW)
    assert not empty.data and "no ledger" in empty.layout.annotations[0].text


def test_bucket_totals_figure() -> None:
    totals = {
        "objects": 9,
        "object_bytes": 5000,
        "bytes_by_state": {"offloaded": 3000, "corrupt": 10, "BookKeeper only": 0},
        "orphan_bytes": 700,
        "double_stored_bytes": 3000,
        "foreign_bytes": 0,
        "corrupt_bytes": 10,
        "incomplete_bytes": 0,
    }
    fig = bucket_totals_figure(totals)
    by_state, problems = fig.data
    assert list(by_state.x) == ["offloaded", "corrupt"] and list(by_state.y) == [3000, 10]
    assert list(problems.x) == ["orphan", "double-stored past the lag", "corrupt"]
    assert "4.9 KiB in 9 objects" in fig.layout.title.text
    assert not bucket_totals_figure({"objects": 0}).data


def test_topic_picker_drives_the_timeline() -> None:
    picker = TopicPicker(LEDGERS, now_ms=NOW, key="t")
    assert picker.value == A  # the largest topic first
    assert {t.name for t in picker.figure.data} >= {"corrupt", "offloaded"}
    picker.tenant.value = "t"
    picker.namespace.value = "t/other"
    assert picker.value == B and [t.name for t in picker.figure.data] == ["missing"]
    assert "ledger" in picker.table.value and ">7<" in picker.table.value
    again = TopicPicker(LEDGERS, now_ms=NOW, namespace="t/ns", tenant="t", topic=A, key="t")
    assert again.value == A and len(again.selected_ledgers()) == 4
