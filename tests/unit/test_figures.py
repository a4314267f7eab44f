"""Figures are tested as data: traces, labels and values, never pixels."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from ledgerlens.inventory.schemas import FINDINGS, columns
from ledgerlens.report import figures

pytestmark = pytest.mark.unit

DAY = 86400


def findings(rows: list[dict]) -> pd.DataFrame:
    """A findings frame with every FINDINGS column, in order."""
    return pd.DataFrame(rows, columns=columns(FINDINGS))


@pytest.fixture
def df() -> pd.DataFrame:
    return findings(
        [
            dict(
                kind="orphan_ledger",
                severity="warning",
                bytes=1000,
                tenant="a",
                namespace="a/x",
                age_seconds=2 * DAY,
            ),
            dict(
                kind="orphan_ledger",
                severity="warning",
                bytes=500,
                tenant="b",
                namespace="b/y",
                age_seconds=3 * DAY,
            ),
            dict(
                kind="orphan_offload_object",
                severity="warning",
                bytes=4000,
                tenant="a",
                namespace="a/x",
                age_seconds=10 * DAY,
            ),
            dict(
                kind="missing_ledger",
                severity="critical",
                bytes=None,
                tenant="a",
                namespace="a/x",
                age_seconds=None,
            ),
            dict(
                kind="missing_offload_object",
                severity="critical",
                bytes=300,
                tenant="b",
                namespace="b/y",
                age_seconds=None,
            ),
            dict(
                kind="missing_offload_object",
                severity="warning",
                bytes=200,
                tenant="b",
                namespace="b/y",
                age_seconds=None,
            ),
            dict(kind="unattributed_ledger", severity="info", bytes=50, age_seconds=40 * DAY),
        ]
    )


def test_bytes_by_kind(df: pd.DataFrame) -> None:
    fig = figures.bytes_by_kind(df)
    assert isinstance(fig, go.Figure)
    assert [t.name for t in fig.data] == ["critical", "warning", "info"]
    by = {t.name: dict(zip(t.x, t.y, strict=True)) for t in fig.data}
    assert by["critical"] == {"missing_ledger": 0, "missing_offload_object": 300}
    assert by["warning"] == {
        "orphan_ledger": 1500,
        "orphan_offload_object": 4000,
        "missing_offload_object": 200,
    }
    assert by["info"] == {"unattributed_ledger": 50}
    counts = {t.name: dict(zip(t.x, t.customdata, strict=True)) for t in fig.data}
    assert counts["warning"]["orphan_ledger"] == 2
    # Kinds ordered by total bytes, largest first.
    assert list(fig.layout.xaxis.categoryarray) == [
        "orphan_offload_object",
        "orphan_ledger",
        "missing_offload_object",
        "unattributed_ledger",
        "missing_ledger",
    ]
    assert fig.layout.template.layout.font.family == figures.TEMPLATE.layout.font.family


def test_orphan_bytes_by_namespace(df: pd.DataFrame) -> None:
    fig = figures.orphan_bytes_by_namespace(df)
    assert [t.name for t in fig.data] == ["orphan_ledger", "orphan_offload_object"]
    by = {t.name: dict(zip(t.y, t.x, strict=True)) for t in fig.data}
    assert by == {"orphan_ledger": {"a/x": 1000, "b/y": 500}, "orphan_offload_object": {"a/x": 4000}}
    assert all(t.orientation == "h" for t in fig.data)
    # Largest namespace drawn at the top (last in a horizontal category array).
    assert list(fig.layout.yaxis.categoryarray) == ["b/y", "a/x"]


def test_orphan_bytes_by_namespace_top_and_unknown() -> None:
    rows = [
        dict(
            kind="orphan_ledger",
            severity="warning",
            bytes=100 * (i + 1),
            tenant=f"t{i}",
            namespace=f"t{i}/ns",
        )
        for i in range(5)
    ]
    rows.append(dict(kind="orphan_ledger", severity="warning", bytes=7, tenant=None, namespace=None))
    fig = figures.orphan_bytes_by_namespace(findings(rows), top=2)
    (trace,) = fig.data
    assert dict(zip(trace.y, trace.x, strict=True)) == {"t4/ns": 500, "t3/ns": 400, "(other)": 607}


def test_age_by_bucket(df: pd.DataFrame) -> None:
    fig = figures.age_by_bucket(df)
    assert [t.name for t in fig.data] == ["warning", "info"]
    labels = ["< 1 h", "< 1 d", "< 7 d", "< 30 d", "older"]
    assert [list(t.x) for t in fig.data] == [labels, labels]
    assert list(fig.data[0].y) == [0, 0, 2, 1, 0]  # 2 d, 3 d; 10 d
    assert list(fig.data[1].y) == [0, 0, 0, 0, 1]  # 40 d
    assert "3 without an age" in fig.layout.title.text
    assert fig.layout.barmode == "stack"


@pytest.mark.parametrize(
    ("seconds", "bucket"),
    [(0, "< 1 h"), (3599, "< 1 h"), (3600, "< 1 d"), (86399, "< 1 d"), (6 * DAY, "< 7 d"),
     (29 * DAY, "< 30 d"), (30 * DAY, "older"), (None, None)],
)  # fmt: skip
def test_age_bucket(seconds: int | None, bucket: str | None) -> None:
    assert figures.age_bucket(seconds) == bucket


def test_counts_by_kind_shows_zero_byte_critical_findings(df: pd.DataFrame) -> None:
    fig = figures.counts_by_kind(df)
    by = {t.name: dict(zip(t.y, t.x, strict=True)) for t in fig.data}
    assert by["critical"] == {"missing_ledger": 1, "missing_offload_object": 1}
    assert by["warning"] == {"orphan_ledger": 2, "orphan_offload_object": 1, "missing_offload_object": 1}
    assert by["info"] == {"unattributed_ledger": 1}
    # kinds with critical findings at the top (last in a horizontal category array)
    order = list(reversed(fig.layout.yaxis.categoryarray))
    assert order[:2] == ["missing_offload_object", "missing_ledger"]


def test_size_axes_are_binary(df: pd.DataFrame) -> None:
    fig = figures.bytes_by_kind(df)
    assert all("KiB" in t or t.endswith(" B") for t in fig.layout.yaxis.ticktext)
    assert not any(t.endswith("k") for t in fig.layout.yaxis.ticktext)
    vals, text = figures.binary_ticks(3 * 1024**3)
    assert text[0] == "0 B" and "GiB" in text[-1] and vals[-1] >= 3 * 1024**3
    assert figures.binary_ticks(0) == ([0], ["0 B"])


def test_namespace_from_evidence() -> None:
    rows = [
        dict(kind="orphan_ledger", severity="warning", bytes=10, namespace=None,
             evidence='{"managed_ledger": "t1/ns1/persistent/a%20b"}'),
        dict(kind="orphan_ledger", severity="warning", bytes=20, namespace=None,
             evidence='{"schema_id": "t2/ns2/x"}'),
        dict(kind="orphan_offload_object", severity="warning", bytes=30, namespace=None, evidence="{}"),
    ]  # fmt: skip
    fig = figures.orphan_bytes_by_namespace(findings(rows))
    seen = {y for t in fig.data for y in t.y}
    assert seen == {"t1/ns1", "t2/ns2", "(unknown)"}


def test_report_figures_skip_empty_charts(df: pd.DataFrame) -> None:
    assert figures.report_figures(findings([])) == []
    titles = [f.layout.title.text for f in figures.report_figures(df)]
    assert titles[0] == "Findings by kind and severity" and len(titles) == 4
    only_critical = findings([dict(kind="corrupt_metadata", severity="critical", path="/x")])
    (fig,) = figures.report_figures(only_critical)  # no bytes, no orphans, no ages: counts only
    assert fig.data and fig.data[0].x == (1,)


def test_offline_renderer_never_asks_a_cdn(df: pd.DataFrame) -> None:
    import plotly.io as pio

    before = pio.renderers.default
    try:
        figures.use_offline_renderer()
        # through plotly's own machinery, which copies the renderer for every figure
        first = pio.renderers._build_mime_bundle(figures.counts_by_kind(df).to_dict())
        second = pio.renderers._build_mime_bundle(figures.bytes_by_kind(df).to_dict())
    finally:
        pio.renderers.default = before
    assert "application/vnd.plotly.v1+json" in first
    assert "plotly.js v" in first["text/html"] and "plotly.js v" not in second["text/html"]
    from ledgerlens.report.runbook import external_scripts

    for bundle in (first, second):
        assert external_scripts(bundle["text/html"]) == []
        assert "<script src" not in bundle["text/html"] and "cdnjs" not in bundle["text/html"]


@pytest.mark.parametrize(
    "fn",
    [figures.bytes_by_kind, figures.orphan_bytes_by_namespace, figures.age_by_bucket, figures.counts_by_kind],
)
def test_empty_frame_gives_annotated_empty_figure(fn) -> None:
    fig = fn(findings([]))
    assert isinstance(fig, go.Figure)
    assert fig.data == ()
    assert fig.layout.annotations and fig.layout.annotations[0].text.startswith("No ")


def test_no_orphans_and_no_ages() -> None:
    df = findings([dict(kind="missing_ledger", severity="critical", bytes=1)])
    assert figures.orphan_bytes_by_namespace(df).data == ()
    fig = figures.age_by_bucket(df)
    assert fig.data == () and fig.layout.annotations[0].text == "No finding has an age"


def test_human_bytes() -> None:
    from ledgerlens.report.text import human_bytes

    assert human_bytes(0) == "0 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(5 * 1024**3) == "5.0 GiB"
    assert human_bytes(None) == ""
    assert human_bytes(float("nan")) == ""


def test_functions_are_pure(df: pd.DataFrame) -> None:
    before = df.copy()
    figures.bytes_by_kind(df)
    figures.orphan_bytes_by_namespace(df)
    figures.age_by_bucket(df)
    figures.counts_by_kind(df)
    figures.report_figures(df)
    pd.testing.assert_frame_equal(df, before)
