"""Managed ledgers' ledger lists with the retention walk: which ledgers a topic still needs, which
it may trim (``retention_overdue``), computed once per managed ledger."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ledgerlens.audit.frames import renamed
from ledgerlens.audit.id_filter import IdFilter
from ledgerlens.audit.materialize import Intermediates
from ledgerlens.audit.names import ml_namespace
from ledgerlens.audit.rules.common import MB, ML_COMPONENT, OFFLOAD_COLUMNS, false_if_null
from ledgerlens.runtime.spark import interprets
from ledgerlens.settings.config import AuditConfig


def policies_by_namespace(policies: DataFrame, config: AuditConfig) -> DataFrame:
    """Namespace -> effective retention and offload deletion lag (``pol_error`` when undecodable)."""
    ns = F.coalesce(F.col("namespace"), F.regexp_extract("path", r"^/admin/policies/(.+)$", 1))
    return policies.select(
        ns.alias("pol_ns"),
        *renamed(
            pol_retention_minutes="retention_minutes",
            pol_retention_mb="retention_mb",
            pol_lag_ms="offload_deletion_lag_ms",
        ),
        F.col("error").isNotNull().alias("pol_error"),
    ).dropDuplicates(["pol_ns"])


def _trimmable(
    ledger_id: Column,
    slowest: Column,
    is_last: Column,
    ts: Column,
    ret_minutes: Column,
    ret_mb: Column,
    size_from_here: Column,
    config: AuditConfig,
) -> tuple[Column, Column, Column]:
    """(trimmable, expired, over_size) of one step of the broker's trimming walk."""
    ready, expired = _ready_expired(is_last, ts, ret_minutes, config)
    over_size = (ret_mb >= 0) & (size_from_here > ret_mb * MB)
    trimmable = false_if_null((ledger_id < slowest) & ready & (expired | over_size))
    return trimmable, expired, over_size


def _ready_expired(
    is_last: Column, ts: Column, ret_minutes: Column, config: AuditConfig
) -> tuple[Column, Column]:
    """(not the last and old enough, expired) of one ledger of the walk; null where unknown."""
    now = config.as_of_ms
    expired = (ret_minutes >= 0) & (ts + ret_minutes * 60000 < now)
    ready = ~false_if_null(is_last) & (ts > 0) & (ts <= now - config.retention_grace_s * 1000)
    return ready, expired


_POS_BITS, _ID_BITS = 20, 43


def _walk_key() -> tuple[Column, Column]:
    """(key, fits): the walk's order (position, then ledger id) as one long, for ``min``.

    A long keeps the aggregation buffers fixed-width (hash aggregation, no sort by managed-ledger
    name): ``position * 2^43 + ledger_id`` orders exactly like the walk wherever the position is
    below 2^20 and the ledger id below 2^43 (ledger ids are a counter; 2^43 is 8.8e12). ``fits`` is
    false elsewhere (also where either is null, which the walk sorts first); such a managed ledger
    is walked in order, whatever its first step.
    """
    pos, lid = F.col("position"), F.col("ledger_id")
    fits = false_if_null((pos >= 0) & (pos < 1 << _POS_BITS) & (lid >= 0) & (lid < 1 << _ID_BITS))
    return F.when(fits, pos.cast("long") * (1 << _ID_BITS) + lid), fits


WALK_BROADCAST_ROWS = 250_000  # managed ledgers to walk: a name and four numbers each, about 25 MiB


class ManagedLedgerReferences:
    """Every ``ml_ledgers`` row as a reference, with the broker's trimming walk already done.

    ``ret_overdue`` marks the ledgers that ``internalTrimLedgers`` would delete (oldest first,
    stopping at the first non-trimmable); ``ret_ev`` carries their evidence.

    The walk trims something only where its first step is trimmable, and that step is known from
    per-managed-ledger aggregates (its row is the minimum of the walk's order; its size from here is
    the managed ledger's whole size). So only those managed ledgers (kept by ``keep``; up to
    ``WALK_BROADCAST_ROWS`` broadcast) are walked in order (their references kept where they are
    read twice, ``deciding``); every other row is a reference with nothing overdue, without
    sorting the whole ledger list by managed-ledger name. Small inventories (expressions
    interpreted) and lazy plans (no ``keep``) walk every managed ledger: one plan, no job to choose.

    ``also_read``: the names (column ``managed_ledger``, few) of more managed ledgers whose rows
    another rule reads; where the walked rows are picked by a broadcast semi-join, those rows are
    picked in the same scan and kept (``also_read_rows``).
    """

    def __init__(
        self,
        ml_ledgers: DataFrame,
        cursors: DataFrame,
        policies: DataFrame,
        config: AuditConfig,
        keep: Intermediates | None = None,
        also_read: DataFrame | None = None,
    ) -> None:
        self._ml_ledgers, self._config, self._keep = ml_ledgers, config, keep
        self._also_rows: DataFrame | None = None
        self._policies = policies_by_namespace(policies, config)
        rows = self._rows(ml_ledgers)
        per_ml = _first_steps(rows, cursors, config)
        good = cursors.where(F.col("error").isNull())
        self._walked: DataFrame | None = None
        if keep is None or not keep.enabled or interprets(per_ml.sparkSession):
            # small or lazy: every managed ledger walked in one plan (fewer jobs than choosing which)
            every = rows.join(per_ml, F.col("managed_ledger").eqNullSafe(F.col("w_ml")), "left")
            self._all = _walk(every, good, config)
            return
        walked, count = keep.counted(per_ml.where("eligible AND steps"))
        few = count <= WALK_BROADCAST_ROWS  # else both sides shuffled
        if few:
            walked = F.broadcast(walked)
        self._names = walked.select("w_ml")
        if few:  # their rows picked at the scan: the policy join then meets those few, not every row
            rows = self._rows(self._picked(ml_ledgers, also_read, keep))
        flagged = rows.join(walked, F.col("managed_ledger").eqNullSafe(F.col("w_ml")), "inner")
        good = good.join(self._names, F.col("managed_ledger") == F.col("w_ml"), "left_semi")
        self._walked = _walk(flagged, good, config)  # kept by ``deciding``, for a second reading

    def _picked(self, ml_ledgers: DataFrame, also_read: DataFrame | None, keep: Intermediates) -> DataFrame:
        """The rows of the walked managed ledgers; with ``also_read``, picked in one scan with theirs
        and kept (``also_read_rows``: the inactive-cursor rule's, a second scan of every row saved)."""

        def of(rows: DataFrame, names: DataFrame) -> DataFrame:
            return rows.join(names, F.col("managed_ledger").eqNullSafe(F.col("w_ml")), "left_semi")

        if also_read is None:
            return of(ml_ledgers, self._names)
        also = also_read.select(F.col("managed_ledger").alias("w_ml"))
        picked = keep.keep(of(ml_ledgers, F.broadcast(self._names.unionByName(also))), measure=False)
        # as they are: the reader joins them by name, so the walked ones among them are no matter
        # (narrowed again to ``also``'s names, the cursors behind them would be read once more)
        self._also_rows = picked
        return of(picked, self._names)

    def also_read_rows(self) -> DataFrame | None:
        """The ``ml_ledgers`` rows of the ``also_read`` managed ledgers (at least), when kept."""
        return self._also_rows

    def _rows(self, ml_ledgers: DataFrame) -> DataFrame:
        """``ml_ledgers`` with their namespace's retention (``ret_*``) and policy columns."""
        config = self._config
        mll = ml_ledgers.select(
            "managed_ledger",
            "tenant",
            F.coalesce("namespace", ml_namespace(F.col("managed_ledger"))).alias("ns"),
            "ledger_id",
            "position",
            "is_last",
            "size",
            "entries",
            "timestamp_ms",
            *OFFLOAD_COLUMNS,
        )
        return mll.join(F.broadcast(self._policies), F.col("ns") == F.col("pol_ns"), "left").select(
            "*",
            F.coalesce("pol_retention_minutes", F.lit(config.default_retention_minutes)).alias("ret_minutes"),
            F.coalesce("pol_retention_mb", F.lit(config.default_retention_mb)).alias("ret_mb"),
        )

    def of(self, only: IdFilter | None = None) -> DataFrame:
        """The references. ``only`` (of the chosen ledger ids): at least the references to those
        ids, the rows not walked read only for them (filtered at the scan, where Catalyst would
        not push a semi-join down through the policy join)."""
        if self._walked is None:
            return self._all
        ml = self._ml_ledgers
        if only is not None:
            ml = only(ml)
        rest = self._rows(ml).join(
            self._names, F.col("managed_ledger").eqNullSafe(F.col("w_ml")), "left_anti"
        )
        return self._walked.unionByName(self._not_overdue(rest))

    def deciding(self) -> DataFrame:
        """A superset of ``of()``, exact in the columns ``selected`` reads: the walked references,
        and every ``ml_ledgers`` row as a reference with nothing overdue (the walked ones twice).

        Without the anti-join by name, and with the policy columns unread (the policy join is then
        left out: one row per namespace), Catalyst reads only those few columns of ``ml_ledgers``.
        Large audits only (``join_candidates``), which read ``of`` afterwards: the walked references
        are kept here, so they are computed once and ties in the walk's order resolve the same way
        in both readings.
        """
        assert self._walked is not None and self._keep is not None
        self._walked = self._keep.keep(self._walked, measure=False)
        return self._walked.unionByName(self._not_overdue(self._rows(self._ml_ledgers)))

    def _not_overdue(self, rows: DataFrame) -> DataFrame:
        """``rows`` (of ``_rows``) as references with nothing overdue (large audits)."""
        assert self._walked is not None
        ev = F.lit(None).cast(self._walked.schema["ret_ev"].dataType)
        return _reference(rows, self._config, F.lit(False), ev)


def _first_steps(rows: DataFrame, cursors: DataFrame, config: AuditConfig) -> DataFrame:
    """Per managed ledger (``w_ml``): ledger count, last ledger, slowest cursor, whether the walk may
    trim (``eligible``) and whether its first step is trimmable or unknown (``steps``).

    One aggregation over its ledgers and its cursors together (a union, no join). The first step is
    the least of the walk's order (``_walk_key``: its ledger id is the key's low bits), its size from
    here the whole size; what else decides it is read from each row before the aggregation: whether
    the row is ready and expired (``_may_trim_first``), one ``min_by`` of two bits. The retention
    size is the managed ledger's namespace's: where its rows disagree, the managed ledger is walked.
    """
    size = F.coalesce("size", F.lit(0))
    key, fits = _walk_key()
    mdl = F.col("mark_delete_ledger_id")
    ledger = F.col("is_ledger")
    ready, expired = _may_trim_first(config)
    both = rows.select(
        "managed_ledger",
        F.lit(True).alias("is_ledger"),
        "ledger_id",
        "is_last",
        "ret_mb",
        size.alias("size"),
        key.alias("key"),
        (~fits).alias("odd"),
        (F.when(ready, 2).otherwise(0) + F.when(expired, 1).otherwise(0)).alias("flags"),
        F.lit(None).cast("long").alias("mdl"),
        F.lit(0).alias("unknown"),
    ).unionByName(
        cursors.where(F.col("managed_ledger").isNotNull()).select(
            "managed_ledger",
            F.lit(False).alias("is_ledger"),
            F.when(F.col("error").isNull(), mdl).alias("mdl"),
            F.when(F.col("error").isNotNull() | mdl.isNull(), 1).otherwise(0).alias("unknown"),
        ),
        allowMissingColumns=True,
    )
    per_ml = both.groupBy("managed_ledger").agg(
        F.count(F.when(ledger, 1)).alias("n_ledgers"),
        F.coalesce(
            F.max(F.when(false_if_null(F.col("is_last")), F.col("ledger_id"))), F.max("ledger_id")
        ).alias("last_id"),
        F.sum("size").alias("ml_size"),
        F.max("odd").alias("odd"),
        F.min("mdl").alias("slowest"),
        F.sum("unknown").alias("unknown_cursors"),
        F.min("key").alias("first_key"),
        F.min_by("flags", F.col("key")).alias("first_flags"),
        F.min("ret_mb").alias("ret_mb_lo"),
        F.max("ret_mb").alias("ret_mb_hi"),
    )
    first_id = F.col("first_key").bitwiseAND((1 << _ID_BITS) - 1)
    flags, ret_mb = F.col("first_flags"), F.col("ret_mb_lo")
    over_size = (ret_mb >= 0) & (F.col("ml_size") > ret_mb * MB)
    first_trimmable = (
        false_if_null(first_id < F.coalesce("slowest", "last_id"))
        & (flags.bitwiseAND(2) == 2)
        & ((flags.bitwiseAND(1) == 1) | false_if_null(over_size))
    )
    mixed = ~F.col("ret_mb_lo").eqNullSafe(F.col("ret_mb_hi"))
    return per_ml.select(
        F.col("managed_ledger").alias("w_ml"),
        "n_ledgers",
        "last_id",
        "slowest",
        ((F.col("n_ledgers") >= 2) & (F.col("unknown_cursors") == 0)).alias("eligible"),
        (false_if_null(F.col("odd")) | mixed | false_if_null(first_trimmable)).alias("steps"),
    )


def _may_trim_first(config: AuditConfig) -> tuple[Column, Column]:
    """Of an ``ml_ledgers`` row (with its ``ret_*``): (not the last and old enough, expired), never
    null. ``_trimmable`` of the first step is exactly both where the first's ledger id is below the
    slowest and it is expired or ``over_size``."""
    ready, expired = _ready_expired(F.col("is_last"), F.col("timestamp_ms"), F.col("ret_minutes"), config)
    return false_if_null(ready), false_if_null(expired)


def _walk(rows: DataFrame, cursors: DataFrame, config: AuditConfig) -> DataFrame:
    """The trimming walk over whole managed ledgers' ``rows`` (with their per-managed-ledger columns);
    ``cursors``: their readable cursors, for the name of the slowest."""
    slowest_cursor = cursors.groupBy(F.col("managed_ledger").alias("s_ml")).agg(
        F.min_by("cursor", F.col("mark_delete_ledger_id")).alias("slowest_cursor")
    )
    w = rows.join(slowest_cursor, F.col("managed_ledger") == F.col("s_ml"), "left")
    order = Window.partitionBy("managed_ledger").orderBy(F.col("position").asc_nulls_first(), "ledger_id")
    whole = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    size = F.coalesce("size", F.lit(0))
    w = w.select(
        "*",
        (F.sum(size).over(whole) - F.sum(size).over(upto) + size).alias("size_from_here"),
        F.row_number().over(order).alias("walk"),
    )
    slowest = F.coalesce("slowest", "last_id")
    trimmable, expired, over_size = _trimmable(
        F.col("ledger_id"),
        slowest,
        F.col("is_last"),
        F.col("timestamp_ms"),
        F.col("ret_minutes"),
        F.col("ret_mb"),
        F.col("size_from_here"),
        config,
    )
    w = w.select("*", trimmable.alias("trimmable"), expired.alias("expired"), over_size.alias("over_size"))
    stop = F.min(F.when(~F.col("trimmable"), F.col("walk"))).over(whole)
    overdue = (
        false_if_null(F.col("eligible"))
        & ~false_if_null(F.col("pol_error"))
        & (F.col("walk") < F.coalesce(stop, F.lit(1 << 62)))
    )
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
    return _reference(w, config, overdue, F.when(overdue, ret_ev))


def _reference(rows: DataFrame, config: AuditConfig, overdue: Column, ret_ev: Column) -> DataFrame:
    """``ml_ledgers`` rows (with their policy) as references, with their retention verdict."""
    offload = F.col("offload_uuid").isNotNull() | (F.size(F.coalesce("offload_segments", F.array())) > 0)
    return rows.select(
        "ledger_id",
        F.lit(ML_COMPONENT).alias("ref_component"),
        *renamed(
            ref_ml="managed_ledger",
            ref_tenant="tenant",
            ref_namespace="ns",
            ref_size="size",
            ref_entries="entries",
        ),
        "is_last",
        "position",
        *OFFLOAD_COLUMNS,
        F.when(offload, F.coalesce("pol_lag_ms", F.lit(config.default_offload_deletion_lag_ms))).alias(
            "lag_ms"
        ),
        F.when(offload, false_if_null(F.col("pol_error"))).alias("pol_error"),
        overdue.alias("ret_overdue"),
        ret_ev.alias("ret_ev"),
    )
