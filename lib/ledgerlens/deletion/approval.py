"""Approving a plan: a named person, a reason, the plan hash they saw, into the journal.

An approval is refused, with one line saying why, when:

- the hash the approver gives is not the plan's hash, or the plan's content no longer hashes to it;
- the plan (or the audit behind it) is older than ``max_age_s`` (default 24 h): the cluster has
  moved on since;
- the approver or the reason is empty;
- ``forbid_self_approval`` is on (``$LEDGERLENS_FORBID_SELF_APPROVAL=1`` or ``--forbid-self-approval``)
  and the approver is whoever ran the audit or made the plan;
- a selected item id is not in the plan.

The approval record (who, when, plan hash, the approved items with their expected states, why)
is appended to the journal; ``approval.json`` is a copy that names its journal line, for
``ledgerlens publish``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ledgerlens.deletion.journal import Journal, now_ms
from ledgerlens.deletion.plan import (
    PlanError,
    canonical,
    plan_hash,
    read_json,
    read_plan,
    sha256_hex,
    write_json,
)
from ledgerlens.errors import LedgerLensError

APPROVAL_FORMAT = "ledgerlens-deletion-approval/1"
DEFAULT_MAX_AGE_S = 24 * 3600


class ApprovalRefused(LedgerLensError):
    """An approval that may not be given; the message says why."""


def forbid_self_approval_default() -> bool:
    """The configured default: ``$LEDGERLENS_FORBID_SELF_APPROVAL`` set to 1/true/yes."""
    return os.environ.get("LEDGERLENS_FORBID_SELF_APPROVAL", "").strip().lower() in ("1", "true", "yes")


def _human_age(ms: int) -> str:
    s = abs(ms) / 1000
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.0f} seconds"


def check_approval(
    plan: Mapping[str, Any],
    *,
    given_hash: str,
    approver: str,
    reason: str,
    max_age_s: int = DEFAULT_MAX_AGE_S,
    forbid_self_approval: bool = False,
    item_ids: Iterable[str] | None = None,
    now: int | None = None,
) -> list[dict[str, Any]]:
    """The approved items, or :class:`ApprovalRefused` naming the first rule that fails."""
    now = now_ms() if now is None else now
    recorded = plan.get("plan_hash")
    actual = plan_hash(plan)
    if recorded != actual:
        raise ApprovalRefused(f"plan content changed after planning: it hashes to {actual}, not {recorded}")
    given = (given_hash or "").strip().lower()
    if given != actual:
        raise ApprovalRefused(
            f"plan hash mismatch: you approved {given or '(none)'} but the plan is {actual}"
        )
    if not (approver or "").strip():
        raise ApprovalRefused("approver is empty: name the person who approves")
    if not (reason or "").strip():
        raise ApprovalRefused("reason is empty: say why these deletions are approved")
    for field, what in (("created_ms", "the plan"), ("as_of_ms", "the audit behind the plan")):
        t = plan.get(field)
        if not isinstance(t, int):
            raise ApprovalRefused(f"plan has no {field}")
        if now - t > max_age_s * 1000:
            raise ApprovalRefused(
                f"{what} is {_human_age(now - t)} old, older than the limit of "
                f"{_human_age(max_age_s * 1000)}: audit and plan again"
            )
        if t - now > 5 * 60 * 1000:
            raise ApprovalRefused(f"{what} is dated {_human_age(t - now)} in the future: check the clocks")
    who = approver.strip()
    if forbid_self_approval:
        for field in ("auditor", "planned_by"):
            if plan.get(field) and str(plan[field]).strip().lower() == who.lower():
                raise ApprovalRefused(
                    f"approver {who!r} is also the plan's {field}: another person must approve"
                )
    items = list(plan.get("items") or [])
    if item_ids is not None:
        wanted = list(dict.fromkeys(item_ids))
        known = {i["item_id"]: i for i in items}
        unknown = [i for i in wanted if i not in known]
        if unknown:
            raise ApprovalRefused(f"{len(unknown)} selected items are not in the plan, e.g. {unknown[0]!r}")
        chosen = set(wanted)
        items = [i for i in items if i["item_id"] in chosen]
    if not items:
        raise ApprovalRefused("nothing to approve: the selection is empty")
    return items


def approve(
    plan: Mapping[str, Any] | str | Path,
    journal: Journal | str | Path,
    *,
    plan_hash_given: str,
    approver: str,
    reason: str,
    max_age_s: int = DEFAULT_MAX_AGE_S,
    forbid_self_approval: bool | None = None,
    item_ids: Iterable[str] | None = None,
    out: str | Path | None = None,
    now: int | None = None,
) -> dict[str, Any]:
    """Check and journal an approval; returns the approval (also written to ``out`` when given)."""
    if isinstance(plan, str | Path):
        try:
            plan = read_plan(plan)
        except PlanError as e:
            raise ApprovalRefused(str(e)) from e
    j = journal if isinstance(journal, Journal) else Journal(journal)
    forbid = forbid_self_approval_default() if forbid_self_approval is None else forbid_self_approval
    items = check_approval(
        plan,
        given_hash=plan_hash_given,
        approver=approver,
        reason=reason,
        max_age_s=max_age_s,
        forbid_self_approval=forbid,
        item_ids=item_ids,
        now=now,
    )
    at = now_ms() if now is None else now
    body: dict[str, Any] = {
        "type": "approval",
        "plan_hash": plan["plan_hash"],
        "approver": approver.strip(),
        "reason": reason.strip(),
        "approved_at_ms": at,
        "auditor": plan.get("auditor"),
        "planned_by": plan.get("planned_by"),
        "plan_created_ms": plan.get("created_ms"),
        "as_of_ms": plan.get("as_of_ms"),
        "cluster_name": plan.get("cluster_name"),
        "deleted_tenants": list(plan.get("deleted_tenants") or []),
        "pulsar_stores": list(plan.get("pulsar_stores") or []),
        "items": items,
    }
    body["approval_id"] = sha256_hex(canonical(body))
    head = j.append([body])[0]
    approval = {
        "format": APPROVAL_FORMAT,
        **body,
        "journal": str(j.path.resolve()),
        "journal_seq": head.seq,
        "journal_line_hash": head.hash,
    }
    if out is not None:
        write_json(approval, out)
    return approval


def read_approval(path: str | Path) -> dict[str, Any]:
    """An ``approval.json`` as written by :func:`approve` (not yet checked against its journal)."""
    p = Path(path)
    data = read_json(p, "approval", ApprovalRefused)
    if not isinstance(data, dict) or data.get("format") != APPROVAL_FORMAT:
        raise ApprovalRefused(f"{p}: not a ledgerlens approval")
    return data


_APPROVAL_BODY_KEYS = (
    "type",
    "plan_hash",
    "approver",
    "reason",
    "approved_at_ms",
    "auditor",
    "planned_by",
    "plan_created_ms",
    "as_of_ms",
    "cluster_name",
    "deleted_tenants",
    "items",
)


_APPROVAL_LATER_KEYS = ("pulsar_stores",)  # hashed when present: older approvals stay valid


def approval_id(record: Mapping[str, Any]) -> str:
    """The id an approval record must carry: SHA-256 over its canonical body."""
    keys = _APPROVAL_BODY_KEYS + tuple(k for k in _APPROVAL_LATER_KEYS if k in record)
    return sha256_hex(canonical({k: record.get(k) for k in keys}))


def approvals_in(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Approval records of a (verified) journal, by approval id; records whose id does not match
    their content are left out."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("type") == "approval" and r.get("approval_id") == approval_id(r):
            out[str(r["approval_id"])] = dict(r)
    return out
