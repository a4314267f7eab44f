"""FindingsExplorer: filter, sort, page through and open the findings of an audit in a notebook.

A plain class composing ipywidgets (msticpy style): ``.widget`` is the root widget, ``.value`` the
currently filtered and sorted findings, ``.selected`` the finding whose detail panel is open.
Constructor arguments seed the filters, so a papermill parameters cell can open the explorer
pre-filtered. Re-running the cell that creates it is safe: with a ``key``, the previous explorer of
that key is closed and, unless filters are seeded explicitly, its state is carried over.

The table wraps its text to the notebook's width (no inner horizontal scrollbar); a column chooser
adds or removes columns. Every row has a button that opens the detail panel (all fields, evidence,
reason, next step, rule) right under that row, across the table's full width: whatever the window
width, the panel opens where the person clicked. Findings are in the report's impact order
(``ledgerlens.report.html.order_findings``: data loss first, new before known, largest first); new
findings (a ``new`` column, when the audit has one) carry a "new" mark and a "new only" filter.
Search filters as you type and matches what the table shows, every finding of a topic included
(schema, cursor, offload object and bookkeeper-ledger findings name their topic differently).
Colours come from JupyterLab's theme variables, or are explicit colour and background pairs, so
the explorer reads in light and dark themes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import ipywidgets as w
import pandas as pd

from ledgerlens.formats.names import decode_component, parse_managed_ledger
from ledgerlens.report.explanations import AuditedWhere, explain, parse_evidence
from ledgerlens.report.html import STYLE, finding_detail_html, order_findings
from ledgerlens.report.text import SEVERITY_ORDER, human_bytes, human_duration, human_time, is_missing

IMPACT = "impact"
SORT_COLUMNS = {
    IMPACT: "",  # the report's order: order_findings
    "bytes": "bytes",
    "age": "age_seconds",
    "first seen": "first_seen",
    "kind": "kind",
    "namespace": "namespace",
    "managed ledger": "managed_ledger",
    "ledger id": "ledger_id",
}
SORT_ALIASES = {"severity": IMPACT}
"""Older names accepted by ``sort_by`` (severity order is the impact order's first key)."""

COLUMNS: dict[str, tuple[str, int]] = {
    # shown name -> (source, relative width)
    "severity": ("severity", 15),
    "kind": ("kind", 16),
    "topic": ("topic", 24),
    "ledger": ("ledger_id", 9),
    "subscription": ("cursor", 11),
    "object key": ("object_key", 18),
    "path": ("path", 22),
    "namespace": ("namespace", 12),
    "component": ("component", 11),
    "size": ("bytes", 9),
    "age": ("age_seconds", 7),
    "first seen": ("first_seen", 12),
    "action": ("action", 9),
    "reason": ("reason", 36),
}
DEFAULT_COLUMNS = ("severity", "kind", "topic", "ledger", "size", "age", "reason")
SEARCH_HINT = (
    "type to filter: topic (persistent://tenant/ns/topic), ledger id, subscription, path, key, kind, reason"
)
_RIGHT = ("ledger", "size", "age")
_DERIVED = ("topic", "reason", "_search", "_new")
_HOUR = 3600
_BUTTON = "34px"

# The report's stylesheet (``report.html.STYLE``) paints a light page: explicit dark text on white.
# Inside the explorer every colour and background of its ``.ll`` content is replaced (``!important``:
# the report's rules must not win whatever their specificity) by JupyterLab's theme variables, so
# text follows the theme; badges are explicit pairs (white on a dark hue, at least 5.4:1).
EXPLORER_CSS = """<style>
.ledgerlens-explorer .ll{color:var(--jp-content-font-color1,#1f2933)!important;
  background:transparent!important}
.ledgerlens-explorer .ll *{color:inherit!important;background:transparent!important;
  border-color:var(--jp-border-color2,#e5e8eb)!important}
.ledgerlens-explorer .ll .ll-muted,.ledgerlens-explorer .ll .ll-meta,.ledgerlens-explorer .ll .ll-label,
.ledgerlens-explorer .ll table.ll-kv th,.ledgerlens-explorer .ll dl.ll-ev dt{
  color:var(--jp-content-font-color2,#52606d)!important}
.ledgerlens-explorer .ll table.ll-table th{background:var(--jp-layout-color2,#f4f6f8)!important}
.ledgerlens-explorer .ll table.ll-table.ll-kv th{background:transparent!important}
.ledgerlens-explorer .ll code,.ledgerlens-explorer .ll pre{
  background:var(--jp-layout-color2,#f4f6f8)!important}
.ledgerlens-explorer .ll a,.ledgerlens-explorer .ll summary{
  color:var(--jp-content-link-color,#2c5282)!important}
.ledgerlens-explorer .ll .ll-badge{display:inline-block;padding:0 5px;margin:0 3px 1px 0;border-radius:3px;
  font-size:11.5px;font-weight:700;letter-spacing:.03em;line-height:1.5;color:#fff!important;
  background:#52606d!important}
.ledgerlens-explorer .ll .ll-badge-critical{background:#a93226!important}
.ledgerlens-explorer .ll .ll-badge-warning{background:#8d5a00!important}
.ledgerlens-explorer .ll .ll-badge-new{background:#1e6b3a!important}
.ledgerlens-explorer .ll table.ll-row,.ledgerlens-explorer .ll table.ll-head{margin:0}
.ledgerlens-explorer .ledgerlens-row .ll table.ll-row td{border-bottom:0}
.ledgerlens-explorer .ll .ll-clamp{display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;
  overflow:hidden}
.ledgerlens-explorer .ledgerlens-row{border-bottom:1px solid var(--jp-border-color2,#e5e8eb)}
.ledgerlens-explorer .ledgerlens-row.ledgerlens-open{background:var(--jp-layout-color2,#eef1f4)}
.ledgerlens-explorer .ledgerlens-detail{margin:0 0 8px 0;padding:4px 10px 6px 12px;
  border-left:4px solid var(--jp-brand-color1,#1976d2);background:var(--jp-layout-color1,#fff)}
.ledgerlens-explorer .ledgerlens-detail .ll .ll-detail h3{margin-top:4px}
</style>"""


def _ll(body: str) -> str:
    """``body`` in the report's ``.ll`` container (the explorer loads the stylesheet once)."""
    return f'<div class="ll">{body}</div>'


def _esc(text: Any) -> str:
    return html.escape("" if text is None else str(text))


def _as_list(values: str | Iterable[str] | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        return [v.strip() for v in values.split(",") if v.strip()]
    return [str(v) for v in values]


def _options(column: pd.Series, extra: Iterable[str] = (), order: Iterable[str] = ()) -> list[str]:
    present = set(column.dropna().astype(str)) | set(extra)
    first = [o for o in order if o in present]
    return first + sorted(present - set(first))


def _text(value: Any) -> str:
    return "" if value is None or is_missing(value) else str(value)


def _topic(ml: Any) -> str:
    if not _text(ml):
        return ""
    try:
        return parse_managed_ledger(str(ml)).topic
    except Exception:  # noqa: BLE001 - shown as stored
        return str(ml)


def schema_topic(schema_id: str) -> str:
    """The topic of a schema id (``tenant/ns/<encoded topic>``, the part after ``/schemas/``).

    A schema belongs to a topic's base name (no partition suffix); it is shown as the persistent
    topic, as people search for it. '' when ``schema_id`` has no tenant/namespace/topic shape."""
    parts = [p for p in schema_id.strip("/").split("/") if p]
    if len(parts) < 3:
        return ""
    try:
        local = decode_component(parts[-1])
    except Exception:  # noqa: BLE001 - shown as stored
        local = parts[-1]
    return f"persistent://{'/'.join(parts[:-1])}/{local}"


def finding_topic(row: Mapping[str, Any]) -> str:
    """The topic a finding is about, ``persistent://tenant/ns/topic``, whatever names it.

    The ``managed_ledger`` column when set; otherwise a schema path (``/schemas/tenant/ns/topic``),
    or the evidence: ``managed_ledger``, ``schema_id``, the owner of a schema, delayed-index or
    compacted ledger, or the owner's ``/managed-ledgers/...`` path. '' when nothing names one."""
    ml = _text(row.get("managed_ledger"))
    if ml:
        return _topic(ml)
    path = _text(row.get("path"))
    if path.startswith("/schemas/"):
        return schema_topic(path[len("/schemas/") :])
    ev = parse_evidence(row.get("evidence"))
    if ev.get("managed_ledger"):
        return _topic(ev["managed_ledger"])
    if ev.get("schema_id"):
        return schema_topic(str(ev["schema_id"]))
    for key in ("delayed_topic", "compacted_topic"):
        if ev.get(key):
            return str(ev[key])
    owner = _text(ev.get("owner"))
    if owner and (_text(row.get("component")) == "schema" or ev.get("component") == "schema"):
        return schema_topic(owner)
    if "/persistent/" in owner:
        return _topic(owner)
    owner_path = _text(ev.get("owner_path"))
    if owner_path.startswith("/managed-ledgers/"):
        return _topic(owner_path[len("/managed-ledgers/") :])
    return ""


def is_new(df: pd.DataFrame) -> pd.Series:
    """Which findings are new since the previous audit (all False without a ``new`` column)."""
    if "new" not in df.columns:
        return pd.Series(False, index=df.index, dtype=bool)
    return df["new"].astype("boolean").fillna(False).astype(bool)


def shown_text(row: Mapping[str, Any], column: str) -> str:
    """The text the table shows for ``column`` (a ``COLUMNS`` name) of one finding."""
    source = COLUMNS[column][0]
    value = row.get(source)
    if value is None or is_missing(value):
        return ""
    if source == "bytes":
        return human_bytes(value)
    if source == "age_seconds":
        return human_duration(value)
    if source == "first_seen":
        return human_time(value)
    if source == "ledger_id":
        return str(int(value))
    return str(value)


def search_text(row: Mapping[str, Any]) -> str:
    """What search matches for one finding (lower case): every column's shown text (``topic`` and
    ``reason`` included), the managed-ledger name as stored, and the word ``new`` for new findings."""
    shown = [shown_text(row, c) for c in COLUMNS]
    extra = [_text(row.get("managed_ledger")), "new" if row.get("_new") else ""]
    return " ".join(t for t in [*shown, *extra] if t).lower()


def impact_sort(df: pd.DataFrame, sort_by: str = IMPACT, ascending: bool = False) -> pd.DataFrame:
    """Sort findings: the impact order (``order_findings``), or ``sort_by`` (a ``SORT_COLUMNS``
    name) with the impact order breaking ties. Descending puts the most pressing first; missing
    values go last either way."""
    if df.empty:
        return df
    base = order_findings(df)
    column = SORT_COLUMNS[SORT_ALIASES.get(sort_by, sort_by)]
    if not column:
        return base.iloc[::-1] if ascending else base
    if column not in base.columns:
        return base
    primary = base[column]
    if column in ("bytes", "age_seconds", "first_seen", "ledger_id"):
        primary = pd.to_numeric(primary, errors="coerce")
    order = primary.sort_values(ascending=ascending, na_position="last", kind="stable").index
    return base.loc[order]


def _severity_badge(severity: str) -> str:
    return f'<span class="ll-badge ll-badge-{_esc(severity)}">{_esc(severity)}</span>'


NEW_BADGE = '<span class="ll-badge ll-badge-new" title="new since the previous audit">new</span>'


class FindingsExplorer:
    """Filter controls, totals, a paged table whose rows open their detail under them.

    Parameters
    ----------
    findings
        Findings (columns of ``ledgerlens.inventory.schemas.FINDINGS``; ``first_seen`` and ``new`` when the
        audit compared with a previous one).
    kinds, severities, components, namespaces
        Initial selections; ``None`` or empty selects everything. A comma-separated string is
        accepted (papermill parameters). ``namespaces`` entries may be a tenant (``"public"``),
        meaning all of its namespaces.
    min_age_hours, min_bytes
        Keep findings at least this old / this large (findings without an age or size are kept
        only while the threshold is 0).
    search
        Text matched (case-insensitive, as you type) against every column's shown text: the topic
        as ``persistent://...`` (for schema, cursor and offload findings too), managed ledger,
        subscription, path, object key, kind, ledger id, namespace, reason.
    new_only
        Keep only findings new since the previous audit.
    sort_by, ascending
        Initial sort: one of ``SORT_COLUMNS`` (``"impact"``, the report's order, by default;
        ``"severity"`` means the same). Ties are broken by the impact order.
    page_size
        Rows per page (totals always cover the whole selection).
    columns
        Table columns (names of ``COLUMNS``); the column chooser changes them.
    key
        Name under which the explorer is remembered in this kernel (re-run cells).
    where
        The audit's context (``ledgerlens.report.audit_context``): addresses filled into next steps.
    """

    _live: ClassVar[dict[str, FindingsExplorer]] = {}
    _DEFAULTS: ClassVar[dict[str, Any]] = dict(
        kinds=None,
        severities=None,
        components=None,
        namespaces=None,
        min_age_hours=0,
        min_bytes=0,
        search="",
        new_only=False,
        sort_by=IMPACT,
        ascending=False,
        columns=None,
    )

    def __init__(
        self,
        findings: pd.DataFrame,
        *,
        kinds: str | Iterable[str] | None = None,
        severities: str | Iterable[str] | None = None,
        components: str | Iterable[str] | None = None,
        namespaces: str | Iterable[str] | None = None,
        min_age_hours: float = 0,
        min_bytes: int = 0,
        search: str = "",
        new_only: bool = False,
        sort_by: str = IMPACT,
        ascending: bool = False,
        page_size: int = 25,
        columns: Iterable[str] | None = None,
        key: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> None:
        sort_by = SORT_ALIASES.get(sort_by, sort_by)
        if sort_by not in SORT_COLUMNS:
            raise ValueError(f"sort_by {sort_by!r}: expected one of {', '.join(SORT_COLUMNS)}")
        chosen = list(columns) if columns is not None else list(DEFAULT_COLUMNS)
        unknown = [c for c in chosen if c not in COLUMNS]
        if unknown:
            raise ValueError(f"columns {unknown}: expected names of {', '.join(COLUMNS)}")
        self.where = AuditedWhere.of(where)
        self._df = self._prepare(findings.reset_index(drop=True))
        self.has_new = "new" in findings.columns
        self._callbacks: list[Callable[[pd.DataFrame], None]] = []
        self.key = key
        self.page_size = max(1, int(page_size))
        seed: dict[str, Any] = dict(
            kinds=_as_list(kinds),
            severities=_as_list(severities),
            components=_as_list(components),
            namespaces=_as_list(namespaces),
            min_age_hours=min_age_hours,
            min_bytes=min_bytes,
            search=search,
            new_only=bool(new_only),
            sort_by=sort_by,
            ascending=ascending,
            columns=chosen if columns is not None else None,
        )
        previous = self._live.pop(key, None) if key else None
        if previous is not None:
            seed = self._merge_previous(seed, previous)
            previous.close()
        if seed["columns"] is None:
            seed["columns"] = chosen
        self._build_controls(seed)
        self._build_table()
        self._build_layout()
        self.value: pd.DataFrame = self._df.iloc[:0]
        for control in self._controls():
            control.observe(self._on_change, names="value")
        self.columns.observe(lambda _c: self._draw_page(), names="value")
        self.reset.on_click(lambda _b: self.clear_filters())
        self.prev_page.on_click(lambda _b: self.show_page(self.page - 1))
        self.next_page.on_click(lambda _b: self.show_page(self.page + 1))
        self.refresh()
        if key:
            self._live[key] = self

    # --- building ------------------------------------------------------------------------------

    def _build_controls(self, seed: dict[str, Any]) -> None:
        df = self._df
        box = w.Layout(width="270px", height="104px")
        self.kinds = w.SelectMultiple(
            options=_options(df["kind"], seed["kinds"] or ()), description="kind", layout=box
        )
        self.severities = w.SelectMultiple(
            options=_options(df["severity"], seed["severities"] or (), SEVERITY_ORDER),
            description="severity",
            layout=w.Layout(width="190px", height="104px"),
        )
        self.components = w.SelectMultiple(
            options=_options(df["component"], seed["components"] or ()), description="component", layout=box
        )
        ns_seed = self._expand_tenants(seed["namespaces"])
        self.namespaces = w.SelectMultiple(
            options=_options(df["namespace"], ns_seed or ()),
            description="namespace",
            layout=w.Layout(width="250px", height="104px"),
        )
        self.columns = w.SelectMultiple(
            options=list(COLUMNS), description="columns", layout=w.Layout(width="210px", height="104px")
        )
        self.min_age_hours = w.BoundedFloatText(
            value=float(seed["min_age_hours"]), min=0, max=1e9, description="min age (h)",
            layout=w.Layout(width="190px"),
        )  # fmt: skip
        self.min_bytes = w.BoundedIntText(
            value=int(seed["min_bytes"]), min=0, max=2**62, description="min bytes",
            layout=w.Layout(width="210px"),
        )  # fmt: skip
        self.search = w.Text(
            value=seed["search"],
            description="search",
            placeholder=SEARCH_HINT,
            tooltip="Filters as you type (case-insensitive, part of any shown text). " + SEARCH_HINT,
            continuous_update=True,
            layout=w.Layout(flex="1 1 520px", min_width="260px", max_width="760px"),
        )
        self.new_only = w.Checkbox(
            value=bool(seed["new_only"]) and self.has_new,
            description="new only",
            indent=False,
            disabled=not self.has_new,
            tooltip=(
                "only findings new since the previous audit"
                if self.has_new
                else "these findings do not say which are new (no previous audit to compare with)"
            ),
            layout=w.Layout(width="100px"),
        )
        self.sort_by = w.Dropdown(
            options=list(SORT_COLUMNS), value=seed["sort_by"], description="sort by",
            layout=w.Layout(width="210px"),
        )  # fmt: skip
        self.ascending = w.ToggleButton(
            value=bool(seed["ascending"]),
            description="ascending",
            icon="sort",
            layout=w.Layout(width="110px"),
        )
        self.reset = w.Button(description="clear filters", layout=w.Layout(width="110px"))
        self.kinds.value = tuple(seed["kinds"] or ())
        self.severities.value = tuple(seed["severities"] or ())
        self.components.value = tuple(seed["components"] or ())
        self.namespaces.value = tuple(ns_seed or ())
        self.columns.value = tuple(c for c in seed["columns"] if c in COLUMNS)

    def _build_table(self) -> None:
        button = w.Layout(width="110px")
        self.prev_page = w.Button(description="previous", icon="chevron-left", layout=button)
        self.next_page = w.Button(description="next", icon="chevron-right", layout=button)
        self.page_label = w.HTML()
        self.totals = w.HTML()
        self.hint = w.HTML(
            _ll('<span class="ll-muted">The ▸ button of a row opens its evidence, reason and next step '
                "under it; ▾ closes it.</span>")
        )  # fmt: skip
        self.header = w.HTML()
        self.rows = w.VBox(layout=w.Layout(width="auto"))
        self.detail = w.HTML()  # the detail of ``selected`` (the last one opened)
        self.panel = w.VBox()
        self._panels: dict[int, w.VBox] = {}  # open details by finding (row index), opened order
        self.page = 0
        self.selected: dict[str, Any] | None = None
        self._row_boxes: list[w.VBox] = []
        self._row_buttons: list[w.Button] = []
        self._row_index: list[int] = []
        self._shown = self._df.iloc[:0]
        self._drawn = False

    def _build_layout(self) -> None:
        wrap_row = w.Layout(flex_flow="row wrap", width="100%", align_items="center")
        style = w.HTML(STYLE + EXPLORER_CSS, layout=w.Layout(display="none"))
        filters = [self.kinds, self.severities, self.components, self.namespaces, self.columns]
        top = w.Layout(flex_flow="row wrap", width="100%", align_items="flex-start")
        self.widget = w.VBox(
            [
                style,
                w.HBox(filters, layout=top),
                w.HBox([self.search, self.new_only], layout=wrap_row),
                w.HBox([self.min_age_hours, self.min_bytes, self.sort_by, self.ascending, self.reset],
                       layout=wrap_row),
                self.totals,
                self.hint,
                self.header,
                self.rows,
                w.HBox([self.prev_page, self.page_label, self.next_page], layout=wrap_row),
            ],
            layout=w.Layout(width="100%", max_width="100%", overflow="hidden"),
        )  # fmt: skip
        self.widget.add_class("ledgerlens-explorer")
        self._style = style

    # --- data ----------------------------------------------------------------------------------

    def _prepare(self, df: pd.DataFrame) -> pd.DataFrame:
        """Add what the table shows and searches: topic names, reasons, new marks, one search text."""
        d = df.copy()
        records = d.to_dict(orient="records")
        d["topic"] = pd.Series([finding_topic(r) for r in records], index=d.index, dtype="object")
        d["reason"] = pd.Series(
            [explain(r, self.where).reason for r in records], index=d.index, dtype="object"
        )
        d["_new"] = is_new(d)
        rows = d.to_dict(orient="records")
        d["_search"] = pd.Series([search_text(r) for r in rows], index=d.index, dtype="object")
        return d

    def _public(self, df: pd.DataFrame) -> pd.DataFrame:
        from ledgerlens.inventory.schemas import FINDINGS, columns

        names = columns(FINDINGS)
        extra = [c for c in df.columns if c not in names and c not in _DERIVED]
        return df[[c for c in names if c in df.columns] + extra]

    # --- state ---------------------------------------------------------------------------------

    def _controls(self) -> list[w.ValueWidget]:
        return [
            self.kinds,
            self.severities,
            self.components,
            self.namespaces,
            self.min_age_hours,
            self.min_bytes,
            self.search,
            self.new_only,
            self.sort_by,
            self.ascending,
        ]

    def state(self) -> dict[str, Any]:
        """The current filters, sort and columns, as constructor keyword arguments."""
        return dict(
            kinds=list(self.kinds.value),
            severities=list(self.severities.value),
            components=list(self.components.value),
            namespaces=list(self.namespaces.value),
            min_age_hours=self.min_age_hours.value,
            min_bytes=self.min_bytes.value,
            search=self.search.value,
            new_only=self.new_only.value,
            sort_by=self.sort_by.value,
            ascending=self.ascending.value,
            columns=list(self.columns.value),
        )

    @classmethod
    def _merge_previous(cls, seed: dict[str, Any], previous: FindingsExplorer) -> dict[str, Any]:
        """Previous state fills every filter the caller left at its default."""
        old = previous.state()
        return {k: (old[k] if v == cls._DEFAULTS[k] else v) for k, v in seed.items()}

    def _expand_tenants(self, names: list[str] | None) -> list[str] | None:
        if not names:
            return names
        present = set(self._df["namespace"].dropna().astype(str))
        out: list[str] = []
        for name in names:
            if "/" not in name:
                under = sorted(ns for ns in present if ns.split("/", 1)[0] == name)
                out.extend(under or [name])
            else:
                out.append(name)
        return list(dict.fromkeys(out))

    def clear_filters(self) -> None:
        """Select everything again (the sort and columns are kept)."""
        with self.widget.hold_sync():
            for control in (self.kinds, self.severities, self.components, self.namespaces):
                control.unobserve(self._on_change, names="value")
                control.value = ()
                control.observe(self._on_change, names="value")
            self.min_age_hours.value = 0
            self.min_bytes.value = 0
            self.search.value = ""
            self.new_only.value = False
        self.refresh()

    def on_change(self, callback: Callable[[pd.DataFrame], None]) -> None:
        """Call ``callback(value)`` whenever the selection changes."""
        self._callbacks.append(callback)

    def close(self) -> None:
        """Close every widget (frees the front-end models)."""
        extra = [self.columns, self.reset, self.prev_page, self.next_page, self.page_label, self.totals]
        panel = [self.detail, self.panel, self.hint, self._style, *self._panel_widgets()]
        for child in [*self._controls(), *extra, self.header, *panel, *self._row_widgets(), self.rows]:
            child.close()
        self.widget.close()

    # --- filtering -----------------------------------------------------------------------------

    def _on_change(self, _change: dict[str, Any]) -> None:
        self.refresh()

    def filtered(self) -> pd.DataFrame:
        """Apply the filters and the sort to the findings (with the shown ``topic`` and ``reason``)."""
        df = self._df
        mask = pd.Series(True, index=df.index)
        for control, column in (
            (self.kinds, "kind"),
            (self.severities, "severity"),
            (self.components, "component"),
            (self.namespaces, "namespace"),
        ):
            if control.value:
                mask &= df[column].isin(control.value)
        if self.min_age_hours.value > 0:
            age = pd.to_numeric(df["age_seconds"], errors="coerce")
            mask &= age.notna() & (age >= self.min_age_hours.value * _HOUR)
        if self.min_bytes.value > 0:
            size = pd.to_numeric(df["bytes"], errors="coerce")
            mask &= size.notna() & (size >= self.min_bytes.value)
        if self.new_only.value:
            mask &= df["_new"]
        text = self.search.value.strip().lower()
        if text:
            mask &= df["_search"].str.contains(text, regex=False).fillna(False).astype(bool)
        return impact_sort(df[mask], self.sort_by.value, bool(self.ascending.value))

    def refresh(self) -> None:
        """Recompute ``.value``, the totals and the first page from the controls.

        A change that leaves the same findings in the same order (a search typed further, filters
        cleared twice) keeps the page as drawn: no row is redrawn under the pointer."""
        shown = self.filtered()
        same = self._drawn and shown.index.equals(self._shown.index)
        self._shown = shown
        self.value = self._public(shown)
        n = len(shown)
        total = int(pd.to_numeric(shown["bytes"], errors="coerce").fillna(0).sum())
        by_sev = shown["severity"].value_counts()
        parts = ", ".join(f"{int(by_sev.get(s, 0))} {s}" for s in SEVERITY_ORDER)
        new = f"; <b>{int(shown['_new'].sum())}</b> new" if self.has_new else ""
        self.totals.value = (
            f"<b>{n}</b> of {len(self._df)} findings selected, <b>{human_bytes(total)}</b> "
            f"({total:,} bytes); {parts}{new}"
        )
        if not same:
            self.show_page(0)
        for callback in self._callbacks:
            callback(self.value)

    # --- the table -----------------------------------------------------------------------------

    @property
    def pages(self) -> int:
        """Number of pages of the current selection (at least 1)."""
        return max(1, -(-len(self._shown) // self.page_size))

    def show_page(self, page: int) -> None:
        """Draw page ``page`` (0-based, clamped) of the selection."""
        self.page = min(max(0, page), self.pages - 1)
        self._draw_page()
        self._drawn = True

    def _colgroup(self, cols: list[str]) -> str:
        total = sum(COLUMNS[c][1] for c in cols) or 1
        return (
            "<colgroup>"
            + "".join(f'<col style="width:{100 * COLUMNS[c][1] / total:.1f}%">' for c in cols)
            + "</colgroup>"
        )

    def _row_html(self, row: Mapping[str, Any], cols: list[str]) -> str:
        cells = []
        for c in cols:
            text = shown_text(row, c)
            style = ' class="ll-num"' if c in _RIGHT else ""
            if c == "severity":
                new = NEW_BADGE if row.get("_new") else ""
                cells.append(f"<td>{_severity_badge(text)}{new}</td>")
            elif c == "reason":  # two lines at most: the whole reason is in the detail and the tooltip
                cells.append(f'<td><div class="ll-clamp" title="{_esc(text)}">{_esc(text)}</div></td>')
            elif c == "topic":  # break long names after their slashes
                cells.append(f"<td>{re.sub('/(?!/)', '/<wbr>', _esc(text))}</td>")
            elif c in ("path", "object key"):
                cells.append(f"<td><code>{_esc(text)}</code></td>")
            elif c == "kind":  # break long kind names after their underscores, not mid-word
                cells.append(f"<td>{_esc(text).replace('_', '_<wbr>')}</td>")
            else:
                cells.append(f"<td{style}>{_esc(text)}</td>")
        if row.get("_new") and cells and "severity" not in cols:  # the mark leads the row anyway
            cells[0] = cells[0].replace(">", ">" + NEW_BADGE, 1)
        body = f"<tbody><tr>{''.join(cells)}</tr></tbody>"
        return _ll(f'<table class="ll-table ll-row">{self._colgroup(cols)}{body}</table>')

    def _draw_page(self) -> None:
        cols = [c for c in COLUMNS if c in self.columns.value] or list(DEFAULT_COLUMNS)
        head = "".join(f"<th{' class=ll-num' if c in _RIGHT else ''}>{_esc(c)}</th>" for c in cols)
        self.header.value = _ll(
            f'<div style="padding-left:{_BUTTON}"><table class="ll-table ll-head">{self._colgroup(cols)}'
            f"<thead><tr>{head}</tr></thead></table></div>"
        )
        start = self.page * self.page_size
        page = self._shown.iloc[start : start + self.page_size]
        old = self._row_widgets()
        self._row_boxes, self._row_buttons, self._row_index = [], [], []
        for pos, (idx, row) in enumerate(page.iterrows()):
            button = w.Button(
                icon="chevron-right", tooltip="show this finding's detail under it",
                layout=w.Layout(width=_BUTTON, min_width=_BUTTON),
            )  # fmt: skip
            button.add_class("ledgerlens-select")
            button.on_click(lambda _b, p=pos: self._toggle(p))
            cells = w.HTML(
                self._row_html(row.to_dict(), cols), layout=w.Layout(flex="1 1 auto", min_width="0")
            )
            line = w.HBox([button, cells], layout=w.Layout(width="auto", align_items="flex-start"))
            box = w.VBox([line], layout=w.Layout(width="auto"))
            box.add_class("ledgerlens-row")
            self._row_boxes.append(box)
            self._row_buttons.append(button)
            self._row_index.append(int(idx))
        children: list[w.Widget] = list(self._row_boxes)
        if not children:
            children = [w.HTML(_ll('<p class="ll-muted"><i>no findings</i></p>'))]
        self._attach()
        self.rows.children = children
        for widget in old:
            widget.close()
        n = len(self._shown)
        shown_to = min(n, start + self.page_size)
        where = f"rows {start + 1 if n else 0}–{shown_to} of {n} (page {self.page + 1} of {self.pages})"
        self.page_label.value = f"&nbsp;{where}&nbsp;"
        self.prev_page.disabled = self.page == 0
        self.next_page.disabled = self.page >= self.pages - 1

    def _row_widgets(self) -> list[w.Widget]:
        """The current page's row widgets (open details aside: they come back with their row)."""
        panels = set(map(id, self._panels.values()))
        out: list[w.Widget] = []
        for box in self.rows.children:
            out.append(box)
            for child in getattr(box, "children", ()):
                if id(child) not in panels:
                    out.append(child)
                    out.extend(getattr(child, "children", ()))
        return out

    def _panel_widgets(self) -> list[w.Widget]:
        return [c for p in self._panels.values() for c in (*p.children, p)]

    def _position(self, row: int) -> int | None:
        return self._row_index.index(row) if row in self._row_index else None

    def _attach(self) -> None:
        """Put every open detail under its row (rows of this page), mark open rows."""
        for box, button, idx in zip(self._row_boxes, self._row_buttons, self._row_index, strict=True):
            panel = self._panels.get(idx)
            line = box.children[0]
            box.children = (line, panel) if panel is not None else (line,)
            button.icon = "chevron-down" if panel is not None else "chevron-right"
            button.button_style = "info" if panel is not None else ""
            button.tooltip = "hide this finding's detail" if panel else "show this finding's detail under it"
            if panel is not None:
                box.add_class("ledgerlens-open")
            else:
                box.remove_class("ledgerlens-open")

    def _toggle(self, position: int) -> None:
        if self._row_index[position] in self._panels:
            self.close_detail(position)
        else:
            self.select(position)

    def select(self, position: int) -> dict[str, Any]:
        """Open the detail of the ``position``-th row of the current page under that row (details
        opened earlier stay open: nothing above the click moves); returns the finding."""
        idx = self._row_index[position]
        row = self._df.loc[idx]
        finding = {k: v for k, v in row.items() if k not in _DERIVED}
        self.selected = {**finding, "_row": idx}
        if idx not in self._panels:
            detail = w.HTML(finding_detail_html(finding, self.where), layout=w.Layout(width="auto"))
            close = w.Button(description="close", icon="times", tooltip="close this detail")
            close.on_click(lambda _b, i=idx: self._close(i))
            panel = w.VBox([detail, close], layout=w.Layout(width="auto", margin=f"0 0 8px {_BUTTON}"))
            panel.add_class("ledgerlens-detail")
            self._panels[idx] = panel
        self.panel = self._panels[idx]
        self.detail = self.panel.children[0]
        self._attach()
        return finding

    def close_detail(self, position: int | None = None) -> None:
        """Close the detail of the ``position``-th row (default: the selected finding's)."""
        idx = self._row_index[position] if position is not None else (self.selected or {}).get("_row")
        if idx is not None:
            self._close(int(idx))

    def _close(self, idx: int) -> None:
        panel = self._panels.pop(idx, None)
        if panel is None:
            return
        self._attach()
        for child in (*panel.children, panel):
            child.close()
        if self.selected is not None and self.selected["_row"] == idx:
            last = list(self._panels)[-1] if self._panels else None
            self.selected = None
            self.detail, self.panel = w.HTML(), w.VBox()
            if last is not None:  # the detail opened before it
                self.selected = {
                    **{k: v for k, v in self._df.loc[last].items() if k not in _DERIVED},
                    "_row": last,
                }
                self.panel = self._panels[last]
                self.detail = self.panel.children[0]

    def table_text(self) -> str:
        """The current page as HTML text (header and rows, without line-break hints), for tests and logs."""
        parts = [self.header.value]
        for child in self.rows.children:
            if isinstance(child, w.VBox):
                parts.append(child.children[0].children[1].value)
            else:
                parts.append(getattr(child, "value", ""))
        return "\n".join(parts).replace("<wbr>", "")

    @property
    def total_bytes(self) -> int:
        """Sum of ``bytes`` over the selection (nulls count as 0)."""
        return int(pd.to_numeric(self.value["bytes"], errors="coerce").fillna(0).sum())

    @property
    def count(self) -> int:
        """Number of selected findings."""
        return len(self.value)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
