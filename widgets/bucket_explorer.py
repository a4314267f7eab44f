"""BucketExplorer: one subscription's delayed-message buckets, figures and merge prediction.

A plain class composing ipywidgets: ``.widget`` is the root, ``.value`` the :class:`BucketView` of
the selected subscription, ``.figures`` its figures (ledger-id axis, schedule, deliverable), rebuilt
whenever the selection or ``delayedDeliveryMaxNumBuckets`` changes. Constructor arguments seed the
controls, so a papermill parameters cell can open it on one topic and subscription.
"""

from __future__ import annotations

import html
import re
from typing import Any

import ipywidgets as w
import pandas as pd

from ledgerlens.buckets.analysis import (
    BucketView,
    MergePrediction,
    far_future_holders,
    memory_estimate,
    next_merge,
    subscription_view,
    subscriptions,
)
from ledgerlens.buckets.figures import buckets_figure, deliverable_figure, schedule_figure
from ledgerlens.buckets.reads import read_summary, unreadable_table
from ledgerlens.report.text import human_bytes


def _label(ml: str, cursor: str) -> str:
    return f"{ml} / {cursor}"


class BucketExplorer:
    """Pick a subscription with buckets; see its buckets, segments, next merge and memory.

    Parameters
    ----------
    snapshots
        The ``bucket_snapshots`` inventory as pandas.
    topic_filter
        Keep managed ledgers containing this text (empty: all).
    subscription
        Preselect this subscription (decoded name) when present.
    max_num_buckets
        The broker's ``delayedDeliveryMaxNumBuckets`` used for the merge prediction (-1: unset).
    now_ms
        'Now' for the schedule view and far-future analysis.
    """

    def __init__(
        self,
        snapshots: pd.DataFrame,
        *,
        topic_filter: str = "",
        subscription: str = "",
        max_num_buckets: int = -1,
        now_ms: int | None = None,
    ) -> None:
        self.snapshots = snapshots
        self.now_ms = now_ms if now_ms is not None else int(pd.Timestamp.now(tz="UTC").value // 1_000_000)
        pairs = [p for p in subscriptions(snapshots) if topic_filter in p[0]]
        self._pairs = {_label(*p): p for p in pairs}
        first = next(
            (k for k, p in self._pairs.items() if p[1] == subscription), next(iter(self._pairs), None)
        )
        self.choice = w.Dropdown(options=list(self._pairs), value=first, description="subscription")
        self.max_buckets = w.IntText(value=max_num_buckets, description="max buckets")
        self.summary = w.HTML()
        self.output = w.Output()
        self.value: BucketView | None = None
        self.merge: MergePrediction | None = None
        self.figures: dict[str, Any] = {}
        self.choice.observe(lambda _: self.refresh(), names="value")
        self.max_buckets.observe(lambda _: self.refresh(), names="value")
        self.widget = w.VBox([w.HBox([self.choice, self.max_buckets]), self.summary, self.output])
        self.refresh()

    def refresh(self) -> None:
        """Rebuild the view, the prediction, the summary and the figures from the controls."""
        key = self.choice.value
        if key is None:
            self.value, self.merge, self.figures = None, None, {}
            self.summary.value = "<p>No subscription with delayed-index buckets.</p>"
            return
        ml, cursor = self._pairs[key]
        view = subscription_view(self.snapshots, ml, cursor)
        merge = next_merge(view, int(self.max_buckets.value))
        self.value, self.merge = view, merge
        self.output.clear_output()
        if view.buckets.empty:  # nothing read: say why once, no empty figures
            self.figures = {}
            self.summary.value = _errors_html(view.errors) or "<p>No sealed bucket.</p>"
            return
        self.figures = {
            "buckets": buckets_figure(view, merge),
            "schedule": schedule_figure(view, self.now_ms),
            "deliverable": deliverable_figure(view),
        }
        self.summary.value = "<br>".join(_summary_rows(view, merge, self.now_ms))
        with self.output:
            from IPython.display import display

            for fig in self.figures.values():
                display(fig)


def _errors_html(errors: pd.DataFrame) -> str:
    """The unreadable buckets of one subscription: unreachable bookies in one line, others each."""
    if errors.empty:
        return ""
    rows = []
    line = read_summary(errors).bookie_line()
    if line:
        rows.append(_bold(html.escape(line)))
    for r in unreadable_table(errors).itertuples():
        rows.append(html.escape(f"bucket {r.ledger_id} could not be read ({r.error_kind}): {r.error}"))
    return "<br>".join(rows)


def _bold(text: str) -> str:
    """``**x**`` (as the notebook's Markdown line has it) as ``<b>x</b>``."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def _summary_rows(view: BucketView, merge: MergePrediction, now_ms: int) -> list[str]:
    far = far_future_holders(view, now_ms)
    mem = memory_estimate(view, now_ms)
    b = view.buckets
    rows = [
        f"<b>{len(b)}</b> sealed buckets, <b>{int(b['index_count'].sum())}</b> indexes, "
        f"snapshots {human_bytes(int(b['snapshot_bytes'].sum()))}",
        f"next merge: {merge.reason}"
        + (f" (ledgers {merge.pair[0]} + {merge.pair[1]})" if merge.pair else ""),
        f"memory: bucket tracker ~{human_bytes(mem['bucket_tracker'])}, "
        f"in-memory tracker ~{human_bytes(mem['in_memory_tracker'])} "
        f"for {mem['indexes']} pending indexes",
    ]
    if not far.empty:
        rows.append(
            f"{len(far)} bucket(s) held alive by far-future messages: "
            + ", ".join(
                f"{r.ledger_id} ({r.far_indexes} of {r.index_count} indexes keep "
                f"{human_bytes(r.snapshot_bytes)})"
                for r in far.itertuples()
            )
        )
    if not view.errors.empty:
        rows.append(_errors_html(view.errors))
    return rows
