"""TopicPicker: pick a tenant, namespace and topic; see its ledgers' timeline and offloaded objects.

A plain class composing ipywidgets: ``.widget`` is the root, ``.value`` the selected managed
ledger. Constructor arguments seed the selection, so a papermill parameters cell can open it on a
topic; with a ``key``, re-running the cell that creates it closes the previous picker of that key.
"""

from __future__ import annotations

from typing import Any, ClassVar

import ipywidgets as w
import pandas as pd
import plotly.graph_objects as go

from ledgerlens.offload.figures import ledger_timeline
from ledgerlens.report import live_kernel
from ledgerlens.report.text import human_bytes

_ALL = "(all)"


class TopicPicker:
    """Tenant / namespace / topic dropdowns over :func:`ledgerlens.offload.segments.topic_ledgers`.

    Parameters
    ----------
    ledgers
        One row per ledger (``LEDGER_COLUMNS``).
    now_ms
        'Now' of the audit, for ages.
    tenant, namespace, topic
        Initial selection (managed-ledger name for ``topic``); the first topic otherwise.
    key
        Re-running the creating cell with the same key closes the previous picker.
    """

    _live: ClassVar[dict[str, TopicPicker]] = {}

    def __init__(
        self,
        ledgers: pd.DataFrame,
        *,
        now_ms: int,
        tenant: str = "",
        namespace: str = "",
        topic: str = "",
        key: str | None = None,
    ) -> None:
        if key is not None and key in self._live:
            self._live.pop(key).close()
        self.ledgers = ledgers
        self.now_ms = now_ms
        self._quiet = False
        self.tenant = w.Dropdown(description="tenant", options=self._tenants())
        self.namespace = w.Dropdown(description="namespace")
        self.topic = w.Dropdown(description="topic", layout=w.Layout(width="60%"))
        self.figure = go.Figure()  # the selected topic's timeline (rendered into ``plot``)
        self.plot = w.Output()
        self.table = w.HTML()
        self.widget = w.VBox([w.HBox([self.tenant, self.namespace]), self.topic, self.plot, self.table])
        if tenant and tenant in self.tenant.options:
            self.tenant.value = tenant
        self._fill_namespaces()
        if namespace and namespace in self.namespace.options:
            self.namespace.value = namespace
        self._fill_topics()
        if topic and topic in self.topic.options:
            self.topic.value = topic
        self._draw()
        self.tenant.observe(self._on_tenant, "value")
        self.namespace.observe(self._on_namespace, "value")
        self.topic.observe(self._on_topic, "value")
        if key is not None:
            self._live[key] = self

    def _on_tenant(self, _change: Any) -> None:
        self._quiet = True
        self._fill_namespaces()
        self._fill_topics()
        self._quiet = False
        self._draw()

    def _on_namespace(self, _change: Any) -> None:
        if self._quiet:
            return
        self._quiet = True
        self._fill_topics()
        self._quiet = False
        self._draw()

    def _on_topic(self, _change: Any) -> None:
        if not self._quiet:
            self._draw()

    @property
    def value(self) -> str | None:
        """The selected managed ledger (None when there is none)."""
        return self.topic.value or None

    def selected_ledgers(self) -> pd.DataFrame:
        """The ledgers of the selected managed ledger."""
        return self.ledgers[self.ledgers["managed_ledger"] == self.value]

    def close(self) -> None:
        self.widget.close()

    def _ipython_display_(self) -> None:  # pragma: no cover - needs a front end
        from IPython.display import display

        display(self.widget)

    def _tenants(self) -> list[str]:
        return [_ALL, *sorted(self.ledgers["tenant"].dropna().astype(str).unique())]

    def _scoped(self) -> pd.DataFrame:
        df = self.ledgers
        if self.tenant.value and self.tenant.value != _ALL:
            df = df[df["tenant"] == self.tenant.value]
        if self.namespace.value and self.namespace.value != _ALL:
            df = df[df["namespace"] == self.namespace.value]
        return df

    def _fill_namespaces(self) -> None:
        df = self.ledgers
        if self.tenant.value and self.tenant.value != _ALL:
            df = df[df["tenant"] == self.tenant.value]
        self.namespace.options = [_ALL, *sorted(df["namespace"].dropna().astype(str).unique())]
        self.namespace.value = _ALL

    def _fill_topics(self) -> None:
        by_bytes = self._scoped().groupby("managed_ledger")["size"].sum().sort_values(ascending=False)
        self.topic.options = [str(t) for t in by_bytes.index]
        self.topic.value = self.topic.options[0] if self.topic.options else None

    def _draw(self) -> None:
        self.figure = ledger_timeline(self.ledgers, self.value or "", now_ms=self.now_ms)
        if live_kernel():  # pragma: no cover - needs a front end
            from IPython.display import display

            self.plot.clear_output(wait=True)
            with self.plot:
                display(self.figure)
        self.table.value = self._table_html(self.selected_ledgers())

    @staticmethod
    def _table_html(rows: pd.DataFrame) -> str:
        import html

        if rows.empty:
            return "<p>No ledger selected.</p>"
        head = "<tr><th>ledger</th><th>state</th><th>entries</th><th>size</th><th>objects</th></tr>"
        body = []
        for r in rows.itertuples():
            keys: Any = r.object_keys if r.object_keys is not None else []
            objs = "<br>".join(html.escape(str(k)) for k in keys) or "-"
            body.append(
                f"<tr><td>{r.ledger_id}</td><td>{html.escape(str(r.state))}</td>"
                f"<td>{'' if pd.isna(r.entries) else int(r.entries)}</td><td>{human_bytes(r.size)}</td>"
                f"<td>{objs} ({human_bytes(r.object_bytes)})</td></tr>"
            )
        return f"<table class='ll-ledgers'>{head}{''.join(body)}</table>"
