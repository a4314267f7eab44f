"""The physical plan of the ledger rules: the managed ledgers' references joined with BookKeeper's
ledgers by id, in one join or in two phases (the first chooses ledger ids as slots, the second
reads only those rows: ``id_filter``), sized from the inventory."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.frames import renamed
from ledgerlens.audit.id_filter import SLOT_BITS, IdFilter, by_ids, from_slots, id_key
from ledgerlens.audit.materialize import Intermediates
from ledgerlens.audit.rules.common import MB
from ledgerlens.audit.rules.conditions import in_plan, selected
from ledgerlens.audit.rules.retention import ManagedLedgerReferences
from ledgerlens.runtime.spark import interprets
from ledgerlens.settings.config import AuditConfig


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
        *renamed(
            bk_component="component", bk_ml="managed_ledger", bk_cursor="cursor", bk_schema_id="schema_id"
        ),
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
    whose rows the rules' row filter reads (``selected``) are decided first, over
    ``ml_refs.deciding()``: where ledger ids are dense (``dense_ids``), by ``selected_slots``,
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
        slots = selected_slots(bk_ledgers, deciding, config, offload=offload)
        chosen = slots.limit(CANDIDATES_BROADCAST_ROWS + 1).toArrow()
        picked = from_slots(bk_ledgers.sparkSession, chosen, CANDIDATES_BROADCAST_ROWS)
    else:
        joined = join_bookkeeper(bk_ledgers, deciding).filter(selected(config, offload=offload))
        ids, count = keep.counted(id_keys(joined))
        picked = None if count > CANDIDATES_BROADCAST_ROWS else by_ids(ids)
    if picked is None:
        return join_bookkeeper(bk_ledgers, references(None))
    return join_bookkeeper(picked(bk_ledgers), picked(references(picked)))


DENSE_IDS = 16  # ledger ids are dense where BookKeeper's ids fill at least 1/16 of their range


BK_IDS = ("bk_ledgers", "ledger_id")  # the extent the facts job finds for ``dense_ids``


def dense_ids(bk_ledgers: DataFrame, ids: tuple[int, int, int] | None = None) -> bool:
    """Whether BookKeeper's ledger ids fill at least ``1/DENSE_IDS`` of the range between the least
    and the greatest: ledger ids are a counter, so they do unless ledgers from long ago outlive the
    others by far. Then ``selected_slots`` has 4 ids or more in a slot on average. ``ids``: the
    least, the greatest and the count, as the facts job found them; None: one small job finds them."""
    if ids is None:
        row = bk_ledgers.agg(
            F.min("ledger_id").alias("lo"), F.max("ledger_id").alias("hi"), F.count("ledger_id").alias("n")
        ).first()
        ids = (0, 0, 0) if row is None or not row["n"] else (int(row["lo"]), int(row["hi"]), int(row["n"]))
    lo, hi, n = ids
    return n > 0 and (hi - lo + 1) <= n * DENSE_IDS


def selected_slots(
    bk_ledgers: DataFrame, references: DataFrame, config: AuditConfig, *, offload: bool
) -> DataFrame:
    """The ledger ids of the rows of ``join_bookkeeper(bk_ledgers, references)`` that ``selected``
    selects, without the join: one aggregation by slot of 64 ledger ids, whose rows (``slot``, and
    ``chosen``: a slot's mask of selected ids) are the slots with a selected id.

    Each side's rows set their id's bit in the slot's masks: ``present`` (BookKeeper has the id),
    ``referenced``, and one mask for each side's condition of each selection the audit reads
    (``conditions.SELECTIONS``, ``in_plan``). The slot's masks then say which of its ids a joined row
    would select: one side's condition where the other side must be absent and its presence mask is
    unset, both sides' where both must hold, one side's alone where the other may be either. Ledger
    ids are dense (a counter, ``dense_ids``), so a task's rows fill few slots and the aggregation
    shuffles about a slot per 64 ledgers of each task, not a row per ledger as a join does
    (docs/performance.md).
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
    bk_masks: dict[str, Column] = {"present": mask(matchable)}
    ref_masks: dict[str, Column] = {"referenced": mask(matchable)}
    m = {k: F.coalesce(F.col(k), F.lit(0)) for k in ("present", "referenced")}
    chosen: Column | None = None
    for i, s in enumerate(in_plan(offload=offload)):
        # a side's mask: the ids of the slot whose rows meet its condition
        sides = []
        if s.bookkeeper is not None:
            cond = s.bookkeeper(config)
            bk_masks[f"bk{i}"] = mask(matchable & cond if s.other == "present" else cond)
            sides.append(f"bk{i}")
        if s.reference is not None:
            cond = s.reference(config)
            ref_masks[f"ref{i}"] = mask(matchable & cond if s.other == "present" else cond)
            sides.append(f"ref{i}")
        m.update({k: F.coalesce(F.col(k), F.lit(0)) for k in sides})
        if s.other == "present":
            part = m[sides[0]].bitwiseAND(m[sides[1]])
        elif s.other == "absent":  # no row of the other side has the id
            other_side = "referenced" if s.bookkeeper is not None else "present"
            part = m[sides[0]].bitwiseAND(F.bitwise_not(m[other_side]))
        else:
            part = m[sides[0]]
        chosen = part if chosen is None else chosen.bitwiseOR(part)
    assert chosen is not None
    slot = F.shiftright(lid, SLOT_BITS).alias("slot")
    bk = _bookkeeper_side(bk_ledgers).select(slot, *[c.alias(k) for k, c in bk_masks.items()])
    refs = references.withColumn("bk_present", F.lit(None).cast("boolean")).select(
        slot, *[c.alias(k) for k, c in ref_masks.items()]
    )
    masks = [*bk_masks, *ref_masks]
    slots = (
        bk.unionByName(refs, allowMissingColumns=True)
        .groupBy("slot")
        .agg(*[F.bit_or(k).alias(k) for k in masks])
    )
    return slots.select("slot", chosen.alias("chosen")).where(F.col("chosen") != 0)


def id_keys(rows: DataFrame) -> DataFrame:
    """The ledger ids of ``rows`` as ``id_filter.by_ids`` reads them: column ``c_id``."""
    return rows.select(id_key(F.col("ledger_id")).alias("c_id"))
