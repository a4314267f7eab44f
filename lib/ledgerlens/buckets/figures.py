"""Plotly figures of one subscription's delayed-message buckets (pure functions, house template)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ledgerlens.buckets.analysis import BucketView, MergePrediction
from ledgerlens.report.figures import TEMPLATE, _empty
from ledgerlens.report.text import human_bytes

MERGE_COLOR = "#e67e22"
BUCKET_COLOR = "#2c7fb8"
MUTABLE_COLOR = "rgba(39, 174, 96, 0.15)"


def _title(view: BucketView, what: str) -> str:
    return f"{what}: {view.managed_ledger} / {view.cursor}"


def buckets_figure(view: BucketView, merge: MergePrediction | None = None) -> go.Figure:
    """Buckets along the ledger-id axis: one bar per bucket over its ledger range, height = indexes.

    The pair the tracker merges next (``merge``) is drawn in orange; the ledgers of the last mutable
    bucket (after the newest sealed one; in broker memory only) are shaded.
    """
    title = _title(view, "Delayed-index buckets")
    b = view.buckets
    if b.empty:
        return _empty(title, "no sealed bucket")
    pair = set(merge.pair) if merge is not None and merge.pair else set()
    width = (b["end_ledger_id"] - b["start_ledger_id"] + 1).clip(lower=1)
    colors = [MERGE_COLOR if lid in pair else BUCKET_COLOR for lid in b["ledger_id"]]
    hover = [
        f"bucket (snapshot ledger) {r.ledger_id}<br>ledgers {r.start_ledger_id}..{r.end_ledger_id}"
        f"<br>{r.index_count} indexes in {r.segment_count} segments"
        f"<br>snapshot {human_bytes(r.snapshot_bytes)}"
        + ("<br><b>merged next</b>" if r.ledger_id in pair else "")
        for r in b.itertuples()
    ]
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    fig.add_trace(
        go.Bar(
            x=b["start_ledger_id"] + (width - 1) / 2,
            y=b["index_count"],
            width=width,
            marker_color=colors,
            name="sealed bucket",
            hovertext=hover,
            hoverinfo="text",
            customdata=b["ledger_id"],
        )
    )
    if view.mutable_from_ledger_id is not None:
        lo = view.mutable_from_ledger_id + 0.5
        fig.add_vrect(
            x0=lo,
            x1=lo + max(float(width.max()), 1.0),
            fillcolor=MUTABLE_COLOR,
            line_width=0,
            annotation_text="last mutable bucket (in memory)",
            annotation_position="top left",
        )
    fig.update_xaxes(title_text="data ledger id")
    fig.update_yaxes(title_text="delayed indexes")
    return fig


def schedule_figure(view: BucketView, now_ms: int | None = None) -> go.Figure:
    """Segments on the schedule-time axis: each bucket a row, each segment a line from its first to its
    last deliver-at time (what becomes deliverable when); ``now_ms`` as a vertical line."""
    title = _title(view, "Schedule of the sealed segments")
    s = view.segments
    if s.empty:
        return _empty(title, "no sealed segment")
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    for lid, seg in s.sort_values(["start_ledger_id", "segment"]).groupby("ledger_id", sort=False):
        xs: list[object] = []
        ys: list[object] = []
        text: list[str] = []
        for r in seg.itertuples():
            lo, hi = (
                pd.to_datetime(r.min_schedule_ms, unit="ms"),
                pd.to_datetime(r.max_schedule_ms, unit="ms"),
            )
            label = (
                f"segment {r.segment}: {r.index_count} indexes, {lo:%Y-%m-%d %H:%M} .. {hi:%Y-%m-%d %H:%M}"
            )
            xs += [lo, hi, None]
            ys += [f"bucket {lid}"] * 2 + [None]
            text += [label, label, ""]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                line={"width": 8},
                name=f"bucket {lid}",
                hovertext=text,
                hoverinfo="text",
            )
        )
    if now_ms is not None:
        fig.add_vline(x=pd.to_datetime(now_ms, unit="ms"), line_dash="dash", line_color="#c0392b")
    fig.update_xaxes(title_text="deliver at (UTC)", type="date")
    fig.update_yaxes(title_text="", autorange="reversed")
    return fig


def deliverable_figure(view: BucketView) -> go.Figure:
    """Cumulative delayed indexes that have become deliverable over time (by segment end time)."""
    title = _title(view, "Indexes deliverable over time")
    s = view.segments
    if s.empty:
        return _empty(title, "no sealed segment")
    order = s.sort_values("max_schedule_ms")
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    fig.add_trace(
        go.Scatter(
            x=pd.to_datetime(order["max_schedule_ms"], unit="ms"),
            y=order["index_count"].cumsum(),
            mode="lines",
            line_shape="hv",
            name="deliverable",
        )
    )
    fig.update_xaxes(title_text="time (UTC)")
    fig.update_yaxes(title_text="indexes deliverable")
    return fig
