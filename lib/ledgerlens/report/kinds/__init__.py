"""Every finding kind, declared once: severity, subject, the rule module that emits it, its explainer
and its section in ``docs/audit-rules.md``.

One module per subject, as ``docs/audit-rules.md`` groups the kinds; each holds its kinds'
explainers and their declarations (``<SUBJECT>.declare(...)``: a ``registry.Subject`` names the subject
and the rule module; next to the explainer):

- ``ledgers``: ``orphan_ledger``, ``unattributed_ledger``, ``foreign_ledger``, ``missing_ledger``;
- ``offload``: the offloaded objects (``*_offload_object``, ``incomplete_offload``,
  ``offloaded_not_deleted``);
- ``retention``: ``retention_overdue``, ``open_ledger_overdue``;
- ``cursors``: ``inactive_cursor``;
- ``metadata``: ``corrupt_metadata``, ``unreadable_metadata``, ``emptied_managed_ledger``;
- ``kafka``: the ``remote_segment_*`` kinds of the Kafka audit.

``registry`` holds ``Kind``, ``declare`` and the explainers' registry; ``finding`` the row view
explainers read. The audit reads its kind tables (``audit.findings.PULSAR_KINDS``, ``KAFKA_KINDS``)
and its rules' severities (``severity_of``) from here.

Adding a finding kind: write its explainer and declare it in its subject's module, add it
to ``PULSAR`` or ``KAFKA`` below, emit it from the declared rule module, and add its
``### `<kind>` `` section to ``docs/audit-rules.md`` and its row to the README's table (a test checks
each).
"""

from __future__ import annotations

from ledgerlens.report.kinds import cursors, kafka, ledgers, metadata, offload, retention
from ledgerlens.report.kinds.registry import DECLARED, Kind, declared, severity_of

# The findings tables' order (the README's table, the audit's ``KINDS``) is a contract: the tables below
# fix it. Every declared kind is in exactly one of them (a test checks).
PULSAR: tuple[Kind, ...] = (
    ledgers.ORPHAN_LEDGER,
    ledgers.UNATTRIBUTED_LEDGER,
    ledgers.FOREIGN_LEDGER,
    ledgers.MISSING_LEDGER,
    offload.ORPHAN_OFFLOAD_OBJECT,
    offload.FOREIGN_OFFLOAD_OBJECT,
    offload.MISSING_OFFLOAD_OBJECT,
    offload.INCOMPLETE_OFFLOAD,
    offload.OFFLOADED_NOT_DELETED,
    retention.RETENTION_OVERDUE,
    retention.OPEN_LEDGER_OVERDUE,
    cursors.INACTIVE_CURSOR,
    metadata.CORRUPT_METADATA,
    offload.CORRUPT_OFFLOAD_OBJECT,
    metadata.UNREADABLE_METADATA,
    metadata.EMPTIED_MANAGED_LEDGER,
)
"""The Pulsar audit's kinds (``ledgerlens.audit``)."""

KAFKA: tuple[Kind, ...] = (
    kafka.REMOTE_SEGMENT_ORPHAN_OBJECT,
    kafka.REMOTE_SEGMENT_FOREIGN_OBJECT,
    kafka.REMOTE_SEGMENT_MISSING_OBJECT,
    kafka.REMOTE_SEGMENT_STUCK_COPY,
    kafka.REMOTE_SEGMENT_STUCK_DELETE,
    kafka.REMOTE_SEGMENT_DELETED_PARTITION_OBJECT,
    kafka.REMOTE_SEGMENT_RETENTION_OVERDUE,
    kafka.REMOTE_SEGMENT_OVERLAP,
    kafka.REMOTE_SEGMENT_ILLEGAL_TRANSITION,
    kafka.REMOTE_SEGMENT_METADATA_GROWTH,
)
"""The Kafka tiered-storage audit's kinds (``ledgerlens.kafka.audit``; it emits ``corrupt_metadata`` too)."""

__all__ = ["DECLARED", "KAFKA", "PULSAR", "Kind", "declared", "severity_of"]
