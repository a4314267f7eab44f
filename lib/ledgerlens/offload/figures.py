"""Figures of offload segments: a topic's ledger timeline, the bucket's totals.

Pure functions over the frames of ``ledgerlens.offload.segments`` returning plotly figures in the
house template (``ledgerlens.report.figures.TEMPLATE``); an empty input gives an annotated empty figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ledgerlens.offload.segments import STATES
from ledgerlens.report.figures import TEMPLATE, _empty
from ledgerlens.report.text import human_bytes

__all__ = ["STATE_COLORS", "bucket_totals_figure", "ledger_timeline"]

STATE_COLORS = {
    "BookKeeper only": "#2c7fb8",
    "offloading": "#f1c40f",
    "offloaded": "#e67e22",
    "offloaded, deleted from BookKeeper": "#27ae60",
    "missing": "#c0392b",
    "corrupt": "#8e44ad",
}


def _age(now_ms: int, then: Any) -> str:
    if then is None or pd.isna(then) or not then:
        return ""
    hours = (now_ms - int(then)) / 3_600_000
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def ledger_timeline(ledgers: pd.DataFrame, managed_ledger: str, *, now_ms: int) -> go.Figure:
    """One topic's ledgers on a time axis, colored by storage state (one bar per ledger).

    A ledger spans from its creation (BookKeeper ``ctime``, else the previous ledger's close) to
    its close (``timestamp_ms``; now while open). Hover: entries, bytes, age, objects.
    """
    title = f"Ledgers of {managed_ledger}"
    rows = ledgers[ledgers["managed_ledger"] == managed_ledger].sort_values("ledger_id")
    if rows.empty:
        return _empty(title, "no ledger of this topic in the inventory")
    starts: list[int] = []
    ends: list[int] = []
    prev_end: int | None = None
    for r in rows.itertuples():
        end = int(r.timestamp_ms) if pd.notna(r.timestamp_ms) and r.timestamp_ms else now_ms
        if pd.notna(r.ctime_ms) and r.ctime_ms:
            start = int(r.ctime_ms)
        else:
            start = prev_end if prev_end is not None else end - 1000
        start = min(start, end)
        starts.append(start)
        ends.append(end)
        prev_end = end
    rows = rows.assign(_start=starts, _end=ends)
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    for state in STATES:
        part = rows[rows["state"] == state]
        if part.empty:
            continue
        text = [
            f"ledger {r.ledger_id}<br>{int(r.entries or 0) if pd.notna(r.entries) else '?'} entries, "
            f"{human_bytes(r.size)}<br>age {_age(now_ms, r.timestamp_ms or r.ctime_ms)}<br>{state}"
            + "".join(f"<br>{k}" for k in (r.object_keys if r.object_keys is not None else [])[:4])
            for r in part.itertuples()
        ]
        fig.add_trace(
            go.Bar(
                name=state,
                orientation="h",
                y=[f"ledger {lid}" for lid in part["ledger_id"]],
                x=(part["_end"] - part["_start"]).clip(lower=1000).tolist(),
                base=pd.to_datetime(part["_start"], unit="ms", utc=True)
                .dt.strftime("%Y-%m-%d %H:%M:%S.%f")
                .tolist(),
                marker={"color": STATE_COLORS[state]},
                hovertext=text,
                hoverinfo="text",
                customdata=part[["ledger_id", "size", "object_bytes"]].to_numpy().tolist(),
            )
        )
    fig.update_xaxes(type="date", title_text="time (UTC)")
    fig.update_yaxes(autorange="reversed", title_text="")
    fig.update_layout(barmode="overlay", height=max(260, 26 * len(rows) + 120))
    return fig


def bucket_totals_figure(totals: Mapping[str, Any]) -> go.Figure:
    """Bytes in the bucket by the storage state of the ledgers they hold, and the problem totals."""
    title = (
        f"Offload bucket: {human_bytes(totals.get('object_bytes', 0))} in {totals.get('objects', 0)} objects"
    )
    by_state = dict(totals.get("bytes_by_state") or {})
    problems = {
        "orphan": totals.get("orphan_bytes", 0),
        "double-stored past the lag": totals.get("double_stored_bytes", 0),
        "foreign": totals.get("foreign_bytes", 0),
        "corrupt": totals.get("corrupt_bytes", 0),
        "incomplete offload": totals.get("incomplete_bytes", 0),
    }
    if not any(by_state.values()) and not any(problems.values()):
        return _empty(title, "no offloaded bytes")
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    states = [s for s in STATES if by_state.get(s)]
    fig.add_trace(
        go.Bar(
            name="by ledger state",
            x=states,
            y=[by_state[s] for s in states],
            marker={"color": [STATE_COLORS[s] for s in states]},
            text=[human_bytes(by_state[s]) for s in states],
        )
    )
    names = [k for k, v in problems.items() if v]
    fig.add_trace(
        go.Bar(
            name="to look at",
            x=names,
            y=[problems[k] for k in names],
            marker={"color": "#7f8c8d"},
            text=[human_bytes(problems[k]) for k in names],
        )
    )
    fig.update_yaxes(title_text="bytes")
    return fig
