"""Settings for sources and the audit.

Connection settings name servers only; credentials never live here, only references to them
(:class:`SecretRef`: an environment variable's name or a file path), read where a connection is
made. S3 credentials come from boto3's standard chain (environment, profile, instance role).
Contexts (``ledgerlens.settings.contexts``) resolve these settings from a file, the environment and flags.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ledgerlens.errors import ConfigError


@dataclass(frozen=True)
class SecretRef:
    """Where a credential is: an environment variable's name or a file's path, never the value."""

    env: str | None = None
    file: str | None = None

    def describe(self) -> str:
        """``env NAME`` or ``file PATH`` (safe to print)."""
        return f"env {self.env}" if self.env else f"file {self.file}"

    def read(self) -> str:
        """The credential (stripped), or :class:`ConfigError` naming the reference (never a value)."""
        if self.env:
            value = os.environ.get(self.env, "")
            if not value.strip():
                raise ConfigError(f"credential reference env {self.env}: the variable is not set or empty")
            return value.strip()
        if not self.file:
            raise ConfigError("credential reference names neither an environment variable nor a file")
        try:
            text = Path(self.file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ConfigError(f"credential reference file {self.file}: cannot read it ({e.strerror})") from e
        if not text:
            raise ConfigError(f"credential reference file {self.file}: the file is empty")
        return text


@dataclass(frozen=True)
class ZooKeeperAuth:
    """ZooKeeper authentication by reference: a digest (``user:password``) or a SASL JAAS file.

    Applied to every kazoo session (``ledgerlens.sources.zk_client.connect``), on the driver and on
    executors alike: executors need the same environment variable or file.
    """

    digest: SecretRef | None = None
    sasl_jaas_file: str | None = None

    def kazoo_options(self) -> dict[str, object]:
        """Keyword arguments of ``KazooClient`` (``auth_data`` / ``sasl_options``) for this auth."""
        out: dict[str, object] = {}
        if self.digest is not None:
            credential = self.digest.read()
            if ":" not in credential:
                raise ConfigError(f"zookeeper digest from {self.digest.describe()}: expected user:password")
            out["auth_data"] = [("digest", credential)]
        if self.sasl_jaas_file:
            out["sasl_options"] = jaas_sasl_options(self.sasl_jaas_file)
            if importlib.util.find_spec("puresasl") is None:  # kazoo's SASL client
                raise ConfigError(
                    f"zookeeper SASL (JAAS file {self.sasl_jaas_file}) needs the pure-sasl package "
                    "(pip install pure-sasl==0.6.2)"
                )
        return out


CACHE_ENV = "LEDGERLENS_CACHE"
"""Where ledgerlens keeps what it fetches or writes once (ZooKeeper and Pulsar jars, the class
archive of ``ledgerlens warm-up``, the CLI's JVM log); default ``~/.cache/ledgerlens``."""


def cache_dir() -> Path:
    """``$LEDGERLENS_CACHE`` or ``~/.cache/ledgerlens``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "ledgerlens"


_JAAS_SECTION = re.compile(r"(?s)\bClient\s*\{(.*?)\}\s*;")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_sasl_options(path: str) -> dict[str, object]:
    """kazoo ``sasl_options`` from the ``Client`` section of a ZooKeeper JAAS file.

    ``DigestLoginModule`` (username/password) gives SASL DIGEST-MD5; ``Krb5LoginModule`` gives
    GSSAPI (the Kerberos ticket comes from the environment). Errors name the file, never a value.
    """
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"zookeeper JAAS file {path}: cannot read it ({e.strerror})") from e
    m = _JAAS_SECTION.search(text)
    if not m:
        raise ConfigError(f"zookeeper JAAS file {path}: no 'Client {{ ... }};' section")
    body = m.group(1)
    options = dict(_JAAS_OPTION.findall(body))
    if "DigestLoginModule" in body:
        if not options.get("username") or "password" not in options:
            raise ConfigError(f"zookeeper JAAS file {path}: DigestLoginModule needs username and password")
        return {"mechanism": "DIGEST-MD5", "username": options["username"], "password": options["password"]}
    if "Krb5LoginModule" in body:
        principal = options.get("principal", "")
        return {"mechanism": "GSSAPI", "principal": principal} if principal else {"mechanism": "GSSAPI"}
    raise ConfigError(f"zookeeper JAAS file {path}: neither DigestLoginModule nor Krb5LoginModule")


@dataclass(frozen=True)
class ZooKeeperSource:
    """Where the metadata lives and how hard the scan may press on it."""

    hosts: str  # host:port[,host:port...][/chroot]
    ledgers_root: str = "/ledgers"
    managed_ledgers_root: str = "/managed-ledgers"
    schemas_root: str = "/schemas"
    policies_root: str = "/admin/policies"
    clusters_root: str = "/admin/clusters"
    rate_limit: float = 20_000.0  # read operations per second, whole scan (split across tasks)
    max_in_flight: int = 200  # outstanding asynchronous reads per task
    timeout_s: float = 30.0
    tasks: int | None = None  # Spark tasks for the scan; None: 4 x default parallelism
    auth: ZooKeeperAuth | None = None  # credentials by reference; None: anonymous


@dataclass(frozen=True)
class S3Source:
    """The tiered-storage bucket to inventory."""

    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    max_in_flight: int = 16
    profile: str | None = None  # AWS profile name (~/.aws/config); None: boto3's default chain


@dataclass(frozen=True)
class BookieSource:
    """How entries are read from bookies (read-only: never fences, recovers or writes).

    ``protocol``: ``v3`` (protobuf), ``v2`` (the pre-v3 binary read) or ``auto`` (v3, then v2 on a
    bookie that refuses it). ``tls_ca_file`` turns on TLS (START_TLS) verified against that CA bundle.
    """

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0  # longest wait for one answer; a silent bookie fails after this
    max_in_flight: int = 64  # pipelined requests per connection
    protocol: str = "auto"
    tls_ca_file: str | None = None
    tasks: int | None = None  # Spark tasks for entry reads; None: 2 x default parallelism


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
    # tenants known to be deleted from the audited cluster: their ledgers are orphan candidates
    # again instead of foreign_ledger (audit/ownership.py)
    deleted_tenants: tuple[str, ...] = ()


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_DURATION_S = 3650 * 86400  # ten years: anything longer is a typo, and overflows downstream
MIN_TIME_MS = 946_684_800_000  # 2000-01-01: Pulsar did not exist before
MAX_TIME_MS = 7_258_118_400_000  # 2200-01-01


def parse_duration(text: str | int | float, *, name: str = "duration") -> int:
    """'90s', '15m', '24h', '7d', '2w', plain seconds or a number of seconds -> seconds.

    Raises ``ConfigError`` (naming ``name``) for malformed, negative or absurd (over ten years) values.
    """
    if isinstance(text, bool):
        raise ConfigError(f"{name} {text!r}: expected a number with an optional unit s, m, h, d or w")
    if isinstance(text, int | float):
        if text != text or text < 0:  # NaN or negative
            raise ConfigError(f"{name} {text!r}: expected a non-negative number of seconds")
        seconds = int(text) if text <= MAX_DURATION_S else MAX_DURATION_S + 1
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", str(text))
        if not m:
            raise ConfigError(f"{name} {text!r}: expected a number with an optional unit s, m, h, d or w")
        digits = m.group(1)
        seconds = int(digits) * _UNITS[m.group(2) or "s"] if len(digits) <= 15 else MAX_DURATION_S + 1
    if seconds > MAX_DURATION_S:
        raise ConfigError(f"{name} {text!r}: out of range (at most {MAX_DURATION_S // 86400}d)")
    return seconds


def parse_time_ms(text: str | int) -> int:
    """An ISO-8601 time ('2026-11-22T03:00:00Z') or epoch milliseconds -> epoch milliseconds."""
    t = str(text).strip()
    if t.isdigit():
        ms = int(t) if len(t) <= 15 else MAX_TIME_MS + 1
    else:
        try:
            dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
        except ValueError as e:
            raise ConfigError(f"time {text!r}: expected ISO-8601 or epoch milliseconds") from e
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        ms = int(dt.timestamp() * 1000)
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        raise ConfigError(f"time {text!r}: out of range (expected a time between 2000 and 2200)")
    return ms
