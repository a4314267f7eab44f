"""``run_audit``: inventory tables in, the findings table out (shared intermediates computed once)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledgerlens.audit import rules, suspicious
from ledgerlens.audit.facts import Facts, collect_facts
from ledgerlens.audit.findings import order_findings, to_findings, with_owners
from ledgerlens.audit.frames import Look, union_all
from ledgerlens.audit.materialize import Intermediates, materialized
from ledgerlens.audit.ownership import tenant_looks
from ledgerlens.audit.references import (
    BUCKET_OWNERS,
    blind_spot_looks,
    bucket_owner_look,
    cursor_references,
    schema_references,
    with_bucket_owners,
)
from ledgerlens.audit.rules.offload_objects import offload_contexts_of, offload_object_rules
from ledgerlens.inventory import schemas
from ledgerlens.runtime.spark import adapts
from ledgerlens.settings.config import AuditConfig

REQUIRED = ("bk_ledgers", "managed_ledgers", "ml_ledgers", "cursors", "schema_ledgers", "namespace_policies")
BOOKIE_TABLES = ("bucket_snapshots", "cursor_positions")  # present when entries were read from bookies


def _column(df: DataFrame, f: T.StructField) -> Column:
    """``f`` of ``df`` with its declared type; null when ``df`` predates the column."""
    if f.name in df.columns:
        return F.col(f.name).cast(f.dataType)
    return F.lit(None).cast(f.dataType).alias(f.name)


def _declared(df: DataFrame, schema: T.StructType) -> DataFrame:
    """``df`` with exactly ``schema``'s columns (cast; null when ``df`` predates one); ``df`` itself
    when it has them already (read with the declared schema: no plan step to analyse)."""
    if df.schema == schema:
        return df
    return df.select(*[_column(df, f) for f in schema.fields])


def _inputs(
    tables: Mapping[str, DataFrame],
) -> tuple[dict[str, DataFrame], DataFrame | None, DataFrame | None]:
    """The inventory tables with their declared columns; absent tables (but offload) are empty."""
    if not tables:
        raise ValueError("run_audit: no inventory tables given")
    spark: SparkSession = next(iter(tables.values())).sparkSession
    out: dict[str, DataFrame] = {}
    for name in (*REQUIRED, "pulsar_tenants"):
        schema = schemas.INVENTORY[name]
        df = tables.get(name)
        out[name] = schemas.local_frame(spark, schema, []) if df is None else _declared(df, schema)
    for name in BOOKIE_TABLES:
        if tables.get(name) is not None:
            out[name] = _declared(tables[name], schemas.INVENTORY[name])
    objects, segments = tables.get("offload_objects"), tables.get("offload_segments")
    if objects is not None:
        objects = _declared(objects, schemas.OFFLOAD_OBJECTS)
    if segments is not None:
        segments = _declared(segments, schemas.OFFLOAD_SEGMENTS)
    return out, objects, segments


def run_audit(
    tables: Mapping[str, DataFrame],
    config: AuditConfig,
    *,
    offload_bucket: str | None = None,
    materialize: bool = True,
    cluster_name: str | None = None,
    facts: Facts | None = None,
) -> DataFrame:
    """Apply every rule of docs/audit-rules.md to the inventory; return the sorted findings.

    Parameters
    ----------
    tables
        Inventory DataFrames keyed as ``schemas.INVENTORY``. Without ``offload_objects`` (S3 not
        scanned) the offload rules are skipped. ``pulsar_tenants`` may be absent (older
        inventories): ownership then comes from the other Pulsar tables (``audit/ownership.py``).
    config
        Thresholds and ``as_of_ms`` ('now').
    offload_bucket
        The bucket the ``offload_objects`` inventory lists; ledgers offloaded to another bucket are
        not checked. ``None``: the buckets present in ``offload_objects``.
    cluster_name
        The audited Pulsar cluster (objects whose user metadata names another cluster are
        ``foreign_offload_object``); None: unknown, no object tagged with a cluster name is an orphan.
    materialize
        Compute the shared intermediates once (``audit.materialize``: the blind spots and owned
        tenants, the candidate rows of the one big join of BookKeeper's ledgers against every
        reference), so every rule reads them instead of re-planning them, and return the findings
        computed (a local checkpoint; ``materialize.release`` frees it). The intermediates are
        released before returning. ``False`` keeps the whole audit one lazy plan (slower).
    facts
        ``inventory_facts`` of these tables and this config, when the caller collected them
        already (with its own counts); None: collected here (one small job).

    Returns
    -------
    DataFrame
        Exactly the ``schemas.FINDINGS`` columns, ordered by ``order_findings``.
    """
    t, objects, segments = _inputs(tables)
    facts = facts or _facts(t, objects, segments, config)
    keep = Intermediates(enabled=materialize)
    try:
        findings, few = _audit(t, objects, segments, config, facts, keep, offload_bucket, cluster_name)
        if not materialize:
            return order_findings(findings)
        if few:  # the rules' findings kept and counted: few enough to sort in one task, which
            # samples nothing first (a sort into several partitions would compute the steps after
            # the kept findings twice: the owners, the suspicious metadata)
            return materialized(order_findings(findings, one_task=True))
        findings = _few_partitions(findings)
        if findings.sparkSession.conf.get("spark.sql.shuffle.partitions") != "1":
            # computed once, then sorted: a sort into several partitions samples its input first
            # (range partitioning), which would run the whole audit plan twice
            findings = keep.keep(findings, measure=False)
        return materialized(order_findings(findings))
    finally:
        keep.release()


def _few_partitions(findings: DataFrame) -> DataFrame:
    """``findings`` in at most two partitions per core (fewer when shuffles use fewer), at least one.

    The union of every rule keeps each branch's partitions: 35 tasks for a 93-ledger cluster, each
    deserializing the whole audit plan (1.5 s of a small audit). Coalesced (no shuffle), a task
    computes several branches' partitions in turn. The findings are few even on a large inventory
    (97k of 10M ledgers): 4 tasks on 2 cores computed them in 4.3 s where 40 took 4.9 s.
    """
    spark = findings.sparkSession
    cores = spark.sparkContext.defaultParallelism
    shuffles = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    return findings.coalesce(max(min(shuffles, 2 * cores), cores))


def inventory_facts(
    tables: Mapping[str, DataFrame], config: AuditConfig, looks: Sequence[Look] = ()
) -> Facts:
    """The facts ``run_audit`` reads (``audit.facts``), and the counts of ``looks`` from the same job."""
    return _facts(*_inputs(tables), config, looks)


SEGMENTS = "segments"  # the look of verified offload segments
FEW_FINDINGS = 500_000  # up to this many, the owner names are broadcast and the findings sorted in one task


def _facts(
    t: dict[str, DataFrame],
    objects: DataFrame | None,
    segments: DataFrame | None,
    config: AuditConfig,
    extra: Sequence[Look] = (),
) -> Facts:
    """The rules' facts: blind spots, owned tenants and the looks whose absence leaves a rule's plan
    out (``Facts.has``): corrupt rows per table, verified offload segments, PIP-76 streaming
    ledgers or objects, ``__compaction`` cursors with a cursor ledger, idle cursors (also their
    count: few are broadcast), bucket ledgers without their topic, emptied managed-ledger nodes."""
    looks = [
        *blind_spot_looks(),
        *tenant_looks(),
        *rules.corrupt_looks(),
        Look("offload_segments", SEGMENTS, F.lit(True)),
        *rules.streaming_looks(),
        rules.compaction_look(),
        rules.idle_cursor_look(config),
        bucket_owner_look(),
        suspicious.emptied_look(),
        *extra,
    ]
    tables = {**t, **({"offload_objects": objects} if objects is not None else {})}
    if segments is not None:
        tables["offload_segments"] = segments
    # the range of BookKeeper's ledger ids, which the join of a large audit reads (``rules.dense_ids``)
    extents = [rules.BK_IDS] if rules.is_large(t["bk_ledgers"]) else []
    return collect_facts(tables, looks, config.deleted_tenants, extents)


def _audit(
    t: dict[str, DataFrame],
    objects: DataFrame | None,
    segments: DataFrame | None,
    config: AuditConfig,
    collected: Facts,
    keep: Intermediates,
    offload_bucket: str | None,
    cluster_name: str | None,
) -> tuple[DataFrame, bool]:
    """The findings of ``run_audit``, unordered (a plan over ``keep``'s intermediates), and whether
    the rules' findings were kept and counted, and are few (``FEW_FINDINGS``)."""
    # one row: the blind spots and the owned tenants, read by the ledger and offload rules
    facts = collected.frame(next(iter(t.values())).sparkSession)
    spots = facts.select("spots")
    idle = collected.counts.get(rules.IDLE)
    held = None  # the managed ledgers of few idle cursors: their ledgers picked with the walked ones
    if (
        collected.has(rules.IDLE)
        and idle is not None
        and idle <= rules.IDLE_BROADCAST_ROWS
        and rules.is_large(t["bk_ledgers"])
    ):
        held = rules.idle_cursors(t["cursors"], config).select("managed_ledger")
    ml_refs = rules.ManagedLedgerReferences(
        t["ml_ledgers"], t["cursors"], t["namespace_policies"], config, keep=keep, also_read=held
    )
    others = cursor_references(t["cursors"]).unionByName(
        schema_references(t["schema_ledgers"]), allowMissingColumns=True
    )
    bk = t["bk_ledgers"]
    if collected.has(BUCKET_OWNERS):  # else no bucket ledger to look an owner up for
        bk = with_bucket_owners(bk, t["ml_ledgers"])
    joined = rules.join_candidates(
        bk,
        ml_refs,
        others,
        config,
        offload=objects is not None,
        keep=keep,
        id_range=collected.extents.get(rules.BK_IDS),
    )
    ledger_findings, offloaded = rules.ledger_rules(
        joined, facts, config, offload=objects is not None, keep=keep
    )
    parts = [ledger_findings]
    if collected.has(rules.IDLE):  # no idle cursor, no inactive_cursor finding
        held_rows = ml_refs.also_read_rows()
        ledgers = t["ml_ledgers"] if held_rows is None else held_rows
        parts.append(rules.inactive_cursors(t["cursors"], ledgers, config, idle_rows=idle))
    corrupt = rules.corrupt_metadata(t, collected.has)
    if corrupt is not None:
        parts.append(corrupt)
    if objects is not None and offloaded is not None:
        not_orphans = None
        if segments is not None and collected.has(SEGMENTS):  # no object verified: nothing to join
            tenants = facts.select(F.explode("owned").alias("tenant"))
            contexts = offload_contexts_of(offloaded)
            verdicts = offload_object_rules(segments, contexts, tenants, config, cluster_name, keep=keep)
            # computed once: left lazy, the offload rules below plan the object verdicts three
            # times over (not_orphans feeds both layouts), half the rules plan of a small audit
            parts.append(keep.keep(verdicts.findings, measure=False))
            not_orphans = keep.keep(verdicts.not_orphans)
        parts.append(
            rules.offload_rules(
                offloaded,
                objects,
                spots,
                config,
                offload_bucket,
                not_orphans,
                streaming=collected.has(rules.STREAMING),
            )
        )
    corrupt_entries = rules.corrupt_bookie_entries(t.get("bucket_snapshots"), t.get("cursor_positions"))
    if corrupt_entries is not None:
        parts.append(corrupt_entries)
    raw, few = union_all(parts), False
    if keep.enabled and adapts(raw.sparkSession):
        # computed once (the owners' join reads it twice) and counted: up to FEW_FINDINGS, their
        # owners' names are sent to the managed ledgers' scan
        raw, rows = keep.counted(_few_partitions(raw))
        few = rows <= FEW_FINDINGS
    findings = to_findings(with_owners(raw, t["managed_ledgers"], named_only=few))
    findings = suspicious.apply(
        findings,
        t["managed_ledgers"],
        t["bk_ledgers"],
        config.as_of_ms,
        emptied=collected.has(suspicious.EMPTIED),
    )
    if collected.has(rules.COMPACTION):  # else no compaction can be in flight
        findings = rules.without_compaction_in_flight(
            findings, t["cursors"], t.get("cursor_positions"), t["bk_ledgers"]
        )
    return findings, few
