"""The audit end to end: collect the inventory, run the rules, re-verify, write the results.

This is what the CLI (``ledgerlens audit``) and the runbook (``notebooks/audit_ledgers.ipynb``)
call; both produce the same ``findings.parquet`` and ``summary.json`` for the same inputs.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.audit import gates
from ledgerlens.audit.disk import write_disk_usage
from ledgerlens.audit.findings import order_findings, summary_of, summary_rows
from ledgerlens.audit.frames import Look
from ledgerlens.audit.gates import MISSING_MIN
from ledgerlens.audit.history import (
    HISTORY_DIR,
    Comparison,
    HistoryOptions,
    Lookup,
    annotate_parquet,
    discover,
    prune,
    record,
    warn,
    write_resolved,
)
from ledgerlens.audit.materialize import release
from ledgerlens.audit.names import ANY
from ledgerlens.audit.references import ML_TAG, cursor_references, schema_references
from ledgerlens.audit.run import inventory_facts, run_audit
from ledgerlens.errors import ConfigError, SourceError
from ledgerlens.inventory import schemas
from ledgerlens.inventory.collect import collect_inventory, load_inventory
from ledgerlens.offload.verdicts import NOT_VERIFIED, VERDICTS_NAME, Incremental
from ledgerlens.runtime.console import Progress, as_progress
from ledgerlens.runtime.outdir import OutputDir, published_dir
from ledgerlens.runtime.spark import sized_for
from ledgerlens.settings.config import AuditConfig, BookieSource, S3Source, ZooKeeperSource
from ledgerlens.settings.redact import redact_nullable, redact_obj, secret_values
from ledgerlens.settings.request import AuditRequest

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Row, SparkSession

    from ledgerlens.audit.facts import Facts
    from ledgerlens.audit.reverify import Verdicts
    from ledgerlens.sources.stores import Stores

# Owner columns of a ledger, joined onto candidates so re-verification knows what to re-read.
_OWNER_COLUMNS = {
    "managed_ledger": "ml_owner",
    "cursor": "cursor_node",
    "schema_id": "schema_id",
    "compacted_topic": "compacted_topic",
    "delayed_topic": "delayed_topic",
    "delayed_cursor": "delayed_cursor",
}


@dataclass
class AuditRun:
    """Where one audit wrote its results, and its summary."""

    out_dir: Path
    findings_path: Path
    summary: dict[str, Any]
    inventory_tables: dict[str, str] = field(default_factory=dict)

    def findings_pandas(self) -> pd.DataFrame:
        """The findings as a pandas frame: the columns of ``schemas.FINDINGS``, then ``first_seen``
        and ``new`` (``schemas.FINDINGS_PUBLISHED``) when the run recorded them."""
        table = pq.read_table(self.findings_path)
        base = schemas.columns(schemas.FINDINGS)
        added = schemas.columns(schemas.FINDINGS_PUBLISHED)[len(base) :]
        names = base + [c for c in added if c in table.column_names]
        return table.to_pandas().reindex(columns=names)


def blind_spots(tables: dict[str, DataFrame]) -> list[str]:
    """Managed-ledger names or prefixes whose metadata did not decode (``""``: any managed ledger).

    The audit's own definition (``ledgerlens.audit.references.blind_spot_looks``), collected for
    re-verification.
    """
    return managed_ledger_spots(inventory_facts(tables, AuditConfig()).spots)


def managed_ledger_spots(spots: Iterable[str]) -> list[str]:
    """The managed-ledger names or prefixes among the audit's tagged blind spots (``Facts.spots``)."""
    prefix = f"{ML_TAG}:"
    return sorted(s[len(prefix) :] for s in spots if s.startswith(prefix) and s != prefix + ANY)


UNDECIDABLE = (
    "schemas_without_ledger_ids",
    "cursors_without_string_properties",
    "cursors_without_last_active",
    "offloads_without_completion_state",
)


def undecidable_looks() -> list[Look]:
    """What the inventory could not see (the admin API source), for ``summary.json``: the
    ``UNDECIDABLE`` looks (``audit.facts``) at schemas without ledger ids (distinct schemas),
    cursors without string properties and offloaded ledgers without a completion state. None for
    metadata-store scans. The audit hides what depends on them (docs/audit-rules.md, "Admin API
    source")."""
    unknown = F.col("error").isNull() & F.coalesce(F.col("cursor_properties_unknown"), F.lit(False))
    no_ledger = F.col("error").isNull() & F.col("ledger_id").isNull()
    no_state = F.col("offload_uuid").isNotNull() & F.col("offload_complete").isNull()
    schemas_, props, active, offloads = UNDECIDABLE
    return [
        Look("schema_ledgers", schemas_, no_ledger, F.to_json(F.struct("schema_id"))),
        Look("cursors", props, unknown),
        Look("cursors", active, unknown & F.col("last_active_ms").isNull()),
        Look("ml_ledgers", offloads, no_state),
    ]


DRIVER_FINDINGS = 50_000
"""Up to this many findings are redacted and written by the driver (:func:`write_findings`)."""


def write_findings(
    findings: DataFrame, path: Path, *, comparison: Comparison | None = None
) -> pa.Table | None:
    """``findings`` as the Parquet table ``path`` (one file, in their order), evidence redacted.

    Up to ``DRIVER_FINDINGS`` rows are collected, redacted and written by the driver (pyarrow): no
    Python worker to start and no write job, most of the write phase of a small audit. More go
    through Spark (:func:`redacted_evidence`). With ``comparison`` (``audit.history``), the file
    gets ``first_seen`` and ``new`` too (``schemas.FINDINGS_PUBLISHED``).

    Returns the ``pyarrow.Table`` written by the driver, or None when Spark wrote the rows.
    """
    head = findings.limit(DRIVER_FINDINGS + 1).toArrow()
    if head.num_rows > DRIVER_FINDINGS:
        redacted_evidence(findings).coalesce(1).write.mode("overwrite").parquet(str(path))
        if comparison is not None:
            annotate_parquet(path, comparison)
        return None
    env = secret_values()
    evidence = pa.array([redact_nullable(t, env) for t in head.column("evidence").to_pylist()], pa.string())
    table = head.set_column(head.schema.get_field_index("evidence"), "evidence", evidence)
    table = table.cast(to_arrow_schema(schemas.FINDINGS))
    if comparison is not None:
        table = comparison.annotate(table).cast(to_arrow_schema(schemas.FINDINGS_PUBLISHED))
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    pq.write_table(table, str(path / "part-00000.zstd.parquet"), compression="zstd")
    return table


def redacted_evidence(findings: DataFrame) -> DataFrame:
    """``findings`` with credentials redacted from ``evidence`` (``ledgerlens.settings.redact``); the
    identifying columns are left as they are."""
    env = secret_values()  # the driver's: executors may have started before a secret was set

    def _redact(text: str | None) -> str | None:
        return redact_nullable(text, env)

    redact_udf = F.udf(_redact, "string", useArrow=True)
    return findings.withColumn("evidence", redact_udf("evidence"))


def _auditor() -> str:
    """Who ran the audit (``$LEDGERLENS_USER``, else the login name): approvals may refuse self-approval."""
    try:
        return os.environ.get("LEDGERLENS_USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


FOREIGN_KINDS = ("foreign_ledger", "foreign_offload_object")


def foreign_by_tenant(rows: Iterable[Row]) -> dict[str, dict[str, int]]:
    """Per tenant of another Pulsar cluster (``""``: owner unknown), what it has in the audited stores.

    ``{tenant: {"ledgers", "bytes", "objects", "object_bytes"}}`` from the ``foreign_ledger`` and
    ``foreign_offload_object`` findings (``audit.findings.summary_rows`` with ``FOREIGN_KINDS``).
    """
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["kind"] not in FOREIGN_KINDS:
            continue
        cell = out.setdefault(r["t"], {"ledgers": 0, "bytes": 0, "objects": 0, "object_bytes": 0})
        n, b = ("ledgers", "bytes") if r["kind"] == "foreign_ledger" else ("objects", "object_bytes")
        cell[n] += int(r["n"])
        cell[b] += int(r["b"] or 0)
    return dict(sorted(out.items()))


def audited_cluster(stores: Any, cluster_name: str | None) -> tuple[str | None, list[str]]:
    """The audited Pulsar cluster: ``cluster_name`` when given, else the single cluster under
    ``/admin/clusters`` of the first Pulsar store (live or snapshot) that can tell, None with
    several, none, or no store that can tell; and the clusters found there."""
    from kazoo.exceptions import KazooException  # kazoo: only where a live ZooKeeper is asked

    clusters: list[str] = []
    for store in getattr(stores, "pulsar", ()):
        try:
            names = store.clusters()
        except (KazooException, ConfigError, SourceError):
            names = None
        if names is not None:
            clusters = names
            break
    if cluster_name:
        return cluster_name, clusters
    return (clusters[0] if len(clusters) == 1 else None), clusters


def _store_lost(
    e: BaseException, phase: str, zk: ZooKeeperSource | None, s3: S3Source | None
) -> SourceError | None:
    """A one-line ``SourceError`` naming the store and the phase for a store lost mid-run, or None
    when ``e`` is something else (a bug, an interruption)."""
    tail = f" (during {phase}; no findings written)"
    if isinstance(e, SourceError):
        return SourceError(e.server, e.problem + tail)
    text = str(e)
    for line in text.splitlines():  # an executor's error, carried in Spark's exception text
        marker = "ledgerlens.errors.SourceError: "
        if marker in line:
            server, _, problem = line.split(marker, 1)[1].strip().partition(": ")
            return SourceError(server, problem + tail)
    module = type(e).__module__ or ""
    names = " ".join([type(e).__name__, text[:4000]])
    zk_words = ("SessionExpired", "ConnectionLoss", "ConnectionClosed", "KazooTimeout", "ConnectionDropped")
    s3_words = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "botocore")
    if module.startswith("kazoo") or any(w in names for w in zk_words):
        return SourceError(
            f"zookeeper {zk.hosts if zk else ''}", f"connection lost: {type(e).__name__}{tail}"
        )
    if s3 is not None and (module.startswith(("botocore", "boto3")) or any(w in names for w in s3_words)):
        where = f"s3 {s3.endpoint_url or 'aws'} bucket {s3.bucket}"
        return SourceError(where, f"connection lost: {type(e).__name__}{tail}")
    return None


def run(
    spark: SparkSession,
    zk: ZooKeeperSource | None,
    s3: S3Source | None,
    audit: AuditConfig,
    out_dir: str | Path,
    *,
    progress: bool | Progress = True,
    context: dict[str, Any] | None = None,
    stores: Stores | None = None,
    cluster_name: str | None = None,
    deep_offload_check: bool = False,
    bookie: BookieSource | None = None,
    allow_empty_metadata: bool = False,
    output: OutputDir | None = None,
    history: HistoryOptions | None = None,
) -> AuditRun:
    """:func:`run_request` of these inputs (``ledgerlens.settings.request.AuditRequest``), for library
    callers that hold the sources themselves.

    ``context`` (``ledgerlens.settings.contexts.Settings.public()``: the context's name and the
    resolved settings, secrets redacted) is recorded in the summary as ``context``. ``stores`` names
    the BookKeeper and Pulsar metadata stores (``ledgerlens.sources.stores``); without it ``zk`` is
    one live ZooKeeper holding both. ``cluster_name`` is the audited Pulsar cluster (default: the
    single one under ``/admin/clusters``); ``deep_offload_check`` streams every offloaded data block.
    With ``bookie``, entries are read from the bookies too (read-only): PIP-195 bucket snapshots
    and the last position of every cursor ledger, which the compacted-ledger rule judges on.

    ``history`` (``ledgerlens.audit.history``): where the previous run is and how many runs
    ``out_dir/history`` keeps; default: the ``audit.previous`` / ``audit.history-keep`` settings
    recorded in ``context``, else the run published in ``out_dir`` and 14 runs.
    """
    history = history or HistoryOptions.from_context(context)
    request = AuditRequest(
        out_dir=Path(out_dir),
        zk=zk,
        s3=s3,
        config=audit,
        stores=stores,
        context=context,
        cluster_name=cluster_name,
        deep_offload_check=deep_offload_check,
        allow_empty_metadata=allow_empty_metadata,
        bookie=bookie,
        previous=str(history.previous or ""),
        history_keep=history.keep,
    )
    return run_request(spark, request, progress=progress, output=output)


def run_request(
    spark: SparkSession,
    request: AuditRequest,
    *,
    progress: bool | Progress = True,
    output: OutputDir | None = None,
) -> AuditRun:
    """Collect, audit, re-verify and publish ``findings.parquet``, ``summary.json`` and the
    inventory under ``request.out_dir``: the audit of one request (``ledgerlens.settings.request``),
    as ``ledgerlens audit`` and the runbooks build it (``contexts.Settings.audit_request``).

    One run at a time per ``out_dir`` (``ledgerlens.runtime.outdir``): everything is written to a private
    staging directory and published whole at the end; on any error ``out_dir`` is left as it was.
    ``output``: the caller's already acquired ``OutputDir`` of ``out_dir`` (the CLI takes the lock
    before Spark starts), else this call takes and releases it. A store lost mid-run raises a
    one-line ``SourceError`` naming the store and the phase; implausible inputs raise
    ``ImplausibleInputError`` unless ``request.allow_empty_metadata`` (docs/audit-rules.md).
    ``progress``: one display across the four phases (``ledgerlens.runtime.console.Progress``), or a flag.

    Every finding gets ``first_seen`` and ``new`` against the previous run (``request.previous``,
    else the run published in ``out_dir``, else its newest ``history/`` entry);
    ``resolved.parquet`` lists the previous run's findings gone since; ``out_dir/history`` keeps
    ``request.history_keep`` runs.
    """
    history = HistoryOptions.of(request.previous or None, request.history_keep)
    owned = output is None
    od = OutputDir(request.out_dir).acquire() if output is None else output
    try:
        result = _run(spark, request, od, progress=progress, history=history)
        od.publish()
        prune(od.out / HISTORY_DIR, history.keep)
    finally:
        if owned:
            od.release()
    tables = {k: str(od.final_path(v)) for k, v in result.inventory_tables.items()}
    return AuditRun(od.out, od.out / "findings.parquet", result.summary, tables)


@dataclass
class _RunState:
    """One run's inputs and what its phases share; ``phase`` names the phase under way (the error of
    a store lost mid-run names it)."""

    spark: SparkSession
    zk: ZooKeeperSource | None
    s3: S3Source | None
    audit: AuditConfig
    od: OutputDir
    bar: Progress
    allow_empty_metadata: bool
    context: dict[str, Any] | None
    stores: Any
    cluster_name: str | None
    deep_offload_check: bool
    bookie: Any
    history: HistoryOptions
    phase: str = "collection"
    timings: dict[str, float] = field(default_factory=dict)
    t_run: float = 0.0


@dataclass
class _Collected:
    """What the collection phase found: the audited cluster, the inventory, the previous run."""

    cluster: str | None
    clusters: list[str]
    inventory: Any
    lookup: Lookup


def _run(
    spark: SparkSession,
    request: AuditRequest,
    od: OutputDir,
    *,
    progress: bool | Progress,
    history: HistoryOptions,
) -> AuditRun:
    bar = as_progress(progress)
    state = _RunState(
        spark,
        request.zk,
        request.s3,
        request.config,
        od,
        bar,
        request.allow_empty_metadata,
        request.context,
        request.stores,
        request.cluster_name,
        request.deep_offload_check,
        request.bookie,
        history,
    )
    try:
        return _phases(state)
    except Exception as e:
        lost = _store_lost(e, state.phase, request.zk, request.s3)
        if lost is None:
            raise
        raise lost from e
    finally:
        if not isinstance(progress, Progress):  # a display of our own ends here, even on error
            bar.close()


def _phases(run: _RunState) -> AuditRun:
    """The phases of one run into ``run.od.staging``: collection here, then :func:`_audit_phases`."""
    from ledgerlens.sources.stores import Stores  # pulls in kazoo: only when the run starts

    if run.stores is None:
        if run.zk is None:
            raise ConfigError("no metadata store given")
        run.stores = Stores.single(run.zk)

    out = run.od.staging
    run.t_run = time.monotonic()

    run.phase = "collection"
    t0 = time.monotonic()
    cluster, clusters = audited_cluster(run.stores, run.cluster_name)
    # the previous run: its findings to compare with, its offload verdicts to reuse
    current = {"system": "pulsar", "cluster_name": cluster, "sources": run.stores.describe()}
    lookup = previous_run(run.od, run.history, current)
    incremental = Incremental.from_context(
        run.context,
        previous=Path(lookup.previous.source) if lookup.previous else None,
        verdicts_out=str(out / VERDICTS_NAME),
    )
    run.bar.begin("collect")  # collect_inventory sets its number of stages
    inventory = collect_inventory(
        run.spark,
        run.stores.sources(),
        run.s3,
        str(out / "inventory"),
        progress=run.bar,
        deep_offload_check=run.deep_offload_check,
        bookie=run.bookie,
        incremental=incremental,
    )
    rows = sum(v for k, v in inventory.counts.items() if k in schemas.INVENTORY)
    run.bar.end(f"{rows:,} rows scanned")
    _say_not_verified(inventory.counts, incremental)
    run.timings.update({f"collect.{k}": v for k, v in inventory.timings.items()})
    run.timings["collect"] = time.monotonic() - t0
    # partitions and code generation chosen from the inventory's size (restored afterwards)
    with sized_for(run.spark, rows):
        return _audit_phases(run, _Collected(cluster, clusters, inventory, lookup))


def _say_not_verified(counts: dict[str, int], incremental: Incremental) -> None:
    """One line on stderr when the request budget left offload objects unverified."""
    n = counts.get("offload_segments.not_verified", 0)
    if n:
        print(
            f"ledgerlens: {n:,} offload objects not verified: the S3 request budget "
            f"(--s3-max-requests {incremental.max_requests or 0:,}) was reached; the next run continues",
            file=sys.stderr,
            flush=True,
        )


def offload_verification(counts: dict[str, int]) -> dict[str, int]:
    """``summary.json``'s ``offload_verification``: objects verified (read) this run, verdicts
    reused from the previous run, objects not verified (request budget), GETs issued."""
    keys = {"verified": "objects", "reused": "reused", "not_verified": "not_verified", "gets": "requests"}
    return {k: int(counts.get(f"offload_segments.{c}", 0)) for k, c in keys.items()}


def _without_unverified(candidates: DataFrame, segments: DataFrame) -> tuple[DataFrame, int]:
    """``candidates`` without the orphan offload objects this run did not verify (request budget:
    their user metadata was not read), and how many those were."""
    unverified = segments.filter(F.col("error") == NOT_VERIFIED).select(F.col("key").alias("_nv_key"))
    on = (candidates["kind"] == "orphan_offload_object") & (candidates["object_key"] == unverified["_nv_key"])
    blocked = candidates.join(unverified, on, "left_semi").count()
    return candidates.join(unverified, on, "left_anti"), int(blocked)


@dataclass
class _Ruled:
    """What the rules phase made: the inventory's tables and facts, the findings (checkpointed), those
    not re-verified, the candidates to re-verify and how many were left out as not verified."""

    tables: dict[str, DataFrame]
    facts: Facts
    findings: DataFrame
    rest: DataFrame
    candidates: list[dict[str, Any]]
    unverified: int


def _audit_phases(run: _RunState, got: _Collected) -> AuditRun:
    """The phases after collection: rules, re-verification, write."""
    ruled = _rules_phase(run, got)
    verdicts, final, suspicion = _reverify_phase(run, ruled)
    return _write_phase(run, got, ruled, verdicts, final, suspicion)


def _rules_phase(run: _RunState, got: _Collected) -> _Ruled:
    """The rules over the inventory (after the plausibility gate) and the candidates to re-verify."""
    from ledgerlens.audit.reverify import REVERIFIED_KINDS  # pulls in kazoo: only when the run starts

    run.phase = "audit"
    t1 = time.monotonic()
    run.bar.begin("audit", label="rules")
    tables = load_inventory(run.spark, str(run.od.staging / "inventory"))
    # one job: the rules' facts, the plausibility gate's managed ledgers, the undecidable counts
    facts = inventory_facts(tables, run.audit, [gates.managed_ledger_look(), *undecidable_looks()])
    gates.check_inventory(
        tables,
        where=f"zookeeper {run.zk.hosts if run.zk else 'stores'}",
        allow_empty_metadata=run.allow_empty_metadata,
        managed=facts.counts[gates.MANAGED] if "managed_ledgers" in tables else None,
    )
    # computed once (a local checkpoint): re-verification and the write read it, then it is freed
    findings = run_audit(
        tables,
        run.audit,
        offload_bucket=run.s3.bucket if run.s3 else None,
        cluster_name=got.cluster,
        facts=facts,
    )
    candidates_df = findings.filter(F.col("kind").isin(*REVERIFIED_KINDS))
    unverified = 0  # orphan candidates whose objects the request budget left unread: never reported
    if got.inventory.counts.get("offload_segments.not_verified") and "offload_segments" in tables:
        candidates_df, unverified = _without_unverified(candidates_df, tables["offload_segments"])
    rest = findings.filter(~F.col("kind").isin(*REVERIFIED_KINDS))
    candidates = _with_owners(candidates_df, tables["bk_ledgers"])
    run.timings["audit"] = time.monotonic() - t1
    run.bar.end(f"{len(candidates):,} candidates to re-verify")
    return _Ruled(tables, facts, findings, rest, candidates, unverified)


def _with_owners(candidates: DataFrame, bk_ledgers: DataFrame) -> list[dict[str, Any]]:
    """The candidates collected, each orphan ledger with its owner columns (``_OWNER_COLUMNS``)."""
    bk = bk_ledgers.select(
        F.col("ledger_id").alias("_lid"), *[F.col(c).alias(a) for c, a in _OWNER_COLUMNS.items()]
    )
    joined = candidates.join(
        bk, (candidates["ledger_id"] == bk["_lid"]) & (candidates["kind"] == "orphan_ledger"), "left"
    ).drop("_lid")
    return [r.asDict() for r in joined.collect()]


def _reverify_phase(run: _RunState, ruled: _Ruled) -> tuple[Verdicts, DataFrame, dict[str, Any] | None]:
    """The candidates checked again against the live stores: the verdicts, the final findings in
    order and the wrong-root suspicion (its ``missing_ledger`` findings downgraded)."""
    from ledgerlens.audit.reverify import reverify  # pulls in kazoo: only when the run re-verifies

    run.phase = "re-verification"
    t2 = time.monotonic()
    run.bar.begin("re-verify", label=f"{len(ruled.candidates):,} candidates")
    live = run.stores.live_zookeeper()
    if live is None:
        raise ConfigError("re-verification needs live stores")  # the snapshot source lands later
    verdicts = reverify(
        ruled.candidates,
        live[0],
        run.s3,
        blind_spots=managed_ledger_spots(ruled.facts.spots),
        pulsar=live[1],
        deleted_tenants=run.audit.deleted_tenants,
    )
    if ruled.unverified:
        verdicts.dropped["orphan_offload_object: not verified this run (S3 request budget)"] += (
            ruled.unverified
        )
    kept = schemas.local_frame(run.spark, schemas.FINDINGS, verdicts.keep)
    final = order_findings(ruled.rest.unionByName(kept))
    suspicion = gates.wrong_root_suspicion(*_missing_share(verdicts.keep, ruled.tables))
    if suspicion is not None:
        final = gates.downgrade_missing(final)
    run.timings["reverify"] = time.monotonic() - t2
    run.bar.end(f"{len(verdicts.keep):,} confirmed, {sum(verdicts.dropped.values()):,} dropped")
    return verdicts, final, suspicion


def _write_phase(
    run: _RunState,
    got: _Collected,
    ruled: _Ruled,
    verdicts: Verdicts,
    final: DataFrame,
    suspicion: dict[str, Any] | None,
) -> AuditRun:
    """``findings.parquet``, ``resolved.parquet``, ``disk_usage.parquet`` and ``summary.json`` into
    the staging directory, and the run recorded in the history."""
    out = run.od.staging
    run.phase = "write"
    t3 = time.monotonic()
    run.bar.begin("write", label="findings.parquet")
    sources = run.stores.describe()
    warn(got.lookup)
    comparison = Comparison(got.lookup.previous, run.audit.as_of_ms)
    findings_path = out / "findings.parquet"
    written = write_findings(final, findings_path, comparison=comparison)
    write_resolved(out, comparison)
    # what was written, as written (redacted); the driver's few rows straight from memory
    final_written = (
        run.spark.read.schema(schemas.FINDINGS).parquet(str(findings_path))
        if written is None
        else run.spark.createDataFrame(written)
    )
    run.timings["write"] = time.monotonic() - t3
    run.timings["total"] = time.monotonic() - run.t_run
    release(ruled.findings)

    rows = summary_rows(final_written, FOREIGN_KINDS)  # one job: both summaries
    summary = _summary(run, got, ruled, verdicts, rows, sources, comparison)
    if suspicion is not None:
        summary["suspected_wrong_root"] = suspicion
    # where the bookies' disk goes: BookKeeper bytes by state, one Spark job (audit/disk.py)
    t_disk = time.monotonic()
    summary["disk_usage"] = write_disk_usage(ruled.tables, final_written, out / "disk_usage.parquet")
    summary["timings"]["disk_usage"] = round(time.monotonic() - t_disk, 3)
    summary = redact_obj(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    record(out, summary, comparison, run.history.keep)
    run.bar.end(f"{summary['total_findings']:,} findings")
    return AuditRun(out, findings_path, summary, dict(got.inventory.tables))


def _summary(
    run: _RunState,
    got: _Collected,
    ruled: _Ruled,
    verdicts: Verdicts,
    rows: list[Row],
    sources: Any,
    comparison: Comparison,
) -> dict[str, Any]:
    """``summary.json`` of a run (before its disk usage, and before redaction)."""
    checked = offload_verification(got.inventory.counts)
    cluster, clusters, s3 = got.cluster, got.clusters, run.s3
    summary = {
        "as_of_ms": run.audit.as_of_ms,
        "auditor": _auditor(),
        **summary_of(rows),
        "sources": sources,
        "undecidable": {
            **{k: ruled.facts.counts[k] for k in UNDECIDABLE if ruled.facts.counts[k]},
            **({"offload_objects_not_verified": checked["not_verified"]} if checked["not_verified"] else {}),
        },
        "offload_verification": checked,
        "deleted_tenants": sorted(run.audit.deleted_tenants),
        "foreign_by_tenant": foreign_by_tenant(rows),
        "inventory_counts": got.inventory.counts,
        "s3_scanned": got.inventory.s3_scanned,
        "cluster_name": cluster,
        "clusters_in_store": clusters,
        "offload_cluster_note": None
        if cluster or s3 is None
        else (
            f"the audited cluster is unknown ({len(clusters)} clusters under /admin/clusters): "
            "no offload object tagged with a cluster name was reported as an orphan; "
            "pass --cluster-name NAME"
        ),
        "deep_offload_check": run.deep_offload_check,
        "reverified": len(ruled.candidates),
        "dropped_on_reverify": dict(sorted(verdicts.dropped.items())),
        "timings": {k: round(v, 3) for k, v in run.timings.items()},
        **comparison.summary(),
        "previous_note": got.lookup.note,
    }
    if run.context is not None:
        summary["context"] = run.context
    return summary


def previous_run(od: OutputDir, history: HistoryOptions, current: dict[str, Any]) -> Lookup:
    """The run to compare with (``audit.history.discover``) for a run publishing through ``od``.
    Looked up before collection (its offload verdicts are reused); its note is said once the run
    has something to publish (``warn``), so a run that fails says only its error."""
    return discover(published_dir(od.out), history, redact_obj(current))


def _missing_share(reverified: list[dict[str, Any]], tables: dict[str, DataFrame]) -> tuple[int, int]:
    """(distinct missing ledgers, distinct ledgers the metadata references).

    ``reverified``: the findings that held on re-verification (every ``missing_ledger`` is one).
    The referenced ledgers are not counted (0) when too few are missing for any share to matter
    (``gates.MISSING_MIN``).
    """
    missing = len({r["ledger_id"] for r in reverified if r["kind"] == "missing_ledger"})
    if missing <= MISSING_MIN:
        return missing, 0
    refs = tables["ml_ledgers"].select("ledger_id")
    refs = refs.unionByName(cursor_references(tables["cursors"]).select("ledger_id"))
    refs = refs.unionByName(schema_references(tables["schema_ledgers"]).select("ledger_id"))
    return missing, refs.filter(F.col("ledger_id").isNotNull()).distinct().count()
