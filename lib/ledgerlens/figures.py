"""Plotly figures over the findings table.

Pure functions: a pandas findings frame (columns of ``ledgerlens.schemas.FINDINGS``) goes in, a
``plotly.graph_objects.Figure`` comes out, drawn with the house template ``TEMPLATE``. Nothing is
shown or written here; notebooks decide how figures are rendered. Every function copes with an empty
frame by returning an annotated, empty figure.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

SEVERITY_ORDER = ("critical", "warning", "info")
SEVERITY_COLORS = {"critical": "#c0392b", "warning": "#e67e22", "info": "#7f8c8d"}
ORPHAN_KINDS = ("orphan_ledger", "orphan_offload_object", "remote_segment_orphan_object")
KIND_COLORS = {
    "orphan_ledger": "#2c7fb8",
    "orphan_offload_object": "#7fcdbb",
    "remote_segment_orphan_object": "#253494",
}

TEMPLATE = go.layout.Template(pio.templates["plotly_white"])
TEMPLATE.layout.update(
    font={"family": "Inter, Helvetica, Arial, sans-serif", "size": 13, "color": "#2d3436"},
    title={"x": 0.0, "xanchor": "left", "font": {"size": 16}},
    colorway=["#2c7fb8", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#f1c40f"],
    margin={"l": 60, "r": 20, "t": 60, "b": 50},
    legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0},
    hoverlabel={"namelength": -1},
)
pio.templates["ledgerlens"] = TEMPLATE

_UNKNOWN_NS = "(unknown)"
_OTHER = "(other)"


def human_bytes(n: float | int | None) -> str:
    """``1536`` -> ``'1.5 KiB'``; null or NaN -> ``''``."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"  # pragma: no cover


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}})
    fig.add_annotation(
        text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 15}
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _bytes(df: pd.DataFrame) -> pd.Series:
    return pd.to_numeric(df["bytes"], errors="coerce").fillna(0).astype("int64")


def _severity_order(values: pd.Series) -> list[str]:
    present = set(values.dropna())
    return [s for s in SEVERITY_ORDER if s in present] + sorted(present - set(SEVERITY_ORDER))


def bytes_by_kind(df: pd.DataFrame) -> go.Figure:
    """Bytes per finding kind, one stacked bar trace per severity; kinds by total bytes, largest first.

    Each trace's ``customdata`` holds the number of findings behind each bar.
    """
    title = "Bytes by finding kind"
    if df.empty:
        return _empty(title, "No findings")
    d = df.assign(bytes=_bytes(df), severity=df["severity"].fillna("unknown"))
    totals = d.groupby("kind")["bytes"].agg(["sum", "size"])
    kinds = totals.sort_values(["sum", "size"], ascending=[False, False], kind="stable").index.tolist()
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "stack"})
    for sev in _severity_order(d["severity"]):
        g = d[d["severity"] == sev].groupby("kind")["bytes"].agg(["sum", "size"]).reindex(kinds)
        g = g.dropna()
        fig.add_trace(
            go.Bar(
                name=sev,
                x=g.index.tolist(),
                y=g["sum"].astype("int64").tolist(),
                customdata=g["size"].astype("int64").tolist(),
                text=[human_bytes(v) for v in g["sum"]],
                marker_color=SEVERITY_COLORS.get(sev),
                hovertemplate="%{x}<br>%{text}<br>%{customdata} findings<extra>" + sev + "</extra>",
            )
        )
    fig.update_xaxes(title_text="kind", categoryorder="array", categoryarray=kinds)
    fig.update_yaxes(title_text="bytes")
    return fig


def orphan_bytes_by_namespace(df: pd.DataFrame, *, top: int = 20) -> go.Figure:
    """Bytes of orphaned storage per namespace (``tenant/ns``), one stacked bar trace per orphan kind.

    Only orphan kinds (``ORPHAN_KINDS``) count. Namespaces are ordered by orphan bytes, largest
    first; beyond ``top`` they are summed into ``(other)``. Horizontal bars: the namespace is ``y``.
    """
    title = "Orphaned bytes by namespace"
    d = df[df["kind"].isin(ORPHAN_KINDS)] if not df.empty else df
    if d.empty:
        return _empty(title, "No orphaned storage")
    ns = d["namespace"].where(d["namespace"].notna() & (d["namespace"] != ""), d["tenant"])
    d = d.assign(bytes=_bytes(d), ns=ns.fillna(_UNKNOWN_NS))
    totals = d.groupby("ns")["bytes"].sum().sort_values(ascending=False, kind="stable")
    ranked = totals.index.tolist()
    keep = ranked[:top]
    if len(ranked) > top:
        d = d.assign(ns=d["ns"].where(d["ns"].isin(keep), _OTHER))
        keep = [*keep, _OTHER]
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "stack"})
    for kind in [k for k in ORPHAN_KINDS if k in set(d["kind"])]:
        g = d[d["kind"] == kind].groupby("ns")["bytes"].agg(["sum", "size"]).reindex(keep).dropna()
        fig.add_trace(
            go.Bar(
                name=kind,
                orientation="h",
                y=g.index.tolist(),
                x=g["sum"].astype("int64").tolist(),
                customdata=g["size"].astype("int64").tolist(),
                text=[human_bytes(v) for v in g["sum"]],
                marker_color=KIND_COLORS.get(kind),
                hovertemplate="%{y}<br>%{text}<br>%{customdata} findings<extra>" + kind + "</extra>",
            )
        )
    # Largest at the top of a horizontal bar chart.
    fig.update_yaxes(title_text="namespace", categoryorder="array", categoryarray=list(reversed(keep)))
    fig.update_xaxes(title_text="bytes")
    fig.update_layout(height=max(300, 120 + 28 * len(keep)))
    return fig


def age_histogram(df: pd.DataFrame, *, nbins: int = 40) -> go.Figure:
    """Histogram of finding age in days (``age_seconds / 86400``), one stacked trace per severity.

    Findings without an age are left out and counted in the title.
    """
    title = "Age of findings"
    if df.empty:
        return _empty(title, "No findings")
    age = pd.to_numeric(df["age_seconds"], errors="coerce")
    d = df.assign(age_days=age / 86400.0, severity=df["severity"].fillna("unknown"))
    no_age = int(d["age_days"].isna().sum())
    d = d[d["age_days"].notna()]
    if no_age:
        title = f"{title} ({no_age} without an age not shown)"
    if d.empty:
        return _empty(title, "No finding has an age")
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "stack"})
    for sev in _severity_order(d["severity"]):
        x = d.loc[d["severity"] == sev, "age_days"].round(4).tolist()
        fig.add_trace(
            go.Histogram(
                name=sev,
                x=x,
                nbinsx=nbins,
                marker_color=SEVERITY_COLORS.get(sev),
                hovertemplate="%{x} days<br>%{y} findings<extra>" + sev + "</extra>",
            )
        )
    fig.update_xaxes(title_text="age (days)")
    fig.update_yaxes(title_text="findings")
    return fig
