"""Suspicious metadata is not an orphan source.

Two transforms of the findings table (docs/audit-rules.md):

- ``emptied_managed_ledgers``: a managed-ledger node that decodes to no ledgers although it was
  written after it was created (znode version > 0, 0 bytes; through the admin API, which shows no
  bytes: no ledger at all) while older BookKeeper ledgers still
  name it as their owner: the node was probably emptied by a bad edit. It becomes an
  ``emptied_managed_ledger`` finding (warning), and the ``orphan_ledger`` findings of the ledgers
  that name it keep their kind but get the caveat in their evidence and the action
  ``investigate``, never ``delete_ledger``.
- ``unreadable_metadata``: a ``corrupt_metadata`` row whose problem is ZooKeeper's ``NoAuth`` (the
  ACL denies the audit) becomes ``unreadable_metadata`` (critical: the audit is blind there), with
  the hint to configure ZooKeeper authentication.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds
from ledgerlens.audit.frames import Look
from ledgerlens.audit.gates import AUTH_HINT
from ledgerlens.report.kinds import severity_of

EMPTIED_KIND = "emptied_managed_ledger"
UNREADABLE_KIND = "unreadable_metadata"
EMPTIED = "emptied"  # the look of emptied_look
NO_AUTH = r"(^|[^A-Za-z])NoAuth"  # kazoo's NoAuthError, in the inventory's error text


def _splice(evidence: Column, extra: Column) -> Column:
    """``evidence`` (a JSON object) with the fields of ``extra`` (a struct) appended."""
    more = F.to_json(extra)
    return F.when(
        evidence.endswith("}") & (F.length(evidence) > 2),
        F.concat(
            F.expr("substring(evidence, 1, length(evidence) - 1)"), F.lit(","), F.substring(more, 2, 1 << 30)
        ),
    ).otherwise(more)


def emptied_look() -> Look:
    """Managed-ledger nodes that decode to no ledger although they were rewritten (look
    ``emptied``): without one, nothing is emptied."""
    # 0 bytes; or, read through the admin API (no bytes: compression null), no ledger at all
    empty = (F.col("compression") == "EMPTY") | (
        F.col("compression").isNull() & (F.coalesce(F.col("ledger_count"), F.lit(0)) == 0)
    )
    return Look("managed_ledgers", EMPTIED, F.col("error").isNull() & empty & (F.col("znode_version") > 0))


def emptied_nodes(managed_ledgers: DataFrame, bk_ledgers: DataFrame) -> DataFrame:
    """Emptied managed-ledger nodes with the ledgers that still name them.

    Columns: ``managed_ledger, path, tenant, namespace, znode_version, znode_mtime_ms,
    owned_ledgers, owned_bytes, oldest_ctime_ms``.
    """
    nodes = managed_ledgers.filter(emptied_look().where).select(
        "managed_ledger", "path", "tenant", "namespace", "znode_version", "znode_mtime_ms"
    )
    owned = bk_ledgers.filter(F.col("managed_ledger").isNotNull() & F.col("error").isNull()).select(
        F.col("managed_ledger").alias("owner"), "ledger_id", "length", "ctime_ms"
    )
    joined = owned.join(F.broadcast(nodes), nodes["managed_ledger"] == owned["owner"]).filter(
        F.col("ctime_ms").isNull()
        | F.col("znode_mtime_ms").isNull()
        | (F.col("ctime_ms") < F.col("znode_mtime_ms"))
    )
    return joined.groupBy(
        "managed_ledger", "path", "tenant", "namespace", "znode_version", "znode_mtime_ms"
    ).agg(
        F.countDistinct("ledger_id").alias("owned_ledgers"),
        F.sum(F.coalesce("length", F.lit(0))).alias("owned_bytes"),
        F.min("ctime_ms").alias("oldest_ctime_ms"),
    )


def emptied_findings(nodes: DataFrame, now_ms: int) -> DataFrame:
    """One ``emptied_managed_ledger`` finding per node of ``emptied_nodes`` (findings columns)."""
    return nodes.select(
        F.lit(EMPTIED_KIND).alias("kind"),
        F.lit(severity_of(EMPTIED_KIND)).alias("severity"),
        F.lit("managed-ledger").alias("component"),
        F.lit(None).cast("bigint").alias("ledger_id"),
        F.col("managed_ledger"),
        F.lit(None).cast("string").alias("cursor"),
        F.col("path"),
        F.lit(None).cast("string").alias("object_key"),
        F.col("owned_bytes").cast("bigint").alias("bytes"),
        F.to_json(
            F.struct(
                "path",
                "znode_version",
                "znode_mtime_ms",
                F.lit(0).alias("data_bytes"),
                "owned_ledgers",
                "owned_bytes",
                "oldest_ctime_ms",
                F.lit(
                    "the node lists no ledger although it was rewritten and older ledgers still name it: "
                    "restore it from a backup or the broker before anything it owned is deleted"
                ).alias("hint"),
            )
        ).alias("evidence"),
        F.lit("investigate").alias("action"),
        F.col("tenant"),
        F.col("namespace"),
        age_seconds(now_ms, F.col("znode_mtime_ms")).alias("age_seconds"),
    )


def apply(
    findings: DataFrame,
    managed_ledgers: DataFrame,
    bk_ledgers: DataFrame,
    now_ms: int,
    *,
    emptied: bool = True,
) -> DataFrame:
    """``findings`` with emptied nodes reported, their ledgers' orphan findings caveated, and
    ``NoAuth`` rows as ``unreadable_metadata``. ``emptied=False`` (no row of
    ``emptied_look``): no node to look for."""
    no_auth = (F.col("kind") == "corrupt_metadata") & F.coalesce(
        F.get_json_object("evidence", "$.problem").rlike(NO_AUTH), F.lit(False)
    )
    auth = F.struct(F.lit(f"ZooKeeper denied the read (NoAuth); {AUTH_HINT}").alias("hint"))
    evidence = F.when(no_auth, _splice(F.col("evidence"), auth)).otherwise(F.col("evidence"))
    action, joined = F.col("action"), findings
    if emptied:
        nodes = emptied_nodes(managed_ledgers, bk_ledgers)
        caveat = nodes.select(
            F.col("managed_ledger").alias("_emptied_ml"),
            F.col("path").alias("_emptied_path"),
            F.col("znode_version").alias("_emptied_version"),
        )
        joined = findings.join(
            F.broadcast(caveat),
            (findings["kind"] == "orphan_ledger") & (findings["managed_ledger"] == caveat["_emptied_ml"]),
            "left",
        )
        hit = F.col("_emptied_ml").isNotNull()
        note = F.struct(
            F.lit(True).alias("owner_emptied"),
            F.col("_emptied_path").alias("owner_node"),
            F.col("_emptied_version").alias("owner_znode_version"),
            F.lit(
                "the owner's managed-ledger node was emptied (0 bytes, rewritten) while this ledger still "
                "names it: suspicious metadata, not proof of an orphan; do not delete"
            ).alias("caveat"),
        )
        evidence = F.when(hit, _splice(F.col("evidence"), note)).otherwise(evidence)
        action = F.when(hit, F.lit("investigate")).otherwise(action)
    out = joined.select(
        F.when(no_auth, F.lit(UNREADABLE_KIND)).otherwise(F.col("kind")).alias("kind"),
        *[c for c in findings.columns if c not in ("kind", "evidence", "action")],
        evidence.alias("evidence"),
        action.alias("action"),
    ).select(*findings.columns)
    return out.unionByName(emptied_findings(nodes, now_ms)) if emptied else out
