"""``inactive_cursor``: long-idle subscriptions holding ledgers back."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds, finding
from ledgerlens.audit.frames import Look
from ledgerlens.audit.rules.common import false_if_null, place_columns
from ledgerlens.settings.config import AuditConfig

IDLE = "idle_cursors"  # the look of idle_cursor_look
IDLE_BROADCAST_ROWS = 100_000
"""Up to this many idle cursors, ``inactive_cursors`` sends them to every task that reads the ledger
lists (a broadcast join) instead of shuffling every ``ml_ledgers`` row to meet them."""


_IDLE_COLUMNS = (  # of an idle cursor, kept into its finding
    "managed_ledger",
    "cursor",
    "path",
    "tenant",
    "namespace",
    "mark_delete_ledger_id",
    "mark_delete_entry_id",
    "last_active_ms",
)


def _idle(config: AuditConfig) -> Column:
    la = F.col("last_active_ms")
    return (
        F.col("error").isNull()
        & (la > 0)
        & (la <= config.as_of_ms - config.inactive_cursor_age_s * 1000)
        & F.col("mark_delete_ledger_id").isNotNull()
    )


def idle_cursors(cursors: DataFrame, config: AuditConfig) -> DataFrame:
    """The cursors inactive for long (``inactive_cursors`` reports those holding ledgers)."""
    return cursors.filter(_idle(config))


def idle_cursor_look(config: AuditConfig) -> Look:
    """The cursors ``inactive_cursors`` reads (look ``idle_cursors``): without one it finds nothing;
    its count chooses the join (``IDLE_BROADCAST_ROWS``)."""
    return Look("cursors", IDLE, _idle(config))


def inactive_cursors(
    cursors: DataFrame, ml_ledgers: DataFrame, config: AuditConfig, idle_rows: int | None = None
) -> DataFrame:
    """``inactive_cursor``: inactive for long and holding ledgers (one row per cursor).

    ``idle_rows``: how many cursors ``idle_cursor_look`` found (None: not counted, then they are not
    broadcast).
    """
    now = config.as_of_ms
    la = F.col("last_active_ms")
    idle = idle_cursors(cursors, config).select(*_IDLE_COLUMNS)
    if idle_rows is not None and idle_rows <= IDLE_BROADCAST_ROWS:
        idle = F.broadcast(idle)
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
        & ~false_if_null(ledgers["h_last"]),
    )
    agg = held.groupBy(*_IDLE_COLUMNS).agg(
        F.count(F.lit(1)).alias("held_ledgers"),
        F.sum("h_size").alias("held_bytes"),
        F.min("h_id").alias("first_held_ledger_id"),
        F.max("h_id").alias("last_held_ledger_id"),
    )
    return finding(
        agg,
        kind="inactive_cursor",
        component="cursor",
        action="investigate",
        **place_columns(bytes_="held_bytes"),
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
