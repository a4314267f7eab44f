"""The ``ledgerlens`` command line's arguments, per command group (``ledgerlens.cli.build_parser``).

Every input flag of ``audit`` and ``report`` is a setting's flag (``contexts.SETTINGS``, its
``Setting.flag`` destination) or one of the run's own (``--out``, ``--deep-offload-check``,
``--allow-empty-metadata``, ``--read-bookies``...): ``contexts.Settings.audit_request`` turns the
resolved settings and these flags into the run's ``AuditRequest``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_NOTEBOOK",
    "FAIL_ON",
    "add_audit_parsers",
    "add_contexts_parsers",
    "add_history_options",
    "add_inputs",
    "add_kafka_parser",
    "add_run_options",
    "add_tool_parsers",
]

# --fail-on: the severities that make the exit status 3; new-*: among the run's new findings only
# (``new_by_severity`` of the summary: findings the previous run did not report).
FAIL_ON = {
    "critical": ("critical",),
    "warning": ("critical", "warning"),
    "new-critical": ("critical",),
    "new-warning": ("critical", "warning"),
}

DEFAULT_NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "audit_ledgers.ipynb"

Group = Any  # an argparse argument group (argparse's _ArgumentGroup is private)


def add_inputs(p: argparse.ArgumentParser, *, zookeeper_required: bool) -> None:
    """The inputs of ``audit`` and ``report``: stores, bucket, thresholds, the run's clock and Spark."""
    g = p.add_argument_group("inputs")
    _add_stores(g, zookeeper_required=zookeeper_required)
    _add_bucket(g)
    _add_thresholds(g)
    _add_run_inputs(g)


# Options that take one value (``default=None``: unset, the context or sandbox fills it in), as
# (flag, metavar, help) rows, in --help order.
_Row = tuple[str, str, str]

_CONTEXT: tuple[_Row, ...] = (
    (
        "--context",
        "NAME",
        "named cluster context of the contexts file ($LEDGERLENS_CONFIG or "
        "~/.config/ledgerlens/contexts.toml); default $LEDGERLENS_CONTEXT, then the file's 'current'. "
        "Flags and LEDGERLENS_* variables override its settings",
    ),
)
_STORE_LOCATIONS: tuple[_Row, ...] = (
    (
        "--admin-url",
        "URL",
        "--source admin: the broker's web service URL, http(s)://HOST:PORT (setting pulsar.admin-url)",
    ),
    (
        "--zk-data-dir",
        "DIR",
        "--source zk-snapshot: ZooKeeper's dataDir (or a copy, a backup); the newest "
        "version-2/snapshot.<zxid> (plain, .gz or .snappy) is read and every transaction log after "
        "it replayed. A chroot in --zookeeper selects the Pulsar tree inside it",
    ),
    (
        "--zk-until",
        "ZXID|TIME",
        "--source zk-snapshot: the state at this zxid (0x1a2b or decimal) or time (ISO-8601 or "
        "epoch ms) instead of the newest one, for a forensic audit of the past",
    ),
    (
        "--bookkeeper-metadata",
        "KIND:LOCATION",
        "where BookKeeper's ledger metadata lives when it is not --zookeeper, e.g. "
        "zk:zk1:2181/ledgers (the path is the ledgers root; bookkeeperMetadataServiceUri values such "
        "as metadata-store:zk:host:2181/ledgers or zk+hierarchical://host:2181/ledgers work too), or "
        "zk-snapshot:DATA_DIR#/ledgers",
    ),
)
_REPEATED_STORES: tuple[_Row, ...] = (
    (
        "--pulsar-metadata",
        "KIND:LOCATION",
        "a Pulsar metadata store, as the broker's metadataStoreUrl: zk:zk1:2181,zk2:2181/chroot "
        "(or zk-snapshot:DATA_DIR#/chroot). Repeat for every Pulsar cluster sharing the BookKeeper "
        "cluster: references are the union, ledgers of tenants found in none of them are "
        "foreign_ledger (info), never orphans",
    ),
    (
        "--deleted-tenant",
        "NAME",
        "a tenant known to be deleted from this cluster: its ledgers become orphan candidates "
        "again instead of foreign_ledger (repeatable)",
    ),
)
_SANDBOX: tuple[_Row, ...] = (
    (
        "--sandbox",
        "DIR",
        "audit a sandbox started with 'ledgerlens sandbox up' or 'sandbox-local up': its "
        "ZooKeeper, S3 endpoint, bucket, clock and thresholds fill every input not given",
    ),
)
_BUCKET: tuple[_Row, ...] = (
    ("--s3-endpoint", "URL", "S3 endpoint URL for the tiered-storage bucket (default: AWS)"),
    ("--s3-region", "REGION", "S3 region of the bucket"),
    ("--aws-profile", "NAME", "AWS profile for S3 (default: boto3's chain)"),
    ("--bucket", "NAME", "tiered-storage bucket to inventory (offload rules run only with it)"),
    (
        "--cluster-name",
        "NAME",
        "the audited Pulsar cluster, for shared buckets: objects other clusters wrote are "
        "foreign, never orphans (default: the single cluster under /admin/clusters)",
    ),
)
_THRESHOLDS: tuple[_Row, ...] = (
    (
        "--min-orphan-age",
        "DURATION",
        "orphan candidates must be at least this old (90s, 15m, 24h, 7d; default 24h, or the sandbox's)",
    ),
    (
        "--retention-grace",
        "DURATION",
        "consumed ledgers count as retention overdue this long after they could be trimmed "
        "(default 6h, or the sandbox's)",
    ),
    (
        "--incomplete-offload-age",
        "DURATION",
        "objects of an offload that never completed count once this old (default 24h, or the sandbox's)",
    ),
    (
        "--open-ledger-max-age",
        "DURATION",
        "a topic's current ledger open longer than this is overdue (default 7d)",
    ),
    (
        "--inactive-cursor-age",
        "DURATION",
        "a subscription inactive this long that holds ledgers back is reported (default 7d)",
    ),
    (
        "--offload-deletion-lag",
        "DURATION",
        "the broker's managedLedgerOffloadDeletionLagMs where a namespace sets none (default 4h)",
    ),
    (
        "--default-retention-minutes",
        "N",
        "the broker's defaultRetentionTimeInMinutes where a namespace sets none (default 0)",
    ),
    (
        "--default-retention-mb",
        "N",
        "the broker's defaultRetentionSizeInMB where a namespace sets none (default 0)",
    ),
)
_SPARK_AND_ROOT: tuple[_Row, ...] = (
    ("--spark-master", "URL", "Spark master (default local[*])"),
    ("--ledgers-root", "PATH", "BookKeeper ledgers root in ZooKeeper (default /ledgers)"),
)


def _add_rows(g: Group, rows: tuple[_Row, ...], **common: Any) -> None:
    """One option per row, unset by default; ``common``: what every row's option shares (``action``)."""
    for flag, metavar, help_ in rows:
        g.add_argument(flag, metavar=metavar, default=None, help=help_, **common)


def _add_stores(g: Group, *, zookeeper_required: bool) -> None:
    _add_rows(g, _CONTEXT)
    g.add_argument(
        "--zookeeper",
        required=False,
        metavar="HOST:PORT",
        help="ZooKeeper connect string of the cluster's metadata store (host:port[,host:port][/chroot])"
        + (" (required unless --sandbox or --context)" if zookeeper_required else ""),
    )
    g.add_argument(
        "--source",
        choices=["zk", "zk-snapshot", "admin"],
        default=None,
        help="how the metadata is read: zk, a live ZooKeeper scan (default); zk-snapshot, a ZooKeeper "
        "data directory (--zk-data-dir), zero load on the ensemble; admin, Pulsar's admin REST API "
        "(--admin-url; for clusters on etcd or Oxia) with BookKeeper's ledgers from "
        "--bookkeeper-metadata or --zookeeper. The token comes from auth.admin-token-env/-file",
    )
    _add_rows(g, _STORE_LOCATIONS)
    _add_rows(g, _REPEATED_STORES, action="append")
    _add_rows(g, _SANDBOX)


def _add_bucket(g: Group) -> None:
    _add_rows(g, _BUCKET)
    g.add_argument(
        "--deep-offload-check",
        action="store_true",
        help="stream every offloaded data block and check entry ids and lengths (reads the whole "
        "bucket; by default only index objects and each data object's first block header are read)",
    )
    g.add_argument(
        "--reverify-objects",
        choices=("changed", "all"),
        default=None,
        help="offload objects to read: changed (default: those new or changed since the previous "
        "run's verdicts, by key, size and ETag) or all",
    )
    g.add_argument(
        "--s3-max-requests",
        metavar="N",
        type=int,
        default=None,
        help="GETs this run may spend verifying offload objects (default: no limit); the objects "
        "left are reported not verified (summary.json undecidable) and verified by the next run",
    )


def _add_thresholds(g: Group) -> None:
    _add_rows(g, _THRESHOLDS)


def _add_run_inputs(g: Group) -> None:
    g.add_argument(
        "--as-of",
        metavar="TIME",
        default="",
        help="'now' of the audit: ISO-8601 or epoch ms (default: now, or a generated sandbox's clock)",
    )
    _add_rows(g, _SPARK_AND_ROOT)
    g.add_argument(
        "--allow-empty-metadata",
        action="store_true",
        help="audit even when the metadata looks like no Pulsar cluster (missing ledgers root nodes or "
        "managed-ledger root, no managed ledger next to a full bucket): only when you know why",
    )
    g.add_argument("--debug", action="store_true", help="on error, print the traceback and Spark's log")


def add_run_options(p: argparse.ArgumentParser, *, fail_on: bool = False) -> None:
    if fail_on:
        p.add_argument(
            "--fail-on",
            choices=sorted(FAIL_ON),
            default=None,
            help="exit 3 when a finding of this severity (or worse) exists; new-critical, new-warning: "
            "only when such a finding is new since the previous run (default: the context's)",
        )
    add_history_options(p)
    p.add_argument(
        "--metrics-textfile",
        metavar="PATH",
        default=None,
        help="also write findings, bytes, counts scanned, duration and the last success time in "
        "Prometheus text format (node_exporter's textfile collector), atomically; a failed run "
        "keeps the previous last success time",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show library output too (Spark/JVM logging, warnings); default: progress and results only",
    )


def add_history_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--previous",
        metavar="DIR",
        default=None,
        help="the run to compare with (an audit's output directory or an entry of its history/): "
        "findings get first_seen and new, resolved.parquet lists those gone since (default: the run "
        "published in --out, else the newest of --out/history/)",
    )
    p.add_argument(
        "--history-keep",
        metavar="N",
        default=None,
        help="runs kept in --out/history/ (their findings, slim, and counts; default 14; 0: none)",
    )


def add_audit_parsers(sub: Any) -> None:
    """``audit`` and ``report``."""
    audit = sub.add_parser(
        "audit",
        help="run the audit and print a summary",
        description="Run the audit pipeline and write findings to --out.",
    )
    add_inputs(audit, zookeeper_required=True)
    audit.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (findings, summary.json)"
    )
    audit.add_argument("--no-progress", action="store_true", help="no progress display")
    audit.add_argument(
        "--read-bookies",
        action="store_true",
        help="also read entries from the bookies (read-only, never fences): PIP-195 bucket snapshots "
        "and cursor-ledger positions, so compacted ledgers are judged on the live reference",
    )
    add_run_options(audit, fail_on=True)

    report = sub.add_parser(
        "report",
        help="run the audit runbook headless and write an HTML report",
        description="Execute notebooks/audit_ledgers.ipynb with papermill into "
        "DIR/audit_ledgers.ipynb and convert it to DIR/report.html.",
    )
    add_inputs(report, zookeeper_required=True)
    report.add_argument("--out", required=True, metavar="DIR", help="output directory")
    report.add_argument(
        "--notebook",
        metavar="PATH",
        default=None,
        help=f"runbook to execute (default {DEFAULT_NOTEBOOK.name} of this checkout)",
    )
    report.add_argument(
        "--html", metavar="PATH", default=None, help="HTML report path (default DIR/report.html)"
    )
    report.add_argument(
        "--kernel", metavar="NAME", default=None, help="Jupyter kernel (default: the notebook's, python3)"
    )
    report.add_argument("--show-code", action="store_true", help="keep code cells in the HTML report")
    report.add_argument("--no-progress", action="store_true", help="no progress display")
    add_run_options(report, fail_on=True)


def add_tool_parsers(sub: Any) -> None:
    """``lab``, ``sandbox`` and ``sandbox-local``."""
    lab = sub.add_parser(
        "lab",
        help="JupyterLab on a scratch copy of the runbooks (autosave never touches the committed ones)",
        description="Copy notebooks/*.ipynb into --workdir (kept between runs unless --fresh) and start "
        "JupyterLab there; with --sandbox DIR the copies' sandbox parameter is filled in, so Run All "
        "audits it as 'ledgerlens report --sandbox DIR' does. Works as root (--allow-root).",
    )
    lab.add_argument("--workdir", default="lab", metavar="DIR", help="scratch directory (default ./lab)")
    lab.add_argument("--sandbox", default=None, metavar="DIR", help="sandbox to fill into the runbooks")
    lab.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (default 8888)")
    lab.add_argument("--token", default=None, help="server token (default: JupyterLab generates one)")
    lab.add_argument(
        "--fresh", action="store_true", help="replace existing copies with the committed runbooks"
    )
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")

    pulsar = sub.add_parser(
        "sandbox",
        help="a real Pulsar standalone sandbox (ZooKeeper metadata, S3 offload) on loopback",
        description="up: fetch the pinned Pulsar release (Maven Central) and start it with a local S3 "
        "server; seed: real traffic; plant: real failure paths and a ground-truth file; status; down.",
    )
    pulsar.add_argument("action", choices=["up", "seed", "plant", "restore-s3", "status", "down"])
    pulsar.add_argument("--workdir", required=True, metavar="DIR", help="sandbox working directory")
    pulsar.add_argument("--timeout", default=None, metavar="SECONDS", help="up: readiness timeout")

    sandbox = sub.add_parser("sandbox-local", help="local ZooKeeper + S3 sandbox with a generated cluster")
    sandbox.add_argument("action", choices=["up", "seed", "status", "down"])
    sandbox.add_argument("--workdir", required=True, metavar="DIR", help="sandbox working directory")
    sandbox.add_argument("--scenario", default=None, help="seed: healthy or planted (default planted)")
    sandbox.add_argument("--root", default=None, metavar="PATH", help="seed: path prefix of the cluster")
    sandbox.add_argument("--now-ms", default=None, type=int, metavar="MS", help="seed: the audit's as_of_ms")
    sandbox.add_argument("--bucket", default=None, metavar="NAME", help="up: tiered-storage bucket to create")


def add_contexts_parsers(sub: Any) -> None:
    """``contexts`` and ``warm-up``."""
    ctx = sub.add_parser(
        "contexts",
        help="named cluster contexts: list, show NAME, check NAME",
        description="Contexts name a Pulsar cluster's stores, credentials (by reference), thresholds and "
        "Spark settings once ($LEDGERLENS_CONFIG or ~/.config/ledgerlens/contexts.toml). list: every "
        "context; show: resolved settings with their origin, secrets redacted; check: try every store "
        "(exit 0 only when all answer).",
    )
    ctx.add_argument("action", choices=["list", "show", "check"])
    ctx.add_argument("name", nargs="?", default=None, help="context (default $LEDGERLENS_CONTEXT or current)")
    ctx.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="check: time limit per store (10)"
    )
    sub.add_parser(
        "warm-up",
        help="write the Spark JVM's class archive once: later sessions start about 4 s sooner",
        description="Start Spark once and write every class its JVM loads to an archive in "
        "~/.cache/ledgerlens ($LEDGERLENS_CACHE), about 180 MiB, in about a minute. Later "
        "sessions on a local master map it instead of loading those classes one by one. Run it again "
        "after upgrading Java or Spark; $LEDGERLENS_CLASS_ARCHIVE=off ignores the archive.",
    )


def add_kafka_parser(sub: Any) -> None:
    """``kafka-audit``."""
    kafka = sub.add_parser(
        "kafka-audit",
        help="audit Kafka tiered storage (KIP-405): remote log metadata against the remote storage",
        description="Read __remote_log_metadata (bounded: earliest to the end offsets at start), list the "
        "remote storage (--bucket, or --remote-dir for Kafka's local tiered storage), describe topics, "
        "and write remote_segment_* findings to --out.",
    )
    kafka.add_argument("--bootstrap-servers", metavar="HOST:PORT", default="", help="Kafka bootstrap servers")
    kafka.add_argument(
        "--metadata-dump",
        metavar="FILE",
        default="",
        help="read the metadata records from a dump file (JSON lines) instead of the topic",
    )
    kafka.add_argument("--metadata-topic", default="__remote_log_metadata", help=argparse.SUPPRESS)
    kafka.add_argument("--bucket", metavar="NAME", default="", help="remote storage bucket (S3 API)")
    kafka.add_argument("--s3-endpoint", metavar="URL", default="", help="S3 endpoint URL (default: AWS)")
    kafka.add_argument("--prefix", metavar="PREFIX", default="", help="key prefix of the segment objects")
    kafka.add_argument(
        "--remote-dir",
        metavar="DIR",
        default="",
        help="Kafka's local tiered storage directory (instead of a bucket)",
    )
    kafka.add_argument(
        "--layout",
        choices=["s3-plugin", "local"],
        default=None,
        help="object key layout (default: s3-plugin with --bucket, local with --remote-dir)",
    )
    kafka.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (findings, summary.json)"
    )
    kafka.add_argument(
        "--min-orphan-age", metavar="DURATION", default="24h", help="orphan objects: minimum age (24h)"
    )
    kafka.add_argument(
        "--stuck-after",
        metavar="DURATION",
        default="24h",
        help="COPY_SEGMENT_STARTED / DELETE_SEGMENT_STARTED older than this are stuck (24h)",
    )
    kafka.add_argument(
        "--retention-grace",
        metavar="DURATION",
        default="6h",
        help="segments past retention by more than this (6h)",
    )
    kafka.add_argument("--as-of", metavar="TIME", default="", help="'now' of the audit (default: now)")
    kafka.add_argument(
        "--spark-master", metavar="URL", default="local[*]", help="Spark master (default local[*])"
    )
    kafka.add_argument(
        "--fail-on",
        choices=sorted(FAIL_ON),
        default=None,
        help="exit 3 at this severity or worse (new-*: among findings new since the previous run)",
    )
    add_history_options(kafka)
    kafka.add_argument("--no-progress", action="store_true", help="no progress bars")
