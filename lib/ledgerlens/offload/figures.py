"""Figures of offload segments: a topic's ledger timeline, the bucket's totals.

Pure functions over the frames of ``ledgerlens.offload.segments`` returning plotly figures in the
house template (``ledgerlens.report.figures.TEMPLATE``); an empty input gives an annotated empty figure.
A size axis reads in one binary unit (KiB, MiB, GiB: the largest value's); a ledger in a critical
state (``missing``, ``corrupt``) gets a marker with its state as label, since a missing ledger has no
bytes in the bucket and its bar would have no height (or, on a timeline, hardly any width).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ledgerlens.offload.segments import STATES
from ledgerlens.report.figures import TEMPLATE, _empty, binary_ticks
from ledgerlens.report.text import human_bytes

__all__ = ["CRITICAL_STATES", "STATE_COLORS", "bucket_totals_figure", "byte_unit", "ledger_timeline"]

STATE_COLORS = {
    "BookKeeper only": "#2c7fb8",
    "offloading": "#f1c40f",
    "offloaded": "#e67e22",
    "offloaded, deleted from BookKeeper": "#27ae60",
    "missing": "#c0392b",
    "corrupt": "#8e44ad",
}
CRITICAL_STATES = ("missing", "corrupt")  # data loss: marked, whatever their size
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def byte_unit(max_value: float) -> tuple[str, int]:
    """The binary unit ``max_value`` reads in (as ``human_bytes`` picks it) and its size in bytes."""
    name = human_bytes(max(float(max_value or 0), 0.0)).split()[-1]
    return name, 1024 ** _UNITS.index(name)


def _in_unit(value: float, factor: int) -> str:
    return f"{value / factor:,.2f}".rstrip("0").rstrip(".")


def _utc(ms: pd.Series) -> list[str]:
    return pd.to_datetime(ms, unit="ms", utc=True).dt.strftime("%Y-%m-%d %H:%M:%S.%f").tolist()


def _critical_marker(x: list[Any], y: list[Any], states: list[str], text: list[str]) -> go.Scatter:
    """Markers (a cross in the state's colour, labelled) for ledgers whose bars may not show."""
    colors = [STATE_COLORS[s] for s in states]
    return go.Scatter(
        name="missing or corrupt (critical)",
        x=x,
        y=y,
        mode="markers+text",
        marker={"symbol": "x", "size": 14, "color": colors},
        text=text,
        textposition="top center",
        textfont={"color": colors},
        hoverinfo="text",
        hovertext=text,
        cliponaxis=False,
    )


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
                base=_utc(part["_start"]),
                marker={"color": STATE_COLORS[state]},
                hovertext=text,
                hoverinfo="text",
                customdata=part[["ledger_id", "size", "object_bytes"]].to_numpy().tolist(),
            )
        )
    critical = rows[rows["state"].isin(CRITICAL_STATES)]
    if not critical.empty:
        fig.add_trace(
            _critical_marker(
                _utc(critical["_end"]),
                [f"ledger {lid}" for lid in critical["ledger_id"]],
                critical["state"].astype(str).tolist(),
                critical["state"].astype(str).tolist(),
            )
        )
    fig.update_xaxes(type="date", title_text="time (UTC)")
    fig.update_yaxes(autorange="reversed", title_text="")
    fig.update_layout(barmode="overlay", height=max(260, 26 * len(rows) + 120))
    return fig


def bucket_totals_figure(totals: Mapping[str, Any]) -> go.Figure:
    """Bytes in the bucket by the storage state of the ledgers they hold, and the problem totals.

    The size axis reads in one binary unit; bars are labelled with their exact size. Missing or
    corrupt ledgers (``ledgers_by_state``) are marked with their count even when they hold no byte.
    """
    title = (
        f"Offload bucket: {human_bytes(totals.get('object_bytes', 0))} in {totals.get('objects', 0)} objects"
    )
    by_state = {str(k): int(v or 0) for k, v in dict(totals.get("bytes_by_state") or {}).items()}
    ledgers = {str(k): int(v or 0) for k, v in dict(totals.get("ledgers_by_state") or {}).items()}
    critical = [s for s in CRITICAL_STATES if ledgers.get(s)]
    problems = {
        "orphan": totals.get("orphan_bytes", 0),
        "double-stored past the lag": totals.get("double_stored_bytes", 0),
        "foreign": totals.get("foreign_bytes", 0),
        "corrupt": totals.get("corrupt_bytes", 0),
        "incomplete offload": totals.get("incomplete_bytes", 0),
    }
    if not any(by_state.values()) and not any(problems.values()) and not critical:
        return _empty(title, "no offloaded bytes")
    states = [s for s in STATES if by_state.get(s) or s in critical]
    names = [k for k, v in problems.items() if v]
    top = max([by_state.get(s, 0) for s in states] + [int(problems[k]) for k in names] + [0])
    unit, factor = byte_unit(top)
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    for name, xs, values, colors in (
        ("by ledger state", states, [by_state.get(s, 0) for s in states], [STATE_COLORS[s] for s in states]),
        ("to look at", names, [int(problems[k]) for k in names], ["#7f8c8d"] * len(names)),
    ):
        fig.add_trace(
            go.Bar(
                name=name,
                x=xs,
                y=[v / factor for v in values],
                marker={"color": colors},
                text=[human_bytes(v) for v in values],
                hovertemplate="%{x}: %{text}<extra></extra>",
                customdata=values,  # exact bytes
            )
        )
    if critical:
        fig.add_trace(
            _critical_marker(
                critical,
                [by_state.get(s, 0) / factor for s in critical],
                critical,
                [f"{s}: {ledgers[s]} ledger" + ("" if ledgers[s] == 1 else "s") for s in critical],
            )
        )
    ticks, _labels = binary_ticks(top)
    fig.update_yaxes(
        title_text=f"size in the bucket ({unit})",
        tickmode="array",
        tickvals=[t / factor for t in ticks],
        ticktext=[f"{_in_unit(t, factor)} {unit}" for t in ticks],
        rangemode="tozero",
    )
    return fig
