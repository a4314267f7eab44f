"""The findings explorer's pure helpers (topic of a finding, search text, impact order, new marks)
and the behaviour built on them, on findings shaped as the generated cluster's audit writes them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ledgerlens.inventory.schemas import FINDINGS, columns
from ledgerlens.report.html import order_findings
from ledgerlens_widgets import FindingsExplorer
from ledgerlens_widgets.findings_explorer import (
    EXPLORER_CSS,
    finding_topic,
    impact_sort,
    is_new,
    schema_topic,
    search_text,
)

pytestmark = pytest.mark.unit

TOPIC = "persistent://acme/orders/lost-data"
DAY_MS = 86_400_000


def ev(**kw: object) -> str:
    return json.dumps(kw)


def rows() -> list[dict]:
    """One topic's findings from every component (as the planted sandbox has them), and others."""
    ml = "acme/orders/persistent/lost-data"
    return [
        dict(kind="orphan_ledger", severity="warning", component="managed-ledger", ledger_id=1462,
             managed_ledger="acme/orders/persistent/deleted-topic", path="/ledgers/00/0000/L1462",
             bytes=30000, namespace="acme/orders", age_seconds=90_000),
        dict(kind="missing_ledger", severity="critical", component="schema", ledger_id=1488,
             path="/schemas/acme/orders/lost-data", namespace="acme/orders",
             evidence=ev(reference="schema", referenced_by="/schemas/acme/orders/lost-data",
                         schema_id="acme/orders/lost-data", schema_version=1)),
        dict(kind="missing_ledger", severity="critical", component="managed-ledger", ledger_id=1479,
             managed_ledger=ml, path=f"/managed-ledgers/{ml}", namespace="acme/orders"),
        dict(kind="missing_ledger", severity="critical", component="cursor", ledger_id=1486,
             managed_ledger=ml, cursor="ghost-cursor", path=f"/managed-ledgers/{ml}/ghost-cursor",
             namespace="acme/orders"),
        dict(kind="orphan_ledger", severity="warning", component="schema", ledger_id=1468,
             path="/ledgers/00/0000/L1468", bytes=30000,
             evidence=ev(component="schema", owner="acme/orders/user+signups",
                         schema_id="acme/orders/user+signups")),
        dict(kind="corrupt_metadata", severity="critical", component="managed-ledger",
             managed_ledger="acme/orders/persistent/corrupt-ml", namespace="acme/orders"),
        dict(kind="unattributed_ledger", severity="info", ledger_id=1474, bytes=4096,
             path="/ledgers/00/0000/L1474"),
    ]  # fmt: skip


def frame(extra: dict[str, list] | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows(), columns=columns(FINDINGS))
    for k, v in (extra or {}).items():
        df[k] = v
    return df


def test_finding_topic_whatever_names_it() -> None:
    by_ledger = {r["ledger_id"]: finding_topic(r) for r in rows() if r.get("ledger_id")}
    assert by_ledger[1488] == TOPIC  # a schema ledger: only its /schemas path names the topic
    assert by_ledger[1479] == TOPIC and by_ledger[1486] == TOPIC
    assert by_ledger[1468] == "persistent://acme/orders/user signups"  # evidence, decoded as Pulsar does
    assert by_ledger[1474] == ""
    # evidence only: a delayed-index bucket's topic, an offload object's owner path
    assert finding_topic({"evidence": ev(delayed_topic="persistent://a/b/jobs")}) == "persistent://a/b/jobs"
    assert (
        finding_topic({"evidence": ev(owner_path="/managed-ledgers/a/b/persistent/t%2Fx")})
        == "persistent://a/b/t/x"
    )
    assert finding_topic({"component": "schema", "evidence": ev(owner="othercorp/billing/invoices")}) == (
        "persistent://othercorp/billing/invoices"
    )
    assert schema_topic("acme/orders") == ""  # no topic part


def test_topic_search_finds_every_component_of_the_topic() -> None:
    ex = FindingsExplorer(frame())
    assert ex.search.continuous_update  # as you type, no Enter needed
    assert "persistent://" in ex.search.placeholder and "type to filter" in ex.search.placeholder
    ex.search.value = TOPIC
    assert sorted(ex.value["ledger_id"]) == [1479, 1486, 1488]
    assert set(ex.value["component"]) == {"schema", "managed-ledger", "cursor"}
    assert TOPIC in ex.table_text()  # the schema ledger's row shows its topic too
    ex.search.value = "user signups"
    assert ex.value["ledger_id"].tolist() == [1468]


def test_order_is_the_reports_impact_order() -> None:
    df = frame()
    ex = FindingsExplorer(df)
    expected = order_findings(df)
    assert ex.value["kind"].tolist() == expected["kind"].tolist()
    assert ex.value["kind"].tolist()[:3] == ["missing_ledger"] * 3  # data loss before corrupt metadata
    assert ex.value["kind"].iloc[3] == "corrupt_metadata"
    assert ex.value["severity"].tolist()[-1] == "info"
    # another column: ties keep the impact order; missing values last
    by_bytes = impact_sort(ex._df, "bytes")
    assert by_bytes["ledger_id"].tolist()[:3] == [1462, 1468, 1474]
    assert FindingsExplorer(df, sort_by="severity").sort_by.value == "impact"  # the old name still works


def test_new_findings_marked_filtered_and_first() -> None:
    new = [False, False, False, True, True, False, False]
    first_seen = [1_790_000_000_000 + i * DAY_MS for i in range(7)]
    df = frame({"new": new, "first_seen": first_seen})
    ex = FindingsExplorer(df, columns=["severity", "kind", "first seen"])
    assert not ex.new_only.disabled
    # new before known within a tier: the new cursor ledger leads the data-loss findings
    assert ex.value["ledger_id"].iloc[0] == 1486
    assert "1 new" not in ex.totals.value and "<b>2</b> new" in ex.totals.value
    table = ex.table_text()
    assert table.count("ll-badge-new") == 2
    assert "2026-" in table or "2027-" in table  # first seen shown as a date
    ex.new_only.value = True
    assert sorted(ex.value["ledger_id"]) == [1468, 1486]
    ex.search.value = "ghost"
    assert ex.value["ledger_id"].tolist() == [1486]
    ex.clear_filters()
    assert ex.count == 7 and ex.new_only.value is False
    assert ex.state()["new_only"] is False and "new" in list(ex.value.columns)


def test_without_a_new_column() -> None:
    df = frame()
    assert not is_new(df).any()
    ex = FindingsExplorer(df, new_only=True)
    assert ex.new_only.disabled and not ex.new_only.value and ex.count == len(df)
    assert "new" not in ex.totals.value and "ll-badge-new" not in ex.table_text()
    # a nullable "new" column with gaps: gaps are not new
    assert is_new(frame({"new": [True, None, False, None, None, None, None]})).tolist() == [
        True, False, False, False, False, False, False,
    ]  # fmt: skip


def test_search_text_covers_what_the_row_shows() -> None:
    r = dict(rows()[3], topic=TOPIC, reason="ledger 1486 does not exist", _new=True)
    text = search_text(r)
    for part in (TOPIC, "ghost-cursor", "1486", "acme/orders/persistent/lost-data", "does not exist", "new"):
        assert part in text


def test_theme_colours_come_from_jupyterlab() -> None:
    """Text colours are JupyterLab's theme variables; fixed colours only as colour+background pairs."""
    for rule in ("--jp-content-font-color1", "--jp-content-font-color2", "--jp-layout-color2",
                 "--jp-content-link-color"):  # fmt: skip
        assert f"var({rule}" in EXPLORER_CSS
    ex = FindingsExplorer(frame())
    assert "ll-badge-critical" in ex.table_text() and 'style="color:' not in ex.table_text()


def test_unchanged_selection_keeps_the_page_as_drawn() -> None:
    ex = FindingsExplorer(frame(), page_size=2)
    ex.next_page.click()
    drawn = list(ex.rows.children)
    ex.search.value = "l"  # typing: every finding still matches
    assert ex.page == 1 and list(ex.rows.children) == drawn
    ex.clear_filters()
    assert ex.page == 1 and list(ex.rows.children) == drawn
    ex.search.value = "lost-data"  # fewer findings: back to the first page
    assert ex.page == 0 and ex.count == 3
