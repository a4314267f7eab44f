"""Plotly figures over the findings table.

Pure functions: a pandas findings frame (columns of ``ledgerlens.inventory.schemas.FINDINGS``) goes in, a
``plotly.graph_objects.Figure`` comes out, drawn with the house template ``TEMPLATE``. Nothing is
shown or written here; notebooks decide how figures are rendered (``use_offline_renderer``: inline,
no CDN; ``static=True``: bar figures as inline SVG, ``report.svg``, so a report carries no plotly.js).
Sizes read in binary units (KiB, MiB, GiB), ages in buckets (< 1 h ... older), counts by
severity so that zero-byte critical findings show. Every function copes with an empty frame by
returning an annotated, empty figure; ``report_figures`` returns only the figures that have data.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.report.explanations import parse_evidence
from ledgerlens.report.svg import figure_svg
from ledgerlens.report.text import SEVERITY_COLORS, SEVERITY_ORDER, human_bytes, impact_tier

ORPHAN_KINDS = ("orphan_ledger", "orphan_offload_object", "remote_segment_orphan_object")
KIND_COLORS = {
    "orphan_ledger": "#2c7fb8",
    "orphan_offload_object": "#41ab5d",
    "remote_segment_orphan_object": "#253494",
}
AGE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("< 1 h", 3600),
    ("< 1 d", 86400),
    ("< 7 d", 7 * 86400),
    ("< 30 d", 30 * 86400),
    ("older", float("inf")),
)

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


# --- rendering --------------------------------------------------------------------------------------


class OfflineRenderer(MimetypeRenderer):
    """Plotly's JSON for JupyterLab plus self-contained HTML for reports, never from a CDN.

    The HTML is plotly's (plotly.js inlined once per kernel, in the first figure shown; MathJax
    never requested) or, with ``static``, the figure as inline SVG (``figure_html``): a headless
    report then weighs kilobytes instead of megabytes, while JupyterLab keeps drawing the JSON with
    plotly, interactive.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.sent: dict[str, bool] = {"plotlyjs": False}  # shared by the copies plotly makes per figure

    def to_mimebundle(self, fig_dict: Any) -> dict[str, Any]:
        fig = go.Figure(fig_dict)
        html = figure_svg(fig) if self.static else None
        if html is None:
            html = pio.to_html(
                fig,
                include_plotlyjs=not self.sent["plotlyjs"],
                include_mathjax=False,
                full_html=False,
                config={"displaylogo": False, "responsive": True},
            )
            self.sent["plotlyjs"] = True
        # through plotly's JSON encoder: numpy values (datetime64 axes) become what Jupyter can send
        plain = json.loads(pio.to_json(fig, validate=False))
        return {"application/vnd.plotly.v1+json": plain, "text/html": html}


def use_offline_renderer(static: bool = False) -> OfflineRenderer:
    """Make ``fig.show()`` render with ``OfflineRenderer`` (plotly.js sent again with the next figure).

    ``static``: bar figures as inline SVG in the HTML (headless reports); other figures keep plotly.
    """
    renderer = OfflineRenderer(static=static)
    pio.renderers["ledgerlens"] = renderer
    pio.renderers.default = "ledgerlens"
    return renderer


def figure_html(fig: go.Figure) -> str:
    """``fig`` as a static HTML fragment: inline SVG for bar figures, else plotly's div with plotly.js."""
    svg = figure_svg(fig)
    if svg is not None:
        return svg
    return pio.to_html(fig, include_plotlyjs=True, include_mathjax=False, full_html=False)


# --- helpers ----------------------------------------------------------------------------------------


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


def binary_ticks(max_value: float, n: int = 5) -> tuple[list[float], list[str]]:
    """Tick values and binary-unit labels (``'512 KiB'``, ``'1.0 MiB'``) from 0 to ``max_value``."""
    if not max_value or max_value <= 0:
        return [0], ["0 B"]
    unit = 1
    while max_value / unit >= 1024 and unit < 1024**5:
        unit *= 1024
    span = max_value / unit
    step = next((s for s in (0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500) if span / s <= n), 1000)
    ticks, v = [], 0.0
    while v <= span * 1.0001 + step:
        ticks.append(v * unit)
        if v > span:
            break
        v += step
    return ticks, [human_bytes(t) if t else "0 B" for t in ticks]


def _binary_axis(fig: go.Figure, axis: str, max_value: float, title: str) -> None:
    vals, text = binary_ticks(max_value)
    update = {"title_text": title, "tickmode": "array", "tickvals": vals, "ticktext": text}
    if axis == "x":
        fig.update_xaxes(**update)
    else:
        fig.update_yaxes(**update)


def namespace_of(row: pd.Series | dict[str, Any]) -> str | None:
    """A finding's namespace: the column, else from the evidence (managed ledger, owner, schema id)."""
    ns = row.get("namespace")
    if isinstance(ns, str) and ns:
        return ns
    ev = parse_evidence(row.get("evidence"))
    for key in ("managed_ledger", "owner", "ManagedLedgerName", "managed_ledger_name"):
        name = ev.get(key) or (row.get("managed_ledger") if key == "managed_ledger" else None)
        if isinstance(name, str) and name:
            try:
                return parse_managed_ledger(name).namespace
            except Exception:  # noqa: BLE001 - not a managed-ledger name; try the next field
                continue
    schema = ev.get("schema_id")
    if isinstance(schema, str) and schema.count("/") >= 2:
        return "/".join(schema.split("/")[:2])
    tenant = row.get("tenant")
    return tenant if isinstance(tenant, str) and tenant else None


# --- figures ----------------------------------------------------------------------------------------


def sized_bar(
    name: str,
    sizes: pd.Series,
    counts: pd.Series,
    color: str | None,
    *,
    counted: str = "findings",
    horizontal: bool = False,
    hover_name: str | None = None,
    **bar: Any,
) -> go.Bar:
    """One bar trace of ``sizes`` (bytes) by category (their index), for a stacked bar figure: each bar's
    text is its size and its hover names the category, the size and its ``counts`` (``<n> <counted>``),
    then ``hover_name`` (the trace's ``name`` by default). ``horizontal`` puts the categories on ``y``;
    ``bar``: more ``go.Bar`` properties."""
    cat, value = ("y", "x") if horizontal else ("x", "y")
    trace = name if hover_name is None else hover_name
    return go.Bar(
        name=name,
        customdata=counts.astype("int64").tolist(),
        text=[human_bytes(v) for v in sizes],
        marker_color=color,
        hovertemplate=f"%{{{cat}}}<br>%{{text}}<br>%{{customdata}} {counted}<extra>{trace}</extra>",
        **{cat: sizes.index.tolist(), value: sizes.astype("int64").tolist()},
        **({"orientation": "h"} if horizontal else {}),
        **bar,
    )


def counts_by_kind(df: pd.DataFrame) -> go.Figure:
    """Findings per kind, one stacked horizontal bar trace per severity (critical first), so that
    findings without bytes (missing data, corrupt metadata) are as visible as large ones. Kinds in
    impact order (``text.impact_tier``: data loss at the top), then by count."""
    title = "Findings by kind and severity"
    if df.empty:
        return _empty(title, "No findings")
    d = df.assign(severity=df["severity"].fillna("unknown"))
    d = d.assign(tier=[impact_tier(k, s) for k, s in zip(d["kind"], d["severity"], strict=True)])
    worst = d.groupby("kind")["tier"].min()
    size = d.groupby("kind").size()
    kinds = sorted(size.index, key=lambda k: (worst[k], -size[k], k))
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "stack"})
    for sev in _severity_order(d["severity"]):
        g = d[d["severity"] == sev].groupby("kind").size().reindex(kinds).dropna()
        fig.add_trace(
            go.Bar(
                name=sev,
                orientation="h",
                y=g.index.tolist(),
                x=g.astype("int64").tolist(),
                marker_color=SEVERITY_COLORS.get(sev),
                hovertemplate="%{y}<br>%{x} findings<extra>" + sev + "</extra>",
            )
        )
    fig.update_yaxes(title_text="", categoryorder="array", categoryarray=list(reversed(kinds)))
    fig.update_xaxes(title_text="findings", rangemode="tozero")
    fig.update_layout(height=max(260, 120 + 30 * len(kinds)))
    return fig


def bytes_by_kind(df: pd.DataFrame) -> go.Figure:
    """Bytes per finding kind, one stacked bar trace per severity; kinds by total bytes, largest first.

    Each trace's ``customdata`` holds the number of findings behind each bar; the size axis is
    labelled in binary units.
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
        fig.add_trace(sized_bar(sev, g["sum"], g["size"], SEVERITY_COLORS.get(sev)))
    fig.update_xaxes(title_text="kind", categoryorder="array", categoryarray=kinds)
    _binary_axis(fig, "y", float(totals["sum"].max()), "size")
    return fig


def orphan_bytes_by_namespace(df: pd.DataFrame, *, top: int = 20) -> go.Figure:
    """Bytes of orphaned storage per namespace (``tenant/ns``), one stacked bar trace per orphan kind.

    Only orphan kinds (``ORPHAN_KINDS``) count. The namespace comes from the finding, else from its
    evidence (``namespace_of``). Namespaces are ordered by orphan bytes, largest first; beyond
    ``top`` they are summed into ``(other)``. Horizontal bars: the namespace is ``y``.
    """
    title = "Orphaned bytes by namespace"
    d = df[df["kind"].isin(ORPHAN_KINDS)] if not df.empty else df
    if d.empty:
        return _empty(title, "No orphaned storage")
    ns = pd.Series([namespace_of(r) for _, r in d.iterrows()], index=d.index, dtype="object")
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
        fig.add_trace(sized_bar(kind, g["sum"], g["size"], KIND_COLORS.get(kind), horizontal=True))
    # Largest at the top of a horizontal bar chart.
    fig.update_yaxes(title_text="namespace", categoryorder="array", categoryarray=list(reversed(keep)))
    _binary_axis(fig, "x", float(d.groupby("ns")["bytes"].sum().max()), "size")
    fig.update_layout(height=max(300, 120 + 28 * len(keep)))
    return fig


def age_bucket(seconds: float | None) -> str | None:
    """``'< 1 h'``, ``'< 1 d'``, ``'< 7 d'``, ``'< 30 d'`` or ``'older'``; None without an age."""
    if seconds is None or pd.isna(seconds):
        return None
    return next(label for label, limit in AGE_BUCKETS if seconds < limit)


def age_by_bucket(df: pd.DataFrame) -> go.Figure:
    """Findings per age bucket (``AGE_BUCKETS``), one stacked trace per severity.

    Findings without an age are left out and counted in the title.
    """
    title = "Age of findings"
    if df.empty:
        return _empty(title, "No findings")
    age = pd.to_numeric(df["age_seconds"], errors="coerce")
    d = df.assign(bucket=[age_bucket(a) for a in age], severity=df["severity"].fillna("unknown"))
    no_age = int(d["bucket"].isna().sum())
    d = d[d["bucket"].notna()]
    if no_age:
        title = f"{title} ({no_age} without an age not shown)"
    if d.empty:
        return _empty(title, "No finding has an age")
    labels = [label for label, _ in AGE_BUCKETS]
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "stack"})
    for sev in _severity_order(d["severity"]):
        g = d[d["severity"] == sev].groupby("bucket").size().reindex(labels).fillna(0).astype("int64")
        fig.add_trace(
            go.Bar(
                name=sev,
                x=labels,
                y=g.tolist(),
                marker_color=SEVERITY_COLORS.get(sev),
                hovertemplate="%{x}<br>%{y} findings<extra>" + sev + "</extra>",
            )
        )
    fig.update_xaxes(title_text="age", categoryorder="array", categoryarray=labels)
    fig.update_yaxes(title_text="findings", rangemode="tozero")
    return fig


def report_figures(df: pd.DataFrame) -> list[go.Figure]:
    """The figures worth drawing for ``df``: none on a healthy cluster, never an empty chart."""
    if df.empty:
        return []
    figs = [counts_by_kind(df)]
    if int(_bytes(df).sum()) > 0:
        figs.append(bytes_by_kind(df))
    orphans = df[df["kind"].isin(ORPHAN_KINDS)]
    if not orphans.empty and int(_bytes(orphans).sum()) > 0:
        figs.append(orphan_bytes_by_namespace(df))
    if pd.to_numeric(df["age_seconds"], errors="coerce").notna().any():
        figs.append(age_by_bucket(df))
    return figs
