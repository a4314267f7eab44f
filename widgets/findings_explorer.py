"""FindingsExplorer: filter, sort and total the findings table in a notebook.

A plain class composing ipywidgets (msticpy style): ``.widget`` is the root widget, ``.value`` the
currently filtered and sorted findings. Constructor arguments seed the filters, so a papermill
parameters cell can open the explorer pre-filtered. Re-running the cell that creates it is safe:
with a ``key``, the previous explorer of that key is closed and, unless filters are seeded
explicitly, its filter state is carried over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import ipywidgets as w
import pandas as pd

from ledgerlens.figures import SEVERITY_ORDER, human_bytes
from ledgerlens.report import findings_table_html, severity_rank

SORT_COLUMNS = {
    "severity": "severity",
    "bytes": "bytes",
    "age": "age_seconds",
    "kind": "kind",
    "namespace": "namespace",
    "managed ledger": "managed_ledger",
    "ledger id": "ledger_id",
}
_SEARCH_COLUMNS = ("managed_ledger", "cursor", "path", "object_key")
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


class FindingsExplorer:
    """Filter controls, totals and a sortable table over a findings frame.

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
        Substring matched against managed ledger, cursor, path and object key.
    sort_by, ascending
        Initial sort: one of ``SORT_COLUMNS``. Severity sorts by importance (descending: critical
        first); ties are broken by severity, then bytes, largest first.
    max_rows
        Rows drawn in the table (totals always cover the whole selection).
    key
        Name under which the explorer is remembered in this kernel (re-run cells).
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
        max_rows: int = 200,
        key: str | None = None,
    ) -> None:
        if sort_by not in SORT_COLUMNS:
            raise ValueError(f"sort_by {sort_by!r}: expected one of {', '.join(SORT_COLUMNS)}")
        self._df = findings.reset_index(drop=True)
        self._callbacks: list[Callable[[pd.DataFrame], None]] = []
        self.key = key
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
        )
        previous = self._live.pop(key, None) if key else None
        if previous is not None:
            seed = self._merge_previous(seed, previous)
            previous.close()

        df = self._df
        layout = w.Layout(width="220px", height="110px")
        self.kinds = w.SelectMultiple(
            options=_options(df["kind"], seed["kinds"] or ()), description="kind", layout=layout
        )
        self.severities = w.SelectMultiple(
            options=_options(df["severity"], seed["severities"] or (), SEVERITY_ORDER),
            description="severity",
            layout=w.Layout(width="200px", height="110px"),
        )
        self.components = w.SelectMultiple(
            options=_options(df["component"], seed["components"] or ()),
            description="component",
            layout=layout,
        )
        ns_seed = self._expand_tenants(seed["namespaces"])
        self.namespaces = w.SelectMultiple(
            options=_options(df["namespace"], ns_seed or ()),
            description="namespace",
            layout=w.Layout(width="280px", height="110px"),
        )
        self.min_age_hours = w.BoundedFloatText(
            value=float(seed["min_age_hours"]),
            min=0,
            max=1e9,
            description="min age (h)",
            layout=w.Layout(width="200px"),
        )
        self.min_bytes = w.BoundedIntText(
            value=int(seed["min_bytes"]),
            min=0,
            max=2**62,
            description="min bytes",
            layout=w.Layout(width="240px"),
        )
        self.search = w.Text(
            value=seed["search"],
            description="search",
            placeholder="topic, cursor, path or key",
            layout=w.Layout(width="340px"),
        )
        self.sort_by = w.Dropdown(
            options=list(SORT_COLUMNS),
            value=seed["sort_by"],
            description="sort by",
            layout=w.Layout(width="220px"),
        )
        self.ascending = w.ToggleButton(
            value=bool(seed["ascending"]),
            description="ascending",
            icon="sort",
            layout=w.Layout(width="110px"),
        )
        self.reset = w.Button(description="clear filters", layout=w.Layout(width="110px"))
        self.totals = w.HTML()
        self.table = w.HTML()

        self.kinds.value = tuple(seed["kinds"] or ())
        self.severities.value = tuple(seed["severities"] or ())
        self.components.value = tuple(seed["components"] or ())
        self.namespaces.value = tuple(ns_seed or ())
        self.max_rows = max_rows

        self.widget = w.VBox(
            [
                w.HBox([self.kinds, self.severities, self.components, self.namespaces]),
                w.HBox([self.min_age_hours, self.min_bytes, self.search]),
                w.HBox([self.sort_by, self.ascending, self.reset]),
                self.totals,
                self.table,
            ]
        )
        self.value: pd.DataFrame = self._df.iloc[:0]
        for control in self._controls():
            control.observe(self._on_change, names="value")
        self.reset.on_click(lambda _b: self.clear_filters())
        self.refresh()
        if key:
            self._live[key] = self

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
        """The current filters and sort, as constructor keyword arguments."""
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
        """Select everything again (the sort is kept)."""
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
        for child in [*self._controls(), self.reset, self.totals, self.table, self.widget]:
            child.close()

    # --- filtering -----------------------------------------------------------------------------

    def _on_change(self, _change: dict[str, Any]) -> None:
        self.refresh()

    def filtered(self) -> pd.DataFrame:
        """Apply the filters and the sort to the findings."""
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
            hit = pd.Series(False, index=df.index)
            for column in _SEARCH_COLUMNS:
                hit |= df[column].astype("string").str.lower().str.contains(text, regex=False).fillna(False)
            mask &= hit
        return self._sort(df[mask])

    def _sort(self, df: pd.DataFrame) -> pd.DataFrame:
        column = SORT_COLUMNS[self.sort_by.value]
        ascending = bool(self.ascending.value)
        keys = pd.DataFrame(
            {
                "rank": severity_rank(df["severity"]),
                "bytes": pd.to_numeric(df["bytes"], errors="coerce"),
            },
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
        """Recompute ``.value``, the totals and the table from the controls."""
        self.value = self.filtered()
        n = len(self.value)
        total = int(pd.to_numeric(self.value["bytes"], errors="coerce").fillna(0).sum())
        by_sev = self.value["severity"].value_counts()
        parts = ", ".join(f"{int(by_sev.get(s, 0))} {s}" for s in SEVERITY_ORDER)
        self.totals.value = (
            f"<b>{n}</b> of {len(self._df)} findings selected, <b>{human_bytes(total)}</b> "
            f"({total:,} bytes); {parts}"
        )
        self.table.value = findings_table_html(self.value, max_rows=self.max_rows)
        for callback in self._callbacks:
            callback(self.value)

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
