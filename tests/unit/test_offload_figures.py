"""Offload figures and the topic picker, as data (no front end)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from ledgerlens.offload.figures import STATE_COLORS, bucket_totals_figure, byte_unit, ledger_timeline
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
    states = [t.name for t in fig.data if t.type == "bar"]
    assert states == [s for s in STATES if s in set(LEDGERS[LEDGERS.managed_ledger == A].state)]
    bars = {
        y: (t.name, x, t.marker.color)
        for t in fig.data
        if t.type == "bar"
        for y, x in zip(t.y, t.x, strict=True)
    }
    assert set(bars) == {"ledger 1", "ledger 2", "ledger 3", "ledger 4"}
    assert bars["ledger 2"][0] == "corrupt" and bars["ledger 2"][2] == STATE_COLORS["corrupt"]
    assert bars["ledger 1"][1] == H  # created to closed
    assert bars["ledger 4"][1] == 6 * H  # open: until now
    hover = next(t for t in fig.data if t.name == "offloaded").hovertext[0]
    assert "50 entries" in hover and "2.9 KiB" in hover and "u-ledger-3-index" in hover
    critical = fig.data[-1]  # the corrupt ledger is marked as well as drawn
    assert (
        critical.type == "scatter" and list(critical.y) == ["ledger 2"] and list(critical.text) == ["corrupt"]
    )


def test_timeline_without_ctime_starts_at_the_previous_close_and_empty_topic() -> None:
    fig = ledger_timeline(LEDGERS, B, now_ms=NOW)
    assert [t.name for t in fig.data] == ["missing", "missing or corrupt (critical)"]
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
    assert list(by_state.x) == ["offloaded", "corrupt"] and list(by_state.customdata) == [3000, 10]
    assert list(by_state.y) == [3000 / 1024, 10 / 1024]  # in KiB, the unit of the largest bar
    assert list(by_state.text) == ["2.9 KiB", "10 B"]  # each bar labelled with its exact size
    assert list(problems.x) == ["orphan", "double-stored past the lag", "corrupt"]
    assert "4.9 KiB in 9 objects" in fig.layout.title.text
    assert not bucket_totals_figure({"objects": 0}).data


@pytest.mark.parametrize("top", [900, 3000, 1.5 * 2**20, 700 * 2**20, 5 * 2**30])
def test_bucket_totals_size_axis_reads_in_one_unit(top: float) -> None:
    totals = {"objects": 3, "object_bytes": int(top), "bytes_by_state": {"offloaded": int(top)},
              "orphan_bytes": int(top) // 3, "foreign_bytes": 200}  # fmt: skip
    fig = bucket_totals_figure(totals)
    unit, factor = byte_unit(top)
    axis = fig.layout.yaxis
    assert axis.title.text.endswith(f"({unit})")
    labels = list(axis.ticktext)
    assert len(labels) >= 3 and {t.split()[-1] for t in labels} == {unit}  # no '512 KiB' next to '1 MiB'
    assert [float(t.split()[0].replace(",", "")) for t in labels] == pytest.approx(list(axis.tickvals))
    assert max(axis.tickvals) >= max(max(t.y) for t in fig.data)  # the ticks span the bars
    for trace in fig.data:  # the bars' heights are in the axis' unit, their exact bytes in customdata
        assert [y * factor for y in trace.y] == pytest.approx(list(trace.customdata))


def test_missing_ledger_has_a_visible_labelled_marker() -> None:
    """A missing ledger holds no byte in the bucket: a zero-height bar would hide it."""
    totals = {
        "objects": 4,
        "object_bytes": 3 * 2**20,
        "bytes_by_state": {"offloaded, deleted from BookKeeper": 3 * 2**20, "missing": 0},
        "ledgers_by_state": {"offloaded, deleted from BookKeeper": 4, "missing": 1},
    }
    fig = bucket_totals_figure(totals)
    marker = next(t for t in fig.data if t.type == "scatter")
    assert list(marker.x) == ["missing"] and list(marker.text) == ["missing: 1 ledger"]
    assert marker.marker.symbol == "x" and marker.marker.size >= 10 and marker.cliponaxis is False
    assert list(marker.marker.color) == [STATE_COLORS["missing"]] and "text" in marker.mode
    assert "missing" in list(fig.data[0].x)  # its category is on the axis, in the states' order
    only_missing = bucket_totals_figure({"bytes_by_state": {}, "ledgers_by_state": {"missing": 2}})
    assert [t.type for t in only_missing.data][-1] == "scatter"  # not "no offloaded bytes"
    # a timeline marks it too, at its close, however short its bar
    timeline = ledger_timeline(LEDGERS, B, now_ms=NOW)
    mark = timeline.data[-1]
    assert list(mark.y) == ["ledger 7"] and list(mark.text) == ["missing"] and mark.marker.symbol == "x"
    closed = pd.Timestamp(NOW - 2 * H, unit="ms", tz="UTC")
    assert list(mark.x) == [closed.strftime("%Y-%m-%d %H:%M:%S.%f")]


def test_topic_picker_drives_the_timeline() -> None:
    picker = TopicPicker(LEDGERS, now_ms=NOW, key="t")
    assert picker.value == A  # the largest topic first
    assert {t.name for t in picker.figure.data} >= {"corrupt", "offloaded"}
    picker.tenant.value = "t"
    picker.namespace.value = "t/other"
    assert picker.value == B and [t.name for t in picker.figure.data][0] == "missing"
    assert "ledger" in picker.table.value and ">7<" in picker.table.value
    again = TopicPicker(LEDGERS, now_ms=NOW, namespace="t/ns", tenant="t", topic=A, key="t")
    assert again.value == A and len(again.selected_ledgers()) == 4
