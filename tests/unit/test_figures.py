"""Figures are tested as data: traces, labels and values, never pixels."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from ledgerlens import figures
from ledgerlens.schemas import FINDINGS, columns

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


def test_age_histogram(df: pd.DataFrame) -> None:
    fig = figures.age_histogram(df)
    assert [t.name for t in fig.data] == ["warning", "info"]
    assert sorted(fig.data[0].x) == [2.0, 3.0, 10.0]
    assert list(fig.data[1].x) == [40.0]
    assert "3 without an age" in fig.layout.title.text
    assert fig.layout.barmode == "stack"


@pytest.mark.parametrize(
    "fn", [figures.bytes_by_kind, figures.orphan_bytes_by_namespace, figures.age_histogram]
)
def test_empty_frame_gives_annotated_empty_figure(fn) -> None:
    fig = fn(findings([]))
    assert isinstance(fig, go.Figure)
    assert fig.data == ()
    assert fig.layout.annotations and fig.layout.annotations[0].text.startswith("No ")


def test_no_orphans_and_no_ages() -> None:
    df = findings([dict(kind="missing_ledger", severity="critical", bytes=1)])
    assert figures.orphan_bytes_by_namespace(df).data == ()
    fig = figures.age_histogram(df)
    assert fig.data == () and fig.layout.annotations[0].text == "No finding has an age"


def test_human_bytes() -> None:
    assert figures.human_bytes(0) == "0 B"
    assert figures.human_bytes(1536) == "1.5 KiB"
    assert figures.human_bytes(5 * 1024**3) == "5.0 GiB"
    assert figures.human_bytes(None) == ""
    assert figures.human_bytes(float("nan")) == ""


def test_functions_are_pure(df: pd.DataFrame) -> None:
    before = df.copy()
    figures.bytes_by_kind(df)
    figures.orphan_bytes_by_namespace(df)
    figures.age_histogram(df)
    pd.testing.assert_frame_equal(df, before)
