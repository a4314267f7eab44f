"""The audit rules of docs/audit-rules.md as DataFrame -> DataFrame transforms.

Each function returns raw findings (``findings.RAW_COLUMNS``). The expensive part is shared: the
managed ledgers' ledger lists are walked once per managed ledger (retention, window functions) and
then joined once with BookKeeper's ledgers by id, together with every other reference (one full
outer join answers orphan, unattributed, missing, open-ledger, retention and the BookKeeper side of
the offload rules).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds, finding
from ledgerlens.audit.names import ANY, ml_namespace, topic_to_ml
from ledgerlens.audit.references import ML_TAG, SCHEMA_TAG, owner_prefixes, without_blind_spots
from ledgerlens.config import AuditConfig

MB = 1024 * 1024
_ML = "managed-ledger"
_KNOWN_COMPONENTS = ("managed-ledger", "schema", "compacted-ledger", "delayed-index-bucket")


def _false(c: Column) -> Column:
    return F.coalesce(c, F.lit(False))


# --------------------------------------------------------------------------------------------------
# Managed ledgers: ledger lists with the retention walk
# --------------------------------------------------------------------------------------------------


def policies_by_namespace(policies: DataFrame, config: AuditConfig) -> DataFrame:
    """Namespace -> effective retention and offload deletion lag (``pol_error`` when undecodable)."""
    ns = F.coalesce(F.col("namespace"), F.regexp_extract("path", r"^/admin/policies/(.+)$", 1))
    return policies.select(
        ns.alias("pol_ns"),
        F.col("retention_minutes").alias("pol_retention_minutes"),
        F.col("retention_mb").alias("pol_retention_mb"),
        F.col("offload_deletion_lag_ms").alias("pol_lag_ms"),
        F.col("error").isNotNull().alias("pol_error"),
    ).dropDuplicates(["pol_ns"])


def managed_ledger_references(
    ml_ledgers: DataFrame, cursors: DataFrame, policies: DataFrame, config: AuditConfig
) -> DataFrame:
    """Every ``ml_ledgers`` row as a reference, with the broker's trimming walk already done.

    ``ret_overdue`` marks the ledgers that ``internalTrimLedgers`` would delete (oldest first,
    stopping at the first non-trimmable); ``ret_ev`` carries their evidence.
    """
    now = config.as_of_ms
    mll = ml_ledgers.select(
        "managed_ledger",
        "tenant",
        F.coalesce("namespace", ml_namespace(F.col("managed_ledger"))).alias("ns"),
        "ledger_id",
        "position",
        "is_last",
        "size",
        "timestamp_ms",
        "offload_uuid",
        "offload_complete",
        "offload_bookkeeper_deleted",
        "offload_timestamp_ms",
        "offload_bucket",
        "offload_segments",
    )
    mdl = F.col("mark_delete_ledger_id")
    slow = cursors.groupBy(F.col("managed_ledger").alias("c_ml")).agg(
        F.min(F.when(F.col("error").isNull(), mdl)).alias("slowest"),
        F.min_by(
            F.when(F.col("error").isNull(), F.col("cursor")), F.when(F.col("error").isNull(), mdl)
        ).alias("slowest_cursor"),
        F.sum(F.when(F.col("error").isNotNull() | mdl.isNull(), 1).otherwise(0)).alias("unknown_cursors"),
    )
    pol = policies_by_namespace(policies, config)
    j = mll.join(slow, mll["managed_ledger"] == slow["c_ml"], "left").join(
        F.broadcast(pol), F.col("ns") == F.col("pol_ns"), "left"
    )
    rm = F.coalesce("pol_retention_minutes", F.lit(config.default_retention_minutes))
    rmb = F.coalesce("pol_retention_mb", F.lit(config.default_retention_mb))
    order = Window.partitionBy("managed_ledger").orderBy(F.col("position").asc_nulls_first(), "ledger_id")
    whole = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    size = F.coalesce("size", F.lit(0))
    j = j.select(
        "*",
        rm.alias("ret_minutes"),
        rmb.alias("ret_mb"),
        F.count(F.lit(1)).over(whole).alias("n_ledgers"),
        F.coalesce(
            F.max(F.when(_false(F.col("is_last")), F.col("ledger_id"))).over(whole),
            F.max("ledger_id").over(whole),
        ).alias("last_id"),
        (F.sum(size).over(whole) - F.sum(size).over(upto) + size).alias("size_from_here"),
        F.row_number().over(order).alias("walk"),
    )
    ts = F.col("timestamp_ms")
    slowest = F.coalesce("slowest", "last_id")
    expired = (F.col("ret_minutes") >= 0) & (ts + F.col("ret_minutes") * 60000 < now)
    over_size = (F.col("ret_mb") >= 0) & (F.col("size_from_here") > F.col("ret_mb") * MB)
    trimmable = _false(
        (F.col("ledger_id") < slowest)
        & ~_false(F.col("is_last"))
        & (ts > 0)
        & (ts <= now - config.retention_grace_s * 1000)
        & (expired | over_size)
    )
    j = j.select("*", trimmable.alias("trimmable"), expired.alias("expired"), over_size.alias("over_size"))
    stop = F.min(F.when(~F.col("trimmable"), F.col("walk"))).over(whole)
    eligible = (
        (F.col("n_ledgers") >= 2)
        & ~_false(F.col("pol_error"))
        & (F.coalesce("unknown_cursors", F.lit(0)) == 0)
    )
    overdue = eligible & (F.col("walk") < F.coalesce(stop, F.lit(1 << 62)))
    ret_ev = F.struct(
        F.lit("ledger").alias("per"),
        F.col("ret_minutes").alias("retention_minutes"),
        F.col("ret_mb").alias("retention_mb"),
        F.col("timestamp_ms"),
        F.col("position"),
        F.col("size_from_here"),
        F.col("expired"),
        F.col("over_size"),
        slowest.alias("slowest_ledger_id"),
        F.col("slowest_cursor"),
        F.lit(config.retention_grace_s).alias("retention_grace_s"),
    )
    offload = F.col("offload_uuid").isNotNull() | (F.size(F.coalesce("offload_segments", F.array())) > 0)
    return j.select(
        "ledger_id",
        F.lit(_ML).alias("ref_component"),
        F.col("managed_ledger").alias("ref_ml"),
        F.col("tenant").alias("ref_tenant"),
        F.col("ns").alias("ref_namespace"),
        F.col("size").alias("ref_size"),
        "is_last",
        "position",
        "offload_uuid",
        "offload_complete",
        "offload_bookkeeper_deleted",
        "offload_timestamp_ms",
        "offload_bucket",
        "offload_segments",
        F.when(offload, F.coalesce("pol_lag_ms", F.lit(config.default_offload_deletion_lag_ms))).alias(
            "lag_ms"
        ),
        F.when(offload, _false(F.col("pol_error"))).alias("pol_error"),
        overdue.alias("ret_overdue"),
        F.when(overdue, ret_ev).alias("ret_ev"),
    )


def join_bookkeeper(bk_ledgers: DataFrame, references: DataFrame) -> DataFrame:
    """Full outer join of BookKeeper's ledgers with every reference, on ledger id.

    A ledger referenced twice appears twice; an unreferenced one once with null ``ref_component``;
    a reference to an absent ledger with null ``bk_present``.
    """
    bk = bk_ledgers.select(
        "ledger_id",
        F.col("path").alias("bk_path"),
        "state",
        "length",
        "ctime_ms",
        "application",
        F.col("component").alias("bk_component"),
        F.col("managed_ledger").alias("bk_ml"),
        F.col("cursor").alias("bk_cursor"),
        F.col("schema_id").alias("bk_schema_id"),
        "compacted_topic",
        "delayed_topic",
        "delayed_cursor",
        "bucket_key",
        F.col("error").alias("bk_error"),
        F.lit(True).alias("bk_present"),
    )
    return bk.join(references, "ledger_id", "full_outer")


# --------------------------------------------------------------------------------------------------
# Ledger rules (from the joined frame)
# --------------------------------------------------------------------------------------------------


def orphan_and_unattributed(joined: DataFrame, spots: DataFrame, config: AuditConfig) -> DataFrame:
    """``orphan_ledger`` (blind spots applied) and ``unattributed_ledger``."""
    now = config.as_of_ms
    old = joined.filter(
        F.col("ref_component").isNull()
        & F.col("bk_present")
        & F.col("bk_error").isNull()
        & (F.col("ctime_ms") <= now - config.min_orphan_age_s * 1000)
    )
    comp = F.col("bk_component")
    owner = (
        F.when(comp == _ML, F.col("bk_ml"))
        .when(comp == "compacted-ledger", topic_to_ml(F.col("compacted_topic")))
        .when(comp == "delayed-index-bucket", topic_to_ml(F.col("delayed_topic")))
        .when(comp == "schema", F.col("bk_schema_id"))
    )
    pulsar = old.filter(F.col("application") == "pulsar").withColumn("owner", owner)
    prefixes = F.when(
        comp.isin(*_KNOWN_COMPONENTS),
        owner_prefixes(F.when(comp == "schema", F.lit(SCHEMA_TAG)).otherwise(F.lit(ML_TAG)), F.col("owner")),
    ).otherwise(F.array(F.lit(f"{ML_TAG}:{ANY}"), F.lit(f"{SCHEMA_TAG}:{ANY}")))
    pulsar = without_blind_spots(pulsar, spots, prefixes)
    owner_ml = F.when(comp != "schema", F.col("owner"))
    orphan = finding(
        pulsar,
        kind="orphan_ledger",
        severity="warning",
        component=F.when((comp == _ML) & F.col("bk_cursor").isNotNull(), F.lit("cursor")).otherwise(comp),
        action="delete_ledger",
        ledger_id=F.col("ledger_id"),
        managed_ledger=owner_ml,
        cursor=F.coalesce("bk_cursor", "delayed_cursor"),
        path=F.col("bk_path"),
        bytes_=F.col("length"),
        age_seconds=age_seconds(now, F.col("ctime_ms")),
        owner_ml=owner_ml,
        evidence=F.struct(
            "ctime_ms",
            "length",
            "state",
            "application",
            F.col("bk_component").alias("component"),
            F.col("owner"),
            F.col("bk_ml").alias("managed_ledger"),
            F.col("bk_cursor").alias("cursor"),
            F.col("bk_schema_id").alias("schema_id"),
            "compacted_topic",
            "delayed_topic",
            "delayed_cursor",
            "bucket_key",
            F.lit(config.min_orphan_age_s).alias("min_orphan_age_s"),
        ),
    )
    other = old.filter(F.col("application").isNull() | (F.col("application") != "pulsar"))
    unattributed = finding(
        other,
        kind="unattributed_ledger",
        severity="info",
        component=None,
        action="none",
        ledger_id=F.col("ledger_id"),
        path=F.col("bk_path"),
        bytes_=F.col("length"),
        age_seconds=age_seconds(now, F.col("ctime_ms")),
        evidence=F.struct(
            "ctime_ms", "length", "state", "application", F.col("bk_component").alias("component")
        ),
    )
    return orphan.unionByName(unattributed)


def missing_ledgers(joined: DataFrame, config: AuditConfig) -> DataFrame:
    """``missing_ledger``: referenced, no BookKeeper row, not offloaded-complete."""
    miss = joined.filter(
        F.col("bk_present").isNull()
        & F.col("ref_component").isNotNull()
        & ~((F.col("ref_component") == _ML) & _false(F.col("offload_complete")))
    )
    return finding(
        miss,
        kind="missing_ledger",
        severity="critical",
        component=F.col("ref_component"),
        action="investigate",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        cursor=F.col("ref_cursor"),
        path=F.col("ref_path"),
        bytes_=F.col("ref_size"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        owner_ml=F.col("ref_ml"),
        evidence=F.struct(
            F.col("ref_component").alias("reference"),
            F.col("ref_path").alias("referenced_by"),
            F.col("ref_ml").alias("managed_ledger"),
            F.col("ref_cursor").alias("cursor"),
            F.col("ref_key").alias("property"),
            F.col("ref_schema_id").alias("schema_id"),
            F.col("ref_schema_version").alias("schema_version"),
            "position",
            "is_last",
            F.col("ref_size").alias("size"),
            "offload_uuid",
            "offload_complete",
        ),
    )


def open_ledger_overdue(joined: DataFrame, config: AuditConfig) -> DataFrame:
    """``open_ledger_overdue``: the last ledger is OPEN in BookKeeper and older than the limit."""
    now = config.as_of_ms
    rows = joined.filter(
        (F.col("ref_component") == _ML)
        & _false(F.col("is_last"))
        & (F.col("state") == "OPEN")
        & F.col("bk_error").isNull()
        & (F.col("ctime_ms") <= now - config.open_ledger_max_age_s * 1000)
    )
    return finding(
        rows,
        kind="open_ledger_overdue",
        severity="warning",
        component=_ML,
        action="investigate",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        bytes_=F.col("ref_size"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        age_seconds=age_seconds(now, F.col("ctime_ms")),
        owner_ml=F.col("ref_ml"),
        evidence=F.struct(
            F.lit("ledger").alias("per"),
            "state",
            "ctime_ms",
            "position",
            F.col("bk_path").alias("ledger_path"),
            F.lit(config.open_ledger_max_age_s).alias("open_ledger_max_age_s"),
        ),
    )


def retention_overdue(joined: DataFrame, spots: DataFrame, config: AuditConfig) -> DataFrame:
    """``retention_overdue``: one row per ledger the broker's trimming would have deleted."""
    rows = joined.filter(_false(F.col("ret_overdue")) & (F.col("ref_component") == _ML))
    rows = without_blind_spots(rows, spots, owner_prefixes(ML_TAG, F.col("ref_ml")))
    return finding(
        rows,
        kind="retention_overdue",
        severity="warning",
        component=_ML,
        action="load_topic",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        bytes_=F.col("ref_size"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        age_seconds=age_seconds(config.as_of_ms, F.col("ctime_ms")),
        owner_ml=F.col("ref_ml"),
        evidence=F.struct("ret_ev.*", F.col("bk_present").isNotNull().alias("in_bookkeeper")),
    )


# --------------------------------------------------------------------------------------------------
# Cursors and corrupt metadata
# --------------------------------------------------------------------------------------------------


def inactive_cursors(cursors: DataFrame, ml_ledgers: DataFrame, config: AuditConfig) -> DataFrame:
    """``inactive_cursor``: inactive for long and holding ledgers (one row per cursor)."""
    now = config.as_of_ms
    la = F.col("last_active_ms")
    idle = cursors.filter(
        F.col("error").isNull()
        & (la > 0)
        & (la <= now - config.inactive_cursor_age_s * 1000)
        & F.col("mark_delete_ledger_id").isNotNull()
    ).select(
        "managed_ledger",
        "cursor",
        "path",
        "tenant",
        "namespace",
        "mark_delete_ledger_id",
        "mark_delete_entry_id",
        "last_active_ms",
    )
    ledgers = ml_ledgers.select(
        F.col("managed_ledger").alias("h_ml"),
        F.col("ledger_id").alias("h_id"),
        F.col("is_last").alias("h_last"),
        F.col("size").alias("h_size"),
    )
    held = idle.join(
        ledgers,
        (idle["managed_ledger"] == ledgers["h_ml"])
        & (ledgers["h_id"] >= idle["mark_delete_ledger_id"])
        & ~_false(ledgers["h_last"]),
    )
    agg = held.groupBy(
        "managed_ledger",
        "cursor",
        "path",
        "tenant",
        "namespace",
        "mark_delete_ledger_id",
        "mark_delete_entry_id",
        "last_active_ms",
    ).agg(
        F.count(F.lit(1)).alias("held_ledgers"),
        F.sum("h_size").alias("held_bytes"),
        F.min("h_id").alias("first_held_ledger_id"),
        F.max("h_id").alias("last_held_ledger_id"),
    )
    return finding(
        agg,
        kind="inactive_cursor",
        severity="warning",
        component="cursor",
        action="investigate",
        managed_ledger=F.col("managed_ledger"),
        cursor=F.col("cursor"),
        path=F.col("path"),
        bytes_=F.col("held_bytes"),
        tenant=F.col("tenant"),
        namespace=F.col("namespace"),
        age_seconds=age_seconds(now, la),
        evidence=F.struct(
            F.lit("cursor").alias("per"),
            "last_active_ms",
            "mark_delete_ledger_id",
            "mark_delete_entry_id",
            "held_ledgers",
            "first_held_ledger_id",
            "last_held_ledger_id",
            F.lit(config.inactive_cursor_age_s).alias("inactive_cursor_age_s"),
        ),
    )


def corrupt_metadata(tables: dict[str, DataFrame]) -> DataFrame:
    """``corrupt_metadata``: every inventory row with ``error``, named by its node."""
    parts = []
    specs = {
        "bk_ledgers": (None, "ledger_id", None, None, None, None),
        "managed_ledgers": (_ML, None, "managed_ledger", None, "tenant", "namespace"),
        "cursors": ("cursor", None, "managed_ledger", "cursor", "tenant", "namespace"),
        "schema_ledgers": ("schema", "ledger_id", None, None, "tenant", "namespace"),
        "namespace_policies": (None, None, None, None, "tenant", "namespace"),
    }
    for table, (component, lid, ml, cur, tenant, ns) in specs.items():
        rows = tables[table].filter(F.col("error").isNotNull())

        def col(name: str | None) -> Column | None:
            return F.col(name) if name else None

        parts.append(
            finding(
                rows,
                kind="corrupt_metadata",
                severity="critical",
                component=component,
                action="investigate",
                ledger_id=col(lid),
                managed_ledger=col(ml),
                cursor=col(cur),
                path=F.col("path"),
                tenant=col(tenant),
                namespace=col(ns),
                evidence=F.struct(F.lit(table).alias("table"), F.col("error").alias("problem")),
            )
        )
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


# --------------------------------------------------------------------------------------------------
# Offload rules
# --------------------------------------------------------------------------------------------------


def offload_rules(
    joined: DataFrame,
    objects: DataFrame,
    spots: DataFrame,
    config: AuditConfig,
    offload_bucket: str | None,
) -> DataFrame:
    """``orphan_offload_object``, ``missing_offload_object``, ``incomplete_offload``,
    ``offloaded_not_deleted`` (per-ledger layout and PIP-76 streaming segments)."""
    now = config.as_of_ms
    if offload_bucket:
        audited = objects.sparkSession.range(1).select(F.array(F.lit(offload_bucket)).alias("audited"))
    else:
        audited = objects.agg(F.collect_set("bucket").alias("audited"))
    off = (
        joined.filter(
            (F.col("ref_component") == _ML)
            & (F.col("offload_uuid").isNotNull() | (F.size(F.coalesce("offload_segments", F.array())) > 0))
        )
        .select(
            "ledger_id",
            "ref_ml",
            "ref_tenant",
            "ref_namespace",
            "ref_size",
            "offload_uuid",
            _false(F.col("offload_complete")).alias("complete"),
            _false(F.col("offload_bookkeeper_deleted")).alias("bk_deleted"),
            "offload_timestamp_ms",
            "offload_bucket",
            "offload_segments",
            "lag_ms",
            "pol_error",
            _false(F.col("bk_present")).alias("in_bk"),
            "length",
            "ctime_ms",
        )
        .crossJoin(F.broadcast(audited))
    )
    b = F.col("offload_bucket")
    off = off.withColumn("eligible", b.isNull() | (b == "") | F.array_contains(F.col("audited"), b)).drop(
        "audited"
    )
    objs = objects.select("bucket", "key", "size", "last_modified_ms", "uuid", "ledger_id", "role", "layout")
    obj_struct = F.struct("key", "role", "size", "last_modified_ms", "bucket", "layout")

    # Per-ledger layout: one full outer join on (uuid, ledger id).
    pl_objs = (
        objs.filter(
            F.col("uuid").isNotNull()
            & F.col("ledger_id").isNotNull()
            & (F.col("layout").isNull() | (F.col("layout") == "ledger"))
        )
        .groupBy("uuid", "ledger_id")
        .agg(
            F.collect_list(obj_struct).alias("objects"),
            F.sum("size").alias("obj_bytes"),
            F.max("last_modified_ms").alias("newest_ms"),
        )
    )
    pl = off.filter(
        F.col("offload_uuid").isNotNull() & (F.size(F.coalesce("offload_segments", F.array())) == 0)
    ).select("*", F.col("offload_uuid").alias("uuid"), F.lit(True).alias("ml_row"))
    pj = pl.join(pl_objs, ["uuid", "ledger_id"], "full_outer")

    orphan_pl = pj.filter(F.col("ml_row").isNull()).select(
        "uuid", "ledger_id", F.explode("objects").alias("o")
    )
    orphan_st_objs = objs.filter(
        F.col("uuid").isNotNull()
        & ((F.col("layout") == "streaming") | (F.col("layout").isNull() & F.col("ledger_id").isNull()))
    )
    seg = off.filter(F.size(F.coalesce("offload_segments", F.array())) > 0).select(
        "*", F.explode("offload_segments").alias("seg")
    )
    seg_uuids = seg.select(F.col("seg.uuid").alias("uuid"))
    orphan_st = orphan_st_objs.join(seg_uuids, "uuid", "left_anti").select(
        "uuid", "ledger_id", obj_struct.alias("o")
    )
    orphans = orphan_pl.unionByName(orphan_st).filter(
        F.col("o.last_modified_ms") <= now - config.min_orphan_age_s * 1000
    )
    orphans = without_blind_spots(orphans, spots, F.array(F.lit(f"{ML_TAG}:{ANY}")))
    orphan_f = finding(
        orphans,
        kind="orphan_offload_object",
        severity="warning",
        component="offload",
        action="delete_object",
        ledger_id=F.col("ledger_id"),
        object_key=F.col("o.key"),
        bytes_=F.col("o.size"),
        age_seconds=age_seconds(now, F.col("o.last_modified_ms")),
        evidence=F.struct(
            F.col("o.bucket").alias("bucket"),
            "uuid",
            "ledger_id",
            F.col("o.role").alias("role"),
            F.col("o.layout").alias("layout"),
            F.col("o.size").alias("size"),
            F.col("o.last_modified_ms").alias("last_modified_ms"),
            F.lit("ManagedLedgerName").alias("reverify_owner_from"),
            F.lit(config.min_orphan_age_s).alias("min_orphan_age_s"),
        ),
    )

    # Missing objects, per-ledger layout: one finding per absent key.
    data_key = F.concat(F.col("uuid"), F.lit("-ledger-"), F.col("ledger_id").cast("string"))
    expected = F.array(
        F.struct(data_key.alias("key"), F.lit("data").alias("role")),
        F.struct(F.concat(data_key, F.lit("-index")).alias("key"), F.lit("index").alias("role")),
    )
    present_keys = F.transform(F.coalesce("objects", F.array()), lambda o: o["key"])
    ml_side = pj.filter(F.col("ml_row"))
    absent = F.filter(expected, lambda e: ~F.array_contains(present_keys, e["key"]))
    miss_pl = (
        ml_side.filter(F.col("complete") & F.col("eligible"))
        .select("*", present_keys.alias("present_keys"), F.explode(absent).alias("e"))
        .select("*", F.lit("ledger").alias("layout"), F.col("uuid").alias("m_uuid"))
    )
    # Missing objects, streaming layout: per segment (deduplicated over the ledgers it spans).
    st_keys = orphan_st_objs.select(F.col("key").alias("st_key"))
    seg_ok = seg.filter(F.col("complete") & F.col("eligible") & _false(F.col("seg.complete")))
    seg_exp = seg_ok.select(
        "*",
        F.explode(
            F.array(
                F.struct(F.col("seg.uuid").alias("key"), F.lit("data").alias("role")),
                F.struct(
                    F.concat(F.col("seg.uuid"), F.lit("-index")).alias("key"), F.lit("index").alias("role")
                ),
            )
        ).alias("e"),
    )
    miss_st = seg_exp.join(st_keys, seg_exp["e.key"] == st_keys["st_key"], "left_anti").select(
        "*",
        F.array().cast("array<string>").alias("present_keys"),
        F.lit("streaming").alias("layout"),
        F.col("seg.uuid").alias("m_uuid"),
    )
    miss_cols = [
        "ledger_id",
        "ref_ml",
        "ref_tenant",
        "ref_namespace",
        "ref_size",
        "m_uuid",
        "e",
        "layout",
        "present_keys",
        "bk_deleted",
        "in_bk",
        "offload_bucket",
        "offload_timestamp_ms",
    ]
    missing = miss_pl.select(*miss_cols).unionByName(miss_st.select(*miss_cols))
    missing_f = finding(
        missing,
        kind="missing_offload_object",
        severity=F.when(F.col("bk_deleted") | ~F.col("in_bk"), F.lit("critical")).otherwise(F.lit("warning")),
        component="offload",
        action="investigate",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        object_key=F.col("e.key"),
        bytes_=F.col("ref_size"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        owner_ml=F.col("ref_ml"),
        evidence=F.struct(
            F.col("m_uuid").alias("uuid"),
            "layout",
            F.col("e.role").alias("role"),
            "offload_bucket",
            F.col("bk_deleted").alias("offload_bookkeeper_deleted"),
            F.col("in_bk").alias("in_bookkeeper"),
            "offload_timestamp_ms",
            "present_keys",
        ),
    )

    # Incomplete offloads: context not complete, objects there, the newest older than the limit.
    inc = ml_side.filter(
        ~F.col("complete")
        & F.col("objects").isNotNull()
        & (F.col("newest_ms") <= now - config.incomplete_offload_age_s * 1000)
    )
    incomplete_f = finding(
        inc,
        kind="incomplete_offload",
        severity="warning",
        component="offload",
        action="investigate",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        object_key=data_key,
        bytes_=F.col("obj_bytes"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        age_seconds=age_seconds(now, F.col("newest_ms")),
        owner_ml=F.col("ref_ml"),
        evidence=F.struct(
            "uuid",
            F.transform("objects", lambda o: o["key"]).alias("keys"),
            F.col("newest_ms").alias("newest_last_modified_ms"),
            F.lit(config.incomplete_offload_age_s).alias("incomplete_offload_age_s"),
        ),
    )

    # Offloaded, complete, verified in S3, still in BookKeeper past the deletion lag.
    due = off.filter(
        F.col("complete")
        & F.col("eligible")
        & F.col("in_bk")
        & ~_false(F.col("pol_error"))
        & (F.col("offload_timestamp_ms") + F.col("lag_ms") < now)
    )
    due = due.join(missing.select(F.col("ref_ml"), "ledger_id"), ["ref_ml", "ledger_id"], "left_anti")
    # The per-ledger layout also needs the objects to exist at all (absent from the join: missing).
    ond_f = finding(
        due,
        kind="offloaded_not_deleted",
        severity="warning",
        component=_ML,
        action="load_topic",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        bytes_=F.col("length"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        age_seconds=age_seconds(now, F.col("ctime_ms")),
        owner_ml=F.col("ref_ml"),
        evidence=F.struct(
            F.lit("ledger").alias("per"),
            F.col("offload_uuid").alias("uuid"),
            "offload_timestamp_ms",
            F.col("lag_ms").alias("offload_deletion_lag_ms"),
            F.col("length").alias("bk_length"),
            F.col("bk_deleted").alias("offload_bookkeeper_deleted"),
            "ctime_ms",
        ),
    )
    return orphan_f.unionByName(missing_f).unionByName(incomplete_f).unionByName(ond_f)
