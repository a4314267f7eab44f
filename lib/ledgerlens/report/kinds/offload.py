"""Tiered storage (S3 offload) against the metadata: ``orphan_offload_object``, ``foreign_offload_object``,
``missing_offload_object``, ``incomplete_offload``, ``offloaded_not_deleted``, ``corrupt_offload_object``
(rules: ``ledgerlens.audit.rules.offload`` and ``offload_objects``)."""

from __future__ import annotations

from ledgerlens.report.kinds.finding import Finding, info_internal, ledger_meta, lines, q, topic_step
from ledgerlens.report.kinds.registry import Subject
from ledgerlens.report.text import human_time

_OFFLOAD = Subject("offload", rule="audit/rules/offload.py")
_OFFLOAD_OBJECTS = Subject("offload", rule="audit/rules/offload_objects.py")


def _orphan_offload_object(f: Finding) -> tuple[str, str]:
    key = f.key
    lid = f.ev("ledger_id")
    of = f" of ledger {lid}" if lid is not None else ""
    age = f.aged(", last modified {} ago")
    reason = (
        f"Offloaded {f.ev('role') or 'data'} object {key}{of} ({f.size}{age}) in bucket {f.bucket} "
        f"belongs to no offload of any topic (offload uuid {f.ev('uuid') or '?'} is referenced nowhere)."
    )
    step = lines(
        "See which topic wrote it (user metadata ManagedLedgerName):",
        f"  {f.s3api('head-object', key)}",
        "Reclaim it through an approved deletion plan; by hand:",
        f"  {f.s3api('delete-object', key)}",
    )
    return reason, step


ORPHAN_OFFLOAD_OBJECT = _OFFLOAD.declare("orphan_offload_object", "warning", _orphan_offload_object)


def _foreign_offload_object(f: Finding) -> tuple[str, str]:
    key = f.key
    tenant = f.tenant or "another cluster"
    reason = (
        f"Object {key} ({f.size}) in bucket {f.bucket} was offloaded for {tenant}, which this cluster "
        "does not own: another cluster offloads into the same bucket."
    )
    step = lines(
        f"See who wrote it (ManagedLedgerName, cluster): {f.s3api('head-object', key)}",
        "Audit the owning cluster against this bucket; never delete it from this report.",
    )
    return reason, step


FOREIGN_OFFLOAD_OBJECT = _OFFLOAD_OBJECTS.declare("foreign_offload_object", "info", _foreign_offload_object)


def _missing_offload_object(f: Finding) -> tuple[str, str]:
    key = f.key
    lost = f.severity == "critical"
    tail = (
        "and the BookKeeper copy is deleted: the data is lost"
        if lost
        else "but the BookKeeper copy still exists: the data is safe until the broker deletes it"
    )
    reason = (
        f"{f.owner} says ledger {f.ledger_id} is offloaded (uuid {f.ev('uuid') or '?'}), but its "
        f"{f.ev('role') or 'data'} object {key} is absent from bucket {f.bucket}, {tail}."
    )
    steps = [f"Confirm: {f.s3api('head-object', key)}"]
    ns = f.namespace
    if lost:
        steps.append(
            "Check the bucket's lifecycle rules and versioning (restore a previous version if versioned): "
            f"aws s3api list-object-versions --bucket {q(f.bucket)} --prefix {q(key)}"
        )
    elif ns:
        steps.append(
            "Keep the BookKeeper copy while you find out who deleted the object: "
            f"pulsar-admin namespaces set-offload-deletion-lag {q(ns)} --lag 3650d"
        )
    return reason, lines(*steps)


MISSING_OFFLOAD_OBJECT = _OFFLOAD.declare(
    "missing_offload_object",
    "critical",
    _missing_offload_object,
    also=("warning",),
    varies="a warning while the ledger's BookKeeper copy still exists",
)


def _incomplete_offload(f: Finding) -> tuple[str, str]:
    keys = f.ev("keys") or ([f.object_key] if f.object_key else [])
    newest = f.ev("newest_last_modified_ms")
    when = f", the newest written {human_time(newest)}" if newest else ""
    reason = (
        f"The offload of ledger {f.ledger_id} of {f.owner} (uuid {f.ev('uuid') or '?'}) never completed "
        f"and left {len(keys)} object(s) ({f.size}) in bucket {f.bucket}{when}."
    )
    steps = [
        topic_step(f, "Is an offload still running? ", "offload-status"),
        f"Compare the uuid with the ledger's current offload: {info_internal(f)}" if f.topic else "",
        "If no offload runs and the uuid is not the current one, the objects are garbage:",
        *[f"  {f.s3api('head-object', str(k))}" for k in keys[:4]],
    ]
    return reason, lines(*steps)


INCOMPLETE_OFFLOAD = _OFFLOAD.declare("incomplete_offload", "warning", _incomplete_offload)


def _offloaded_not_deleted(f: Finding) -> tuple[str, str]:
    lag_s = f.ev_duration("offload_deletion_lag_ms", "offload deletion lag", per_second=1000)
    reason = (
        f"Ledger {f.ledger_id} of {f.owner} is offloaded, but its BookKeeper copy ({f.size}) is still "
        f"kept past the offload deletion lag{lag_s}: the broker deletes it only while the topic is loaded."
    )
    step = lines(
        topic_step(f, "Load and trim the topic: ", "trim-topic"),
        f"Check afterwards: {ledger_meta(f)}   (expect: ledger does not exist)",
    )
    return reason, step


OFFLOADED_NOT_DELETED = _OFFLOAD.declare("offloaded_not_deleted", "warning", _offloaded_not_deleted)


def _corrupt_offload_object(f: Finding) -> tuple[str, str]:
    key = f.key
    problem = f.ev("problem") or f.ev("error") or "does not decode"
    reason = f"Offloaded object {key} in bucket {f.bucket} cannot be read back: {problem}."
    step = lines(
        f"Look at it: {f.s3api('head-object', key)}",
        f"Is it still in BookKeeper? {ledger_meta(f)}" if f.ledger_id is not None else "",
        "While BookKeeper has it, keep it (raise the namespace's offload deletion lag) and re-offload.",
    )
    return reason, step


CORRUPT_OFFLOAD_OBJECT = _OFFLOAD_OBJECTS.declare(
    "corrupt_offload_object",
    "critical",
    _corrupt_offload_object,
    also=("warning",),
    varies="a warning while the referencing ledger's BookKeeper copy exists, and for the ``uuid`` check",
)
