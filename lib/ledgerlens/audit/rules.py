"""The audit rules of docs/audit-rules.md as DataFrame -> DataFrame transforms.

Each function returns raw findings (``findings.RAW_COLUMNS``). The expensive part is shared: the
managed ledgers' ledger lists are walked once per managed ledger (retention, window functions) and
then joined once with BookKeeper's ledgers by id, together with every other reference (one full
outer join answers orphan, unattributed, missing, open-ledger, retention and the BookKeeper side of
the offload rules).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ledgerlens.audit.findings import age_seconds, explode_findings, finding, raw_finding
from ledgerlens.audit.frames import Look, union_all
from ledgerlens.audit.id_filter import SLOT_BITS, IdFilter, by_ids, from_slots, id_key
from ledgerlens.audit.materialize import Intermediates
from ledgerlens.audit.names import ANY, ml_namespace, topic_to_ml
from ledgerlens.audit.ownership import is_owned, tenant_of_name
from ledgerlens.audit.references import BUCKET_TAG, ML_TAG, SCHEMA_TAG, owner_prefixes
from ledgerlens.config import AuditConfig
from ledgerlens.formats.references import COMPACTION_CURSOR
from ledgerlens.spark import adapts, interprets

MB = 1024 * 1024
_ML = "managed-ledger"
_KNOWN_COMPONENTS = ("managed-ledger", "schema", "compacted-ledger", "delayed-index-bucket")


def _false(c: Column) -> Column:
    return F.coalesce(c, F.lit(False))


def _offload_complete() -> Column:
    """``offload_complete``; where a source could not see it (null while an offload uuid is known:
    the admin API), inferred from BookKeeper: the broker deletes a ledger's BookKeeper copy only
    after its offload completed, so an absent copy means complete, a present one not."""
    return F.coalesce(
        F.col("offload_complete"), F.col("offload_uuid").isNotNull() & F.col("bk_present").isNull()
    )


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
    trimmable = _false((ledger_id < slowest) & ready & (expired | over_size))
    return trimmable, expired, over_size


def _ready_expired(
    is_last: Column, ts: Column, ret_minutes: Column, config: AuditConfig
) -> tuple[Column, Column]:
    """(not the last and old enough, expired) of one ledger of the walk; null where unknown."""
    now = config.as_of_ms
    expired = (ret_minutes >= 0) & (ts + ret_minutes * 60000 < now)
    ready = ~_false(is_last) & (ts > 0) & (ts <= now - config.retention_grace_s * 1000)
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
    fits = _false((pos >= 0) & (pos < 1 << _POS_BITS) & (lid >= 0) & (lid < 1 << _ID_BITS))
    return F.when(fits, pos.cast("long") * (1 << _ID_BITS) + lid), fits


_OFFLOAD_COLUMNS = (  # of an ml_ledgers row, carried into its reference as they are
    "offload_uuid",
    "offload_complete",
    "offload_bookkeeper_deleted",
    "offload_timestamp_ms",
    "offload_bucket",
    "offload_segments",
)
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
            *_OFFLOAD_COLUMNS,
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
        """A superset of ``of()``, exact in the columns ``_selected`` reads: the walked references,
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
        F.coalesce(F.max(F.when(_false(F.col("is_last")), F.col("ledger_id"))), F.max("ledger_id")).alias(
            "last_id"
        ),
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
        _false(first_id < F.coalesce("slowest", "last_id"))
        & (flags.bitwiseAND(2) == 2)
        & ((flags.bitwiseAND(1) == 1) | _false(over_size))
    )
    mixed = ~F.col("ret_mb_lo").eqNullSafe(F.col("ret_mb_hi"))
    return per_ml.select(
        F.col("managed_ledger").alias("w_ml"),
        "n_ledgers",
        "last_id",
        "slowest",
        ((F.col("n_ledgers") >= 2) & (F.col("unknown_cursors") == 0)).alias("eligible"),
        (_false(F.col("odd")) | mixed | _false(first_trimmable)).alias("steps"),
    )


def _may_trim_first(config: AuditConfig) -> tuple[Column, Column]:
    """Of an ``ml_ledgers`` row (with its ``ret_*``): (not the last and old enough, expired), never
    null. ``_trimmable`` of the first step is exactly both where the first's ledger id is below the
    slowest and it is expired or ``over_size``."""
    ready, expired = _ready_expired(F.col("is_last"), F.col("timestamp_ms"), F.col("ret_minutes"), config)
    return _false(ready), _false(expired)


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
        _false(F.col("eligible"))
        & ~_false(F.col("pol_error"))
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
        F.lit(_ML).alias("ref_component"),
        F.col("managed_ledger").alias("ref_ml"),
        F.col("tenant").alias("ref_tenant"),
        F.col("ns").alias("ref_namespace"),
        F.col("size").alias("ref_size"),
        F.col("entries").alias("ref_entries"),
        "is_last",
        "position",
        *_OFFLOAD_COLUMNS,
        F.when(offload, F.coalesce("pol_lag_ms", F.lit(config.default_offload_deletion_lag_ms))).alias(
            "lag_ms"
        ),
        F.when(offload, _false(F.col("pol_error"))).alias("pol_error"),
        overdue.alias("ret_overdue"),
        ret_ev.alias("ret_ev"),
    )


def join_bookkeeper(bk_ledgers: DataFrame, references: DataFrame) -> DataFrame:
    """Full outer join of BookKeeper's ledgers with every reference, on ledger id.

    A ledger referenced twice appears twice; an unreferenced one once with null ``ref_component``;
    a reference to an absent ledger with null ``bk_present``.
    """
    return _bookkeeper_side(bk_ledgers).join(references, "ledger_id", "full_outer")


def _bookkeeper_side(bk_ledgers: DataFrame) -> DataFrame:
    """``bk_ledgers`` with the column names of a ``join_bookkeeper`` row."""
    return bk_ledgers.select(
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
        (F.col("bucket_owner") if "bucket_owner" in bk_ledgers.columns else F.lit(None).cast("string")).alias(
            "bucket_owner"
        ),
        F.col("error").alias("bk_error"),
        F.lit(True).alias("bk_present"),
    )


# BookKeeper's ledgers as Spark sizes them (Parquet bytes): ~500k ledgers. Above it the join runs in
# two phases decided by slot masks (docs/performance.md, "The join in two phases").
TWO_PHASE_BYTES = 16 * MB
CANDIDATES_BROADCAST_ROWS = 2_000_000  # ledger ids the ledger rules read: a long each, about 32 MiB hashed


def _estimated_bytes(df: DataFrame) -> int:
    """The size Catalyst estimates for ``df`` (a Parquet scan: its files' bytes); no job runs."""
    return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())


def is_large(bk_ledgers: DataFrame) -> bool:
    """Whether an audit of ``bk_ledgers`` is large enough that a job saving a scan of every ledger
    pays (``TWO_PHASE_BYTES`` of them, as Catalyst sizes them); no job runs."""
    return not interprets(bk_ledgers.sparkSession) and _estimated_bytes(bk_ledgers) >= TWO_PHASE_BYTES


def join_candidates(
    bk_ledgers: DataFrame,
    ml_refs: ManagedLedgerReferences,
    others: DataFrame,
    config: AuditConfig,
    *,
    offload: bool,
    keep: Intermediates,
    id_range: tuple[int, int, int] | None = None,
) -> DataFrame:
    """``join_bookkeeper`` of every reference (``ml_refs`` and the ``others``), and in a large audit
    only the ledger ids whose rows ``ledger_rules`` reads. ``id_range``: the least and greatest of
    BookKeeper's ledger ids and their count, when the facts job found them (``BK_IDS``).

    Nearly every joined row is a referenced ledger that BookKeeper has and no rule flags. So the ids
    whose rows the rules' row filter reads (``_selected``) are decided first, over
    ``ml_refs.deciding()``: where ledger ids are dense (``dense_ids``), by ``_selected_slots``,
    which aggregates each side's few columns by slot of 64 ids and joins nothing (its few rows
    collected: a bitmap of the chosen ids, ``audit.id_filter``); else by a join of those few columns
    (Catalyst prunes the rest before the shuffle: a tenth of the bytes), its ids kept. Only the rows
    with those ids (null ids included) are then joined whole, both sides filtered at the scan. Every
    row of such an id is joined exactly as in the one join, so the rules see the same rows. Lazy
    audits, audits of fewer than ``TWO_PHASE_BYTES`` of BookKeeper ledgers and audits where more
    than ``CANDIDATES_BROADCAST_ROWS`` ids are selected join once.
    """

    def references(only: IdFilter | None) -> DataFrame:
        return ml_refs.of(only).unionByName(others, allowMissingColumns=True)

    if not keep.enabled or not is_large(bk_ledgers):
        return join_bookkeeper(bk_ledgers, references(None))
    # read by both phases: computed once, the cursors' property maps decoded once (a few rows a cursor)
    others = keep.keep(others, measure=False)
    deciding = ml_refs.deciding().unionByName(others, allowMissingColumns=True)
    picked: IdFilter | None
    if dense_ids(bk_ledgers, id_range):
        # collected (a slot holds one chosen id at least: more slots than the limit, too many ids)
        slots = _selected_slots(bk_ledgers, deciding, config, offload=offload)
        chosen = slots.limit(CANDIDATES_BROADCAST_ROWS + 1).toArrow()
        picked = from_slots(bk_ledgers.sparkSession, chosen, CANDIDATES_BROADCAST_ROWS)
    else:
        joined = join_bookkeeper(bk_ledgers, deciding).filter(_selected(config, offload=offload))
        ids, count = keep.counted(_id_keys(joined))
        picked = None if count > CANDIDATES_BROADCAST_ROWS else by_ids(ids)
    if picked is None:
        return join_bookkeeper(bk_ledgers, references(None))
    return join_bookkeeper(picked(bk_ledgers), picked(references(picked)))


DENSE_IDS = 16  # ledger ids are dense where BookKeeper's ids fill at least 1/16 of their range


BK_IDS = ("bk_ledgers", "ledger_id")  # the extent the facts job finds for ``dense_ids``


def dense_ids(bk_ledgers: DataFrame, ids: tuple[int, int, int] | None = None) -> bool:
    """Whether BookKeeper's ledger ids fill at least ``1/DENSE_IDS`` of the range between the least
    and the greatest: ledger ids are a counter, so they do unless ledgers from long ago outlive the
    others by far. Then ``_selected_slots`` has 4 ids or more in a slot on average. ``ids``: the
    least, the greatest and the count, as the facts job found them; None: one small job finds them."""
    if ids is None:
        row = bk_ledgers.agg(
            F.min("ledger_id").alias("lo"), F.max("ledger_id").alias("hi"), F.count("ledger_id").alias("n")
        ).first()
        ids = (0, 0, 0) if row is None or not row["n"] else (int(row["lo"]), int(row["hi"]), int(row["n"]))
    lo, hi, n = ids
    return n > 0 and (hi - lo + 1) <= n * DENSE_IDS


def _selected_slots(
    bk_ledgers: DataFrame, references: DataFrame, config: AuditConfig, *, offload: bool
) -> DataFrame:
    """The ledger ids of the rows of ``join_bookkeeper(bk_ledgers, references)`` that ``_selected``
    selects, without the join: one aggregation by slot of 64 ledger ids, whose rows (``slot``, and
    ``chosen``: a slot's mask of selected ids) are the slots with a selected id.

    Each side's rows set their id's bit in the slot's masks (present, and the one-sided conditions of
    ``_candidate``); the slot's masks then say which of its ids a joined row would select:
    unreferenced, absent or open too long where both sides' masks meet. Ledger ids are dense (a
    counter, ``dense_ids``), so a task's rows fill few slots and the aggregation shuffles about a
    slot per 64 ledgers of each task, not a row per ledger as a join does (docs/performance.md).
    Null ids match nothing: their rows mark the null slot's bit 0,
    selected where their own side's condition holds.
    """
    lid = F.col("ledger_id")
    bit = F.coalesce(
        F.call_function("shiftleft", F.lit(1).cast("long"), lid.bitwiseAND(63).cast("int")), F.lit(1)
    )

    def mask(cond: Column) -> Column:
        return F.when(cond, bit)

    matchable = lid.isNotNull()
    masks = ("present", "unreferenced", "open", "referenced", "absent", "by_ml", "selected")
    bk = _bookkeeper_side(bk_ledgers).select(
        F.shiftright(lid, SLOT_BITS).alias("slot"),
        mask(matchable).alias("present"),
        mask(_orphan_if_unreferenced(config)).alias("unreferenced"),
        mask(matchable & _open_too_long(config)).alias("open"),
    )
    refs = references.withColumn("bk_present", F.lit(None).cast("boolean")).select(
        F.shiftright(lid, SLOT_BITS).alias("slot"),
        mask(matchable).alias("referenced"),
        mask(_missing_if_absent()).alias("absent"),
        mask(matchable & _overdue_if_open()).alias("by_ml"),
        mask(_reference_selected(offload=offload)).alias("selected"),
    )
    m = {k: F.coalesce(F.col(k), F.lit(0)) for k in masks}
    slots = (
        bk.unionByName(refs, allowMissingColumns=True)
        .groupBy("slot")
        .agg(*[F.bit_or(k).alias(k) for k in masks])
    )
    chosen = (
        m["unreferenced"]
        .bitwiseAND(F.bitwise_not(m["referenced"]))
        .bitwiseOR(m["absent"].bitwiseAND(F.bitwise_not(m["present"])))
        .bitwiseOR(m["open"].bitwiseAND(m["by_ml"]))
        .bitwiseOR(m["selected"])
    )
    return slots.select("slot", chosen.alias("chosen")).where(F.col("chosen") != 0)


def _id_keys(rows: DataFrame) -> DataFrame:
    """The ledger ids of ``rows`` as ``id_filter.by_ids`` reads them: column ``c_id``."""
    return rows.select(id_key(F.col("ledger_id")).alias("c_id"))


# --------------------------------------------------------------------------------------------------
# Ledger rules: one pass over the joined frame
# --------------------------------------------------------------------------------------------------


def _not_hidden(prefixes: Column) -> Column:
    """No prefix is a blind spot (needs the broadcast ``spots`` column).

    Without a blind spot, true before ``prefixes`` is computed: a name's prefixes come from a lambda,
    evaluated row by row, uncompiled (the same truth: nothing overlaps an empty array)."""
    spots = F.col("spots")
    return (F.size(spots) == 0) | ~F.arrays_overlap(prefixes, spots)


# the columns of ``_with_owner_columns``
_OWNER, _TENANT, _OWNED = "lr_owner", "lr_tenant", "lr_owned"
_VISIBLE, _ML_VISIBLE = "lr_visible", "lr_ml_visible"


def _with_owner_columns(rows: DataFrame) -> DataFrame:
    """``rows`` (joined rows with the facts' columns) with the columns the ledger rules read of an
    owner, computed once per row (``ledger_rules`` keeps them with the rows).

    Of an unreferenced ledger: its owner's name, the owner's tenant, whether the tenant is owned and
    whether no blind spot hides the owner; of a managed ledger's overdue reference: whether no blind
    spot hides the managed ledger. Null (owned: false) elsewhere: every rule that reads one also
    requires its row to be such. Written into each rule instead, the owner's name (a topic parsed by
    regular expressions) was planned, compiled and evaluated once per use: ten times in the orphan
    and foreign rules. The owner is a plan step of its own, so what is read of it reads its column.
    """
    comp = F.col("bk_component")
    unreferenced = F.col("ref_component").isNull()
    owner = (
        F.when(comp == _ML, F.col("bk_ml"))
        .when(comp == "compacted-ledger", topic_to_ml(F.col("compacted_topic")))
        .when(
            comp == "delayed-index-bucket",
            # older brokers wrote no topic: the owner found through the bucket key range, else unknown
            F.coalesce(topic_to_ml(F.col("delayed_topic")), F.col("bucket_owner")),
        )
        .when(comp == "schema", F.col("bk_schema_id"))
    )
    rows = rows.select("*", F.when(unreferenced, owner).alias(_OWNER))
    named = F.col(_OWNER)
    prefixes = (
        F.when(
            comp == "delayed-index-bucket",
            # a bucket's owner is also hidden where its cursors' string properties are unknown
            F.concat(owner_prefixes(ML_TAG, named), owner_prefixes(BUCKET_TAG, named)),
        )
        .when(
            comp.isin(*_KNOWN_COMPONENTS),
            owner_prefixes(F.when(comp == "schema", F.lit(SCHEMA_TAG)).otherwise(F.lit(ML_TAG)), named),
        )
        .otherwise(F.array(F.lit(f"{ML_TAG}:{ANY}"), F.lit(f"{SCHEMA_TAG}:{ANY}")))
    )
    overdue = (F.col("ref_component") == _ML) & _false(F.col("ret_overdue"))
    tenant = tenant_of_name(named)
    return rows.select(
        "*",
        tenant.alias(_TENANT),
        is_owned(tenant).alias(_OWNED),
        F.when(unreferenced, _not_hidden(prefixes)).alias(_VISIBLE),
        F.when(overdue, _not_hidden(owner_prefixes(ML_TAG, F.col("ref_ml")))).alias(_ML_VISIBLE),
    )


def _ledger_items(config: AuditConfig) -> list[tuple[Column, Column]]:
    """The ledger rules as (condition on a joined row with ``_with_owner_columns``, raw finding) pairs."""
    now = config.as_of_ms
    unreferenced_old = (
        F.col("ref_component").isNull()
        & _false(F.col("bk_present"))
        & F.col("bk_error").isNull()
        & (F.col("ctime_ms") <= now - config.min_orphan_age_s * 1000)
    )
    comp = F.col("bk_component")
    owner = F.col(_OWNER)
    owner_ml = F.when(comp != "schema", owner)
    tenant = F.col(_TENANT)
    owned = F.col(_OWNED)
    # the columns an orphan and a foreign ledger share: which ledger, whose, how big, how old
    ledger_cols: dict[str, Column] = {
        "component": F.when((comp == _ML) & F.col("bk_cursor").isNotNull(), F.lit("cursor")).otherwise(comp),
        "ledger_id": F.col("ledger_id"),
        "managed_ledger": owner_ml,
        "cursor": F.coalesce("bk_cursor", "delayed_cursor"),
        "path": F.col("bk_path"),
        "bytes_": F.col("length"),
        "tenant": tenant,
        "age_seconds": age_seconds(now, F.col("ctime_ms")),
    }
    orphan = raw_finding(
        kind="orphan_ledger",
        severity="warning",
        action="delete_ledger",
        owner_ml=owner_ml,
        **ledger_cols,
        evidence=F.struct(
            "ctime_ms",
            "length",
            "state",
            "application",
            comp.alias("component"),
            owner.alias("owner"),
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
    foreign = raw_finding(
        kind="foreign_ledger",
        severity="info",
        action="none",
        **ledger_cols,
        evidence=F.struct(
            tenant.alias("tenant"),
            F.when(tenant.isNull(), F.lit("owner unknown"))
            .otherwise(F.lit("tenant in none of the given Pulsar metadata stores"))
            .alias("reason"),
            "ctime_ms",
            "length",
            "state",
            comp.alias("component"),
            owner.alias("owner"),
        ),
    )
    unattributed = raw_finding(
        kind="unattributed_ledger",
        severity="info",
        component=None,
        action="none",
        ledger_id=F.col("ledger_id"),
        path=F.col("bk_path"),
        bytes_=F.col("length"),
        age_seconds=age_seconds(now, F.col("ctime_ms")),
        evidence=F.struct("ctime_ms", "length", "state", "application", comp.alias("component")),
    )
    ref = F.col("ref_component")
    missing = raw_finding(
        kind="missing_ledger",
        severity="critical",
        component=ref,
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
            ref.alias("reference"),
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
    is_ml = ref == _ML
    ml_common: dict[str, Any] = {
        "component": _ML,
        "ledger_id": F.col("ledger_id"),
        "managed_ledger": F.col("ref_ml"),
        "bytes_": F.col("ref_size"),
        "tenant": F.col("ref_tenant"),
        "namespace": F.col("ref_namespace"),
        "age_seconds": age_seconds(now, F.col("ctime_ms")),
        "owner_ml": F.col("ref_ml"),
    }
    open_overdue = raw_finding(
        kind="open_ledger_overdue",
        severity="warning",
        action="investigate",
        evidence=F.struct(
            F.lit("ledger").alias("per"),
            "state",
            "ctime_ms",
            "position",
            F.col("bk_path").alias("ledger_path"),
            F.lit(config.open_ledger_max_age_s).alias("open_ledger_max_age_s"),
        ),
        **ml_common,
    )
    retention = raw_finding(
        kind="retention_overdue",
        severity="warning",
        action="load_topic",
        evidence=F.struct("ret_ev.*", _false(F.col("bk_present")).alias("in_bookkeeper")),
        **ml_common,
    )
    return [
        (
            unreferenced_old & (F.col("application") == "pulsar") & owned & F.col(_VISIBLE),
            orphan,
        ),
        (
            # an unknown owner (null tenant) stays silent while blind spots may hide it, as orphans do
            unreferenced_old
            & (F.col("application") == "pulsar")
            & ~owned
            & (tenant.isNotNull() | F.col(_VISIBLE)),
            foreign,
        ),
        (
            unreferenced_old & (F.col("application").isNull() | (F.col("application") != "pulsar")),
            unattributed,
        ),
        (
            F.col("bk_present").isNull() & ref.isNotNull() & ~(is_ml & _false(_offload_complete())),
            missing,
        ),
        (
            is_ml
            & _false(F.col("is_last"))
            & (F.col("state") == "OPEN")
            & F.col("bk_error").isNull()
            & (F.col("ctime_ms") <= now - config.open_ledger_max_age_s * 1000),
            open_overdue,
        ),
        (
            is_ml & _false(F.col("ret_overdue")) & F.col(_ML_VISIBLE),
            retention,
        ),
    ]


def _is_offloaded() -> Column:
    return (F.col("ref_component") == _ML) & (
        F.col("offload_uuid").isNotNull() | (F.size(F.coalesce("offload_segments", F.array())) > 0)
    )


OFFLOAD_ROW = (
    "ledger_id",
    "ref_ml",
    "ref_tenant",
    "ref_namespace",
    "ref_size",
    "ref_entries",
    *_OFFLOAD_COLUMNS,
    "lag_ms",
    "pol_error",
    "bk_present",
    "length",
    "ctime_ms",
)


def _orphan_if_unreferenced(config: AuditConfig) -> Column:
    """Of a BookKeeper ledger: a candidate where no reference has its id."""
    return F.col("bk_error").isNull() & (
        F.col("ctime_ms") <= config.as_of_ms - config.min_orphan_age_s * 1000
    )


def _missing_if_absent() -> Column:
    """Of a reference: a candidate where BookKeeper has no ledger of its id (``bk_present`` null)."""
    return ~((F.col("ref_component") == _ML) & _false(_offload_complete()))


def _overdue_if_open() -> Column:
    """Of a reference: a candidate where its ledger is ``_open_too_long``."""
    return F.col("ref_component") == _ML


def _open_too_long(config: AuditConfig) -> Column:
    """Of a BookKeeper ledger: a candidate where a managed ledger references it."""
    return (F.col("state") == "OPEN") & (
        F.col("ctime_ms") <= config.as_of_ms - config.open_ledger_max_age_s * 1000
    )


def _reference_selected(*, offload: bool) -> Column:
    """Of a reference: selected whatever BookKeeper has (retention overdue; offloaded)."""
    overdue = (F.col("ref_component") == _ML) & _false(F.col("ret_overdue"))
    return overdue | _is_offloaded() if offload else overdue


def _candidate(config: AuditConfig) -> Column:
    """A joined row some ledger rule may flag: cheap conditions, a superset of ``_ledger_items``'.

    Each condition reads one side of the join and whether the other side matched
    (``_selected_slots`` reads them so, without joining)."""
    ref = F.col("ref_component")
    return (
        (ref.isNull() & _orphan_if_unreferenced(config))
        | (F.col("bk_present").isNull() & ref.isNotNull() & _missing_if_absent())
        | (_overdue_if_open() & _open_too_long(config))
        | _reference_selected(offload=False)
    )


def _selected(config: AuditConfig, *, offload: bool) -> Column:
    """The joined rows ``ledger_rules`` reads: candidates, and with ``offload`` offloaded ledgers."""
    return _candidate(config) | _is_offloaded() if offload else _candidate(config)


def ledger_rules(
    joined: DataFrame,
    facts: DataFrame,
    config: AuditConfig,
    *,
    offload: bool,
    keep: Intermediates,
) -> tuple[DataFrame, DataFrame | None]:
    """``orphan_ledger``, ``unattributed_ledger``, ``missing_ledger``, ``open_ledger_overdue`` and
    ``retention_overdue`` in one pass over ``joined``; with ``offload``, also the offloaded ledgers
    (for ``offload_rules``) from the same pass.

    The big join is filtered to candidate rows (and offloaded ledgers) with cheap conditions; that
    small result is materialized once (``keep``) and both consumers read it, so the join runs once.
    ``facts`` is one row with the ``spots`` (``references.blind_spot_looks``) and ``owned``
    (``ownership.owned_tenants``) columns: ledgers of other tenants are ``foreign_ledger``.
    """
    candidate = _candidate(config)
    offloaded = _is_offloaded()
    # Cheap filter on the big join, then the few rows left are materialized once (``keep``):
    # every rule below reads that small result. Without it, Catalyst pushes each consumer's filter
    # under the shared shuffle and plans the big join once per rule (exchange reuse does not
    # apply).
    # the one-row facts are joined before the rows are kept: every rule's plan is then a filter and a
    # select over the kept rows, not 14 more joins
    step = joined.filter(_selected(config, offload=offload)).crossJoin(F.broadcast(facts))
    # computed here, once per row: in this stage they make its compiled method longer than HotSpot
    # compiles; in a stage of their own they cost as much as they save (docs/performance.md, "The
    # owner of a ledger, computed once")
    step = _with_owner_columns(step)
    # measured (counted: its true size lets the offload joins broadcast it) where nothing else sizes
    # it: not where expressions are interpreted (a tiny audit: the count is a query more than those
    # joins save), nor where adaptive execution re-plans those joins from the rows it shuffled
    spark = step.sparkSession
    step = (
        keep.keep(step, measure=not interprets(spark) and not adapts(spark))
        if keep.enabled
        else step.repartition("ledger_id")
    )
    rows = step.filter(candidate)
    # the finding of each rule where its condition holds, else null; every plan step is analysed as
    # the plan grows, so fewer steps plan faster
    items = [F.when(cond, f) for cond, f in _ledger_items(config)]
    if interprets(rows.sparkSession):  # one step: all the rules' findings as one array
        found = F.array_compact(F.array(*items))
        findings = rows.select(F.explode(found).alias("f")).select("f.*")
    else:  # compiled, one array of every rule's finding outgrows Java's 64 KB method limit
        parts = [rows.select(item.alias("f")) for item in items]
        findings = union_all(parts).filter(F.col("f").isNotNull()).select("f.*")
    if not offload:
        return findings, None
    return findings, step.filter(offloaded).select(*OFFLOAD_ROW)


COMPACTION = "compaction"  # the look of compaction_look
STREAMING = "streaming"  # the looks of streaming_looks


def compaction_look() -> Look:
    """The ``__compaction`` cursors with a cursor ledger (look ``compaction``): without one,
    ``without_compaction_in_flight`` keeps every finding."""
    where = (
        (F.col("cursor") == COMPACTION_CURSOR) & (F.col("cursors_ledger_id") >= 0) & F.col("error").isNull()
    )
    return Look("cursors", COMPACTION, where)


def without_compaction_in_flight(
    findings: DataFrame,
    cursors: DataFrame,
    positions: DataFrame | None = None,
    bk_ledgers: DataFrame | None = None,
) -> DataFrame:
    """Drop compacted-ledger orphans that a ``__compaction`` cursor may still reference.

    The broker keeps the ``CompactedTopicLedger`` property in the mark-delete position, which is
    written to the cursor *ledger* and copied to the cursor znode only when that ledger rolls over
    or the cursor closes. While the ``__compaction`` cursor has a cursor ledger, the live reference
    is the one in that ledger's last entry (``positions``, read from the bookies): a compacted
    ledger at or above it is the live one or a compaction in flight and is not reported; older ones
    are stale (the broker replaces compacted ledgers oldest first). When that entry could not be
    read, the znode's reference stands in: everything newer than it is not reported. A
    ``missing_ledger`` for the znode's reference is dropped when the live reference replaced it, or,
    without that entry, when BookKeeper holds a newer compacted ledger of the same topic
    (``bk_ledgers``): the znode lags behind the cursor ledger by up to a rollover (hours by default),
    and the broker deletes each compacted ledger the next compaction replaces.
    """
    pending = cursors.filter(compaction_look().where).select(
        F.col("managed_ledger").alias("_c_ml"),
        F.col("cursors_ledger_id").alias("_c_lid"),
        F.col("properties").getItem("CompactedTopicLedger").alias("_c_ref"),
    )
    if positions is not None:
        live = positions.filter(
            (F.col("cursor") == COMPACTION_CURSOR) & F.col("error").isNull() & F.col("entry_id").isNotNull()
        ).select(
            F.col("managed_ledger").alias("_p_ml"),
            F.col("compacted_ledger_id").alias("_p_ref"),
        )
        # the entry may come from a newer cursor ledger than the scanned znode named (it rolled over
        # meanwhile and the reader followed it): newer is still the live reference
        pending = pending.join(live, F.col("_c_ml") == F.col("_p_ml"), "left").select(
            "_c_ml",
            # the live reference: the newer of the cursor ledger's and the znode's (ids only grow)
            F.when(
                F.col("_p_ml").isNotNull(),
                F.greatest(F.coalesce("_p_ref", F.lit(-1)), F.coalesce("_c_ref", F.lit(-1))),
            ).alias("_live"),
            "_c_ref",
        )
    else:
        pending = pending.select("_c_ml", F.lit(None).cast("bigint").alias("_live"), "_c_ref")
    if bk_ledgers is not None:
        newest = (
            bk_ledgers.filter((F.col("component") == "compacted-ledger") & F.col("error").isNull())
            .groupBy(topic_to_ml(F.col("compacted_topic")).alias("_n_ml"))
            .agg(F.max("ledger_id").alias("_newest"))
        )
        pending = pending.join(newest, F.col("_c_ml") == F.col("_n_ml"), "left").drop("_n_ml")
    else:
        pending = pending.withColumn("_newest", F.lit(None).cast("bigint"))
    f = findings.alias("f")
    lid = F.col("f.ledger_id")
    mine = (F.col("f.component") == "compacted-ledger") & (F.col("f.managed_ledger") == F.col("_c_ml"))
    orphan = (F.col("f.kind") == "orphan_ledger") & F.when(
        F.col("_live").isNotNull(), lid >= F.col("_live")
    ).otherwise(F.col("_c_ref").isNull() | (lid > F.col("_c_ref")))
    # the znode still names a compacted ledger the live reference replaced (and the broker deleted)
    replaced = (F.col("f.kind") == "missing_ledger") & (lid < F.coalesce(F.col("_live"), F.col("_newest")))
    hidden = mine & (orphan | replaced)
    return f.join(F.broadcast(pending), hidden, "left_anti")


def corrupt_bookie_entries(
    bucket_snapshots: DataFrame | None, positions: DataFrame | None
) -> DataFrame | None:
    """``corrupt_metadata`` for bucket snapshots and cursor-ledger entries that do not decode or fail
    their digest on every bookie (``error_kind = corrupt``); ledger and entry in ledger_id / evidence.

    Unreachable bookies are not findings (the summary counts them); absent snapshot ledgers are
    ``missing_ledger`` through the references.
    """
    parts = []
    for table, df, component, path in (
        ("bucket_snapshots", bucket_snapshots, "delayed-index-bucket", "ledger_path"),
        ("cursor_positions", positions, "cursor", "path"),
    ):
        if df is None:
            continue
        lid = "ledger_id" if table == "bucket_snapshots" else "cursors_ledger_id"
        rows = df.filter(F.col("error_kind") == "corrupt")
        parts.append(
            finding(
                rows,
                kind="corrupt_metadata",
                severity="critical",
                component=component,
                action="investigate",
                ledger_id=F.col(lid),
                managed_ledger=F.col("managed_ledger"),
                cursor=F.col("cursor"),
                path=F.col(path),
                tenant=F.col("tenant"),
                namespace=F.col("namespace"),
                evidence=F.struct(
                    F.lit(table).alias("table"),
                    F.col("error").alias("problem"),
                    F.col(lid).alias("ledger_id"),
                    F.col("error_entry_id").alias("entry_id"),
                    F.col("path").alias("cursor_path"),
                ),
            )
        )
    if not parts:
        return None
    return union_all(parts)


# --------------------------------------------------------------------------------------------------
# Cursors and corrupt metadata
# --------------------------------------------------------------------------------------------------


IDLE = "idle_cursors"  # the look of idle_cursor_look
IDLE_BROADCAST_ROWS = 100_000
"""Up to this many idle cursors, ``inactive_cursors`` sends them to every task that reads the ledger
lists (a broadcast join) instead of shuffling every ``ml_ledgers`` row to meet them."""


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
    idle = idle_cursors(cursors, config).select(
        "managed_ledger",
        "cursor",
        "path",
        "tenant",
        "namespace",
        "mark_delete_ledger_id",
        "mark_delete_entry_id",
        "last_active_ms",
    )
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


_CORRUPT_METADATA = {  # table: component, ledger id, managed ledger, cursor, tenant, namespace columns
    "bk_ledgers": (None, "ledger_id", None, None, None, None),
    "managed_ledgers": (_ML, None, "managed_ledger", None, "tenant", "namespace"),
    "cursors": ("cursor", None, "managed_ledger", "cursor", "tenant", "namespace"),
    "schema_ledgers": ("schema", "ledger_id", None, None, "tenant", "namespace"),
    "namespace_policies": (None, None, None, None, "tenant", "namespace"),
}


def corrupt_looks() -> list[Look]:
    """The rows ``corrupt_metadata`` reports, per table (look ``corrupt:<table>``)."""
    return [Look(t, f"corrupt:{t}", F.col("error").isNotNull()) for t in _CORRUPT_METADATA]


def corrupt_metadata(
    tables: dict[str, DataFrame], present: Callable[[str], bool] | None = None
) -> DataFrame | None:
    """``corrupt_metadata``: every inventory row with ``error``, named by its node.

    ``present``: whether a look of ``corrupt_looks`` found a row (tables without one are left out;
    None when no table has one); None: every table is read.
    """
    parts = []
    for look, (component, lid, ml, cur, tenant, ns) in zip(
        corrupt_looks(), _CORRUPT_METADATA.values(), strict=True
    ):
        if present is not None and not present(look.name):
            continue
        rows = tables[look.table].filter(look.where)

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
                evidence=F.struct(F.lit(look.table).alias("table"), F.col("error").alias("problem")),
            )
        )
    return union_all(parts) if parts else None


# --------------------------------------------------------------------------------------------------
# Offload rules
# --------------------------------------------------------------------------------------------------


def _obj_orphan(o: Column, uuid: Column, ledger_id: Column, config: AuditConfig) -> Column:
    return raw_finding(
        kind="orphan_offload_object",
        severity="warning",
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
    blind-spot check happens there (``ledgerlens.reverify``), not here.
    """
    cut = config.as_of_ms - config.min_orphan_age_s * 1000
    return F.transform(
        F.filter(objects, lambda o: (o["last_modified_ms"] <= cut) & ~_false(o["no_orphan"])),
        lambda o: _obj_orphan(o, uuid, ledger_id, config),
    )


def _missing_object(e: Column, uuid: Column, layout: str, config: AuditConfig) -> Column:
    return raw_finding(
        kind="missing_offload_object",
        severity=F.when(F.col("bk_deleted") | ~F.col("in_bk"), F.lit("critical")).otherwise(F.lit("warning")),
        component="offload",
        action="investigate",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        object_key=e["key"],
        bytes_=F.col("ref_size"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        owner_ml=F.col("ref_ml"),
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
        severity="warning",
        component=_ML,
        action="load_topic",
        ledger_id=F.col("ledger_id"),
        managed_ledger=F.col("ref_ml"),
        bytes_=F.col("length"),
        tenant=F.col("ref_tenant"),
        namespace=F.col("ref_namespace"),
        age_seconds=age_seconds(config.as_of_ms, F.col("ctime_ms")),
        owner_ml=F.col("ref_ml"),
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
    now = config.as_of_ms
    if offload_bucket:
        audited = objects.sparkSession.range(1).select(F.array(F.lit(offload_bucket)).alias("audited"))
    else:
        audited = objects.agg(F.collect_set("bucket").alias("audited"))
    b = F.col("offload_bucket")
    off = offloaded.crossJoin(F.broadcast(audited)).select(
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
        _false(_offload_complete()).alias("complete"),
        _false(F.col("offload_bookkeeper_deleted")).alias("bk_deleted"),
        _false(F.col("bk_present")).alias("in_bk"),
        (b.isNull() | (b == "") | F.array_contains(F.col("audited"), b)).alias("eligible"),
        (
            F.col("offload_timestamp_ms").isNotNull()
            & (F.col("offload_timestamp_ms") + F.col("lag_ms") < now)
            & ~_false(F.col("pol_error"))
        ).alias("due"),
    )
    if not_orphans is not None:
        keep = not_orphans.select("key").distinct().withColumn("no_orphan", F.lit(True))
        objects = objects.join(keep, "key", "left")
    else:
        objects = objects.withColumn("no_orphan", F.lit(None).cast("boolean"))
    obj = F.struct("key", "role", "size", "last_modified_ms", "bucket", "layout", "no_orphan")
    segments = _segments()

    # Per-ledger layout (PIP-17): <uuid>-ledger-<id> and <uuid>-ledger-<id>-index.
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
    pl = off.filter(F.col("offload_uuid").isNotNull() & (F.size(segments) == 0)).select(
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
    checked = F.col("ml_row") & F.col("complete") & F.col("eligible")
    incomplete = raw_finding(
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
            F.col("present_keys").alias("keys"),
            F.col("newest_ms").alias("newest_last_modified_ms"),
            F.lit(config.incomplete_offload_age_s).alias("incomplete_offload_age_s"),
        ),
    )
    per_ledger = explode_findings(
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
                    _false(F.col("ml_row"))
                    & ~F.col("complete")
                    & F.col("objects").isNotNull()
                    & (F.col("newest_ms") <= now - config.incomplete_offload_age_s * 1000),
                    incomplete,
                ),
                F.when(
                    checked & F.col("in_bk") & F.col("due") & (F.size("absent") == 0), _not_deleted(config)
                ),
            ),
        ),
    )

    if not streaming:
        return per_ledger
    # Streaming layout (PIP-76): objects <uuid> and <uuid>-index, shared by the segment's ledgers.
    st_objects = objects.filter(_streaming_object()).groupBy("uuid").agg(F.collect_list(obj).alias("objects"))
    seg = off.filter(F.size(segments) > 0).select(
        "*", F.explode("offload_segments").alias("seg"), F.lit(True).alias("ml_row")
    )
    seg = seg.select("*", F.col("seg.uuid").alias("uuid"))
    sj = seg.join(st_objects, "uuid", "full_outer").crossJoin(F.broadcast(spots))
    uuid = F.col("uuid")
    expected = F.array(_key_role(uuid, "data"), _key_role(F.concat(uuid, F.lit("-index")), "index"))
    present = F.transform(F.coalesce("objects", F.array()), lambda o: o["key"])
    seg_checked = checked & _false(F.col("seg.complete"))
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
    return per_ledger.unionByName(st_orphans).unionByName(st_missing).unionByName(st_not_deleted)
