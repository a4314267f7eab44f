"""Settings for sources and the audit.

Connection settings name servers only; credentials never live here. S3 credentials come from
boto3's standard chain (environment, profile, instance role), Pulsar auth from the environment.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ledgerlens.errors import ConfigError


@dataclass(frozen=True)
class ZooKeeperSource:
    """Where the metadata lives and how hard the scan may press on it."""

    hosts: str  # host:port[,host:port...][/chroot]
    ledgers_root: str = "/ledgers"
    managed_ledgers_root: str = "/managed-ledgers"
    schemas_root: str = "/schemas"
    policies_root: str = "/admin/policies"
    rate_limit: float = 20_000.0  # read operations per second, whole scan (split across tasks)
    max_in_flight: int = 200  # outstanding asynchronous reads per task
    timeout_s: float = 30.0
    tasks: int | None = None  # Spark tasks for the scan; None: 4 x default parallelism


@dataclass(frozen=True)
class S3Source:
    """The tiered-storage bucket to inventory."""

    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    max_in_flight: int = 16


@dataclass(frozen=True)
class AuditConfig:
    """Thresholds of the audit rules. Durations in seconds; ``as_of_ms`` fixes 'now'."""

    as_of_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    min_orphan_age_s: int = 24 * 3600
    incomplete_offload_age_s: int = 24 * 3600
    default_offload_deletion_lag_ms: int = 4 * 3600 * 1000  # broker managedLedgerOffloadDeletionLagMs
    default_retention_minutes: int = 0  # broker defaultRetentionTimeInMinutes
    default_retention_mb: int = 0  # broker defaultRetentionSizeInMB
    retention_grace_s: int = 6 * 3600
    open_ledger_max_age_s: int = 7 * 24 * 3600
    inactive_cursor_age_s: int = 7 * 24 * 3600


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> int:
    """'90s', '15m', '24h', '7d', '2w' or plain seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", text)
    if not m:
        raise ConfigError(f"duration {text!r}: expected a number with an optional unit s, m, h, d or w")
    return int(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_time_ms(text: str) -> int:
    """An ISO-8601 time ('2026-11-22T03:00:00Z') or epoch milliseconds -> epoch milliseconds."""
    from datetime import UTC, datetime

    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as e:
        raise ConfigError(f"time {text!r}: expected ISO-8601 or epoch milliseconds") from e
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)
