"""Where the bookies' disk goes: every BookKeeper ledger's bytes in exactly one state.

``disk_usage`` gives each ledger of ``bk_ledgers`` one state, the first that holds in ``STATES``'
order (docs/audit-rules.md, "Disk usage by state"):

1. the state of its finding: ``orphan`` (``orphan_ledger``), ``foreign`` (``foreign_ledger``),
   ``unattributed`` (``unattributed_ledger``), ``offloaded_not_deleted``, ``retention_overdue``, then
   ``inactive_cursor`` (the ledgers an ``inactive_cursor`` finding holds: its managed ledger's ledgers
   from the evidence's ``first_held_ledger_id`` to ``last_held_ledger_id``, the current one excluded,
   as the rule counted them). What a rule decided is not decided again here.
2. ``open``: BookKeeper's metadata says ``OPEN`` or ``IN_RECOVERY`` (an ``open_ledger_overdue``
   ledger too). Its length is 0 until it is closed: the row counts the ledger, with no bytes.
3. ``consumed_in_retention``: a ledger of a managed ledger's list, not the current one, wholly before
   the slowest cursor's mark-delete ledger (every subscription has acknowledged it; with no cursor,
   every ledger before the current one), kept by retention (else the retention rule flagged it).
   A managed ledger with a cursor that does not decode has no consumed ledgers (not known).
4. ``live_unconsumed``: any other ledger of a managed ledger's list.
5. ``other``: everything else: cursor, schema, compacted and delayed-index-bucket ledgers, ledgers
   of other applications and unreferenced ledgers without a finding (younger than the orphan age,
   hidden by a blind spot, or dropped by re-verification), ledgers whose metadata did not decode.

The tenant and namespace are the finding's, else the managed ledger's (its list, else the ledger's
custom metadata: managed ledger, compacted or delayed-index topic, schema id); ``""`` when unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ledgerlens.audit.names import ml_namespace, topic_to_ml
from ledgerlens.inventory import schemas

if TYPE_CHECKING:
    import pandas as pd

STATES: tuple[str, ...] = (
    "orphan",
    "foreign",
    "unattributed",
    "offloaded_not_deleted",
    "retention_overdue",
    "inactive_cursor",
    "open",
    "consumed_in_retention",
    "live_unconsumed",
    "other",
)
"""Every state, in the order of priority: a ledger is in the first that holds."""

FINDING_STATES: Mapping[str, str] = {
    "orphan_ledger": "orphan",
    "foreign_ledger": "foreign",
    "unattributed_ledger": "unattributed",
    "offloaded_not_deleted": "offloaded_not_deleted",
    "retention_overdue": "retention_overdue",
}
"""Finding kinds that name their ledger (``ledger_id``) -> the state they give it."""

COLUMNS = ("tenant", "namespace", "state", "ledgers", "bytes")


def _rank(state: Column) -> Column:
    """The priority of a state column (its index in ``STATES``)."""
    out = F.lit(len(STATES))
    for i, s in reversed(list(enumerate(STATES))):
        out = F.when(state == s, F.lit(i)).otherwise(out)
    return out


def _per_list_ledger(ml_ledgers: DataFrame, cursors: DataFrame, findings: DataFrame) -> DataFrame:
    """Every ``ml_ledgers`` row with ``consumed`` (wholly before the slowest cursor, not current,
    every cursor known) and ``held`` (by an ``inactive_cursor`` finding): one window per managed
    ledger over its ledgers, its cursors and its inactive-cursor findings together (one shuffle).

    The rule holds a suffix of the list (from the mark-delete ledger, the current one excluded), so
    the ledgers its findings name are those between the least ``first_held_ledger_id`` and the
    greatest ``last_held_ledger_id`` of the managed ledger's findings, the current one excluded.
    """
    ok = F.col("error").isNull() & F.col("mark_delete_ledger_id").isNotNull()
    ev = F.col("evidence")
    both = (
        ml_ledgers.select(
            "managed_ledger",
            F.lit(True).alias("is_ledger"),
            "ledger_id",
            F.coalesce(F.col("is_last"), F.lit(False)).alias("last"),
            F.coalesce("namespace", ml_namespace(F.col("managed_ledger"))).alias("ns"),
            "tenant",
        )
        .unionByName(
            cursors.where(F.col("managed_ledger").isNotNull()).select(
                "managed_ledger",
                F.when(ok, F.col("mark_delete_ledger_id")).alias("mdl"),
                F.when(ok, 0).otherwise(1).alias("unknown"),
            ),
            allowMissingColumns=True,
        )
        .unionByName(
            findings.where((F.col("kind") == "inactive_cursor") & F.col("managed_ledger").isNotNull()).select(
                "managed_ledger",
                F.get_json_object(ev, "$.first_held_ledger_id").cast("long").alias("held_lo"),
                F.get_json_object(ev, "$.last_held_ledger_id").cast("long").alias("held_hi"),
            ),
            allowMissingColumns=True,
        )
    )
    w = Window.partitionBy("managed_ledger")
    is_ledger = F.coalesce(F.col("is_ledger"), F.lit(False))
    last_id = F.coalesce(
        F.max(F.when(is_ledger & F.col("last"), F.col("ledger_id"))).over(w),
        F.max(F.when(is_ledger, F.col("ledger_id"))).over(w),
    )
    slowest = F.coalesce(F.min("mdl").over(w), last_id)
    unknown = F.coalesce(F.sum("unknown").over(w), F.lit(0))
    lid, last = F.col("ledger_id"), F.col("last")
    consumed = ~last & (unknown == 0) & F.coalesce(lid < slowest, F.lit(False))
    held = ~last & F.coalesce(lid.between(F.min("held_lo").over(w), F.max("held_hi").over(w)), F.lit(False))
    return both.select("*", consumed.alias("consumed"), held.alias("held")).where(is_ledger)


def _by_ledger(tables: Mapping[str, DataFrame], findings: DataFrame, replicated: bool) -> DataFrame:
    """One row per ``bk_ledgers`` ledger id: its rows' count and bytes, the best state a finding gives
    it (``d``: rank, state, tenant, namespace), its list's verdict (``r``), its metadata's columns.

    The ledger rows, the findings naming a ledger and the managed ledgers' lists are one union
    grouped by ledger id (one shuffle); a ledger id no ``bk_ledgers`` row has is dropped."""
    kind = F.col("kind")
    state = F.lit(None).cast("string")
    for k, s in FINDING_STATES.items():
        state = F.when(kind == k, F.lit(s)).otherwise(state)
    length = F.coalesce(F.col("length"), F.lit(0))
    copies = F.coalesce(F.col("write_quorum"), F.lit(1)).cast("long") if replicated else F.lit(1)
    bk = tables["bk_ledgers"].select(
        "ledger_id",
        F.lit(1).alias("bk_rows"),
        (length * copies).alias("bk_bytes"),
        F.col("state").isin("OPEN", "IN_RECOVERY").alias("bk_open"),
        _metadata_namespace().alias("bk_ns"),
    )
    named = findings.where(kind.isin(*FINDING_STATES) & F.col("ledger_id").isNotNull()).select(
        "ledger_id",
        F.struct(_rank(state).alias("rank"), state.alias("state"), "tenant", "namespace").alias("d"),
    )
    lists = _per_list_ledger(_table(tables, "ml_ledgers"), _table(tables, "cursors"), findings)
    inactive = F.lit("inactive_cursor")
    held = F.struct(
        _rank(inactive).alias("rank"), inactive.alias("state"), "tenant", F.col("ns").alias("namespace")
    )
    listed = lists.select(
        "ledger_id",
        F.when(F.col("held"), held).alias("d"),
        # where two lists name a ledger, not consumed wins
        F.struct((~F.col("consumed")).alias("live"), "ns", "tenant").alias("r"),
    )
    rows = bk.unionByName(named, allowMissingColumns=True).unionByName(listed, allowMissingColumns=True)
    return (
        rows.groupBy("ledger_id")
        .agg(
            F.sum("bk_rows").alias("ledgers"),
            F.sum("bk_bytes").alias("bytes"),
            F.max("bk_open").alias("bk_open"),
            F.max("bk_ns").alias("bk_ns"),
            F.min("d").alias("d"),
            F.max("r").alias("r"),
        )
        .where(F.col("ledgers") > 0)
    )


def _metadata_namespace() -> Column:
    """A ``bk_ledgers`` row's namespace from its custom metadata (managed ledger, topics, schema id)."""
    owner = F.coalesce(
        F.col("managed_ledger"), topic_to_ml(F.col("compacted_topic")), topic_to_ml(F.col("delayed_topic"))
    )
    schema = F.split(F.col("schema_id"), "/")
    by_schema = F.when(F.size(schema) >= 3, F.concat_ws("/", schema.getItem(0), schema.getItem(1)))
    return F.coalesce(ml_namespace(owner), by_schema)


def _table(tables: Mapping[str, DataFrame], name: str) -> DataFrame:
    if name in tables:
        return tables[name]
    first = next(iter(tables.values()))
    return schemas.local_frame(first.sparkSession, schemas.INVENTORY[name], [])


def ledger_states(
    tables: Mapping[str, DataFrame], findings: DataFrame, *, replicated: bool = False
) -> DataFrame:
    """One row per ledger id of ``bk_ledgers``: ``ledger_id``, ``tenant``, ``namespace``, ``state``,
    ``ledgers`` (its rows: 1) and ``bytes`` (its length; times its write quorum with ``replicated``).
    Lazy: nothing runs."""
    g = _by_ledger(tables, findings, replicated)
    decided = F.col("d.state").isNotNull()
    in_list = F.col("r").isNotNull()
    state = (
        F.when(decided, F.col("d.state"))
        .when(_false(F.col("bk_open")), F.lit("open"))
        .when(in_list & ~F.col("r.live"), F.lit("consumed_in_retention"))
        .when(in_list, F.lit("live_unconsumed"))
        .otherwise(F.lit("other"))
    )
    namespace = F.coalesce(F.when(decided, F.col("d.namespace")), F.col("r.ns"), F.col("bk_ns"))
    tenant = F.coalesce(F.when(decided, F.col("d.tenant")), F.col("r.tenant"))
    return g.select(
        "ledger_id",
        F.coalesce(tenant, F.split(namespace, "/").getItem(0), F.lit("")).alias("tenant"),
        F.coalesce(namespace, F.lit("")).alias("namespace"),
        state.alias("state"),
        "ledgers",
        "bytes",
    )


def _false(c: Column) -> Column:
    return F.coalesce(c, F.lit(False))


def disk_usage(
    tables: Mapping[str, DataFrame], findings: DataFrame, *, replicated: bool = False
) -> pd.DataFrame:
    """BookKeeper bytes per (tenant, namespace, state): columns ``COLUMNS``, one row per group with a
    ledger (an ``open`` ledger's bytes may be 0: its length is recorded when it is closed).

    ``tables``: the inventory (``bk_ledgers`` required; ``ml_ledgers`` and ``cursors`` read where
    present); ``findings``: the audit's findings (``schemas.FINDINGS``) whose verdicts are reused.
    Every ledger is in exactly one state, so ``bytes`` sums to the sum of ``bk_ledgers`` lengths (with
    ``replicated``, of each length times its write quorum, 1 where unknown). One action over three
    shuffles (by managed ledger, by ledger id, by namespace and state).
    """
    order = {s: i for i, s in enumerate(STATES)}
    agg = (
        ledger_states(tables, findings, replicated=replicated)
        .groupBy("tenant", "namespace", "state")
        .agg(F.sum("ledgers").alias("ledgers"), F.sum("bytes").alias("bytes"))
    )
    df = cast("pd.DataFrame", agg.toPandas())
    df = df.assign(_o=df["state"].map(order)).sort_values(["tenant", "namespace", "_o"], kind="stable")
    df = df.drop(columns="_o").reset_index(drop=True)
    return df.astype({"ledgers": "int64", "bytes": "int64"})[list(COLUMNS)]


def summary_of_usage(df: pd.DataFrame, *, replicated: bool = False) -> dict[str, object]:
    """``summary.json``'s ``disk_usage``: ``total_bytes``, ``by_state`` (every state with bytes or
    ledgers, in ``STATES``' order), ``ledgers_by_state`` and ``replicated``."""
    by_bytes = df.groupby("state")["bytes"].sum()
    by_count = df.groupby("state")["ledgers"].sum()
    states = [s for s in STATES if s in by_bytes.index] + sorted(set(by_bytes.index) - set(STATES))
    return {
        "total_bytes": int(df["bytes"].sum()),
        "by_state": {s: int(by_bytes[s]) for s in states},
        "ledgers_by_state": {s: int(by_count[s]) for s in states},
        "replicated": replicated,
    }


def write_disk_usage(
    tables: Mapping[str, DataFrame], findings: DataFrame, path: Path, *, replicated: bool = False
) -> dict[str, object] | None:
    """``disk_usage`` written to ``path`` (one Parquet file); ``summary.json``'s ``disk_usage`` back.

    None, and nothing written, without a ``bk_ledgers`` table (nothing scanned BookKeeper)."""
    if "bk_ledgers" not in tables:
        return None
    df = disk_usage(tables, findings, replicated=replicated)
    df.to_parquet(path, index=False)
    return summary_of_usage(df, replicated=replicated)
