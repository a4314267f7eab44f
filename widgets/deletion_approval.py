"""ApprovalWidget: filter a deletion plan, select items, see totals and the plan hash, approve.

A plain class composing ipywidgets. ``.widget`` is the root widget, ``.value`` the item ids
currently selected, ``.approval`` the last approval given (or ``None``), ``.error`` the last
refusal. Nothing is selected at first: the person selects what to approve (or a papermill run
names the items, ``selected``). Filters: kind, component, tenant or namespace, minimum age and
size. Approving calls :func:`ledgerlens.deletion.approval.approve` with the plan hash shown to
the person (so a plan changed under them is refused), their name and their reason; refusals are
shown, never raised.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import ipywidgets as w

from ledgerlens.deletion.approval import ApprovalRefused, approve
from ledgerlens.errors import LedgerLensError
from ledgerlens.report.text import human_bytes

_DAY = 86400


def _kind(item: Mapping[str, Any]) -> str:
    return str((item.get("finding") or {}).get("kind") or "")


def _component(item: Mapping[str, Any]) -> str:
    return str((item.get("finding") or {}).get("component") or "")


def item_label(item: Mapping[str, Any]) -> str:
    """One line per item: id, kind, owner, size, age."""
    f = item.get("finding") or {}
    owner = f.get("managed_ledger") or ""
    age = item.get("age_seconds")
    age_s = f"{int(age) / _DAY:.1f} d" if age is not None else "?"
    return f"{item['item_id']}  {_kind(item)}  {owner}  {human_bytes(item.get('bytes') or 0)}  {age_s}"


class ApprovalWidget:
    """Filter, select and approve the items of one plan.

    Parameters
    ----------
    plan
        A plan as read by :func:`ledgerlens.deletion.plan.read_plan`.
    journal
        The deletion journal the approval is appended to.
    approver, reason
        Seed the text fields (a papermill run passes them).
    kinds, components
        Initial filter selections (empty: all).
    tenant
        Keep items whose tenant or namespace starts with this text.
    min_age_days, min_bytes
        Keep items at least this old / large.
    approval_out
        Where ``approval.json`` is written on approval.
    selected
        Item ids to select at first (a papermill run's choice); default none. ``ApprovalRefused`` names
        those that are not in the plan or that the filters hide.
    """

    def __init__(
        self,
        plan: Mapping[str, Any],
        journal: str | Path,
        *,
        approver: str = "",
        reason: str = "",
        kinds: Iterable[str] = (),
        components: Iterable[str] = (),
        tenant: str = "",
        min_age_days: float = 0.0,
        min_bytes: int = 0,
        approval_out: str | Path | None = None,
        max_age_s: int = 24 * 3600,
        forbid_self_approval: bool | None = None,
        selected: Iterable[str] = (),
    ) -> None:
        self.plan = plan
        self.journal = Path(journal)
        self.approval_out = approval_out
        self.max_age_s = max_age_s
        self.forbid_self_approval = forbid_self_approval
        self.approval: dict[str, Any] | None = None
        self.error: str | None = None
        self.items = list(plan.get("items") or [])
        all_kinds = sorted({_kind(i) for i in self.items})
        all_components = sorted({_component(i) for i in self.items})
        self.kinds = w.SelectMultiple(options=all_kinds, value=tuple(k for k in kinds if k in all_kinds),
                                      description="kind", rows=min(4, max(1, len(all_kinds))))  # fmt: skip
        self.components = w.SelectMultiple(
            options=all_components,
            value=tuple(c for c in components if c in all_components),
            description="component",
            rows=min(5, max(1, len(all_components))),
        )
        self.tenant = w.Text(value=tenant, description="tenant/ns", placeholder="tenant or tenant/namespace")
        self.min_age_days = w.FloatText(value=min_age_days, description="min age (d)")
        self.min_bytes = w.IntText(value=min_bytes, description="min bytes")
        self.selection = w.SelectMultiple(options=[], description="items", rows=12,
                                          layout=w.Layout(width="100%"))  # fmt: skip
        self.select_all = w.Button(description="select all shown")
        self.totals = w.HTML()
        self.approver = w.Text(value=approver, description="approver")
        self.reason = w.Textarea(value=reason, description="reason")
        self.hash_confirm = w.Text(
            value="", description="plan hash", placeholder="type or paste the plan hash"
        )
        self.approve_button = w.Button(description="Approve", button_style="danger")
        self.result = w.HTML()
        for ctl in (self.kinds, self.components, self.tenant, self.min_age_days, self.min_bytes):
            ctl.observe(lambda _change: self.refresh(), names="value")
        self.selection.observe(lambda _change: self._update_totals(), names="value")
        self.select_all.on_click(lambda _b: self.select_shown())
        self.approve_button.on_click(lambda _b: self.approve())
        self.widget = w.VBox(
            [
                w.HTML(f"<b>Plan</b> <code>{html.escape(str(plan.get('plan_hash')))}</code>"),
                w.HBox([self.kinds, self.components]),
                w.HBox([self.tenant, self.min_age_days, self.min_bytes]),
                self.selection,
                w.HBox([self.select_all]),
                self.totals,
                w.HBox([self.approver, self.hash_confirm]),
                self.reason,
                self.approve_button,
                self.result,
            ]
        )
        self.refresh()
        self.select(selected)

    # -- filtering -----------------------------------------------------------------------------

    def shown(self) -> list[dict[str, Any]]:
        """Items that pass the filters."""
        kinds, comps = set(self.kinds.value), set(self.components.value)
        prefix = self.tenant.value.strip()
        out = []
        for i in self.items:
            if kinds and _kind(i) not in kinds:
                continue
            if comps and _component(i) not in comps:
                continue
            if prefix:
                ns = str(i.get("namespace") or "")
                if str(i.get("tenant") or "") != prefix and not ns.startswith(prefix):
                    continue
            if (i.get("age_seconds") or 0) < self.min_age_days.value * _DAY:
                continue
            if (i.get("bytes") or 0) < self.min_bytes.value:
                continue
            out.append(i)
        return out

    def refresh(self) -> None:
        """Re-apply the filters; the selection keeps the items still shown."""
        shown = self.shown()
        keep = set(self.selection.value)
        self.selection.options = [(item_label(i), i["item_id"]) for i in shown]
        self.selection.value = tuple(i["item_id"] for i in shown if i["item_id"] in keep)
        self._update_totals()

    def select(self, item_ids: Iterable[str]) -> None:
        """Select exactly these items (``ApprovalRefused``: one is not in the plan or filtered out)."""
        wanted = list(dict.fromkeys(item_ids))
        shown = {i["item_id"] for i in self.shown()}
        absent = [i for i in wanted if i not in shown]
        if absent:
            known = {i["item_id"] for i in self.items}
            why = "hidden by the filters" if absent[0] in known else "not in the plan"
            more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
            raise ApprovalRefused(f"cannot select {absent[0]!r}: {why}{more}")
        self.selection.value = tuple(wanted)

    def select_shown(self) -> None:
        """Select every item the filters show."""
        self.selection.value = tuple(i["item_id"] for i in self.shown())

    @property
    def value(self) -> list[str]:
        """Selected item ids."""
        return list(self.selection.value)

    def _update_totals(self) -> None:
        chosen = set(self.selection.value)
        sel = [i for i in self.items if i["item_id"] in chosen]
        by: dict[str, int] = {}
        for i in sel:
            by[i["action"]] = by.get(i["action"], 0) + 1
        parts = ", ".join(f"{n} {a}" for a, n in sorted(by.items())) or "nothing"
        self.totals.value = (
            f"<b>{len(sel)}</b> of {len(self.shown())} shown / {len(self.items)} items selected "
            f"({parts}); <b>{human_bytes(sum(int(i.get('bytes') or 0) for i in sel))}</b> freed. "
            f"Plan hash <code>{html.escape(str(self.plan.get('plan_hash')))}</code>"
        )

    # -- approving -----------------------------------------------------------------------------

    def approve(self, plan_hash: str | None = None) -> dict[str, Any] | None:
        """Approve the selection; returns the approval, or None with ``.error`` set."""
        given = plan_hash if plan_hash is not None else self.hash_confirm.value
        try:
            self.approval = approve(
                self.plan,
                self.journal,
                plan_hash_given=given,
                approver=self.approver.value,
                reason=self.reason.value,
                item_ids=self.value,
                out=self.approval_out,
                max_age_s=self.max_age_s,
                forbid_self_approval=self.forbid_self_approval,
            )
        except (ApprovalRefused, LedgerLensError) as e:
            self.error = str(e)
            self.result.value = f"<span style='color:#b00020'><b>Refused:</b> {html.escape(str(e))}</span>"
            return None
        self.error = None
        who = html.escape(self.approval["approver"])
        self.result.value = (
            f"<b>Approved</b> {len(self.approval['items'])} items by {who} "
            f"(journal line {self.approval['journal_seq']})"
        )
        return self.approval
