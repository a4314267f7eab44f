"""Subscriptions: ``inactive_cursor`` (rule: ``ledgerlens.audit.rules.cursors``)."""

from __future__ import annotations

from ledgerlens.report.kinds.finding import Finding, lines, q
from ledgerlens.report.kinds.registry import Subject

_CURSORS = Subject("cursors", rule="audit/rules/cursors.py")


def _inactive_cursor(f: Finding) -> tuple[str, str]:
    held = f.ev("held_ledgers")
    first, last = f.ev("first_held_ledger_id"), f.ev("last_held_ledger_id")
    span = f" (ledgers {first} to {last})" if first is not None and last is not None else ""
    n = f"{held} ledger(s)" if held is not None else "ledgers"
    reason = (
        f"Subscription {f.cursor} on {f.owner} has been inactive for {f.age or 'long'} and holds "
        f"{n}{span}, {f.size}, back from retention."
    )
    t, s = q(f.topic or "TOPIC"), q(f.cursor or "SUBSCRIPTION")
    step = lines(
        f"See its backlog: pulsar-admin topics stats {t}",
        "Ask its owner whether it is still needed; if not:",
        f"  pulsar-admin topics unsubscribe {t} -s {s}",
        f"or drop only its backlog: pulsar-admin topics skip-all {t} -s {s}",
    )
    return reason, step


INACTIVE_CURSOR = _CURSORS.declare("inactive_cursor", "warning", _inactive_cursor)
