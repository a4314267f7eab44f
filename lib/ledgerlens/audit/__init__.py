"""The audit: Spark transforms from the inventory tables to the findings table.

- ``run_audit``: every rule of docs/audit-rules.md, one lazy plan, sorted findings.
- ``KINDS``: the finding kinds; ``order_findings``: the findings order; ``summarize``: counts and
  bytes by kind and severity, collected to the driver.

Modules: ``names`` (column helpers over Pulsar names), ``references`` (what metadata references,
blind spots), ``rules`` (one transform per rule), ``findings`` (row shape, order, summary),
``run`` (the plan).
"""

from __future__ import annotations

from ledgerlens.audit.findings import KINDS, order_findings, summarize
from ledgerlens.audit.run import run_audit

__all__ = ["KINDS", "order_findings", "run_audit", "summarize"]
