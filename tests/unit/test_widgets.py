"""FindingsExplorer driven headless: set control values, assert on ``.value`` and totals."""

from __future__ import annotations

import ipywidgets as w
import pandas as pd
import pytest

from ledgerlens.inventory.schemas import FINDINGS, columns
from ledgerlens_widgets import FindingsExplorer

pytestmark = pytest.mark.unit

H = 3600


def findings(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns(FINDINGS))


@pytest.fixture
def df() -> pd.DataFrame:
    return findings(
        [
            dict(
                kind="orphan_ledger",
                severity="warning",
                component="managed-ledger",
                ledger_id=11,
                managed_ledger="a/x/persistent/t1",
                bytes=1000,
                tenant="a",
                namespace="a/x",
                age_seconds=48 * H,
                action="delete_ledger",
            ),
            dict(
                kind="orphan_ledger",
                severity="warning",
                component="cursor",
                ledger_id=12,
                managed_ledger="b/y/persistent/t2",
                cursor="sub",
                bytes=500,
                tenant="b",
                namespace="b/y",
                age_seconds=30 * H,
                action="delete_ledger",
            ),
            dict(
                kind="orphan_offload_object",
                severity="warning",
                component="offload",
                ledger_id=13,
                object_key="u1-ledger-13",
                bytes=4000,
                tenant="a",
                namespace="a/z",
                age_seconds=240 * H,
                action="delete_object",
            ),
            dict(
                kind="missing_ledger",
                severity="critical",
                component="managed-ledger",
                ledger_id=14,
                managed_ledger="a/x/persistent/t3",
                bytes=None,
                tenant="a",
                namespace="a/x",
                age_seconds=None,
                action="investigate",
            ),
            dict(
                kind="unattributed_ledger",
                severity="info",
                ledger_id=15,
                bytes=50,
                age_seconds=900 * H,
                action="none",
            ),
        ]
    )


def test_unfiltered_value_is_everything_in_default_order(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df)
    assert isinstance(ex.widget, w.Widget)
    assert ex.count == 5 and len(ex.value) == 5
    assert ex.total_bytes == 5550
    # severity first (critical first), then bytes largest first
    assert ex.value["ledger_id"].tolist() == [14, 13, 11, 12, 15]
    assert "5</b> of 5 findings" in ex.totals.value
    assert "<table" in ex.table_text() and "persistent://a/x/t1" in ex.table_text()


def test_filters_by_driving_controls(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df)
    ex.kinds.value = ("orphan_ledger",)
    assert ex.value["ledger_id"].tolist() == [11, 12]
    assert ex.total_bytes == 1500
    assert "1.5 KiB" in ex.totals.value
    ex.kinds.value = ()
    ex.severities.value = ("warning", "critical")
    assert set(ex.value["ledger_id"]) == {11, 12, 13, 14}
    ex.components.value = ("managed-ledger",)
    assert set(ex.value["ledger_id"]) == {11, 14}
    ex.namespaces.value = ("a/x",)
    ex.min_bytes.value = 1
    assert ex.value["ledger_id"].tolist() == [11]  # null bytes drop out once a minimum is set
    ex.clear_filters()
    assert ex.count == 5


def test_min_age_and_search(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df)
    ex.min_age_hours.value = 36
    assert set(ex.value["ledger_id"]) == {11, 13, 15}
    ex.min_age_hours.value = 0
    ex.search.value = "T2"
    assert ex.value["ledger_id"].tolist() == [12]
    ex.search.value = "u1-ledger"
    assert ex.value["ledger_id"].tolist() == [13]
    # topic names as people write them, and what the table shows (ledger id, reason)
    ex.search.value = "persistent://b/y/t2"
    assert ex.value["ledger_id"].tolist() == [12]
    ex.search.value = "persistent://a/x/"
    assert ex.value["ledger_id"].tolist() == [14, 11]
    ex.search.value = "15"
    assert 15 in ex.value["ledger_id"].tolist()
    ex.search.value = "does not exist in bookkeeper"
    assert ex.value["ledger_id"].tolist() == [14]


def test_sort(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df)
    ex.sort_by.value = "bytes"
    assert ex.value["ledger_id"].tolist() == [13, 11, 12, 15, 14]  # nulls last
    ex.ascending.value = True
    assert ex.value["ledger_id"].tolist() == [15, 12, 11, 13, 14]
    ex.sort_by.value = "age"
    assert ex.value["ledger_id"].tolist() == [12, 11, 13, 15, 14]
    ex.sort_by.value = "impact"  # the report's order, reversed
    assert ex.value["severity"].tolist() == ["info", "warning", "warning", "warning", "critical"]
    ex.ascending.value = False
    assert ex.value["ledger_id"].tolist() == [14, 13, 11, 12, 15]
    # the table follows the sort
    table = ex.table_text()
    assert table.index(">14<") < table.index(">13<") < table.index(">15<")


def test_seeded_from_parameters(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(
        df, kinds="orphan_ledger, orphan_offload_object", namespaces=["a"], min_age_hours=40, sort_by="bytes"
    )
    assert ex.kinds.value == ("orphan_ledger", "orphan_offload_object")
    assert set(ex.namespaces.value) == {"a/x", "a/z"}  # a tenant selects its namespaces
    assert ex.value["ledger_id"].tolist() == [13, 11]


def test_seeded_kind_absent_from_data_selects_nothing(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df, kinds=["corrupt_metadata"])
    assert ex.kinds.value == ("corrupt_metadata",)
    assert ex.count == 0 and ex.total_bytes == 0
    assert "no findings" in ex.table_text()


def test_empty_frame() -> None:
    ex = FindingsExplorer(findings([]))
    assert ex.count == 0 and ex.value.empty
    assert list(ex.value.columns) == columns(FINDINGS)
    ex.sort_by.value = "bytes"
    ex.min_bytes.value = 10
    assert ex.value.empty
    assert "no findings" in ex.table_text()


def test_rerun_cell_recreates_and_keeps_state(df: pd.DataFrame) -> None:
    first = FindingsExplorer(df, key="cell")
    first.kinds.value = ("orphan_ledger",)
    second = FindingsExplorer(df, key="cell")
    assert second.kinds.value == ("orphan_ledger",)
    assert second.count == 2
    assert first.widget.comm is None  # the old one was closed
    third = FindingsExplorer(df, key="cell", kinds=["missing_ledger"])  # explicit seed wins
    assert third.value["ledger_id"].tolist() == [14]
    # without a key, nothing is shared
    assert FindingsExplorer(df).count == 5


def test_on_change_callback_and_pages(df: pd.DataFrame) -> None:
    seen: list[int] = []
    ex = FindingsExplorer(df, page_size=2)
    ex.on_change(lambda v: seen.append(len(v)))
    ex.severities.value = ("warning",)
    assert seen == [3]
    assert "rows 1–2 of 3 (page 1 of 2)" in ex.page_label.value and ex.prev_page.disabled
    assert len(ex.rows.children) == 2
    ex.next_page.click()
    assert "rows 3–3 of 3 (page 2 of 2)" in ex.page_label.value and ex.next_page.disabled
    assert len(ex.rows.children) == 1 and ">12<" in ex.table_text()


def test_selecting_a_row_opens_the_detail_panel(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df, where={"zookeeper": "zk9:2181"})
    assert "opens its evidence" in ex.hint.value and len(ex._row_boxes[0].children) == 1
    ex._row_buttons[0].click()  # the first row: the critical missing ledger 14
    assert ex.selected is not None and ex.selected["ledger_id"] == 14
    detail = ex.detail.value
    assert (
        "does not exist in BookKeeper" in detail and "bookkeeper shell ledgermetadata -ledgerid 14" in detail
    )
    assert "docs/audit-rules.md#missing_ledger" in detail and "persistent://a/x/t3" in detail
    assert ex._row_buttons[0].button_style == "info"
    assert ex._row_boxes[0].children[-1] is ex.panel  # the detail opens under its row
    ex.select(1)
    assert ex.selected["ledger_id"] == 13 and "u1-ledger-13" in ex.detail.value
    assert ex._row_boxes[1].children[-1] is ex.panel
    assert len(ex._row_boxes[0].children) == 2  # the one above stays open: nothing above the click moves
    ex._row_buttons[1].click()  # an open row's button closes it
    assert len(ex._row_boxes[1].children) == 1 and ex.selected["ledger_id"] == 14  # the one opened before
    ex.severities.value = ("warning",)  # its row leaves the page, its detail stays open for its return
    assert all(len(b.children) == 1 for b in ex._row_boxes)
    ex.severities.value = ()
    assert ex._row_boxes[0].children[-1] is ex.panel
    ex.panel.children[1].click()  # the detail's own close button
    assert ex.selected is None and all(len(b.children) == 1 for b in ex._row_boxes)


def test_column_chooser(df: pd.DataFrame) -> None:
    ex = FindingsExplorer(df, columns=["severity", "kind"])
    assert ">kind<" in ex.header.value and ">topic<" not in ex.header.value
    ex.columns.value = ("severity", "path", "object key")
    assert ">path<" in ex.header.value and "u1-ledger-13" in ex.table_text()
    again = FindingsExplorer(df, key="cols", columns=["kind"])
    again.columns.value = ("kind", "size")
    assert FindingsExplorer(df, key="cols").columns.value == ("kind", "size")  # survives a re-run
    with pytest.raises(ValueError, match="columns"):
        FindingsExplorer(df, columns=["bogus"])


def test_bad_sort_column(df: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="sort_by"):
        FindingsExplorer(df, sort_by="size")


def test_ipython_display(df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    ex = FindingsExplorer(df)
    ex._ipython_display_()
    assert shown == [ex.widget]
