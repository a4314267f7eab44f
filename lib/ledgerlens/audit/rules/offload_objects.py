"""``corrupt_offload_object`` and ``foreign_offload_object``: the verified objects against the metadata.

The verification (``ledgerlens.offload.verify``) wrote one ``offload_segments`` row per object with
what it decoded and the checks that need only the object. Here each object meets the managed
ledger that references it (per-ledger layout: ``(uuid, ledger id)``; streaming: the segment
uuid) and the rest of the checks run:

- ``index_ledger``: the index's entry count and length agree with the managed ledger's
  ``LedgerInfo`` (V1); a streaming index names every ledger whose segment it is (V2).
- ``managed_ledger``: the object's user metadata (``ManagedLedgerName``) and the index's embedded
  ``pulsar/managed-ledger`` name the managed ledger that references the object.
- ``uuid``: an object of a ledger whose complete offload context names another uuid, with user
  metadata naming that ledger's managed ledger (Pulsar reads only the context's uuid).

Objects nobody references are never corrupt (they are orphans or foreign). An object whose user
metadata names another Pulsar cluster, or a managed ledger of a tenant the audited cluster does not
own, is foreign. With no audited cluster name known, an object tagged with any cluster name is
neither foreign nor an orphan.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds, raw_finding
from ledgerlens.audit.frames import firsts, renamed
from ledgerlens.audit.materialize import Intermediates
from ledgerlens.offload.verify import RELATIVE_TO_INDEX
from ledgerlens.report.kinds import declared
from ledgerlens.settings.config import AuditConfig

__all__ = ["ObjectVerdicts", "offload_object_rules"]

_CORRUPT = declared("corrupt_offload_object")  # its rows' severity depends on the object (see _corrupt)


def _problem(check: str, detail: Column) -> Column:
    return F.struct(F.lit(check).alias("check"), detail.alias("detail"))


def _ml_tenant(ml: Column) -> Column:
    return F.split(ml, "/").getItem(0)


def _corrupt(
    config: AuditConfig,
    *,
    severity: Column,
    ledger_id: Column,
    managed_ledger: Column,
    problems: Column,
    only_copy: Column,
) -> Column:
    """A ``corrupt_offload_object`` finding of the object row in scope (key, uuid, role, size...)."""
    return raw_finding(
        kind=_CORRUPT.name,
        severity=severity,
        component="offload",
        action="investigate",
        ledger_id=ledger_id,
        managed_ledger=managed_ledger,
        object_key=F.col("key"),
        bytes_=F.col("size"),
        age_seconds=age_seconds(config.as_of_ms, F.col("last_modified_ms")),
        owner_ml=managed_ledger,
        evidence=F.struct(
            "bucket",
            "uuid",
            "role",
            "layout",
            F.array_distinct(F.transform(problems, lambda p: p["check"])).alias("checks_failed"),
            problems.alias("problems"),
            only_copy.alias("only_copy"),
        ),
    )


class ObjectVerdicts:
    """The findings of the verified objects, and the keys never to report as orphans."""

    def __init__(self, findings: DataFrame, not_orphans: DataFrame) -> None:
        self.findings = findings
        self.not_orphans = not_orphans


def _contexts(df: DataFrame, bk_absent: Column) -> DataFrame:
    """The offload contexts of ``df``'s ledgers; ``bk_absent``: BookKeeper no longer holds the ledger."""
    return df.select(
        "managed_ledger",
        "ledger_id",
        "entries",
        "size",
        "offload_uuid",
        # null (the admin API does not show it): complete when the BookKeeper copy is gone (rules.py)
        F.coalesce(
            F.col("offload_complete"), F.col("offload_uuid").isNotNull() & bk_absent, F.lit(False)
        ).alias("complete"),
        (F.coalesce("offload_bookkeeper_deleted", F.lit(False)) | bk_absent).alias("only_copy"),
        "offload_segments",
        F.col("offload_complete").isNull().alias("complete_unknown"),
    )


def offload_contexts(ml_ledgers: DataFrame, bk_ledgers: DataFrame) -> DataFrame:
    """Every ``ml_ledgers`` row as an offload context: ``managed_ledger, ledger_id, entries, size,
    offload_uuid, complete, only_copy, offload_segments`` (``only_copy``: BookKeeper's copy is gone)."""
    present = bk_ledgers.select(F.col("ledger_id").alias("_bk_id")).distinct()
    ml = ml_ledgers.join(present, ml_ledgers["ledger_id"] == present["_bk_id"], "left")
    return _contexts(ml, F.col("_bk_id").isNull())


def offload_contexts_of(offloaded: DataFrame) -> DataFrame:
    """``offload_contexts`` of the audit's offloaded ledgers (``rules.OFFLOAD_ROW`` rows: the managed
    ledgers' ledgers with an offload, already joined with BookKeeper's ledgers by id), without
    reading the inventory again. Only offloaded ledgers matter to :func:`offload_object_rules`."""
    ml = offloaded.select(
        F.col("ref_ml").alias("managed_ledger"),
        "ledger_id",
        *renamed(entries="ref_entries", size="ref_size"),
        "offload_uuid",
        "offload_complete",
        "offload_bookkeeper_deleted",
        "offload_segments",
        "bk_present",
    )
    return _contexts(ml, F.col("bk_present").isNull())


def _verified(segments: DataFrame) -> DataFrame:
    """The verified objects (``offload_segments`` rows without error) with the columns judged here."""
    return segments.filter(F.col("error").isNull()).select(
        "key",
        "uuid",
        F.col("ledger_id").alias("key_ledger_id"),
        "role",
        "layout",
        "size",
        "last_modified_ms",
        "bucket",
        F.col("managed_ledger").alias("meta_ml"),
        "cluster_name",
        "index_version",
        "ledgers",
        F.coalesce("problems", F.array()).alias("problems"),
    )


def _referencing(
    contexts: DataFrame, uuid: Column, key_ledger_id: Column, layout: str, complete: Column | str
) -> DataFrame:
    """``contexts`` as references to the objects of one ``layout`` (``uuid``, ``key_ledger_id``: the
    object's), with the referencing ledger's ``ref_*`` columns, ``complete`` and ``only_copy``."""
    return contexts.select(
        uuid.alias("uuid"),
        key_ledger_id.alias("key_ledger_id"),
        F.lit(layout).alias("layout"),
        *renamed(ref_ledger_id="ledger_id", ref_ml="managed_ledger", ref_entries="entries", ref_size="size"),
        complete,
        "only_copy",
    )


def _references(ml: DataFrame) -> DataFrame:
    """Who references which object: ``(uuid, ledger)`` per ledger, ``uuid`` per streaming segment."""
    offloaded = ml.filter(F.col("offload_uuid").isNotNull())
    per_ledger = _referencing(offloaded, F.col("offload_uuid"), F.col("ledger_id"), "ledger", "complete")
    segments = ml.select("*", F.explode(F.coalesce("offload_segments", F.array())).alias("seg")).filter(
        F.col("seg.uuid").isNotNull()
    )
    streaming = _referencing(
        segments,
        F.col("seg.uuid"),
        F.lit(None).cast("bigint"),
        "streaming",
        F.coalesce(F.col("seg.complete"), F.lit(False)).alias("complete"),
    )
    return per_ledger.unionByName(streaming)


def _context_checks() -> Column:
    """The checks of a referenced object against the managed ledger that references it (an array of
    ``_problem`` structs, null where a check passes)."""
    led = F.filter(F.coalesce("ledgers", F.array()), lambda x: x["ledger_id"] == F.col("ref_ledger_id"))
    one = F.try_element_at(led, F.lit(1))
    is_index = F.col("role") == "index"
    v1 = is_index & (F.col("index_version") == 1)
    v2 = is_index & (F.col("index_version") == 2)
    return F.array(
        F.when(
            v1 & F.col("ref_entries").isNotNull() & (one["entries"] != F.col("ref_entries")),
            _problem(
                "index_ledger",
                F.format_string(
                    "the index covers %d entries, the managed ledger's LedgerInfo says %d",
                    one["entries"],
                    F.col("ref_entries"),
                ),
            ),
        ),
        F.when(
            v1
            & F.col("ref_size").isNotNull()
            & (F.col("ref_size") > 0)
            & (one["length"] != F.col("ref_size")),
            _problem(
                "index_ledger",
                F.format_string(
                    "the index says %d bytes, the managed ledger's LedgerInfo says %d",
                    one["length"],
                    F.col("ref_size"),
                ),
            ),
        ),
        F.when(
            v2 & (F.size(led) == 0),
            _problem(
                "index_ledger",
                F.format_string("the segment index does not name ledger %d", F.col("ref_ledger_id")),
            ),
        ),
        F.when(
            v1 & one["managed_ledger"].isNotNull() & (one["managed_ledger"] != F.col("ref_ml")),
            _problem(
                "managed_ledger",
                F.format_string(
                    "the index's ledger metadata names %s, the object is referenced by %s",
                    one["managed_ledger"],
                    F.col("ref_ml"),
                ),
            ),
        ),
        F.when(
            F.col("meta_ml").isNotNull() & (F.col("meta_ml") != F.col("ref_ml")),
            _problem(
                "managed_ledger",
                F.format_string(
                    "the user metadata names %s, the object is referenced by %s",
                    F.col("meta_ml"),
                    F.col("ref_ml"),
                ),
            ),
        ),
    )


def _referenced_corrupt(joined: DataFrame, config: AuditConfig) -> DataFrame:
    """``corrupt_offload_object`` of the referenced objects of complete offloads: every check."""
    per_key = (
        joined.filter(F.col("ref_ml").isNotNull() & F.col("complete"))
        .select("*", F.filter(_context_checks(), lambda p: p.isNotNull()).alias("ctx_problems"))
        .groupBy("key")
        .agg(
            F.first("problems").alias("problems"),
            F.array_distinct(F.flatten(F.collect_list("ctx_problems"))).alias("ctx_problems"),
            F.min_by(F.struct("ref_ml", "ref_ledger_id"), F.col("ref_ledger_id")).alias("ref"),
            F.max(F.col("only_copy").cast("int")).alias("only_copy"),
            *firsts("uuid", "key_ledger_id", "role", "layout", "size", "bucket", "last_modified_ms"),
        )
        .select("*", F.concat("problems", "ctx_problems").alias("all_problems"))
    )
    # a data object that disagrees with a damaged index is not blamed for it
    suspect = per_key.filter((F.col("role") == "index") & (F.size("all_problems") > 0)).select(
        F.col("uuid").alias("_s_uuid"),
        F.col("key_ledger_id").alias("_s_lid"),
        F.lit(True).alias("index_suspect"),
    )
    per_key = per_key.join(
        suspect,
        (per_key["uuid"] == suspect["_s_uuid"]) & per_key["key_ledger_id"].eqNullSafe(suspect["_s_lid"]),
        "left",
    )
    relative = F.array(*[F.lit(c) for c in RELATIVE_TO_INDEX])
    referenced = per_key.select(
        *[c for c in per_key.columns if c != "all_problems"],
        F.when(
            (F.col("role") == "data") & F.coalesce("index_suspect", F.lit(False)),
            F.filter("all_problems", lambda p: ~F.array_contains(relative, p["check"])),
        )
        .otherwise(F.col("all_problems"))
        .alias("all_problems"),
    ).filter(F.size("all_problems") > 0)
    return referenced.select(
        _corrupt(
            config,
            # critical when the object is the only copy of its data (BookKeeper's is gone)
            severity=F.when(F.col("only_copy") == 1, F.lit(_CORRUPT.severity)).otherwise(
                F.lit(_CORRUPT.other("warning"))
            ),
            ledger_id=F.col("ref.ref_ledger_id"),
            managed_ledger=F.col("ref.ref_ml"),
            problems=F.col("all_problems"),
            only_copy=F.col("only_copy") == 1,
        ).alias("f")
    ).select("f.*")


def _of_another_uuid(mine: DataFrame, ml: DataFrame) -> DataFrame:
    """The unreferenced objects of this cluster's ledgers whose complete (or maybe complete) offload
    context names another uuid, joined with that context (``ctx_ledger_id``, ``ctx_ml``, ``ctx_uuid``)."""
    # a context whose completion is unknown (admin API) may be complete: an object of another uuid is
    # then never an orphan (corrupt_offload_object, as for a complete one)
    ctx = ml.filter(
        F.col("offload_uuid").isNotNull() & (F.col("complete") | F.col("complete_unknown"))
    ).select(
        F.col("ledger_id").alias("ctx_ledger_id"),
        F.col("managed_ledger").alias("ctx_ml"),
        F.col("offload_uuid").alias("ctx_uuid"),
    )
    return mine.join(
        ctx,
        (mine["layout"] == "ledger")
        & (mine["key_ledger_id"] == ctx["ctx_ledger_id"])
        & (mine["meta_ml"] == ctx["ctx_ml"])
        & (mine["uuid"] != ctx["ctx_uuid"]),
        "inner",
    )


def _uuid_corrupt(mism: DataFrame, config: AuditConfig) -> DataFrame:
    """``corrupt_offload_object`` (a warning: the ``uuid`` check) of each object of another uuid."""
    uuid_problem = _problem(
        "uuid",
        F.format_string(
            "the offload context of ledger %d names uuid %s, this object is of uuid %s",
            F.col("ctx_ledger_id"),
            F.col("ctx_uuid"),
            F.col("uuid"),
        ),
    )
    return mism.select(
        _corrupt(
            config,
            severity=F.lit(_CORRUPT.other("warning")),
            ledger_id=F.col("ctx_ledger_id"),
            managed_ledger=F.col("ctx_ml"),
            problems=F.array(uuid_problem),
            only_copy=F.lit(False),
        ).alias("f")
    ).select("f.*")


def _foreign(
    rest: DataFrame, other_tenant: Column, config: AuditConfig, cluster_name: str | None
) -> DataFrame:
    """``foreign_offload_object`` of ``rest``'s objects of another cluster or an unowned tenant."""
    other_cluster = F.col("other_cluster")
    return (
        rest.filter(other_cluster | other_tenant)
        .select(
            raw_finding(
                kind="foreign_offload_object",
                component="offload",
                action="none",
                ledger_id=F.col("key_ledger_id"),
                managed_ledger=F.col("meta_ml"),
                object_key=F.col("key"),
                bytes_=F.col("size"),
                age_seconds=age_seconds(config.as_of_ms, F.col("last_modified_ms")),
                evidence=F.struct(
                    "bucket",
                    "uuid",
                    "role",
                    "layout",
                    F.when(other_cluster, F.lit("cluster")).otherwise(F.lit("tenant")).alias("reason"),
                    F.col("cluster_name").alias("cluster"),
                    F.lit(cluster_name).cast("string").alias("audited_cluster"),
                    F.when(other_tenant, F.col("meta_tenant")).alias("tenant"),
                ),
            ).alias("f")
        )
        .select("f.*")
    )


def _unreferenced(
    unref: DataFrame, ml: DataFrame, owned_tenants: DataFrame, config: AuditConfig, cluster_name: str | None
) -> ObjectVerdicts:
    """The unreferenced objects: another cluster's (by name), then of another uuid, then of a tenant
    the audited cluster does not own."""
    tagged = F.col("cluster_name").isNotNull()
    if cluster_name is None:
        other_cluster = F.lit(False)
        unknown = tagged
    else:
        other_cluster = tagged & (F.col("cluster_name") != F.lit(cluster_name))
        unknown = F.lit(False)
    unref = unref.select("*", other_cluster.alias("other_cluster"), unknown.alias("unknown_cluster"))
    mism = _of_another_uuid(unref.filter(~F.col("other_cluster") & ~F.col("unknown_cluster")), ml)

    rest = unref.join(mism.select("key"), "key", "left_anti")
    tenants = owned_tenants.select(F.col("tenant").alias("_owned")).distinct()
    rest = rest.select("*", _ml_tenant(F.col("meta_ml")).alias("meta_tenant"))
    rest = rest.join(F.broadcast(tenants), rest["meta_tenant"] == tenants["_owned"], "left")
    other_cluster = F.col("other_cluster")
    unknown = F.col("unknown_cluster")
    other_tenant = ~other_cluster & ~unknown & F.col("meta_ml").isNotNull() & F.col("_owned").isNull()
    not_orphans = (
        mism.select("key")
        .unionByName(rest.filter(other_cluster | other_tenant | unknown).select("key"))
        .distinct()
    )
    findings = _uuid_corrupt(mism, config).unionByName(_foreign(rest, other_tenant, config, cluster_name))
    return ObjectVerdicts(findings, not_orphans)


def offload_object_rules(
    segments: DataFrame,
    contexts: DataFrame,
    owned_tenants: DataFrame,
    config: AuditConfig,
    cluster_name: str | None,
    keep: Intermediates | None = None,
) -> ObjectVerdicts:
    """Findings ``corrupt_offload_object`` / ``foreign_offload_object`` and the non-orphan keys.

    Parameters
    ----------
    segments
        The ``offload_segments`` inventory table.
    contexts
        The managed ledgers' offload contexts (:func:`offload_contexts`, or
        :func:`offload_contexts_of` the audit's offloaded ledgers): which object each references,
        whether the offload completed, whether the BookKeeper copy still exists.
    owned_tenants
        One column ``tenant``: the tenants of the audited cluster.
    cluster_name
        The audited Pulsar cluster; None when unknown (several or no clusters in the store).
    keep
        The audit's intermediates: the objects joined with their references are computed once
        there (the referenced objects' checks and the unreferenced objects' verdicts both read
        them); None keeps the plan lazy.
    """
    s = _verified(segments)
    refs = _references(contexts)
    joined = s.join(
        refs,
        (s["uuid"] == refs["uuid"])
        & (s["layout"] == refs["layout"])
        & (
            (s["key_ledger_id"] == refs["key_ledger_id"])
            | (s["key_ledger_id"].isNull() & refs["key_ledger_id"].isNull())
        ),
        "left",
    ).drop(refs["uuid"], refs["layout"], refs["key_ledger_id"])
    if keep is not None:
        joined = keep.keep(joined, measure=False)
    corrupt_ref = _referenced_corrupt(joined, config)
    unref = joined.filter(F.col("ref_ml").isNull()).select(*s.columns).dropDuplicates(["key"])
    rest = _unreferenced(unref, contexts, owned_tenants, config, cluster_name)
    return ObjectVerdicts(corrupt_ref.unionByName(rest.findings), rest.not_orphans)
