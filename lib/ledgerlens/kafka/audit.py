"""The ``remote_segment_*`` rules of docs/audit-rules.md: Kafka inventory -> findings (Spark).

Inputs are the KIP-405 inventory tables (``schemas.KAFKA_INVENTORY``): the replayed segments,
partitions and replay events, the remote storage listing and the cluster's topics. The result has
the columns of ``schemas.FINDINGS`` (component ``kafka-remote``), like the Pulsar audit's.

Ownership: an object belongs to the audited cluster only when its topic id appears in the
cluster's metadata topic or among its live topics. Objects of unknown topic ids are reported
(``remote_segment_foreign_object``) but never offered for deletion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ledgerlens.audit.findings import KAFKA_KINDS, RAW_COLUMNS, age_seconds, severity_by_kind, to_findings
from ledgerlens.formats.kafka_remote_keys import REQUIRED_ROLES
from ledgerlens.report.kinds import declared, severity_of

__all__ = ["KAFKA_KINDS", "KafkaAuditConfig", "run_kafka_audit"]

COMPONENT = "kafka-remote"
_LIVE = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED")


@dataclass(frozen=True)
class KafkaAuditConfig:
    """Thresholds of the Kafka rules; durations in seconds, ``as_of_ms`` fixes 'now'."""

    as_of_ms: int
    layout: str = "s3-plugin"
    prefix: str = ""
    metadata_topic: str = "__remote_log_metadata"
    min_orphan_age_s: int = 24 * 3600
    stuck_copy_s: int = 24 * 3600
    stuck_delete_s: int = 24 * 3600
    retention_grace_s: int = 6 * 3600
    growth_records_per_segment: float = 20.0
    growth_min_records: int = 100_000
    topics_known: bool = True  # the admin client listed the cluster's topics (else: no topic rules)
    extra: dict[str, Any] = field(default_factory=dict)


def _rows(
    df: DataFrame,
    *,
    kind: Column | str,
    severity: Column | str,
    action: Column | str,
    evidence: Column,
    path: Column,
    object_key: Column | None = None,
    bytes_: Column | None = None,
    age: Column | None = None,
) -> DataFrame:
    """Raw findings (``RAW_COLUMNS``) with kind, severity and action computed per row."""

    def col(v: Column | str | None, dtype: str = "string") -> Column:
        return (v if isinstance(v, Column) else F.lit(v)).cast(dtype)

    cols = {
        "kind": col(kind),
        "severity": col(severity),
        "component": F.lit(COMPONENT),
        "ledger_id": col(None, "bigint"),
        "managed_ledger": col(None),
        "cursor": col(None),
        "path": col(path),
        "object_key": col(object_key),
        "bytes": col(bytes_, "bigint"),
        "evidence": F.to_json(evidence),
        "action": col(action),
        "tenant_hint": col(None),
        "namespace_hint": col(None),
        "age_seconds": col(age, "bigint"),
        "owner_ml": col(None),
    }
    return df.select(*[cols[c].alias(c) for c in RAW_COLUMNS])


def _path(topic: Column, partition: Column, segment: Column | None = None) -> Column:
    parts = [topic, F.lit("-"), partition.cast("string")]
    if segment is not None:
        parts += [F.lit("/"), segment]
    return F.concat(*parts)


def _segment_key(cfg: KafkaAuditConfig, role: str) -> Column:
    name = F.concat(F.lpad(F.col("start_offset").cast("string"), 20, "0"), F.lit("-"), F.col("segment_id"))
    if cfg.layout == "s3-plugin":
        base = F.concat(
            F.lit(cfg.prefix),
            F.col("topic"),
            F.lit("-"),
            F.col("topic_id"),
            F.lit("/"),
            F.col("partition").cast("string"),
            F.lit("/"),
            name,
        )
    else:
        base = F.concat(
            F.lit(cfg.prefix),
            F.col("topic"),
            F.lit("-"),
            F.col("partition").cast("string"),
            F.lit("-"),
            F.col("topic_id"),
            F.lit("/"),
            name,
        )
    return F.concat(base, F.lit(f".{role}"))


def _with_segment_and_topic(
    objects: DataFrame, segments: DataFrame, partitions: DataFrame, topics: DataFrame
) -> DataFrame:
    """Each object with its segment's state, its partition's delete state, whether the cluster knows
    its topic id and the live topic of that id."""
    seg = segments.select(
        "topic_id",
        "partition",
        "segment_id",
        F.col("state").alias("seg_state"),
        F.col("state_ms").alias("seg_state_ms"),
    )
    part = partitions.select(
        "topic_id", "partition", F.col("delete_state").alias("part_delete_state")
    ).dropDuplicates(["topic_id", "partition"])
    known_ids = (
        segments.select("topic_id")
        .union(partitions.select("topic_id"))
        .union(topics.filter(F.col("topic_id").isNotNull()).select("topic_id"))
        .distinct()
        .withColumn("topic_known", F.lit(True))
    )
    live_ids = (
        topics.filter(F.col("topic_id").isNotNull())
        .select("topic_id", F.col("topic").alias("live_topic"))
        .dropDuplicates(["topic_id"])
    )
    return (
        objects.join(seg, ["topic_id", "partition", "segment_id"], "left")
        .join(part, ["topic_id", "partition"], "left")
        .join(F.broadcast(known_ids), "topic_id", "left")
        .join(F.broadcast(live_ids), "topic_id", "left")
    )


def _segment_live() -> Column:
    """The object's segment is live (the manager forgets every segment of a partition at
    DELETE_PARTITION_FINISHED)."""
    return F.coalesce(F.col("seg_state").isin(*_LIVE), F.lit(False)) & (
        F.coalesce(F.col("part_delete_state"), F.lit("")) != "DELETE_PARTITION_FINISHED"
    )


def _topic_gone(cfg: KafkaAuditConfig) -> Column:
    return F.lit(cfg.topics_known) & F.col("live_topic").isNull()


def _partition_deleted(cfg: KafkaAuditConfig) -> Column:
    return F.col("part_delete_state").isNotNull() | _topic_gone(cfg)  # both never null


def _object_reason(cfg: KafkaAuditConfig, known: Column) -> Column:
    """Why an object is reported, in words."""
    return (
        F.when(
            ~known,
            "topic id unknown to this cluster (another cluster's data, or a deleted topic's "
            "whose metadata was removed)",
        )
        .when(
            _partition_deleted(cfg) & _topic_gone(cfg),
            "topic deleted: its id is not among the cluster's topics",
        )
        .when(_partition_deleted(cfg), F.concat(F.lit("partition "), F.col("part_delete_state")))
        .when(F.col("seg_state").isNull(), "no segment metadata record names this segment")
        .otherwise("segment is DELETE_SEGMENT_FINISHED in the metadata")
    )


def _object_evidence(blind: int) -> Column:
    return F.struct(
        F.col("reason"),
        F.col("store"),
        F.col("layout"),
        F.col("topic"),
        F.col("topic_id"),
        F.col("partition"),
        F.col("segment_id"),
        F.col("start_offset"),
        F.col("role"),
        F.col("last_modified_ms"),
        F.col("etag"),
        F.col("seg_state").alias("segment_state"),
        F.col("part_delete_state").alias("partition_delete_state"),
        F.col("live_topic").isNotNull().alias("topic_live"),
        F.lit(blind).alias("corrupt_metadata_records"),
    )


def _objects(
    objects: DataFrame,
    segments: DataFrame,
    partitions: DataFrame,
    topics: DataFrame,
    blind: int,
    cfg: KafkaAuditConfig,
) -> DataFrame:
    """Orphan, foreign and deleted-partition objects: one finding per object file."""
    age = age_seconds(cfg.as_of_ms, F.col("last_modified_ms"))
    old = F.coalesce(age >= F.lit(cfg.min_orphan_age_s), F.lit(False))
    known = F.coalesce(F.col("topic_known"), F.lit(False))
    kind = (
        F.when(~old, None)
        .when(~known, "remote_segment_foreign_object")
        .when(_partition_deleted(cfg), "remote_segment_deleted_partition_object")
        .when(~_segment_live(), "remote_segment_orphan_object")
    )
    o = _with_segment_and_topic(objects, segments, partitions, topics)
    o = o.withColumn("_kind", kind).filter(F.col("_kind").isNotNull())
    o = o.withColumn("reason", _object_reason(cfg, known))
    deletable = ~_segment_live() & F.lit(blind == 0)
    severity = severity_by_kind(F.col("_kind"), KAFKA_KINDS)
    action = F.when(
        (F.col("_kind") != "remote_segment_foreign_object") & deletable, "delete_object"
    ).otherwise("investigate")
    return _rows(
        o,
        kind=F.col("_kind"),
        severity=severity,
        action=action,
        evidence=_object_evidence(blind),
        path=_path(F.col("topic"), F.col("partition"), F.col("segment_id")),
        object_key=F.col("key"),
        bytes_=F.col("size"),
        age=age,
    )


def _with_objects_and_topics(
    segments: DataFrame, objects: DataFrame, topics: DataFrame, cfg: KafkaAuditConfig
) -> DataFrame:
    """Each segment with its objects' roles and bytes, its live topic's retention and its missing roles."""
    present = objects.groupBy("topic_id", "partition", "segment_id").agg(
        F.collect_set("role").alias("roles"), F.sum("size").alias("object_bytes")
    )
    t = (
        topics.filter(F.col("topic_id").isNotNull())
        .select("topic_id", "retention_ms", F.lit(True).alias("topic_live"))
        .dropDuplicates(["topic_id"])
    )
    s = segments.join(present, ["topic_id", "partition", "segment_id"], "left").join(
        F.broadcast(t), "topic_id", "left"
    )
    missing = F.filter(
        F.array(*[F.lit(r) for r in REQUIRED_ROLES[cfg.layout]]),
        lambda r: ~F.array_contains(F.coalesce(F.col("roles"), F.array().cast("array<string>")), r),
    )
    return s.withColumn("missing_roles", missing)


def _with_previous_segment(s: DataFrame) -> DataFrame:
    """Each segment with the one before it in its partition and state (by offsets)."""
    w = Window.partitionBy("topic_id", "partition", "state").orderBy(
        "start_offset", "end_offset", "segment_id"
    )
    return s.select(
        *s.columns,
        F.lag("segment_id").over(w).alias("prev_segment"),
        F.lag("end_offset").over(w).alias("prev_end"),
        F.lag("leader_epochs").over(w).alias("prev_epochs"),
    )


def _retention_overdue(cfg: KafkaAuditConfig) -> Column:
    """A finished segment whose newest record is older than its topic's retention and the grace."""
    return (
        (F.col("state") == "COPY_SEGMENT_FINISHED")
        & (F.col("retention_ms") >= 0)
        & (
            F.col("max_timestamp_ms")
            < F.lit(cfg.as_of_ms) - F.col("retention_ms") - F.lit(cfg.retention_grace_s * 1000)
        )
    )


def _overlaps_previous() -> Column:
    """Overlapping finished segments of one partition whose leader-epoch chains differ."""
    return (
        (F.col("state") == "COPY_SEGMENT_FINISHED")
        & F.col("prev_segment").isNotNull()
        & (F.col("start_offset") <= F.col("prev_end"))
        & (F.to_json("leader_epochs") != F.to_json("prev_epochs"))
    )


def _segment_kinds(cfg: KafkaAuditConfig) -> Column:
    """The kinds a segment row is found to be (an array, maybe empty)."""
    state = F.col("state")
    deleted_part = F.col("partition_delete_state").isNotNull() | (
        F.lit(cfg.topics_known) & F.col("topic_live").isNull()
    )
    copy_age = age_seconds(cfg.as_of_ms, F.col("copy_started_ms"))
    delete_age = age_seconds(cfg.as_of_ms, F.col("delete_started_ms"))
    return F.filter(
        F.array(
            F.when(
                (state == "COPY_SEGMENT_FINISHED") & ~deleted_part & (F.size("missing_roles") > 0),
                "remote_segment_missing_object",
            ),
            F.when(
                (state == "COPY_SEGMENT_STARTED") & (copy_age > cfg.stuck_copy_s), "remote_segment_stuck_copy"
            ),
            F.when(
                (state == "DELETE_SEGMENT_STARTED") & (delete_age > cfg.stuck_delete_s),
                "remote_segment_stuck_delete",
            ),
            F.when(_retention_overdue(cfg), "remote_segment_retention_overdue"),
            F.when(_overlaps_previous(), "remote_segment_overlap"),
        ),
        lambda k: k.isNotNull(),
    )


def _segment_evidence(k: Column, cfg: KafkaAuditConfig) -> Column:
    """The evidence of a segment finding of kind ``k``: the segment, and what its kind needs."""
    return F.struct(
        F.col("topic"),
        F.col("topic_id"),
        F.col("partition"),
        F.col("segment_id"),
        F.col("state"),
        F.col("start_offset"),
        F.col("end_offset"),
        F.col("segment_size"),
        F.col("copy_started_ms"),
        F.col("state_ms"),
        F.col("metadata_partition"),
        F.col("metadata_offset"),
        F.col("max_timestamp_ms"),
        F.col("leader_epochs"),
        F.coalesce(F.col("roles"), F.array().cast("array<string>")).alias("present_roles"),
        F.when(k == "remote_segment_missing_object", F.col("missing_roles")).alias("missing_roles"),
        F.when(k == "remote_segment_stuck_copy", F.lit(cfg.stuck_copy_s))
        .when(k == "remote_segment_stuck_delete", F.lit(cfg.stuck_delete_s))
        .alias("threshold_s"),
        F.when(k == "remote_segment_retention_overdue", F.col("retention_ms")).alias("retention_ms"),
        F.when(k == "remote_segment_retention_overdue", F.lit(cfg.retention_grace_s)).alias("grace_s"),
        F.when(k == "remote_segment_overlap", F.col("prev_segment")).alias("overlaps_segment"),
        F.when(k == "remote_segment_overlap", F.col("prev_end")).alias("overlaps_end_offset"),
        F.when(k == "remote_segment_overlap", F.col("prev_epochs")).alias("overlaps_leader_epochs"),
    )


def _segments(segments: DataFrame, objects: DataFrame, topics: DataFrame, cfg: KafkaAuditConfig) -> DataFrame:
    """Missing objects, stuck states and retention, one finding per segment."""
    now = cfg.as_of_ms
    s = _with_previous_segment(_with_objects_and_topics(segments, objects, topics, cfg))
    hit = s.select("*", F.explode(_segment_kinds(cfg)).alias("_kind"))
    k = F.col("_kind")
    return _rows(
        hit,
        kind=k,
        severity=severity_by_kind(k, KAFKA_KINDS),
        action="investigate",
        evidence=_segment_evidence(k, cfg),
        path=_path(F.col("topic"), F.col("partition"), F.col("segment_id")),
        object_key=_segment_key(cfg, "log"),
        bytes_=F.when(
            k.isin("remote_segment_stuck_copy", "remote_segment_stuck_delete"),
            F.coalesce(F.col("object_bytes"), F.lit(0)),
        ).otherwise(F.col("segment_size")),
        age=F.when(k == "remote_segment_stuck_copy", age_seconds(now, F.col("copy_started_ms")))
        .when(k == "remote_segment_stuck_delete", age_seconds(now, F.col("delete_started_ms")))
        .when(k == "remote_segment_retention_overdue", age_seconds(now, F.col("max_timestamp_ms")))
        .otherwise(age_seconds(now, F.col("state_ms"))),
    )


def _events(events: DataFrame, cfg: KafkaAuditConfig) -> DataFrame:
    """Corrupt records (``corrupt_metadata``) and illegal transitions."""
    where = F.concat(
        F.lit(cfg.metadata_topic + "/"),
        F.col("metadata_partition").cast("string"),
        F.lit("@"),
        F.col("metadata_offset").cast("string"),
    )
    ev = F.struct(
        F.col("kind").alias("event"),
        F.lit(cfg.metadata_topic).alias("metadata_topic"),
        F.col("metadata_partition"),
        F.col("metadata_offset"),
        F.col("topic"),
        F.col("topic_id"),
        F.col("partition"),
        F.col("segment_id"),
        F.col("from_state"),
        F.col("to_state"),
        F.col("problem"),
    )
    corrupt = F.col("kind") == "corrupt"
    return _rows(
        events,
        kind=F.when(corrupt, "corrupt_metadata").otherwise("remote_segment_illegal_transition"),
        severity=F.when(corrupt, severity_of("corrupt_metadata"))
        .when(F.col("kind") == "illegal_transition", severity_of("remote_segment_illegal_transition"))
        .otherwise(declared("remote_segment_illegal_transition").other("info")),
        action="investigate",
        evidence=ev,
        path=where,
        age=age_seconds(cfg.as_of_ms, F.col("event_ms")),
    )


def _growth(partitions: DataFrame, events: DataFrame, cfg: KafkaAuditConfig) -> DataFrame:
    """One finding for the whole metadata topic when records per live segment exceed the threshold."""
    totals = partitions.agg(
        F.coalesce(F.sum("records"), F.lit(0)).alias("records"),
        F.coalesce(F.sum("live_segments"), F.lit(0)).alias("live_segments"),
        F.count(F.lit(1)).alias("partitions"),
    ).crossJoin(events.agg(F.count(F.lit(1)).alias("unapplied")))
    total = F.col("records") + F.col("unapplied")
    ratio = total / F.greatest(F.col("live_segments"), F.lit(1))
    grown = totals.filter(
        (total >= F.lit(cfg.growth_min_records)) & (ratio > F.lit(cfg.growth_records_per_segment))
    )
    return _rows(
        grown,
        kind="remote_segment_metadata_growth",
        severity=severity_of("remote_segment_metadata_growth"),
        action="none",
        evidence=F.struct(
            total.alias("records"),
            F.col("live_segments"),
            F.round(ratio, 1).alias("records_per_live_segment"),
            F.col("partitions").alias("user_partitions"),
            F.lit(cfg.growth_records_per_segment).alias("threshold"),
        ),
        path=F.lit(cfg.metadata_topic),
    )


def run_kafka_audit(tables: dict[str, DataFrame], cfg: KafkaAuditConfig) -> DataFrame:
    """Findings (``schemas.FINDINGS`` columns) from the Kafka inventory tables."""
    segments, partitions = tables["remote_segments"], tables["remote_partitions"]
    events, objects, topics = tables["remote_log_events"], tables["remote_objects"], tables["kafka_topics"]
    blind = events.filter(F.col("kind") == "corrupt").count()
    raw = (
        _objects(objects, segments, partitions, topics, blind, cfg)
        .unionByName(_segments(segments, objects, topics, cfg))
        .unionByName(_events(events, cfg))
        .unionByName(_growth(partitions, events, cfg))
    )
    return to_findings(raw)
