"""What an audit looked at: the context a report opens with.

``audit_context`` gathers, as one JSON-able dict, the cluster's name, the metadata store and bucket
(credentials redacted), the source, the as-of time, the counts scanned per table, the thresholds,
the ledgerlens version and the duration. Runbooks record it (``record("context", ...)``) so a report's
title and a scheduler's metrics can be made from the executed notebook alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ledgerlens.report.text import human_time
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens.settings.redact import redact

SCANNED_TABLES = (
    "bk_ledgers",
    "managed_ledgers",
    "ml_ledgers",
    "cursors",
    "schema_ledgers",
    "namespace_policies",
    "offload_objects",
)
"""Inventory tables whose row counts say what was scanned (others may add theirs)."""

TABLE_LABELS = {
    "bk_ledgers": "BookKeeper ledgers",
    "managed_ledgers": "managed ledgers (topics)",
    "ml_ledgers": "ledgers listed by topics",
    "cursors": "cursors (subscriptions)",
    "schema_ledgers": "schema versions",
    "namespace_policies": "namespaces",
    "offload_objects": "offloaded objects",
}


def ledgerlens_version() -> str:
    """The installed ledgerlens version (``'unknown'`` outside an install)."""
    try:
        return version("ledgerlens")
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def audit_context(
    summary: Mapping[str, Any],
    zk: ZooKeeperSource | None,
    s3: S3Source | None,
    audit: AuditConfig,
    *,
    cluster_name: str = "",
    source: str = "ZooKeeper (live)",
    out_dir: str = "",
    sandbox: str = "",
) -> dict[str, Any]:
    """The context of one audit run, JSON-able, without credentials.

    ``summary`` is the pipeline's summary (``AuditRun.summary``): counts scanned and timings
    come from it, and the cluster's name when ``cluster_name`` is not given (the single cluster
    the audit found under ``/admin/clusters``).
    """
    counts = dict(summary.get("inventory_counts") or {})
    scanned = {t: int(counts[t]) for t in counts if t in SCANNED_TABLES or t in TABLE_LABELS}
    timings = summary.get("timings") or {}
    phases = [k for k in ("collect", "audit", "reverify", "write") if k in timings]
    duration = float(timings.get("total") or sum(float(timings[k]) for k in phases))
    zookeeper = redact(zk.hosts) if zk is not None else "(metadata stores named otherwise)"
    cluster_name = cluster_name or str(summary.get("cluster_name") or "")  # as found under /admin/clusters
    return {
        "cluster": cluster_name or zookeeper,
        "cluster_named": bool(cluster_name),
        "zookeeper": zookeeper,
        "ledgers_root": zk.ledgers_root if zk is not None else "",
        "bucket": s3.bucket if s3 else "",
        "s3_endpoint": redact(s3.endpoint_url or "AWS S3") if s3 else "",
        "source": source,
        "sandbox": sandbox,
        "as_of_ms": int(summary.get("as_of_ms") or audit.as_of_ms),
        "scanned": scanned,
        "s3_scanned": bool(summary.get("s3_scanned", s3 is not None)),
        "thresholds": {
            "min_orphan_age_s": audit.min_orphan_age_s,
            "retention_grace_s": audit.retention_grace_s,
        },
        "ledgerlens_version": ledgerlens_version(),
        "duration_s": round(duration, 1),
        "out_dir": out_dir,
        "context": summary.get("context"),  # the named cluster context and every setting's origin
    }


def report_title(context: Mapping[str, Any]) -> str:
    """``'Pulsar storage audit: <cluster>, <as-of>'``."""
    when = human_time(context.get("as_of_ms"))
    return f"Pulsar storage audit: {context.get('cluster') or 'cluster'}, {when}".rstrip(", ")
