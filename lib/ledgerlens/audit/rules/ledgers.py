"""The ledger rules, one pass over the joined frame: ``orphan_ledger``, ``foreign_ledger``,
``unattributed_ledger``, ``missing_ledger``, ``open_ledger_overdue``, ``retention_overdue``,
``offloaded_not_deleted`` and the BookKeeper side of the offload rules; compacted ledgers in flight
and corrupt bookie entries."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds, raw_finding
from ledgerlens.audit.frames import Look, renamed, union_all
from ledgerlens.audit.materialize import Intermediates
from ledgerlens.audit.names import ANY, topic_to_ml
from ledgerlens.audit.ownership import is_owned, tenant_of_name
from ledgerlens.audit.references import BUCKET_TAG, ML_TAG, SCHEMA_TAG, owner_prefixes
from ledgerlens.audit.rules.common import (
    KNOWN_COMPONENTS,
    ML_COMPONENT,
    false_if_null,
    ml_reference_columns,
    offload_complete,
    place_columns,
)
from ledgerlens.audit.rules.conditions import OFFLOAD_ROW, is_candidate, is_offloaded, selected
from ledgerlens.audit.rules.corrupt import corrupt_finding
from ledgerlens.formats.references import COMPACTION_CURSOR
from ledgerlens.runtime.spark import adapts, interprets
from ledgerlens.settings.config import AuditConfig


def _not_hidden(prefixes: Column) -> Column:
    """No prefix is a blind spot (needs the broadcast ``spots`` column).

    Without a blind spot, true before ``prefixes`` is computed: a name's prefixes come from a lambda,
    evaluated row by row, uncompiled (the same truth: nothing overlaps an empty array)."""
    spots = F.col("spots")
    return (F.size(spots) == 0) | ~F.arrays_overlap(prefixes, spots)


# the columns of ``_with_owner_columns``
_OWNER, _TENANT, _OWNED = "lr_owner", "lr_tenant", "lr_owned"
_VISIBLE, _ML_VISIBLE = "lr_visible", "lr_ml_visible"


def _with_owner_columns(rows: DataFrame) -> DataFrame:
    """``rows`` (joined rows with the facts' columns) with the columns the ledger rules read of an
    owner, computed once per row (``ledger_rules`` keeps them with the rows).

    Of an unreferenced ledger: its owner's name, the owner's tenant, whether the tenant is owned and
    whether no blind spot hides the owner; of a managed ledger's overdue reference: whether no blind
    spot hides the managed ledger. Null (owned: false) elsewhere: every rule that reads one also
    requires its row to be such. Written into each rule instead, the owner's name (a topic parsed by
    regular expressions) was planned, compiled and evaluated once per use: ten times in the orphan
    and foreign rules. The owner is a plan step of its own, so what is read of it reads its column.
    """
    comp = F.col("bk_component")
    unreferenced = F.col("ref_component").isNull()
    owner = (
        F.when(comp == ML_COMPONENT, F.col("bk_ml"))
        .when(comp == "compacted-ledger", topic_to_ml(F.col("compacted_topic")))
        .when(
            comp == "delayed-index-bucket",
            # older brokers wrote no topic: the owner found through the bucket key range, else unknown
            F.coalesce(topic_to_ml(F.col("delayed_topic")), F.col("bucket_owner")),
        )
        .when(comp == "schema", F.col("bk_schema_id"))
    )
    rows = rows.select("*", F.when(unreferenced, owner).alias(_OWNER))
    named = F.col(_OWNER)
    prefixes = (
        F.when(
            comp == "delayed-index-bucket",
            # a bucket's owner is also hidden where its cursors' string properties are unknown
            F.concat(owner_prefixes(ML_TAG, named), owner_prefixes(BUCKET_TAG, named)),
        )
        .when(
            comp.isin(*KNOWN_COMPONENTS),
            owner_prefixes(F.when(comp == "schema", F.lit(SCHEMA_TAG)).otherwise(F.lit(ML_TAG)), named),
        )
        .otherwise(F.array(F.lit(f"{ML_TAG}:{ANY}"), F.lit(f"{SCHEMA_TAG}:{ANY}")))
    )
    overdue = (F.col("ref_component") == ML_COMPONENT) & false_if_null(F.col("ret_overdue"))
    tenant = tenant_of_name(named)
    return rows.select(
        "*",
        tenant.alias(_TENANT),
        is_owned(tenant).alias(_OWNED),
        F.when(unreferenced, _not_hidden(prefixes)).alias(_VISIBLE),
        F.when(overdue, _not_hidden(owner_prefixes(ML_TAG, F.col("ref_ml")))).alias(_ML_VISIBLE),
    )


def _unreferenced_old(config: AuditConfig) -> Column:
    """A ledger in BookKeeper that nothing references, decoded and older than ``min_orphan_age_s``."""
    return (
        F.col("ref_component").isNull()
        & false_if_null(F.col("bk_present"))
        & F.col("bk_error").isNull()
        & (F.col("ctime_ms") <= config.as_of_ms - config.min_orphan_age_s * 1000)
    )


def _is_pulsar() -> Column:
    return F.col("application") == "pulsar"


def _is_ml_reference() -> Column:
    return F.col("ref_component") == ML_COMPONENT


def _owner_ml() -> Column:
    return F.when(F.col("bk_component") != "schema", F.col(_OWNER))


def _bookkeeper_columns(config: AuditConfig) -> dict[str, Column]:
    """The columns of an unreferenced ledger as BookKeeper knows it: which, where, how big, how old."""
    return {
        "ledger_id": F.col("ledger_id"),
        "path": F.col("bk_path"),
        "bytes_": F.col("length"),
        "age_seconds": age_seconds(config.as_of_ms, F.col("ctime_ms")),
    }


def _unreferenced_columns(config: AuditConfig) -> dict[str, Column]:
    """The columns an orphan and a foreign ledger share: which ledger, whose, how big, how old."""
    comp = F.col("bk_component")
    return {
        **_bookkeeper_columns(config),
        "component": F.when(
            (comp == ML_COMPONENT) & F.col("bk_cursor").isNotNull(), F.lit("cursor")
        ).otherwise(comp),
        "managed_ledger": _owner_ml(),
        "cursor": F.coalesce("bk_cursor", "delayed_cursor"),
        "tenant": F.col(_TENANT),
    }


def _orphan(config: AuditConfig) -> Column:
    comp = F.col("bk_component")
    return raw_finding(
        kind="orphan_ledger",
        action="delete_ledger",
        owner_ml=_owner_ml(),
        **_unreferenced_columns(config),
        evidence=F.struct(
            "ctime_ms",
            "length",
            "state",
            "application",
            comp.alias("component"),
            *renamed(owner=_OWNER, managed_ledger="bk_ml", cursor="bk_cursor", schema_id="bk_schema_id"),
            "compacted_topic",
            "delayed_topic",
            "delayed_cursor",
            "bucket_key",
            F.lit(config.min_orphan_age_s).alias("min_orphan_age_s"),
        ),
    )


def _foreign(config: AuditConfig) -> Column:
    tenant = F.col(_TENANT)
    return raw_finding(
        kind="foreign_ledger",
        action="none",
        **_unreferenced_columns(config),
        evidence=F.struct(
            tenant.alias("tenant"),
            F.when(tenant.isNull(), F.lit("owner unknown"))
            .otherwise(F.lit("tenant in none of the given Pulsar metadata stores"))
            .alias("reason"),
            "ctime_ms",
            "length",
            "state",
            F.col("bk_component").alias("component"),
            F.col(_OWNER).alias("owner"),
        ),
    )


def _unattributed(config: AuditConfig) -> Column:
    return raw_finding(
        kind="unattributed_ledger",
        component=None,
        action="none",
        **_bookkeeper_columns(config),
        evidence=F.struct(
            "ctime_ms", "length", "state", "application", F.col("bk_component").alias("component")
        ),
    )


def _missing() -> Column:
    ref = F.col("ref_component")
    return raw_finding(
        kind="missing_ledger",
        component=ref,
        action="investigate",
        owner_ml=F.col("ref_ml"),
        **place_columns(
            ledger_id="ledger_id",
            managed_ledger="ref_ml",
            cursor="ref_cursor",
            path="ref_path",
            tenant="ref_tenant",
            namespace="ref_namespace",
            bytes_="ref_size",
        ),
        evidence=F.struct(
            ref.alias("reference"),
            *renamed(
                referenced_by="ref_path",
                managed_ledger="ref_ml",
                cursor="ref_cursor",
                property="ref_key",
                schema_id="ref_schema_id",
                schema_version="ref_schema_version",
            ),
            "position",
            "is_last",
            F.col("ref_size").alias("size"),
            "offload_uuid",
            "offload_complete",
        ),
    )


def _ml_reference_columns(config: AuditConfig) -> dict[str, Any]:
    """The columns of a finding on a managed ledger's reference to a ledger."""
    return {
        **ml_reference_columns(),
        "component": ML_COMPONENT,
        "bytes_": F.col("ref_size"),
        "age_seconds": age_seconds(config.as_of_ms, F.col("ctime_ms")),
    }


def _open_overdue(config: AuditConfig) -> Column:
    return raw_finding(
        kind="open_ledger_overdue",
        action="investigate",
        evidence=F.struct(
            F.lit("ledger").alias("per"),
            "state",
            "ctime_ms",
            "position",
            F.col("bk_path").alias("ledger_path"),
            F.lit(config.open_ledger_max_age_s).alias("open_ledger_max_age_s"),
        ),
        **_ml_reference_columns(config),
    )


def _retention(config: AuditConfig) -> Column:
    return raw_finding(
        kind="retention_overdue",
        action="load_topic",
        evidence=F.struct("ret_ev.*", false_if_null(F.col("bk_present")).alias("in_bookkeeper")),
        **_ml_reference_columns(config),
    )


def _is_missing() -> Column:
    """Referenced, absent from BookKeeper, and not a managed ledger's completely offloaded ledger."""
    return (
        F.col("bk_present").isNull()
        & F.col("ref_component").isNotNull()
        & ~(_is_ml_reference() & false_if_null(offload_complete()))
    )


def _is_open_overdue(config: AuditConfig) -> Column:
    """A managed ledger's last ledger, still open after ``open_ledger_max_age_s``."""
    return (
        _is_ml_reference()
        & false_if_null(F.col("is_last"))
        & (F.col("state") == "OPEN")
        & F.col("bk_error").isNull()
        & (F.col("ctime_ms") <= config.as_of_ms - config.open_ledger_max_age_s * 1000)
    )


def _ledger_items(config: AuditConfig) -> list[tuple[Column, Column]]:
    """The ledger rules as (condition on a joined row with ``_with_owner_columns``, raw finding) pairs."""
    unreferenced_old = _unreferenced_old(config)
    owned = F.col(_OWNED)
    return [
        (unreferenced_old & _is_pulsar() & owned & F.col(_VISIBLE), _orphan(config)),
        (
            # an unknown owner (null tenant) stays silent while blind spots may hide it, as orphans do
            unreferenced_old & _is_pulsar() & ~owned & (F.col(_TENANT).isNotNull() | F.col(_VISIBLE)),
            _foreign(config),
        ),
        (
            unreferenced_old & (F.col("application").isNull() | (F.col("application") != "pulsar")),
            _unattributed(config),
        ),
        (_is_missing(), _missing()),
        (_is_open_overdue(config), _open_overdue(config)),
        (_is_ml_reference() & false_if_null(F.col("ret_overdue")) & F.col(_ML_VISIBLE), _retention(config)),
    ]


def ledger_rules(
    joined: DataFrame,
    facts: DataFrame,
    config: AuditConfig,
    *,
    offload: bool,
    keep: Intermediates,
) -> tuple[DataFrame, DataFrame | None]:
    """``orphan_ledger``, ``unattributed_ledger``, ``missing_ledger``, ``open_ledger_overdue`` and
    ``retention_overdue`` in one pass over ``joined``; with ``offload``, also the offloaded ledgers
    (for ``offload_rules``) from the same pass.

    The big join is filtered to candidate rows (and offloaded ledgers) with cheap conditions; that
    small result is materialized once (``keep``) and both consumers read it, so the join runs once.
    ``facts`` is one row with the ``spots`` (``references.blind_spot_looks``) and ``owned``
    (``ownership.owned_tenants``) columns: ledgers of other tenants are ``foreign_ledger``.
    """
    candidate = is_candidate(config)
    offloaded = is_offloaded()
    # Cheap filter on the big join, then the few rows left are materialized once (``keep``):
    # every rule below reads that small result. Without it, Catalyst pushes each consumer's filter
    # under the shared shuffle and plans the big join once per rule (exchange reuse does not
    # apply).
    # the one-row facts are joined before the rows are kept: every rule's plan is then a filter and a
    # select over the kept rows, not 14 more joins
    step = joined.filter(selected(config, offload=offload)).crossJoin(F.broadcast(facts))
    # computed here, once per row: in this stage they make its compiled method longer than HotSpot
    # compiles; in a stage of their own they cost as much as they save (docs/performance.md, "The
    # owner of a ledger, computed once")
    step = _with_owner_columns(step)
    # measured (counted: its true size lets the offload joins broadcast it) where nothing else sizes
    # it: not where expressions are interpreted (a tiny audit: the count is a query more than those
    # joins save), nor where adaptive execution re-plans those joins from the rows it shuffled
    spark = step.sparkSession
    step = (
        keep.keep(step, measure=not interprets(spark) and not adapts(spark))
        if keep.enabled
        else step.repartition("ledger_id")
    )
    rows = step.filter(candidate)
    # the finding of each rule where its condition holds, else null; every plan step is analysed as
    # the plan grows, so fewer steps plan faster
    items = [F.when(cond, f) for cond, f in _ledger_items(config)]
    if interprets(rows.sparkSession):  # one step: all the rules' findings as one array
        found = F.array_compact(F.array(*items))
        findings = rows.select(F.explode(found).alias("f")).select("f.*")
    else:  # compiled, one array of every rule's finding outgrows Java's 64 KB method limit
        parts = [rows.select(item.alias("f")) for item in items]
        findings = union_all(parts).filter(F.col("f").isNotNull()).select("f.*")
    if not offload:
        return findings, None
    return findings, step.filter(offloaded).select(*OFFLOAD_ROW)


COMPACTION = "compaction"  # the look of compaction_look


def compaction_look() -> Look:
    """The ``__compaction`` cursors with a cursor ledger (look ``compaction``): without one,
    ``without_compaction_in_flight`` keeps every finding."""
    where = (
        (F.col("cursor") == COMPACTION_CURSOR) & (F.col("cursors_ledger_id") >= 0) & F.col("error").isNull()
    )
    return Look("cursors", COMPACTION, where)


def without_compaction_in_flight(
    findings: DataFrame,
    cursors: DataFrame,
    positions: DataFrame | None = None,
    bk_ledgers: DataFrame | None = None,
) -> DataFrame:
    """Drop compacted-ledger orphans that a ``__compaction`` cursor may still reference.

    The broker keeps the ``CompactedTopicLedger`` property in the mark-delete position, which is
    written to the cursor *ledger* and copied to the cursor znode only when that ledger rolls over
    or the cursor closes. While the ``__compaction`` cursor has a cursor ledger, the live reference
    is the one in that ledger's last entry (``positions``, read from the bookies): a compacted
    ledger at or above it is the live one or a compaction in flight and is not reported; older ones
    are stale (the broker replaces compacted ledgers oldest first). When that entry could not be
    read, the znode's reference stands in: everything newer than it is not reported. A
    ``missing_ledger`` for the znode's reference is dropped when the live reference replaced it, or,
    without that entry, when BookKeeper holds a newer compacted ledger of the same topic
    (``bk_ledgers``): the znode lags behind the cursor ledger by up to a rollover (hours by default),
    and the broker deletes each compacted ledger the next compaction replaces.
    """
    pending = cursors.filter(compaction_look().where).select(
        F.col("managed_ledger").alias("_c_ml"),
        F.col("cursors_ledger_id").alias("_c_lid"),
        F.col("properties").getItem("CompactedTopicLedger").alias("_c_ref"),
    )
    if positions is not None:
        live = positions.filter(
            (F.col("cursor") == COMPACTION_CURSOR) & F.col("error").isNull() & F.col("entry_id").isNotNull()
        ).select(
            F.col("managed_ledger").alias("_p_ml"),
            F.col("compacted_ledger_id").alias("_p_ref"),
        )
        # the entry may come from a newer cursor ledger than the scanned znode named (it rolled over
        # meanwhile and the reader followed it): newer is still the live reference
        pending = pending.join(live, F.col("_c_ml") == F.col("_p_ml"), "left").select(
            "_c_ml",
            # the live reference: the newer of the cursor ledger's and the znode's (ids only grow)
            F.when(
                F.col("_p_ml").isNotNull(),
                F.greatest(F.coalesce("_p_ref", F.lit(-1)), F.coalesce("_c_ref", F.lit(-1))),
            ).alias("_live"),
            "_c_ref",
        )
    else:
        pending = pending.select("_c_ml", F.lit(None).cast("bigint").alias("_live"), "_c_ref")
    if bk_ledgers is not None:
        newest = (
            bk_ledgers.filter((F.col("component") == "compacted-ledger") & F.col("error").isNull())
            .groupBy(topic_to_ml(F.col("compacted_topic")).alias("_n_ml"))
            .agg(F.max("ledger_id").alias("_newest"))
        )
        pending = pending.join(newest, F.col("_c_ml") == F.col("_n_ml"), "left").drop("_n_ml")
    else:
        pending = pending.withColumn("_newest", F.lit(None).cast("bigint"))
    f = findings.alias("f")
    lid = F.col("f.ledger_id")
    mine = (F.col("f.component") == "compacted-ledger") & (F.col("f.managed_ledger") == F.col("_c_ml"))
    orphan = (F.col("f.kind") == "orphan_ledger") & F.when(
        F.col("_live").isNotNull(), lid >= F.col("_live")
    ).otherwise(F.col("_c_ref").isNull() | (lid > F.col("_c_ref")))
    # the znode still names a compacted ledger the live reference replaced (and the broker deleted)
    replaced = (F.col("f.kind") == "missing_ledger") & (lid < F.coalesce(F.col("_live"), F.col("_newest")))
    hidden = mine & (orphan | replaced)
    return f.join(F.broadcast(pending), hidden, "left_anti")


def corrupt_bookie_entries(
    bucket_snapshots: DataFrame | None, positions: DataFrame | None
) -> DataFrame | None:
    """``corrupt_metadata`` for bucket snapshots and cursor-ledger entries that do not decode or fail
    their digest on every bookie (``error_kind = corrupt``); ledger and entry in ledger_id / evidence.

    Unreachable bookies are not findings (the summary counts them); absent snapshot ledgers are
    ``missing_ledger`` through the references.
    """
    parts = []
    for table, df, component, path in (
        ("bucket_snapshots", bucket_snapshots, "delayed-index-bucket", "ledger_path"),
        ("cursor_positions", positions, "cursor", "path"),
    ):
        if df is None:
            continue
        lid = "ledger_id" if table == "bucket_snapshots" else "cursors_ledger_id"
        parts.append(
            corrupt_finding(
                df.filter(F.col("error_kind") == "corrupt"),
                component=component,
                ledger_id=lid,
                path=path,
                evidence=F.struct(
                    F.lit(table).alias("table"),
                    F.col("error").alias("problem"),
                    F.col(lid).alias("ledger_id"),
                    F.col("error_entry_id").alias("entry_id"),
                    F.col("path").alias("cursor_path"),
                ),
            )
        )
    if not parts:
        return None
    return union_all(parts)
