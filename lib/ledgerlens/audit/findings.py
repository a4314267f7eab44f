"""The findings table: its kinds, how a rule shapes a row, ordering, and a driver-side summary."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from ledgerlens.audit.names import ml_namespace, ml_tenant
from ledgerlens.inventory import schemas
from ledgerlens.report import kinds
from ledgerlens.report.kinds import severity_of

# The kinds, each declared once with its severity, rule module and explainer (``ledgerlens.report.kinds``);
# the tables' order is a contract (the README's findings table follows it).
# Kinds of the Pulsar audit (``audit.rules``)
PULSAR_KINDS: tuple[str, ...] = tuple(k.name for k in kinds.PULSAR)
# Kinds of the Kafka tiered-storage audit (``ledgerlens.kafka.audit``; it emits corrupt_metadata too)
KAFKA_KINDS: tuple[str, ...] = tuple(k.name for k in kinds.KAFKA)
KINDS: tuple[str, ...] = PULSAR_KINDS + KAFKA_KINDS

# Kinds only re-verification produces (it reads what the inventory does not hold, e.g. an object's
# user metadata); ``run_audit`` never emits them.
REVERIFICATION_KINDS: tuple[str, ...] = ("foreign_offload_object",)

# A rule's row before the final touch: the findings columns with tenant/namespace hints, plus the
# managed ledger whose node path and existence the final step looks up (``owner_ml``).
RAW_COLUMNS: tuple[str, ...] = (
    *schemas.FINDING_KEYS,
    "bytes",
    "evidence",
    "action",
    "tenant_hint",
    "namespace_hint",
    "age_seconds",
    "owner_ml",
)

_TYPES = {f.name: f.dataType for f in schemas.FINDINGS.fields}


def _lit_or_col(v: Column | str | int | None) -> Column:
    return v if isinstance(v, Column) else F.lit(v)


def raw_finding(
    *,
    kind: str,
    severity: Column | str | None = None,
    component: Column | str | None,
    action: str,
    evidence: Column,
    ledger_id: Column | None = None,
    managed_ledger: Column | None = None,
    cursor: Column | None = None,
    path: Column | None = None,
    object_key: Column | None = None,
    bytes_: Column | None = None,
    tenant: Column | None = None,
    namespace: Column | None = None,
    age_seconds: Column | None = None,
    owner_ml: Column | None = None,
) -> Column:
    """One raw finding as a struct of ``RAW_COLUMNS``; ``evidence`` is a struct, stored as JSON.

    ``severity``: the kind's declared one (``ledgerlens.report.kinds``) when None; a rule whose rows
    take another severity the kind declares (``Kind.also``) passes its per-row column.
    Rules that emit several kinds from one pass build an array of these and explode it.
    """
    s = "string"
    return F.struct(
        F.lit(kind).alias("kind"),
        _lit_or_col(severity_of(kind) if severity is None else severity).cast(s).alias("severity"),
        _lit_or_col(component).cast(s).alias("component"),
        _lit_or_col(ledger_id).cast("bigint").alias("ledger_id"),
        _lit_or_col(managed_ledger).cast(s).alias("managed_ledger"),
        _lit_or_col(cursor).cast(s).alias("cursor"),
        _lit_or_col(path).cast(s).alias("path"),
        _lit_or_col(object_key).cast(s).alias("object_key"),
        _lit_or_col(bytes_).cast("bigint").alias("bytes"),
        F.to_json(evidence).alias("evidence"),
        F.lit(action).alias("action"),
        _lit_or_col(tenant).cast(s).alias("tenant_hint"),
        _lit_or_col(namespace).cast(s).alias("namespace_hint"),
        _lit_or_col(age_seconds).cast("bigint").alias("age_seconds"),
        _lit_or_col(owner_ml).cast(s).alias("owner_ml"),
    )


def finding(df: DataFrame, **kw: Any) -> DataFrame:
    """Every row of ``df`` as one raw finding (keywords of ``raw_finding``)."""
    return df.select(raw_finding(**kw).alias("f")).select("f.*")


def severity_by_kind(kind: Column, names: Iterable[str]) -> Column:
    """The declared severity of each of the kinds ``names`` a per-row ``kind`` column may hold (null
    for another kind)."""
    out: Column | None = None
    for name in names:
        hit, severity = kind == name, F.lit(severity_of(name))
        out = F.when(hit, severity) if out is None else out.when(hit, severity)
    if out is None:
        raise ValueError("severity_by_kind: no kind named")
    return out


def explode_findings(df: DataFrame, items: Column) -> DataFrame:
    """Raw findings from an array of ``raw_finding`` structs (null elements dropped, after the
    explosion: a filter with a lambda is evaluated uncompiled)."""
    return df.select(F.explode(items).alias("f")).where(F.col("f").isNotNull()).select("f.*")


def age_seconds(now_ms: int, then_ms: Column) -> Column:
    """Whole seconds from ``then_ms`` to ``now_ms``; null when unknown."""
    return F.when(then_ms.isNotNull() & (then_ms > 0), F.floor((F.lit(now_ms) - then_ms) / 1000))


def with_owners(raw: DataFrame, managed_ledgers: DataFrame, *, named_only: bool = False) -> DataFrame:
    """Fill ``path`` from the owner managed ledger's node and add ``owner_exists``/``owner_path`` to
    the evidence of rows that name an owner (one left join on the owner's name).

    ``named_only``: first narrow ``managed_ledgers`` to the names ``raw`` gives (a broadcast
    semi-join: pass a ``raw`` that is kept, it is read twice, and few). The names meet every node in
    one pass, where the whole table was otherwise shuffled to drop duplicates (a million managed
    ledgers of the 10M benchmark: about 2 s).
    """
    nodes = managed_ledgers.filter(F.col("managed_ledger").isNotNull()).select(
        F.col("managed_ledger").alias("owner_ml"), F.col("path").alias("owner_path")
    )
    if named_only:
        names = raw.select("owner_ml").where(F.col("owner_ml").isNotNull()).distinct()
        nodes = nodes.join(F.broadcast(names), "owner_ml", "left_semi")
    owners = nodes.dropDuplicates(["owner_ml"]).withColumn("owner_exists", F.lit(True))
    need = raw.join(owners, "owner_ml", "left")
    extra = F.to_json(
        F.struct(F.coalesce("owner_exists", F.lit(False)).alias("owner_exists"), F.col("owner_path"))
    )
    spliced = F.concat(
        F.expr("substring(evidence, 1, length(evidence) - 1)"), F.lit(","), F.substring(extra, 2, 1 << 30)
    )
    named = F.col("owner_ml").isNotNull()
    return need.select(
        *[
            F.when(named, F.coalesce("path", "owner_path")).otherwise(F.col("path")).alias("path")
            if c == "path"
            else F.when(named, spliced).otherwise(F.col("evidence")).alias("evidence")
            if c == "evidence"
            else F.col(c)
            for c in RAW_COLUMNS
        ]
    )


def to_findings(raw: DataFrame) -> DataFrame:
    """Raw rows -> exactly the ``schemas.FINDINGS`` columns, tenant/namespace from the ML name."""
    ns = F.coalesce(ml_namespace(F.col("managed_ledger")), F.col("namespace_hint"))
    tenant = F.coalesce(ml_tenant(F.col("managed_ledger")), F.col("tenant_hint"), F.split(ns, "/").getItem(0))
    cols = {"tenant": tenant, "namespace": ns}
    # ``when(c is not null, c)``: every column nullable, exactly as declared
    return raw.select(
        *[
            F.when(c.isNotNull(), c).cast(_TYPES[n]).alias(n)
            for n in schemas.columns(schemas.FINDINGS)
            for c in [cols[n] if n in cols else F.col(n)]
        ]
    )


def order_findings(findings: DataFrame, *, one_task: bool = False) -> DataFrame:
    """Sort by severity (critical first), kind, managed ledger, ledger id, object key, path.

    ``one_task``: into one partition (a sort into several samples ``findings`` first, one more
    computation of them); for findings known to be few."""
    rank = F.when(F.col("severity") == "critical", 0).when(F.col("severity") == "warning", 1).otherwise(2)
    sort = findings.repartition(1).sortWithinPartitions if one_task else findings.orderBy
    return sort(
        rank.asc(),
        F.col("kind").asc(),
        F.col("managed_ledger").asc_nulls_first(),
        F.col("ledger_id").asc_nulls_first(),
        F.col("object_key").asc_nulls_first(),
        F.col("path").asc_nulls_first(),
        F.col("cursor").asc_nulls_first(),
    )


def summary_rows(findings: DataFrame, tenant_kinds: Collection[str] = ()) -> list[Row]:
    """Count ``n`` and bytes ``b`` per kind, severity and (for ``tenant_kinds``' findings, else
    null) tenant ``t`` (``""``: unknown), collected to the driver (one small job)."""
    kind = F.col("kind")
    tenant = (
        F.when(kind.isin(*tenant_kinds), F.coalesce("tenant", F.lit(""))) if tenant_kinds else F.lit(None)
    )
    return (
        findings.groupBy("kind", "severity", tenant.cast("string").alias("t"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum(F.coalesce("bytes", F.lit(0))).alias("b"))
        .collect()
    )


def summarize(findings: DataFrame) -> dict[str, Any]:
    """Counts and bytes by kind and by severity, collected to the driver (one small job).

    Returns ``{"total_findings", "counts_by_kind", "counts_by_severity", "bytes_by_kind",
    "bytes_by_severity", "by_kind_severity": [{"kind", "severity", "count", "bytes"}]}``.
    """
    return summary_of(summary_rows(findings))


def summary_of(rows: Iterable[Row]) -> dict[str, Any]:
    """``summarize``'s dictionary from ``summary_rows``."""
    cells: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        cell = cells.setdefault((r["kind"], r["severity"]), [0, 0])
        cell[0] += int(r["n"])
        cell[1] += int(r["b"] or 0)
    counts_kind: dict[str, int] = {}
    bytes_kind: dict[str, int] = {}
    counts_sev: dict[str, int] = {s: 0 for s in schemas.SEVERITIES}
    bytes_sev: dict[str, int] = {s: 0 for s in schemas.SEVERITIES}
    out = []
    for (k, s), (n, b) in cells.items():
        counts_kind[k] = counts_kind.get(k, 0) + n
        bytes_kind[k] = bytes_kind.get(k, 0) + b
        counts_sev[s] = counts_sev.get(s, 0) + n
        bytes_sev[s] = bytes_sev.get(s, 0) + b
        out.append({"kind": k, "severity": s, "count": n, "bytes": b})
    return {
        "total_findings": sum(counts_kind.values()),
        "counts_by_kind": dict(sorted(counts_kind.items())),
        "counts_by_severity": counts_sev,
        "bytes_by_kind": dict(sorted(bytes_kind.items())),
        "bytes_by_severity": bytes_sev,
        "by_kind_severity": sorted(out, key=lambda c: (c["kind"], c["severity"])),
    }
