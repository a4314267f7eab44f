"""What the metadata references, and what it cannot see (blind spots).

DataFrame -> DataFrame transforms over the inventory tables (docs/audit-rules.md, "References" and
"Blind spots").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.frames import Look
from ledgerlens.audit.names import ANY, name_prefixes

DELAYED_BUCKET_PREFIX = "#pulsar.internal.delayed.bucket_"
COMPACTED_TOPIC_LEDGER = "CompactedTopicLedger"

ML_TAG = "m"  # blind spots of managed ledgers and cursors
SCHEMA_TAG = "s"  # blind spots of schema locators
BUCKET_TAG = "b"  # managed ledgers whose cursors' string properties (delayed-index buckets) are unknown


def cursor_references(cursors: DataFrame) -> DataFrame:
    """Ledgers referenced by cursors: the cursor ledger, the compacted ledger, delayed-index buckets.

    Columns: ``ledger_id, ref_component, ref_ml, ref_cursor, ref_path, ref_tenant, ref_namespace,
    ref_key`` (the property key, for compacted and bucket ledgers).
    """
    ok = cursors.filter(F.col("error").isNull())
    base = [
        F.col("managed_ledger").alias("ref_ml"),
        F.col("cursor").alias("ref_cursor"),
        F.col("path").alias("ref_path"),
        F.col("tenant").alias("ref_tenant"),
        F.col("namespace").alias("ref_namespace"),
    ]
    # One pass over cursors: an array of (id, component, key) per cursor, exploded.
    cursor_ledger = F.when(
        F.col("cursors_ledger_id") >= 0,
        F.array(
            F.struct(
                F.col("cursors_ledger_id").alias("id"),
                F.lit("cursor").alias("c"),
                F.lit(None).cast("string").alias("k"),
            )
        ),
    ).otherwise(F.array())
    compacted = F.col("properties").getItem(COMPACTED_TOPIC_LEDGER)
    compacted_ref = F.when(
        compacted >= 0,
        F.array(
            F.struct(
                compacted.alias("id"),
                F.lit("compacted-ledger").alias("c"),
                F.lit(COMPACTED_TOPIC_LEDGER).alias("k"),
            )
        ),
    ).otherwise(F.array())
    # lambdas are evaluated row by row, uncompiled: only for cursors with string properties (few),
    # and the references without an id are dropped after the explosion
    props = F.col("cursor_properties")
    buckets = F.map_filter(props, lambda k, v: k.startswith(DELAYED_BUCKET_PREFIX))
    bucket_refs = F.when(
        F.size(props) > 0,
        F.transform(
            F.map_entries(buckets),
            lambda e: F.struct(
                F.trim(e["value"]).try_cast("bigint").alias("id"),
                F.lit("delayed-index-bucket").alias("c"),
                e["key"].alias("k"),
            ),
        ),
    ).otherwise(F.array())
    refs = F.concat(cursor_ledger, compacted_ref, bucket_refs)
    return (
        ok.select(*base, F.explode(refs).alias("r"))
        .where(F.col("r.id").isNotNull())
        .select(
            F.col("r.id").alias("ledger_id"),
            F.col("r.c").alias("ref_component"),
            "ref_ml",
            "ref_cursor",
            "ref_path",
            "ref_tenant",
            "ref_namespace",
            F.col("r.k").alias("ref_key"),
        )
    )


BUCKET_OWNERS = "bucket_owners"  # the look of bucket_owner_look


def _bucket_start() -> Column:
    """The first ledger of a bucket key's range (``#pulsar.internal.delayed.bucket_<start>_<end>``)."""
    return F.regexp_extract(F.col("bucket_key"), r"^#pulsar\.internal\.delayed\.bucket_(\d+)_(\d+)$", 1)


def _needs_owner() -> Column:
    """A delayed-index bucket snapshot ledger without ``pulsar/delayedIndexTopic`` whose bucket key
    names its range."""
    return F.coalesce(
        (F.col("component") == "delayed-index-bucket")
        & F.col("delayed_topic").isNull()
        & (_bucket_start() != ""),
        F.lit(False),
    )


def bucket_owner_look() -> Look:
    """The ledgers ``with_bucket_owners`` looks up (look ``bucket_owners``): without one, no lookup."""
    return Look("bk_ledgers", BUCKET_OWNERS, _needs_owner())


def with_bucket_owners(bk_ledgers: DataFrame, ml_ledgers: DataFrame) -> DataFrame:
    """``bk_ledgers`` plus ``bucket_owner``: for delayed-index bucket snapshot ledgers that older
    brokers wrote without ``pulsar/delayedIndexTopic``, the managed ledger whose ledger list holds the
    first ledger of the bucket key's range (``..._<start>_<end>``); null when none does.

    Only those few rows are joined (broadcast against one scan of ``ml_ledgers``): no shuffle of the
    big tables. ``bucket_owner_look`` counts them first: without one, leave this out (the audit
    reads a null owner).
    """
    start, need = _bucket_start(), _needs_owner()
    few = bk_ledgers.filter(need).withColumn("_b_start", start.cast("bigint"))
    owners = (
        ml_ledgers.select(F.col("ledger_id").alias("_b_start"), F.col("managed_ledger").alias("bucket_owner"))
        .join(F.broadcast(few.select("_b_start").distinct()), "_b_start")
        .dropDuplicates(["_b_start"])
    )
    found = few.join(F.broadcast(owners), "_b_start", "left").drop("_b_start")
    rest = bk_ledgers.filter(~need).withColumn("bucket_owner", F.lit(None).cast("string"))
    return rest.unionByName(found)


def schema_references(schema_ledgers: DataFrame) -> DataFrame:
    """Ledgers referenced by schema locators (every version)."""
    return schema_ledgers.filter(F.col("error").isNull() & F.col("ledger_id").isNotNull()).select(
        "ledger_id",
        F.lit("schema").alias("ref_component"),
        F.col("path").alias("ref_path"),
        F.col("tenant").alias("ref_tenant"),
        F.col("namespace").alias("ref_namespace"),
        F.col("schema_id").alias("ref_schema_id"),
        F.col("version").alias("ref_schema_version"),
    )


def blind_spot_looks() -> list[Look]:
    """The rows that are blind spots (``spot`` looks; ``audit.facts`` collects their values and
    adds :func:`spots_of`'s entries): the tagged names (or prefixes) whose metadata did not decode.

    ``m:<managed ledger or prefix>`` from managed-ledger and cursor error rows, ``s:<schema id>``
    from schema error rows and from schema rows without a ledger id (the admin API shows schema
    versions, not their ledgers), ``b:<managed ledger>`` from cursor rows whose string properties
    are unknown (``cursor_properties_unknown``: the admin API does not show them; bucket ledgers of that
    managed ledger are not decidable); ``m:`` / ``s:`` (an empty name) hides everything of that
    tag, and ``<tag>:ANY`` is present whenever any blind spot of the tag exists (owner unknown).
    """

    def spots(table: str, name: str, tag: str) -> Look:  # rows that did not decode
        norm = F.coalesce(F.regexp_replace(F.col(name), "/+$", ""), F.lit(""))
        return Look(table, "spot", F.col("error").isNotNull(), F.concat(F.lit(f"{tag}:"), norm))

    def unknown(table: str, where: Column, name: str, tag: str) -> Look:  # read, not fully seen (admin API)
        value = F.concat(F.lit(f"{tag}:"), F.coalesce(F.col(name), F.lit("")))
        return Look(table, "spot", F.col("error").isNull() & where, value)

    return [
        spots("managed_ledgers", "managed_ledger", ML_TAG),
        spots("cursors", "managed_ledger", ML_TAG),
        spots("schema_ledgers", "schema_id", SCHEMA_TAG),
        unknown("schema_ledgers", F.col("ledger_id").isNull(), "schema_id", SCHEMA_TAG),
        unknown(
            "cursors",
            F.coalesce(F.col("cursor_properties_unknown"), F.lit(False)),
            "managed_ledger",
            BUCKET_TAG,
        ),
    ]


def spots_of(collected: Column) -> Column:
    """The ``spots`` column from the collected values of :func:`blind_spot_looks`: plus the
    ``<tag>:ANY`` entries."""
    any_ = F.filter(
        F.array(F.lit(f"{ML_TAG}:{ANY}"), F.lit(f"{SCHEMA_TAG}:{ANY}"), F.lit(f"{BUCKET_TAG}:{ANY}")),
        lambda a: F.exists(collected, lambda s: F.startswith(s, F.substring(a, 1, 2))),
    )
    return F.array_union(collected, any_)


def owner_prefixes(tag: Column | str, owner: Column) -> Column:
    """Tagged prefixes of an owner name, the tag chosen per row (``m`` or ``s``)."""
    if isinstance(tag, str):
        return name_prefixes(owner, tag)
    return F.when(tag == SCHEMA_TAG, name_prefixes(owner, SCHEMA_TAG)).otherwise(name_prefixes(owner, ML_TAG))
