"""The offload rules: ``orphan_offload_object``, ``missing_offload_object``, ``incomplete_offload``
and streaming (PIP-76) segments; the object checks are in ``rules.offload_objects``."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds, explode_findings, raw_finding
from ledgerlens.audit.frames import Look
from ledgerlens.audit.rules.common import ML_COMPONENT, false_if_null, ml_reference_columns, offload_complete
from ledgerlens.report.kinds import declared
from ledgerlens.settings.config import AuditConfig

STREAMING = "streaming"  # the looks of streaming_looks
_MISSING = declared("missing_offload_object")


def _obj_orphan(o: Column, uuid: Column, ledger_id: Column, config: AuditConfig) -> Column:
    return raw_finding(
        kind="orphan_offload_object",
        component="offload",
        action="delete_object",
        ledger_id=ledger_id,
        object_key=o["key"],
        bytes_=o["size"],
        age_seconds=age_seconds(config.as_of_ms, o["last_modified_ms"]),
        evidence=F.struct(
            o["bucket"].alias("bucket"),
            uuid.alias("uuid"),
            ledger_id.alias("ledger_id"),
            o["role"].alias("role"),
            o["layout"].alias("layout"),
            o["size"].alias("size"),
            o["last_modified_ms"].alias("last_modified_ms"),
            F.lit("ManagedLedgerName").alias("reverify_owner_from"),
            F.lit(config.min_orphan_age_s).alias("min_orphan_age_s"),
        ),
    )


def _orphans(objects: Column, uuid: Column, ledger_id: Column, config: AuditConfig) -> Column:
    """Orphan candidates for the old enough objects of an unreferenced group.

    An object's managed ledger is unknown until re-verification reads its user metadata, so the
    blind-spot check happens there (``ledgerlens.audit.reverify``), not here.
    """
    cut = config.as_of_ms - config.min_orphan_age_s * 1000
    return F.transform(
        F.filter(objects, lambda o: (o["last_modified_ms"] <= cut) & ~false_if_null(o["no_orphan"])),
        lambda o: _obj_orphan(o, uuid, ledger_id, config),
    )


def _missing_object(e: Column, uuid: Column, layout: str, config: AuditConfig) -> Column:
    return raw_finding(
        kind=_MISSING.name,
        # critical once BookKeeper's copy is gone too (the data is lost), else a warning
        severity=F.when(F.col("bk_deleted") | ~F.col("in_bk"), F.lit(_MISSING.severity)).otherwise(
            F.lit(_MISSING.other("warning"))
        ),
        component="offload",
        action="investigate",
        **ml_reference_columns(),
        object_key=e["key"],
        bytes_=F.col("ref_size"),
        evidence=F.struct(
            uuid.alias("uuid"),
            F.lit(layout).alias("layout"),
            e["role"].alias("role"),
            "offload_bucket",
            F.col("bk_deleted").alias("offload_bookkeeper_deleted"),
            F.col("in_bk").alias("in_bookkeeper"),
            "offload_timestamp_ms",
            F.col("present_keys"),
        ),
    )


def _not_deleted(config: AuditConfig) -> Column:
    return raw_finding(
        kind="offloaded_not_deleted",
        component=ML_COMPONENT,
        action="load_topic",
        **ml_reference_columns(),
        bytes_=F.col("length"),
        age_seconds=age_seconds(config.as_of_ms, F.col("ctime_ms")),
        evidence=F.struct(
            F.lit("ledger").alias("per"),
            F.col("uuid"),
            "offload_timestamp_ms",
            F.col("lag_ms").alias("offload_deletion_lag_ms"),
            F.col("length").alias("bk_length"),
            F.col("bk_deleted").alias("offload_bookkeeper_deleted"),
            "ctime_ms",
        ),
    )


def _key_role(key: Column, role: str) -> Column:
    return F.struct(key.alias("key"), F.lit(role).alias("role"))


def _segments() -> Column:
    """The PIP-76 segments an offloaded ledger names (empty: the per-ledger layout)."""
    return F.coalesce("offload_segments", F.array())


def _streaming_object() -> Column:
    """An object of the streaming layout (PIP-76): ``<uuid>`` and ``<uuid>-index``."""
    return F.col("uuid").isNotNull() & (
        (F.col("layout") == "streaming") | (F.col("layout").isNull() & F.col("ledger_id").isNull())
    )


def streaming_looks() -> list[Look]:
    """The rows the streaming half of ``offload_rules`` reads (look ``streaming``: ledgers naming
    segments, objects of the streaming layout): without any, it finds nothing."""
    return [
        Look("ml_ledgers", STREAMING, F.size(_segments()) > 0),
        Look("offload_objects", STREAMING, _streaming_object()),
    ]


def _offloaded(
    offloaded: DataFrame, objects: DataFrame, config: AuditConfig, offload_bucket: str | None
) -> DataFrame:
    """The offloaded ledgers with what the rules judge: ``complete``, ``bk_deleted``, ``in_bk``,
    ``eligible`` (offloaded to an audited bucket) and ``due`` (past the offload deletion lag)."""
    now = config.as_of_ms
    if offload_bucket:
        audited = objects.sparkSession.range(1).select(F.array(F.lit(offload_bucket)).alias("audited"))
    else:
        audited = objects.agg(F.collect_set("bucket").alias("audited"))
    b = F.col("offload_bucket")
    return offloaded.crossJoin(F.broadcast(audited)).select(
        "ledger_id",
        "ref_ml",
        "ref_tenant",
        "ref_namespace",
        "ref_size",
        "offload_uuid",
        "offload_timestamp_ms",
        "offload_bucket",
        "offload_segments",
        "lag_ms",
        "length",
        "ctime_ms",
        false_if_null(offload_complete()).alias("complete"),
        false_if_null(F.col("offload_bookkeeper_deleted")).alias("bk_deleted"),
        false_if_null(F.col("bk_present")).alias("in_bk"),
        (b.isNull() | (b == "") | F.array_contains(F.col("audited"), b)).alias("eligible"),
        (
            F.col("offload_timestamp_ms").isNotNull()
            & (F.col("offload_timestamp_ms") + F.col("lag_ms") < now)
            & ~false_if_null(F.col("pol_error"))
        ).alias("due"),
    )


def _checked() -> Column:
    """A managed ledger's complete offload to an audited bucket: its objects must all be there."""
    return F.col("ml_row") & F.col("complete") & F.col("eligible")


def _incomplete(data_key: Column, config: AuditConfig) -> Column:
    return raw_finding(
        kind="incomplete_offload",
        component="offload",
        action="investigate",
        **ml_reference_columns(),
        object_key=data_key,
        bytes_=F.col("obj_bytes"),
        age_seconds=age_seconds(config.as_of_ms, F.col("newest_ms")),
        evidence=F.struct(
            "uuid",
            F.col("present_keys").alias("keys"),
            F.col("newest_ms").alias("newest_last_modified_ms"),
            F.lit(config.incomplete_offload_age_s).alias("incomplete_offload_age_s"),
        ),
    )


def _per_ledger(
    off: DataFrame, objects: DataFrame, obj: Column, spots: DataFrame, config: AuditConfig
) -> DataFrame:
    """The per-ledger layout (PIP-17): ``<uuid>-ledger-<id>`` and ``<uuid>-ledger-<id>-index``."""
    now = config.as_of_ms
    pl_objects = (
        objects.filter(
            F.col("uuid").isNotNull()
            & F.col("ledger_id").isNotNull()
            & (F.col("layout").isNull() | (F.col("layout") == "ledger"))
        )
        .groupBy("uuid", "ledger_id")
        .agg(
            F.collect_list(obj).alias("objects"),
            F.sum("size").alias("obj_bytes"),
            F.max("last_modified_ms").alias("newest_ms"),
        )
    )
    pl = off.filter(F.col("offload_uuid").isNotNull() & (F.size(_segments()) == 0)).select(
        "*", F.col("offload_uuid").alias("uuid"), F.lit(True).alias("ml_row")
    )
    pj = pl.join(pl_objects, ["uuid", "ledger_id"], "full_outer").crossJoin(F.broadcast(spots))
    data_key = F.concat(F.col("uuid"), F.lit("-ledger-"), F.col("ledger_id").cast("string"))
    expected = F.array(_key_role(data_key, "data"), _key_role(F.concat(data_key, F.lit("-index")), "index"))
    present = F.transform(F.coalesce("objects", F.array()), lambda o: o["key"])
    pj = pj.select(
        "*",
        present.alias("present_keys"),
        F.filter(expected, lambda e: ~F.array_contains(present, e["key"])).alias("absent"),
    )
    checked = _checked()
    return explode_findings(
        pj,
        F.concat(
            F.when(
                F.col("ml_row").isNull(),
                _orphans(F.col("objects"), F.col("uuid"), F.col("ledger_id"), config),
            ).otherwise(F.array()),
            F.when(
                checked, F.transform("absent", lambda e: _missing_object(e, F.col("uuid"), "ledger", config))
            ).otherwise(F.array()),
            F.array(
                F.when(
                    false_if_null(F.col("ml_row"))
                    & ~F.col("complete")
                    & F.col("objects").isNotNull()
                    & (F.col("newest_ms") <= now - config.incomplete_offload_age_s * 1000),
                    _incomplete(data_key, config),
                ),
                F.when(
                    checked & F.col("in_bk") & F.col("due") & (F.size("absent") == 0), _not_deleted(config)
                ),
            ),
        ),
    )


def _streaming(
    off: DataFrame, objects: DataFrame, obj: Column, spots: DataFrame, config: AuditConfig
) -> DataFrame:
    """The streaming layout (PIP-76): objects ``<uuid>`` and ``<uuid>-index``, shared by the
    segment's ledgers."""
    st_objects = objects.filter(_streaming_object()).groupBy("uuid").agg(F.collect_list(obj).alias("objects"))
    seg = off.filter(F.size(_segments()) > 0).select(
        "*", F.explode("offload_segments").alias("seg"), F.lit(True).alias("ml_row")
    )
    seg = seg.select("*", F.col("seg.uuid").alias("uuid"))
    sj = seg.join(st_objects, "uuid", "full_outer").crossJoin(F.broadcast(spots))
    uuid = F.col("uuid")
    expected = F.array(_key_role(uuid, "data"), _key_role(F.concat(uuid, F.lit("-index")), "index"))
    present = F.transform(F.coalesce("objects", F.array()), lambda o: o["key"])
    seg_checked = _checked() & false_if_null(F.col("seg.complete"))
    sj = sj.select(
        "*",
        present.alias("present_keys"),
        F.when(seg_checked, F.filter(expected, lambda e: ~F.array_contains(present, e["key"])))
        .otherwise(F.array())
        .alias("absent"),
    )
    st_orphans = explode_findings(
        sj.filter(F.col("ml_row").isNull()),
        _orphans(F.col("objects"), uuid, F.lit(None).cast("bigint"), config),
    )
    # one finding per absent key: the oldest ledger of the managed ledger that names the segment
    st_missing = (
        sj.filter(F.size("absent") > 0)
        .select("*", F.explode("absent").alias("e"))
        .groupBy("ref_ml", F.col("e.key").alias("m_key"))
        .agg(F.min_by(F.struct("*"), F.col("ledger_id")).alias("r"))
        .select("r.*")
    )
    st_missing = st_missing.select(_missing_object(F.col("e"), uuid, "streaming", config).alias("f")).select(
        "f.*"
    )
    # a streaming ledger is verified when every segment it names is complete with both objects
    per_ledger_st = (
        sj.filter(F.col("ml_row"))
        .groupBy("ref_ml", "ledger_id")
        .agg(
            F.min_by(F.struct("*"), F.col("uuid")).alias("r"),
            F.bool_and(seg_checked & (F.size("absent") == 0)).alias("verified"),
        )
    )
    st_not_deleted = per_ledger_st.filter(F.col("verified") & F.col("r.in_bk") & F.col("r.due")).select("r.*")
    st_not_deleted = st_not_deleted.select(_not_deleted(config).alias("f")).select("f.*")
    return st_orphans.unionByName(st_missing).unionByName(st_not_deleted)


def offload_rules(
    offloaded: DataFrame,
    objects: DataFrame,
    spots: DataFrame,
    config: AuditConfig,
    offload_bucket: str | None,
    not_orphans: DataFrame | None = None,
    *,
    streaming: bool = True,
) -> DataFrame:
    """``orphan_offload_object``, ``missing_offload_object``, ``incomplete_offload``,
    ``offloaded_not_deleted``.

    ``not_orphans`` (column ``key``): objects never reported as orphans (foreign, of another
    uuid, tagged with a cluster name while the audited cluster is unknown).

    ``offloaded`` are the offloaded ledgers from ``ledger_rules`` (with their BookKeeper facts).
    Per-ledger layout: one full outer join of ledgers and objects grouped by ``(uuid, ledger id)``,
    then one pass. PIP-76 streaming segments: the same on ``uuid``, then per key / per ledger;
    ``streaming=False`` (no row of ``streaming_looks``) leaves that half out.
    """
    off = _offloaded(offloaded, objects, config, offload_bucket)
    if not_orphans is not None:
        keep = not_orphans.select("key").distinct().withColumn("no_orphan", F.lit(True))
        objects = objects.join(keep, "key", "left")
    else:
        objects = objects.withColumn("no_orphan", F.lit(None).cast("boolean"))
    obj = F.struct("key", "role", "size", "last_modified_ms", "bucket", "layout", "no_orphan")
    per_ledger = _per_ledger(off, objects, obj, spots, config)
    if not streaming:
        return per_ledger
    return per_ledger.unionByName(_streaming(off, objects, obj, spots, config))
