"""Every setting of a cluster context, once: its key in the contexts file (``table.key``), kind,
environment variable (``LEDGERLENS_*``), flag (the argparse destination, also the runbook
parameter's name), built-in default and whether it references a credential.

``ledgerlens.settings.contexts.resolve`` layers them: built-in default < context < environment <
flags (or runbook parameters). These names are contracts: documented in README.md and used by
contexts files, environments and runbooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BY_KEY", "KINDS", "SETTINGS", "TABLES", "Setting"]

KINDS = ("str", "int", "float", "bool", "duration", "choice", "list", "table")


@dataclass(frozen=True)
class Setting:
    """One setting: its key in a context (``table.key``), how it is typed and where it may come from.

    ``flag`` is the argparse destination (also the runbook parameter's name); ``secret`` marks a
    reference to a credential (an environment variable's name or a file path): shown as the
    reference, never read into any output.
    """

    key: str
    kind: str
    env: str | None
    flag: str | None
    default: Any
    help: str
    secret: bool = False
    choices: tuple[str, ...] = ()

    @property
    def flag_name(self) -> str:
        return "--" + (self.flag or "").replace("_", "-")


def _s(key: str, kind: str, env: str | None, flag: str | None, default: Any, help: str, **kw: Any) -> Setting:
    return Setting(key, kind, env, flag, default, help, **kw)


SETTINGS: tuple[Setting, ...] = (
    # -- the Pulsar cluster
    _s("pulsar.cluster-name", "str", "LEDGERLENS_CLUSTER_NAME", "cluster_name", "", "Pulsar cluster name"),
    _s("pulsar.admin-url", "str", "LEDGERLENS_ADMIN_URL", "admin_url", "", "Pulsar admin (web service) URL"),
    _s("pulsar.service-url", "str", "LEDGERLENS_SERVICE_URL", "service_url", "", "broker URL (pulsar://)"),
    # -- metadata stores
    _s(
        "metadata.source",
        "choice",
        "LEDGERLENS_SOURCE",
        "source",
        "zk",
        "metadata source kind",
        choices=("zk", "zk-snapshot", "admin"),
    ),
    _s(
        "metadata.zookeeper",
        "str",
        "LEDGERLENS_ZOOKEEPER",
        "zookeeper",
        "",
        "ZooKeeper connect string with chroot",
    ),
    _s("metadata.ledgers-root", "str", "LEDGERLENS_LEDGERS_ROOT", "ledgers_root", "/ledgers", "ledgers root"),
    _s(
        "metadata.managed-ledgers-root",
        "str",
        "LEDGERLENS_MANAGED_LEDGERS_ROOT",
        None,
        "/managed-ledgers",
        "managed-ledger root",
    ),
    _s(
        "metadata.bookkeeper",
        "str",
        "LEDGERLENS_BOOKKEEPER_METADATA",
        "bookkeeper_metadata",
        "",
        "BookKeeper metadata store where separate",
    ),
    _s(
        "metadata.pulsar",
        "list",
        "LEDGERLENS_PULSAR_METADATA",
        "pulsar_metadata",
        [],
        "every Pulsar metadata store sharing the BookKeeper cluster (KIND:LOCATION)",
    ),
    _s(
        "metadata.zk-data-dir",
        "str",
        "LEDGERLENS_ZK_DATA_DIR",
        "zk_data_dir",
        "",
        "ZooKeeper data directory (snapshots, logs) of --source zk-snapshot",
    ),
    _s(
        "metadata.zk-until",
        "str",
        "LEDGERLENS_ZK_UNTIL",
        "zk_until",
        "",
        "zk-snapshot: state at this zxid/time",
    ),
    _s("metadata.rate-limit", "float", "LEDGERLENS_ZK_RATE_LIMIT", None, 20_000.0, "reads/s over the scan"),
    _s("metadata.timeout", "float", "LEDGERLENS_ZK_TIMEOUT", None, 30.0, "ZooKeeper session timeout (s)"),
    # -- tiered storage
    _s("s3.bucket", "str", "LEDGERLENS_BUCKET", "bucket", "", "tiered-storage bucket"),
    _s("s3.endpoint", "str", "LEDGERLENS_S3_ENDPOINT", "s3_endpoint", "", "S3 endpoint URL (empty: AWS)"),
    _s("s3.region", "str", "LEDGERLENS_S3_REGION", "s3_region", "", "S3 region"),
    _s("s3.profile", "str", "LEDGERLENS_AWS_PROFILE", "aws_profile", "", "AWS profile name"),
    _s("s3.shared", "bool", "LEDGERLENS_S3_SHARED", None, False, "other clusters offload to this bucket"),
    _s(
        "s3.max-requests",
        "int",
        "LEDGERLENS_S3_MAX_REQUESTS",
        "s3_max_requests",
        0,
        "GETs a run may spend verifying offload objects (0: no limit); the rest wait for the next run",
    ),
    # -- credentials, by reference only
    _s(
        "auth.zookeeper-digest-env",
        "str",
        "LEDGERLENS_ZK_DIGEST_ENV",
        None,
        "",
        "env var holding the ZooKeeper digest user:password",
        secret=True,
    ),
    _s(
        "auth.zookeeper-digest-file",
        "str",
        "LEDGERLENS_ZK_DIGEST_FILE",
        None,
        "",
        "file holding the ZooKeeper digest user:password",
        secret=True,
    ),
    _s(
        "auth.zookeeper-sasl-jaas-file",
        "str",
        "LEDGERLENS_ZK_JAAS_FILE",
        None,
        "",
        "ZooKeeper SASL JAAS file",
        secret=True,
    ),
    _s(
        "auth.admin-token-env",
        "str",
        "LEDGERLENS_ADMIN_TOKEN_ENV",
        None,
        "",
        "env var holding the Pulsar token (admin API and broker)",
        secret=True,
    ),
    _s(
        "auth.admin-token-file",
        "str",
        "LEDGERLENS_ADMIN_TOKEN_FILE",
        None,
        "",
        "file holding the Pulsar token (admin API and broker)",
        secret=True,
    ),
    _s(
        "auth.tls-trust-certs-file",
        "str",
        "LEDGERLENS_TLS_TRUST_CERTS_FILE",
        None,
        "",
        "CA certificates (PEM) of the admin URL",
    ),
    _s("auth.tls-cert-file", "str", "LEDGERLENS_TLS_CERT_FILE", None, "", "client certificate (PEM)"),
    _s(
        "auth.tls-key-file",
        "str",
        "LEDGERLENS_TLS_KEY_FILE",
        None,
        "",
        "client private key (PEM)",
        secret=True,
    ),
    # -- audit thresholds
    _s(
        "audit.min-orphan-age",
        "duration",
        "LEDGERLENS_MIN_ORPHAN_AGE",
        "min_orphan_age",
        "24h",
        "orphan minimum age",
    ),
    _s(
        "audit.retention-grace",
        "duration",
        "LEDGERLENS_RETENTION_GRACE",
        "retention_grace",
        "6h",
        "retention grace",
    ),
    _s(
        "audit.incomplete-offload-age",
        "duration",
        "LEDGERLENS_INCOMPLETE_OFFLOAD_AGE",
        "incomplete_offload_age",
        "24h",
        "incomplete offload minimum age",
    ),
    _s(
        "audit.open-ledger-max-age",
        "duration",
        "LEDGERLENS_OPEN_LEDGER_MAX_AGE",
        "open_ledger_max_age",
        "7d",
        "open ledger maximum age",
    ),
    _s(
        "audit.inactive-cursor-age",
        "duration",
        "LEDGERLENS_INACTIVE_CURSOR_AGE",
        "inactive_cursor_age",
        "7d",
        "inactive cursor age",
    ),
    _s(
        "audit.offload-deletion-lag",
        "duration",
        "LEDGERLENS_OFFLOAD_DELETION_LAG",
        "offload_deletion_lag",
        "4h",
        "broker managedLedgerOffloadDeletionLagMs",
    ),
    _s(
        "audit.default-retention-minutes",
        "int",
        "LEDGERLENS_DEFAULT_RETENTION_MINUTES",
        "default_retention_minutes",
        0,
        "broker defaultRetentionTimeInMinutes",
    ),
    _s(
        "audit.default-retention-mb",
        "int",
        "LEDGERLENS_DEFAULT_RETENTION_MB",
        "default_retention_mb",
        0,
        "broker defaultRetentionSizeInMB",
    ),
    _s(
        "audit.deleted-tenants",
        "list",
        "LEDGERLENS_DELETED_TENANTS",
        "deleted_tenant",
        [],
        "tenants known to be deleted from this cluster",
    ),
    _s(
        "audit.fail-on",
        "choice",
        "LEDGERLENS_FAIL_ON",
        "fail_on",
        "",
        "exit 3 on findings this severe (new-*: on new findings only)",
        choices=("", "critical", "warning", "new-critical", "new-warning"),
    ),
    _s(
        "audit.previous",
        "str",
        "LEDGERLENS_PREVIOUS",
        "previous",
        "",
        "the run to compare with (an output directory); empty: the one in --out, else its history/",
    ),
    _s(
        "audit.history-keep",
        "int",
        "LEDGERLENS_HISTORY_KEEP",
        "history_keep",
        14,
        "runs kept in --out/history/ (0: none)",
    ),
    _s(
        "audit.reverify-objects",
        "choice",
        "LEDGERLENS_REVERIFY_OBJECTS",
        "reverify_objects",
        "changed",
        "offload objects to read again: changed (new or changed since the previous run's verdicts) or all",
        choices=("changed", "all"),
    ),
    # -- Spark
    _s("spark.master", "str", "LEDGERLENS_SPARK_MASTER", "spark_master", "local[*]", "Spark master"),
    _s("spark.conf", "table", "LEDGERLENS_SPARK_CONF", None, {}, "extra Spark settings"),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
TABLES: tuple[str, ...] = tuple(dict.fromkeys(s.key.split(".", 1)[0] for s in SETTINGS))
