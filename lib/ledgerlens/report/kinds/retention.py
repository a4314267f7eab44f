"""Ledgers kept past their time: ``retention_overdue``, ``open_ledger_overdue`` (rules:
``ledgerlens.audit.rules.ledgers``, the retention walk in ``rules.retention``)."""

from __future__ import annotations

from ledgerlens.report.kinds.finding import Finding, ledger_meta, lines, q, topic_step
from ledgerlens.report.kinds.registry import Subject
from ledgerlens.report.text import human_bytes, human_duration

_RETENTION = Subject("retention", rule="audit/rules/ledgers.py")


def _retention_overdue(f: Finding) -> tuple[str, str]:
    minutes, mb = f.ev("retention_minutes"), f.ev("retention_mb")
    limits = []
    if minutes is not None and minutes >= 0:
        limits.append(human_duration(minutes * 60))
    if mb is not None and mb >= 0:
        limits.append(human_bytes(mb * 1024 * 1024))
    limit = " / ".join(limits) or "the namespace retention"
    age = f.aged(", {} old")
    reason = (
        f"Ledger {f.ledger_id} of {f.owner} ({f.size}{age}) is consumed by every subscription and past "
        f"the retention of {f.namespace or 'its namespace'} ({limit}), yet still kept: the topic is not "
        "loaded, so no broker trims it."
    )
    step = lines(
        topic_step(f, "Trim it: ", "trim-topic"),
        f"Check the retention: pulsar-admin namespaces get-retention {q(f.namespace)}" if f.namespace else "",
    )
    return reason, step


RETENTION_OVERDUE = _RETENTION.declare("retention_overdue", "warning", _retention_overdue)


def _open_ledger_overdue(f: Finding) -> tuple[str, str]:
    lim = f.ev_duration("open_ledger_max_age_s")
    reason = (
        f"Ledger {f.ledger_id}, the current ledger of {f.owner}, has been OPEN for {f.age or 'long'}{lim}: "
        "its broker may have died without closing it, or the topic has not rolled over."
    )
    step = lines(
        topic_step(f, "Check the topic's state: ", "stats-internal"),
        f"Check the ledger: {ledger_meta(f)}",
        topic_step(f, "Unloading the topic closes and recovers it: ", "unload"),
    )
    return reason, step


OPEN_LEDGER_OVERDUE = _RETENTION.declare("open_ledger_overdue", "warning", _open_ledger_overdue)
