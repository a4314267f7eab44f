"""What the metadata references, and what it cannot see (blind spots).

DataFrame -> DataFrame transforms over the inventory tables (docs/audit-rules.md, "References" and
"Blind spots").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.frames import Look, renamed
from ledgerlens.audit.names import ANY, name_prefixes
from ledgerlens.formats.references import COMPACTED_LEDGER_PROPERTY as COMPACTED_TOPIC_LEDGER
from ledgerlens.formats.references import DELAYED_BUCKET_PREFIX

ML_TAG = "m"  # blind spots of managed ledgers and cursors
SCHEMA_TAG = "s"  # blind spots of schema locators
BUCKET_TAG = "b"  # managed ledgers whose cursors' string properties (delayed-index buckets) are unknown


def cursor_references(cursors: DataFrame) -> DataFrame:
    """Ledgers referenced by cursors: the cursor ledger, the compacted ledger, delayed-index buckets
    (``ledgerlens.formats.references.cursor_references`` over the inventory's cursor columns).

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

    def entry(key: Column, ledger_id: Column) -> Column:  # a map entry's shape: (key, value)
        return F.struct(
            key.cast("string").alias("key"), F.when(ledger_id >= 0, ledger_id.cast("string")).alias("value")
        )

    # One pass over cursors, compiled, no lambda: each cursor's cursor ledger (slot 0), its compacted
    # ledger (slot 1) and its string properties (slots 2 on), exploded with their slot; a slot kept
    # where it holds a ledger id (a property only if its key names a delayed-index bucket). The lambdas
    # of map_filter/transform are evaluated row by row, uncompiled (docs/performance.md, "The cursors'
    # references, compiled").
    entries = F.concat(
        F.array(
            entry(F.lit(None), F.col("cursors_ledger_id")),
            entry(F.lit(COMPACTED_TOPIC_LEDGER), F.col("properties").getItem(COMPACTED_TOPIC_LEDGER)),
        ),
        F.coalesce(
            F.map_entries("cursor_properties"), F.array().cast("array<struct<key:string,value:string>>")
        ),
    )
    slot, key = F.col("slot"), F.col("e.key")
    ledger_id = F.trim(F.col("e.value")).try_cast("bigint")
    component = (
        F.when(slot == 0, "cursor").when(slot == 1, "compacted-ledger").otherwise("delayed-index-bucket")
    )
    return (
        ok.select(*base, F.posexplode(entries).alias("slot", "e"))
        .where((ledger_id >= 0) & ((slot < 2) | key.startswith(DELAYED_BUCKET_PREFIX)))
        .select(
            ledger_id.alias("ledger_id"),
            component.alias("ref_component"),
            "ref_ml",
            "ref_cursor",
            "ref_path",
            "ref_tenant",
            "ref_namespace",
            F.when(slot > 0, key).alias("ref_key"),
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
        *renamed(
            ref_path="path",
            ref_tenant="tenant",
            ref_namespace="namespace",
            ref_schema_id="schema_id",
            ref_schema_version="version",
        ),
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
