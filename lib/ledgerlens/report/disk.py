"""Where the bookies' disk goes: BookKeeper bytes by state, per namespace (pandas and plotly, no Spark).

Every function takes the disk-usage frame that ``ledgerlens.audit.disk.disk_usage`` computes (and the
audit writes as ``disk_usage.parquet``): columns ``tenant``, ``namespace``, ``state``, ``ledgers``,
``bytes``, one row per (tenant, namespace, state) with bytes. The states partition the BookKeeper
inventory: every ledger of ``bk_ledgers`` is in exactly one, so the bytes add up to the inventory's
total (docs/audit-rules.md, "Disk usage by state").

- ``disk_figure``: one horizontal stacked bar per namespace (the 15 largest, then "other namespaces").
- ``disk_table_html``: states x ledgers, bytes, share, with a totals row equal to the inventory total.
- ``disk_states_html``: the same at a glance, one line per state.
"""

from __future__ import annotations

import html as _html

import pandas as pd
import plotly.graph_objects as go

from ledgerlens.report.figures import TEMPLATE, _binary_axis, _empty, sized_bar
from ledgerlens.report.text import human_bytes, plural

STATE_COLORS: dict[str, str] = {
    "orphan": "#c0392b",
    "foreign": "#8e44ad",
    "unattributed": "#7f8c8d",
    "offloaded_not_deleted": "#e67e22",
    "retention_overdue": "#d35400",
    "inactive_cursor": "#b9770e",
    "open": "#5dade2",
    "consumed_in_retention": "#16a085",
    "live_unconsumed": "#2c7fb8",
    "other": "#95a5a6",
}
"""Every state (``ledgerlens.audit.disk.STATES``, in the audit's priority order) and its colour:
reclaimable states in reds and oranges, healthy ones in blues and greens, the same in every view."""

STATE_LABELS: dict[str, str] = {
    "orphan": "orphan",
    "foreign": "foreign",
    "unattributed": "unattributed",
    "offloaded_not_deleted": "offloaded, not deleted",
    "retention_overdue": "retention overdue",
    "inactive_cursor": "held by an inactive cursor",
    "open": "open (being written)",
    "consumed_in_retention": "consumed, within retention",
    "live_unconsumed": "live, unconsumed",
    "other": "cursors, schemas, other",
}
"""What each state is called in figures and tables."""

TOP_NAMESPACES = 15
OTHER_NAMESPACES = "other namespaces"
UNKNOWN_NAMESPACE = "(unknown)"


def _e(value: object) -> str:
    return _html.escape(str(value))


def _swatch(state: str) -> str:
    colour = STATE_COLORS.get(state, "#bdc3c7")
    return (
        f'<span style="display:inline-block;width:.8em;height:.8em;border-radius:2px;'
        f'vertical-align:baseline;margin-right:.35em;background:{colour}"></span>'
    )


def _share(share: float) -> str:
    return "< 1%" if 0 < share < 0.01 else f"{share:.0%}"


def _ordered_states(states: pd.Series) -> list[str]:
    present = set(states.dropna())
    return [s for s in STATE_COLORS if s in present] + sorted(present - set(STATE_COLORS))


def _clean(df: pd.DataFrame) -> pd.DataFrame:
    d = df.copy()
    d["bytes"] = pd.to_numeric(d["bytes"], errors="coerce").fillna(0).astype("int64")
    d["ledgers"] = pd.to_numeric(d["ledgers"], errors="coerce").fillna(0).astype("int64")
    ns = d["namespace"].fillna("").astype(str)
    d["namespace"] = ns.where(ns != "", UNKNOWN_NAMESPACE)
    return d


def by_state(df: pd.DataFrame) -> pd.DataFrame:
    """Totals per state (columns ``state``, ``ledgers``, ``bytes``, ``share``), in the audit's order."""
    d = _clean(df)
    g = d.groupby("state")[["ledgers", "bytes"]].sum()
    g = g.reindex(_ordered_states(d["state"])).reset_index()
    total = int(g["bytes"].sum())
    g["share"] = g["bytes"] / total if total else 0.0
    return g


def disk_figure(df: pd.DataFrame, *, top: int = TOP_NAMESPACES) -> go.Figure:
    """BookKeeper bytes per namespace, one horizontal bar per namespace stacked by state.

    ``df`` is the frame of ``ledgerlens.audit.disk.disk_usage`` (or ``disk_usage.parquet``). The ``top``
    namespaces with the most bytes are drawn largest first; the rest are summed into "other
    namespaces"; ledgers of no known namespace show as "(unknown)". States keep their colours
    (``STATE_COLORS``); hovering a segment shows its size and ledgers; the size axis is in binary units.
    An empty frame gives an annotated, empty figure.
    """
    title = "Where the bookies' disk goes"
    if df.empty or int(pd.to_numeric(df["bytes"], errors="coerce").fillna(0).sum()) == 0:
        return _empty(title, "No BookKeeper bytes")
    d = _clean(df)
    totals = d.groupby("namespace")["bytes"].sum().sort_values(ascending=False, kind="stable")
    keep = totals.index.tolist()[:top]
    if len(totals) > top:
        d = d.assign(namespace=d["namespace"].where(d["namespace"].isin(keep), OTHER_NAMESPACES))
        keep = [*keep, OTHER_NAMESPACES]
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "stack"})
    for state in _ordered_states(d["state"]):
        g = d[d["state"] == state].groupby("namespace")[["bytes", "ledgers"]].sum().reindex(keep).dropna()
        label = STATE_LABELS.get(state, state)
        color = STATE_COLORS.get(state, "#bdc3c7")
        fig.add_trace(
            sized_bar(
                label,
                g["bytes"],
                g["ledgers"],
                color,
                counted="ledgers",
                horizontal=True,
                hover_name=_e(label),
                textposition="none",
            )
        )
    fig.update_yaxes(title_text="namespace", categoryorder="array", categoryarray=list(reversed(keep)))
    _binary_axis(fig, "x", float(d.groupby("namespace")["bytes"].sum().max()), "size in BookKeeper")
    fig.update_layout(height=max(300, 140 + 28 * len(keep)))
    return fig


def disk_table_html(df: pd.DataFrame, *, replicated: bool = False) -> str:
    """A ``.ll-table`` of states x (ledgers, size, share of the total), with a totals row.

    The totals row is the sum over all states, which equals the inventory's total (the sum of
    ``bk_ledgers`` lengths, times each ledger's write quorum when ``replicated``). Unwrapped HTML
    fragment: put it inside ``ledgerlens.report.html.wrap`` (or another ``.ll`` block) to style it.
    """
    g = by_state(df)
    what = "bytes on the bookies (x write quorum)" if replicated else "ledger bytes (one copy)"
    head = (
        f'<table class="ll-table"><thead><tr><th>state</th><th class="ll-num">ledgers</th>'
        f'<th class="ll-num">{_e(what)}</th><th class="ll-num">share</th></tr></thead><tbody>'
    )
    rows = [
        f"<tr><td>{_swatch(r.state)}{_e(STATE_LABELS.get(r.state, r.state))} <code>{_e(r.state)}</code></td>"
        f'<td class="ll-num">{int(r.ledgers):,}</td><td class="ll-num">{_e(human_bytes(int(r.bytes)))}</td>'
        f'<td class="ll-num">{r.share:.1%}</td></tr>'
        for r in g.itertuples(index=False)
    ]
    total, ledgers = int(g["bytes"].sum()), int(g["ledgers"].sum())
    foot = (
        f'<tr><th>total</th><th class="ll-num">{ledgers:,}</th>'
        f'<th class="ll-num">{_e(human_bytes(total))}</th>'
        f'<th class="ll-num">{"100.0%" if total else ""}</th></tr>'
    )
    return head + "".join(rows) + foot + "</tbody></table>"


def disk_states_html(df: pd.DataFrame) -> str:
    """At a glance: the total, then one line per state with its size and share (unwrapped fragment)."""
    g = by_state(df)
    total = int(g["bytes"].sum())
    if not total:
        return '<p class="ll-muted">No bytes in BookKeeper.</p>'
    lines = [
        f"<li>{_swatch(r.state)}{_e(human_bytes(int(r.bytes)))} ({_share(r.share)})"
        f" {_e(STATE_LABELS.get(r.state, r.state))}"
        f' <span class="ll-muted">{_e(plural(int(r.ledgers), "ledger"))}</span></li>'
        for r in g.itertuples(index=False)
        if r.bytes
    ]
    return (
        f"<p><strong>{_e(human_bytes(total))}</strong> in BookKeeper "
        f'<span class="ll-muted">({_e(plural(int(g["ledgers"].sum()), "ledger"))})</span>:</p>'
        f'<ul class="ll-disk">{"".join(lines)}</ul>'
    )
