"""Offload segments per topic: each ledger's storage state and the objects under it; bucket totals.

The analysis behind ``notebooks/offload_segments.ipynb``. Spark joins the inventory tables
(``ml_ledgers``, ``bk_ledgers``, ``offload_objects``, ``offload_segments``) with the findings,
filtered to a tenant / namespace / topic first; the small result comes back as pandas for the
figures (``ledgerlens.offload.figures``) and the topic picker widget.

A ledger's storage state, in the order the checks apply:

============================================  =====================================================
``corrupt``                                    an object under it failed verification
``missing``                                    absent from BookKeeper and not offloaded, or offloaded
                                               with an object gone (``missing_ledger``,
                                               ``missing_offload_object``)
``offloaded, deleted from BookKeeper``         offload complete, the BookKeeper copy is gone
``offloaded``                                  offload complete, still in BookKeeper (double-stored)
``offloading``                                 an offload started and not complete
``BookKeeper only``                            never offloaded
============================================  =====================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.formats.names import topic_to_managed_ledger

__all__ = ["LEDGER_COLUMNS", "STATES", "bucket_totals", "topic_ledgers"]

STATES = (
    "BookKeeper only",
    "offloading",
    "offloaded",
    "offloaded, deleted from BookKeeper",
    "missing",
    "corrupt",
)
LEDGER_COLUMNS = (
    "managed_ledger",
    "tenant",
    "namespace",
    "ledger_id",
    "position",
    "is_last",
    "entries",
    "size",
    "ctime_ms",
    "timestamp_ms",
    "offload_uuid",
    "offload_complete",
    "offload_timestamp_ms",
    "in_bookkeeper",
    "state",
    "object_keys",
    "object_bytes",
    "problems",
)
_PLAIN = LEDGER_COLUMNS.index("state")  # the columns before it come straight from the inventory


def _scope(df: DataFrame, tenant: str, namespace: str, topic: str) -> DataFrame:
    """Rows of ``ml_ledgers`` of a tenant, a namespace (``tenant/ns``) or a topic (or ML name)."""
    if topic:
        name = topic if "://" not in topic else topic_to_managed_ledger(topic)
        df = df.filter(F.col("managed_ledger") == name)
    if namespace:
        df = df.filter(F.col("namespace") == namespace)
    if tenant:
        df = df.filter(F.col("tenant") == tenant)
    return df


def _state(findings_kinds: Column) -> Column:
    has = lambda k: F.array_contains(findings_kinds, k)  # noqa: E731
    return (
        F.when(has("corrupt_offload_object"), "corrupt")
        .when(has("missing_ledger") | has("missing_offload_object"), "missing")
        .when(F.col("offload_complete") & ~F.col("in_bookkeeper"), "offloaded, deleted from BookKeeper")
        .when(F.col("offload_complete"), "offloaded")
        .when(F.col("offload_uuid").isNotNull() | (F.size("seg_uuids") > 0), "offloading")
        .otherwise("BookKeeper only")
    )


def topic_ledgers(
    tables: Mapping[str, DataFrame],
    findings: DataFrame,
    *,
    tenant: str = "",
    namespace: str = "",
    topic: str = "",
    limit: int = 200_000,
) -> pd.DataFrame:
    """One row per ledger of the selected managed ledgers (:data:`LEDGER_COLUMNS`), oldest first.

    Parameters
    ----------
    tables
        Inventory tables (``ml_ledgers``, ``bk_ledgers``; ``offload_objects`` and
        ``offload_segments`` when the bucket was scanned).
    findings
        The audit's findings (Spark).
    tenant, namespace, topic
        Filters; ``namespace`` is ``tenant/ns``, ``topic`` a topic name or managed-ledger name.
    limit
        At most this many ledgers are brought back (the oldest of the largest topics first).
    """
    mll = _scope(tables["ml_ledgers"], tenant, namespace, topic)
    bk = tables["bk_ledgers"].select(F.col("ledger_id").alias("_bk"), F.col("ctime_ms"))
    computed = {
        "offload_complete": F.coalesce("offload_complete", F.lit(False)),
        "in_bookkeeper": F.col("_bk").isNotNull() & ~F.coalesce("offload_bookkeeper_deleted", F.lit(False)),
    }
    led = mll.join(bk, mll["ledger_id"] == bk["_bk"], "left").select(
        *[computed[c].alias(c) if c in computed else F.col(c) for c in LEDGER_COLUMNS[:_PLAIN]],
        F.transform(F.coalesce("offload_segments", F.array()), lambda s: s["uuid"]).alias("seg_uuids"),
    )
    kinds = (
        findings.filter(F.col("ledger_id").isNotNull() & F.col("managed_ledger").isNotNull())
        .groupBy(F.col("managed_ledger").alias("_f_ml"), F.col("ledger_id").alias("_f_lid"))
        .agg(
            F.collect_set("kind").alias("kinds"),
            F.collect_list(
                F.when(
                    F.col("kind") == "corrupt_offload_object",
                    F.concat_ws(": ", "object_key", F.get_json_object("evidence", "$.checks_failed")),
                )
            ).alias("problems"),
        )
    )
    led = led.join(
        kinds, (led["managed_ledger"] == kinds["_f_ml"]) & (led["ledger_id"] == kinds["_f_lid"]), "left"
    )
    led = led.select("*", F.coalesce("kinds", F.array()).alias("_kinds"))
    objects = tables.get("offload_objects")
    if objects is not None:
        per = objects.filter(F.col("ledger_id").isNotNull()).select("uuid", "ledger_id", "key", "size")
        grouped = per.groupBy(F.col("uuid").alias("_o_uuid"), F.col("ledger_id").alias("_o_lid")).agg(
            F.sort_array(F.collect_list("key")).alias("pl_keys"), F.sum("size").alias("pl_bytes")
        )
        led = led.join(
            grouped,
            (led["offload_uuid"] == grouped["_o_uuid"]) & (led["ledger_id"] == grouped["_o_lid"]),
            "left",
        )
        streaming = (
            objects.filter(F.col("layout") == "streaming")
            .groupBy(F.col("uuid").alias("_s_uuid"))
            .agg(F.collect_list("key").alias("s_keys"), F.sum("size").alias("s_bytes"))
        )
        exploded = led.select("managed_ledger", "ledger_id", F.explode("seg_uuids").alias("_seg"))
        seg = (
            exploded.join(streaming, exploded["_seg"] == streaming["_s_uuid"])
            .groupBy(F.col("managed_ledger").alias("_x_ml"), F.col("ledger_id").alias("_x_lid"))
            .agg(F.flatten(F.collect_list("s_keys")).alias("st_keys"), F.sum("s_bytes").alias("st_bytes"))
        )
        led = led.join(
            seg, (led["managed_ledger"] == seg["_x_ml"]) & (led["ledger_id"] == seg["_x_lid"]), "left"
        )
        keys = F.concat(F.coalesce("pl_keys", F.array()), F.coalesce("st_keys", F.array()))
        size = F.coalesce("pl_bytes", F.lit(0)) + F.coalesce("st_bytes", F.lit(0))
    else:
        keys = F.array().cast("array<string>")
        size = F.lit(0).cast("bigint")
    out = led.select(
        *LEDGER_COLUMNS[:_PLAIN],
        _state(F.col("_kinds")).alias("state"),
        keys.alias("object_keys"),
        size.cast("bigint").alias("object_bytes"),
        F.filter(F.coalesce("problems", F.array()), lambda p: p.isNotNull()).alias("problems"),
    )
    rows: pd.DataFrame = out.orderBy("managed_ledger", "ledger_id").limit(limit).toPandas()
    return rows.reindex(columns=list(LEDGER_COLUMNS))


def bucket_totals(
    tables: Mapping[str, DataFrame], findings: DataFrame, ledgers: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Bucket-level totals: object bytes and ledgers by the state of the ledgers, orphan bytes,
    bytes still double-stored past the offload deletion lag, foreign and corrupt bytes.

    ``ledgers`` (from :func:`topic_ledgers` over the whole cluster) gives bytes by state; without
    it those come from Spark directly.
    """
    objects = tables.get("offload_objects")
    total_bytes = total_objects = 0
    if objects is not None:
        r = objects.agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("b")).first()
        if r is not None:
            total_objects, total_bytes = int(r["n"] or 0), int(r["b"] or 0)
    by_kind = {
        row["kind"]: (int(row["n"]), int(row["b"] or 0))
        for row in findings.groupBy("kind")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"))
        .collect()
    }

    def kind_bytes(kind: str) -> int:
        return by_kind.get(kind, (0, 0))[1]

    by_state: dict[str, int] = dict.fromkeys(STATES, 0)
    count_by_state: dict[str, int] = dict.fromkeys(STATES, 0)
    if ledgers is None:
        ledgers = topic_ledgers(tables, findings)
    for state, b in ledgers.groupby("state")["object_bytes"].sum().items():
        by_state[str(state)] = int(b)
    for state, n in ledgers.groupby("state").size().items():
        count_by_state[str(state)] = int(n)
    return {
        "objects": total_objects,
        "object_bytes": total_bytes,
        "bytes_by_state": by_state,
        "ledgers_by_state": count_by_state,  # a missing ledger holds no byte: counted here
        "orphan_bytes": kind_bytes("orphan_offload_object"),
        "double_stored_bytes": kind_bytes("offloaded_not_deleted"),
        "foreign_bytes": kind_bytes("foreign_offload_object"),
        "corrupt_bytes": kind_bytes("corrupt_offload_object"),
        "incomplete_bytes": kind_bytes("incomplete_offload"),
    }
