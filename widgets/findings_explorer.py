"""FindingsExplorer: filter, sort, page through and open the findings of an audit in a notebook.

A plain class composing ipywidgets (msticpy style): ``.widget`` is the root widget, ``.value`` the
currently filtered and sorted findings, ``.selected`` the finding whose detail panel is open.
Constructor arguments seed the filters, so a papermill parameters cell can open the explorer
pre-filtered. Re-running the cell that creates it is safe: with a ``key``, the previous explorer of
that key is closed and, unless filters are seeded explicitly, its state is carried over.

The table wraps its text to the notebook's width (no inner horizontal scrollbar); a column chooser
adds or removes columns; every row has a button that opens the detail panel (all fields, evidence,
reason, next step, rule). Search matches what the table shows, topic names as
``persistent://tenant/ns/topic`` included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import ipywidgets as w
import pandas as pd

from ledgerlens.report.explanations import AuditedWhere, explain
from ledgerlens.report.html import finding_detail_html, severity_rank, wrap
from ledgerlens.report.text import SEVERITY_COLORS, SEVERITY_ORDER, human_bytes, human_duration, is_missing

SORT_COLUMNS = {
    "severity": "severity",
    "bytes": "bytes",
    "age": "age_seconds",
    "kind": "kind",
    "namespace": "namespace",
    "managed ledger": "managed_ledger",
    "ledger id": "ledger_id",
}

COLUMNS: dict[str, tuple[str, int]] = {
    # shown name -> (source, relative width)
    "severity": ("severity", 11),
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
    "action": ("action", 9),
    "reason": ("reason", 36),
}
DEFAULT_COLUMNS = ("severity", "kind", "topic", "ledger", "size", "age", "reason")
_RIGHT = ("ledger", "size", "age")
_DERIVED = ("topic", "reason", "_search")
_HOUR = 3600


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


def _topic(ml: Any) -> str:
    if ml is None or is_missing(ml) or not str(ml):
        return ""
    from ledgerlens.formats.names import parse_managed_ledger

    try:
        return parse_managed_ledger(str(ml)).topic
    except Exception:  # noqa: BLE001 - shown as stored
        return str(ml)


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
    if source == "ledger_id":
        return str(int(value))
    return str(value)


class FindingsExplorer:
    """Filter controls, totals, a paged table with a detail panel over a findings frame.

    Parameters
    ----------
    findings
        Findings (columns of ``ledgerlens.schemas.FINDINGS``).
    kinds, severities, components, namespaces
        Initial selections; ``None`` or empty selects everything. A comma-separated string is
        accepted (papermill parameters). ``namespaces`` entries may be a tenant (``"public"``),
        meaning all of its namespaces.
    min_age_hours, min_bytes
        Keep findings at least this old / this large (findings without an age or size are kept
        only while the threshold is 0).
    search
        Text matched (case-insensitive) against every column's shown text (topic as
        ``persistent://...``, managed ledger, subscription, path, object key, kind, ledger id,
        namespace, reason).
    sort_by, ascending
        Initial sort: one of ``SORT_COLUMNS``. Severity sorts by importance (descending: critical
        first); ties are broken by severity, then bytes, largest first.
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
        sort_by: str = "severity",
        ascending: bool = False,
        page_size: int = 25,
        columns: Iterable[str] | None = None,
        key: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> None:
        if sort_by not in SORT_COLUMNS:
            raise ValueError(f"sort_by {sort_by!r}: expected one of {', '.join(SORT_COLUMNS)}")
        chosen = list(columns) if columns is not None else list(DEFAULT_COLUMNS)
        unknown = [c for c in chosen if c not in COLUMNS]
        if unknown:
            raise ValueError(f"columns {unknown}: expected names of {', '.join(COLUMNS)}")
        self.where = AuditedWhere.of(where)
        self._df = self._prepare(findings.reset_index(drop=True))
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
            value=float(seed["min_age_hours"]),
            min=0,
            max=1e9,
            description="min age (h)",
            layout=w.Layout(width="190px"),
        )
        self.min_bytes = w.BoundedIntText(
            value=int(seed["min_bytes"]),
            min=0,
            max=2**62,
            description="min bytes",
            layout=w.Layout(width="210px"),
        )
        self.search = w.Text(
            value=seed["search"],
            description="search",
            placeholder="persistent://tenant/ns/topic, ledger, path, key, reason",
            continuous_update=False,
            layout=w.Layout(width="420px"),
        )
        self.sort_by = w.Dropdown(
            options=list(SORT_COLUMNS),
            value=seed["sort_by"],
            description="sort by",
            layout=w.Layout(width="210px"),
        )
        self.ascending = w.ToggleButton(
            value=bool(seed["ascending"]),
            description="ascending",
            icon="sort",
            layout=w.Layout(width="110px"),
        )
        self.reset = w.Button(description="clear filters", layout=w.Layout(width="110px"))
        self.prev_page = w.Button(description="previous", icon="chevron-left", layout=w.Layout(width="110px"))
        self.next_page = w.Button(description="next", icon="chevron-right", layout=w.Layout(width="110px"))
        self.page_label = w.HTML()
        self.totals = w.HTML()
        self.header = w.HTML()
        self.rows = w.VBox(layout=w.Layout(width="auto"))
        self.detail = w.HTML(
            value=wrap('<p class="ll-muted">Select a finding (the ▸ button of its row) to see its '
                       "evidence, reason and next step.</p>"),
            layout=w.Layout(width="auto"),  # 100% plus the widget margins would overflow the panel
        )  # fmt: skip
        self.page = 0
        self.selected: dict[str, Any] | None = None
        self._row_buttons: list[w.Button] = []
        self._row_index: list[int] = []

        self.kinds.value = tuple(seed["kinds"] or ())
        self.severities.value = tuple(seed["severities"] or ())
        self.components.value = tuple(seed["components"] or ())
        self.namespaces.value = tuple(ns_seed or ())
        self.columns.value = tuple(c for c in seed["columns"] if c in COLUMNS)

        wrap_row = w.Layout(flex_flow="row wrap", width="100%", align_items="flex-start")
        table = w.VBox([self.header, self.rows], layout=w.Layout(flex="2 1 620px", min_width="0"))
        panel = w.VBox(
            [w.HTML("<b>Detail</b>"), self.detail],
            layout=w.Layout(flex="1 1 320px", min_width="0", border="1px solid #d9dee3", padding="4px 8px"),
        )
        self.widget = w.VBox(
            [
                w.HBox(
                    [self.kinds, self.severities, self.components, self.namespaces, self.columns],
                    layout=wrap_row,
                ),
                w.HBox([self.search, self.min_age_hours, self.min_bytes], layout=wrap_row),
                w.HBox([self.sort_by, self.ascending, self.reset], layout=wrap_row),
                self.totals,
                w.HBox([table, panel], layout=wrap_row),
                w.HBox([self.prev_page, self.page_label, self.next_page], layout=wrap_row),
            ],
            layout=w.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.widget.add_class("ledgerlens-explorer")
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

    # --- data ----------------------------------------------------------------------------------

    def _prepare(self, df: pd.DataFrame) -> pd.DataFrame:
        """Add what the table shows and searches: topic names, reasons, one search text per row."""
        d = df.copy()
        d["topic"] = pd.Series([_topic(m) for m in d["managed_ledger"]], index=d.index, dtype="object")
        records = d.to_dict(orient="records")
        reasons = [explain(r, self.where).reason for r in records]
        d["reason"] = pd.Series(reasons, index=d.index, dtype="object")
        text = []
        for r, reason in zip(records, reasons, strict=True):
            shown = [shown_text(r, c) for c in COLUMNS if c != "reason"]
            text.append(" ".join([*shown, reason, str(r.get("managed_ledger") or "")]).lower())
        d["_search"] = pd.Series(text, index=d.index, dtype="object")
        return d

    def _public(self, df: pd.DataFrame) -> pd.DataFrame:
        from ledgerlens.schemas import FINDINGS, columns

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
            sort_by=self.sort_by.value,
            ascending=self.ascending.value,
            columns=list(self.columns.value),
        )

    @staticmethod
    def _merge_previous(seed: dict[str, Any], previous: FindingsExplorer) -> dict[str, Any]:
        """Previous state fills every filter the caller left at its default."""
        defaults: dict[str, Any] = dict(
            kinds=None,
            severities=None,
            components=None,
            namespaces=None,
            min_age_hours=0,
            min_bytes=0,
            search="",
            sort_by="severity",
            ascending=False,
            columns=None,
        )
        old = previous.state()
        return {k: (old[k] if v == defaults[k] else v) for k, v in seed.items()}

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
        self.refresh()

    def on_change(self, callback: Callable[[pd.DataFrame], None]) -> None:
        """Call ``callback(value)`` whenever the selection changes."""
        self._callbacks.append(callback)

    def close(self) -> None:
        """Close every widget (frees the front-end models)."""
        extra = [self.columns, self.reset, self.prev_page, self.next_page, self.page_label, self.totals]
        for child in [*self._controls(), *extra, self.header, self.detail, *self._row_widgets(), self.rows]:
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
        text = self.search.value.strip().lower()
        if text:
            mask &= df["_search"].str.contains(text, regex=False).fillna(False).astype(bool)
        return self._sort(df[mask])

    def _sort(self, df: pd.DataFrame) -> pd.DataFrame:
        column = SORT_COLUMNS[self.sort_by.value]
        ascending = bool(self.ascending.value)
        keys = pd.DataFrame(
            {"rank": severity_rank(df["severity"]), "bytes": pd.to_numeric(df["bytes"], errors="coerce")},
            index=df.index,
        )
        # Default order (critical first, then largest) breaks every tie.
        base = keys.sort_values(
            ["rank", "bytes"], ascending=[True, False], na_position="last", kind="stable"
        ).index
        df = df.loc[base]
        if column == "severity":
            primary = -keys.loc[base, "rank"]  # higher = more important
        elif column == "bytes":
            primary = keys.loc[base, "bytes"]
        else:
            primary = df[column]
        order = primary.sort_values(ascending=ascending, na_position="last", kind="stable").index
        return df.loc[order]

    def refresh(self) -> None:
        """Recompute ``.value``, the totals and the first page from the controls."""
        shown = self.filtered()
        self._shown = shown
        self.value = self._public(shown)
        n = len(shown)
        total = int(pd.to_numeric(shown["bytes"], errors="coerce").fillna(0).sum())
        by_sev = shown["severity"].value_counts()
        parts = ", ".join(f"{int(by_sev.get(s, 0))} {s}" for s in SEVERITY_ORDER)
        self.totals.value = (
            f"<b>{n}</b> of {len(self._df)} findings selected, <b>{human_bytes(total)}</b> "
            f"({total:,} bytes); {parts}"
        )
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
                color = SEVERITY_COLORS.get(text, "#1f2933")
                cells.append(f'<td><b style="color:{color}">{_esc(text)}</b></td>')
            elif c in ("path", "object key"):
                cells.append(f"<td><code>{_esc(text)}</code></td>")
            elif c == "kind":  # break long kind names after their underscores, not mid-word
                cells.append(f"<td>{_esc(text).replace('_', '_<wbr>')}</td>")
            else:
                cells.append(f"<td{style}>{_esc(text)}</td>")
        body = f"<tbody><tr>{''.join(cells)}</tr></tbody>"
        return wrap(f'<table class="ll-table ll-row">{self._colgroup(cols)}{body}</table>')

    def _draw_page(self) -> None:
        cols = [c for c in COLUMNS if c in self.columns.value] or list(DEFAULT_COLUMNS)
        head = "".join(f"<th{' class=ll-num' if c in _RIGHT else ''}>{_esc(c)}</th>" for c in cols)
        self.header.value = wrap(
            f'<div style="padding-left:40px"><table class="ll-table ll-head">{self._colgroup(cols)}'
            f"<thead><tr>{head}</tr></thead></table></div>"
        )
        start = self.page * self.page_size
        page = self._shown.iloc[start : start + self.page_size]
        for old in self._row_widgets():
            old.close()
        self._row_buttons, self._row_index = [], []
        children = []
        for pos, (idx, row) in enumerate(page.iterrows()):
            button = w.Button(
                icon="chevron-right",
                tooltip="show this finding's detail",
                layout=w.Layout(width="34px", min_width="34px"),
            )
            button.add_class("ledgerlens-select")
            button.on_click(lambda _b, p=pos: self.select(p))
            if self.selected is not None and self.selected.get("_row") == int(idx):
                button.button_style = "info"
            cells = w.HTML(
                self._row_html(row.to_dict(), cols), layout=w.Layout(flex="1 1 auto", min_width="0")
            )
            self._row_buttons.append(button)
            self._row_index.append(int(idx))
            children.append(w.HBox([button, cells], layout=w.Layout(width="auto", align_items="flex-start")))
        if not children:
            children = [w.HTML(wrap('<p class="ll-muted"><i>no findings</i></p>'))]
        self.rows.children = children
        n = len(self._shown)
        shown_to = min(n, start + self.page_size)
        where = f"rows {start + 1 if n else 0}–{shown_to} of {n} (page {self.page + 1} of {self.pages})"
        self.page_label.value = f"&nbsp;{where}&nbsp;"
        self.prev_page.disabled = self.page == 0
        self.next_page.disabled = self.page >= self.pages - 1

    def _row_widgets(self) -> list[w.Widget]:
        out: list[w.Widget] = []
        for box in self.rows.children:
            out.append(box)
            out.extend(getattr(box, "children", ()))
        return out

    def select(self, position: int) -> dict[str, Any]:
        """Open the detail panel of the ``position``-th row of the current page; returns the finding."""
        idx = self._row_index[position]
        row = self._df.loc[idx]
        finding = {k: v for k, v in row.items() if k not in _DERIVED}
        self.selected = {**finding, "_row": idx}
        self.detail.value = finding_detail_html(finding, self.where)
        for i, button in enumerate(self._row_buttons):
            button.button_style = "info" if i == position else ""
        return finding

    def table_text(self) -> str:
        """The current page as HTML text (header and rows), for tests and logs."""
        parts = [self.header.value]
        for child in self.rows.children:
            parts.append(
                child.children[1].value if isinstance(child, w.HBox) else getattr(child, "value", "")
            )
        return "\n".join(parts)

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


def _esc(text: Any) -> str:
    import html

    return html.escape("" if text is None else str(text))
