"""The report's top and its order, as data: the banner names the worst finding and the new ones, the
at-a-glance block, cards in impact order with "new" marks, static SVG figures, styles that stay
readable on a dark page, records that show nothing. The browser tests look at the pixels."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import plotly.graph_objects as go
import pytest

from ledgerlens.inventory.schemas import FINDINGS_PUBLISHED, columns
from ledgerlens.report import disk as disk_views
from ledgerlens.report import figures, html, runbook
from ledgerlens.report import html as report_html
from ledgerlens.report.svg import figure_svg
from ledgerlens.report.text import impact_tier

pytestmark = pytest.mark.unit

DAY_MS = 86_400_000
AS_OF = 1_795_000_000_000


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns(FINDINGS_PUBLISHED))


def findings(new: bool = True) -> pd.DataFrame:
    """Five corrupt znodes (alphabetically first), a known and a new data loss, warnings, info."""
    corrupt = [
        dict(kind="corrupt_metadata", severity="critical", ledger_id=i, path=f"/ledgers/L{i:04d}", new=False)
        for i in range(1, 6)
    ]
    df = frame(
        [
            *corrupt,
            dict(kind="orphan_ledger", severity="warning", ledger_id=20, bytes=5 * 1024**2, new=False,
                 namespace="t/ns"),
            dict(kind="missing_ledger", severity="critical", ledger_id=42, new=False,
                 managed_ledger="t/ns/persistent/x"),
            dict(kind="orphan_ledger", severity="warning", ledger_id=21, bytes=1024, new=True,
                 namespace="t/ns"),
            dict(kind="missing_offload_object", severity="critical", ledger_id=43, bytes=2048, new=True,
                 managed_ledger="t/ns/persistent/y", object_key="uuid-ledger-43"),
            dict(kind="unattributed_ledger", severity="info", ledger_id=7, bytes=1, new=False),
        ]
    )  # fmt: skip
    return df if new else df.drop(columns=["new", "first_seen"])


def summary(previous: bool = True, **extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "total_findings": 10,
        "counts_by_severity": {"critical": 7, "warning": 2, "info": 1},
        "bytes_by_severity": {"critical": 2048, "warning": 5 * 1024**2 + 1024, "info": 1},
        "inventory_counts": {"bk_ledgers": 40},
        "as_of_ms": AS_OF,
        "previous": {"as_of_ms": AS_OF - DAY_MS, "source": "/out/history/1"} if previous else None,
        "new_by_severity": {"critical": 1, "warning": 1, "info": 0} if previous else {"critical": 7},
        "new_total": 2 if previous else 10,
        "resolved_by_severity": {"critical": 0, "warning": 3, "info": 0} if previous else {},
        "resolved_total": 3 if previous else 0,
    }
    return {**s, **extra}


CONTEXT = {"cluster": "east", "zookeeper": "zk:2181", "scanned": {"bk_ledgers": 40}, "as_of_ms": AS_OF}


# --- banner and at a glance -------------------------------------------------------------------------


def test_banner_names_the_worst_finding_and_the_new_ones() -> None:
    df = findings()
    banner = html.banner_html(summary(), CONTEXT, df)
    text = re.sub(r"<[^>]+>", "", banner)
    assert text.startswith("7 critical findings (1 new), 2 warnings (1 new)")
    worst = report_html.worst_finding(df)
    # data loss first, new before known: the new missing offload object, not the fifth corrupt znode
    assert worst.startswith("missing_offload_object ledger 43") and f"Worst: {worst}" in text
    assert "data-worst" in banner
    # a first run compares with nothing: no "(N new)" although every finding counts as new
    first = re.sub(r"<[^>]+>", "", html.banner_html(summary(previous=False), CONTEXT, df))
    assert first.startswith("7 critical findings, 2 warnings") and "new)" not in first
    # an older summary, no findings frame: the plain banner
    old = {k: v for k, v in summary().items() if not k.startswith(("new", "resolved", "previous"))}
    assert "Worst" not in html.banner_html(old, CONTEXT) and "new" not in html.banner_html(old, CONTEXT)


def test_glance_counts_by_impact_and_kind_changes_and_disk() -> None:
    disk = pd.DataFrame(
        [
            dict(tenant="t", namespace="t/ns", state="live_unconsumed", ledgers=30, bytes=3 * 1024**3),
            dict(tenant="t", namespace="t/ns", state="orphan", ledgers=2, bytes=1024**3),
        ]
    )
    page = html.glance_html(summary(), findings(), disk)
    text = re.sub(r"<[^>]+>", "", page).replace("&nbsp;", " ")
    tiers = [text.index(t) for t in ("data loss 2", "critical 5", "warning 2", "info 1")]
    assert tiers == sorted(tiers)  # impact order
    assert "missing_offload_object 1 · missing_ledger 1".replace("·", "&middot;") in text
    assert "1 new" in text  # the data-loss tier's new finding
    assert "Since the previous run (2026-11-17 11:06 UTC)" in text
    assert "2 new (1 critical, 1 warning)" in text and "3 resolved (3 warning)" in text
    assert "4.0 GiB in BookKeeper" in text and "1.0 GiB (25%) orphan" in text
    # the disk from summary.json alone (no disk_usage.parquet), and absent keys left out
    usage = {"total_bytes": 2048, "by_state": {"orphan": 1024, "live_unconsumed": 1024},
             "ledgers_by_state": {"orphan": 1, "live_unconsumed": 3}, "replicated": True}  # fmt: skip
    from_summary = html.glance_html(summary(disk_usage=usage), findings())
    assert "2.0 KiB" in from_summary and "all copies" in from_summary
    bare = html.glance_html({"counts_by_severity": {}}, findings(new=False))
    assert "previous run" not in bare and "BookKeeper" not in bare and "data loss" in bare
    assert "First run here" in html.glance_html(summary(previous=False, previous_note="other cluster"))
    assert html.glance_html({}) == ""


def test_header_puts_banner_and_glance_first() -> None:
    page = html.header_html(summary(), CONTEXT, "Pulsar storage audit: east", findings=findings())
    assert page.index("<h1>") < page.index('class="ll-banner') < page.index('class="ll-glance"')
    assert "What was audited" not in page  # after the figures: html.audited_html
    assert "What was audited" in html.audited_html(CONTEXT)


# --- cards ------------------------------------------------------------------------------------------


def _cards(page: str) -> list[tuple[str, str, bool]]:
    return [
        (m["sev"], m["kind"], bool(m["new"]))
        for m in re.finditer(
            r'class="ll-finding ll-sev-(?P<sev>\w+)[^"]*" data-kind="(?P<kind>\w+)"(?P<new> data-new)?', page
        )
    ]


def test_cards_in_impact_order_new_first_and_marked() -> None:
    page = html.findings_html(findings(), CONTEXT)
    cards = _cards(page)
    assert len(cards) == 10
    tiers = [impact_tier(k, s) for s, k, _ in cards]
    assert tiers == sorted(tiers)
    kinds = [k for _, k, _ in cards]
    assert kinds.index("missing_ledger") < kinds.index("corrupt_metadata")  # data loss before the rest
    assert kinds[:2] == ["missing_offload_object", "missing_ledger"]  # the new one first in its tier
    assert [n for _, k, n in cards if k == "orphan_ledger"] == [True, False]  # new first among warnings
    assert sum(n for *_, n in cards) == 2
    assert page.count('class="ll-new"') == 2 + 2 + 2  # on the new cards, their groups, their tiers' headings
    headings = re.findall(r'<h2 id="([\w-]+)">', page)
    assert headings == ["findings-data-loss", "findings-critical", "findings-warning", "findings-info"]
    # no marks on a first run, and findings of an older release (no ``new`` column) in the same order
    assert 'class="ll-new"' not in html.findings_html(findings(), CONTEXT, mark_new=False)
    old = _cards(html.findings_html(findings(new=False), CONTEXT))
    assert [impact_tier(k, s) for s, k, _ in old] == sorted(tiers) and not any(n for *_, n in old)


# --- static figures ---------------------------------------------------------------------------------


def test_bar_figures_as_svg_carry_their_data() -> None:
    df = findings()
    for fig in figures.report_figures(df):
        svg = figure_svg(fig)
        assert svg is not None and svg.startswith('<figure class="ll-figure"') and "<script" not in svg
        assert f'aria-label="{fig.layout.title.text}"' in svg
        for trace in fig.data:  # every category and every legend entry is drawn
            for cat in trace.y if trace.orientation == "h" else trace.x:
                assert f">{cat}<" in svg or f"<title>{cat}</title>" in svg, cat
            assert f">{trace.name}</text>" in svg
    counts = figure_svg(figures.counts_by_kind(df)) or ""
    labels = re.findall(r'text-anchor="end" fill="#1f2933">(\w+)</text>', counts)
    assert set(labels[:2]) == {"missing_offload_object", "missing_ledger"}  # data loss at the top
    assert labels.index("missing_ledger") < labels.index("corrupt_metadata")
    sizes = figure_svg(figures.bytes_by_kind(df)) or ""
    assert "5.0 MiB" in sizes  # the figure's own binary tick labels and totals
    assert "orphan_ledger · 5.0 MiB · 2 findings (warning)" in sizes  # hover text as a tooltip


def test_svg_of_disk_empty_and_other_figures() -> None:
    disk = pd.DataFrame(
        [
            dict(tenant="t", namespace=f"t/ns{i}", state="orphan", ledgers=1, bytes=(i + 1) * 1024)
            for i in range(3)
        ]
    )
    svg = figure_svg(disk_views.disk_figure(disk)) or ""
    assert "t/ns2 · 3.0 KiB · 1 ledgers (orphan)" in svg and "3.0 KiB</text>" in svg
    empty = figure_svg(figures.age_by_bucket(findings().iloc[:0])) or ""
    assert "No findings" in empty
    assert figure_svg(go.Figure(go.Scatter(x=[1], y=[2]))) is None
    import numpy as np  # plotly keeps numpy arrays as they are

    arrays = go.Figure(go.Bar(x=np.array(["a", "b"]), y=np.array([3, np.nan]), customdata=np.array([0, 2]),
                              hovertemplate="%{x}: %{customdata} ledgers"))  # fmt: skip
    drawn = figure_svg(arrays) or ""
    assert "<title>a: 0 ledgers</title>" in drawn and ">b</text>" in drawn


def test_static_renderer_sends_svg_and_keeps_plotly_json() -> None:
    import plotly.io as pio

    df = findings()
    before = pio.renderers.default
    try:
        figures.use_offline_renderer(static=True)
        bar = pio.renderers._build_mime_bundle(figures.counts_by_kind(df).to_dict())
        line = pio.renderers._build_mime_bundle(go.Figure(go.Scatter(x=[1], y=[2])).to_dict())
    finally:
        pio.renderers.default = before
    assert bar["text/html"].startswith('<figure class="ll-figure"') and "plotly.js" not in bar["text/html"]
    assert bar["application/vnd.plotly.v1+json"]["data"]  # JupyterLab keeps the interactive figure
    assert "plotly.js v" in line["text/html"]  # a trace the SVG does not draw keeps plotly, inline
    assert runbook.external_scripts(line["text/html"]) == []


# --- styles and records -----------------------------------------------------------------------------

_COLOR = re.compile(r"(?<![-\w])color\s*:")
_BACKGROUND = re.compile(r"(?<![-\w])background(-color)?\s*:")


def test_every_background_comes_with_a_text_colour() -> None:
    """JupyterLab's dark theme sets light text: a light background of ours needs our dark text."""
    css = html.STYLE.removeprefix("<style>").removesuffix("</style>")
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", css)
    assert len(rules) > 30
    missing = [sel.strip() for sel, body in rules if _BACKGROUND.search(body) and not _COLOR.search(body)]
    assert missing == []
    root = {sel.strip(): body for sel, body in rules}[
        ".ll"
    ]  # the root sets both: nothing of the page's theme shows through
    assert _COLOR.search(root) and _BACKGROUND.search(root)
    assert "color:" in html.error_html(ValueError("x")).split(">")[0]


def test_records_show_nothing_and_old_records_still_read(tmp_path: Path) -> None:
    new = nbformat.v4.new_output(
        "display_data",
        data={runbook.RECORD_MIME: {"a": 1}},
        metadata={runbook.RECORD_MIME: {"ledgerlens": "x"}},
    )
    old = nbformat.v4.new_output(
        "display_data",
        data={"application/json": {"a": 0}},
        metadata={"application/json": {"ledgerlens": "y"}},
    )
    cell = nbformat.v4.new_code_cell("x", execution_count=1)
    cell.outputs = [new, old]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nbformat.validate(nb)
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    assert runbook.read_recorded(path, "x") == {"a": 1} and runbook.read_recorded(path, "y") == {"a": 0}
    page = runbook.to_html(path, tmp_path / "r.html").read_text()
    assert '"a": 1' not in page and json.dumps({"a": 1}) not in page
