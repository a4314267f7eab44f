"""Rows by ledger id: the second phase of the two-phase join reads only the ids the first chose.

The first phase (``rules.join_candidates``) chooses ledger ids as slots of 64 consecutive ids, each
with a mask of its chosen ids (a null slot: null ids). The second reads, on both sides of the join,
only the rows of those ids. Two filters give the same rows:

- a bitmap (``MASK_SLOTS`` slots at most, one long each, from the least chosen slot), sent to every
  task once: a row is kept where its id's bit is set. One shift and one array read per row;
- a broadcast semi-join by id, for chosen ids spread wider than the bitmap (a reference to a ledger
  id far beyond BookKeeper's): Spark probes a hash map of the ids for every row, slower than the
  bitmap (docs/performance.md, "Counts observed, and the chosen ids as a bitmap").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

__all__ = ["MASK_SLOTS", "NULL_ID", "SLOT_BITS", "IdFilter", "by_ids", "from_slots", "id_key", "ids_of"]

NULL_ID = -(1 << 63)  # a null ledger id, in the semi-join by id
SLOT_BITS = 6  # ledger ids in slots of 64: one bit of a long each
MASK_SLOTS = 1 << 22  # the bitmap's slots at most: 32 MiB, 268M ledger ids

IdFilter = Callable[[DataFrame], DataFrame]
"""The rows of a frame (with a ``ledger_id`` column) whose id was chosen."""


def id_key(ledger_id: Column) -> Column:
    """The id as the semi-join reads it: null as ``NULL_ID``."""
    return F.coalesce(ledger_id, F.lit(NULL_ID))


def by_ids(ids: DataFrame) -> IdFilter:
    """The rows whose id is in ``ids`` (column ``c_id``, null ids as ``NULL_ID``): a broadcast
    semi-join by one long key, not by ``eqNullSafe`` (a two-field key built for every row). A real
    ledger id equal to ``NULL_ID`` would only be read as well: both sides of the join filter the
    same ids alike."""
    ids = F.broadcast(ids)
    return lambda df: df.join(ids, id_key(F.col("ledger_id")) == F.col("c_id"), "left_semi")


def ids_of(slots: pa.Table) -> np.ndarray:
    """The chosen ids of ``slots`` (columns ``slot`` and ``chosen``, a slot's mask), a null slot's
    as ``NULL_ID``, in no order."""
    return _ids(*_valid(slots))


def from_slots(spark: SparkSession, slots: pa.Table, limit: int) -> IdFilter | None:
    """The filter of the ids ``slots`` choose (see ``ids_of``); None where more than ``limit`` are
    chosen (the second phase would read nearly everything: one join is cheaper) or more than
    ``limit`` slots are given (each chooses one id at least)."""
    if slots.num_rows > limit:
        return None
    slot, chosen, nulls = _valid(slots)
    if int(np.bitwise_count(chosen.view(np.uint64)).sum()) + nulls > limit:
        return None
    lo, hi = (int(slot.min()), int(slot.max())) if len(slot) else (0, -1)
    if hi - lo >= MASK_SLOTS:
        ids = pa.array(_ids(slot, chosen, nulls), pa.int64())
        return by_ids(spark.createDataFrame(pa.table({"c_id": ids})))
    masks = np.zeros(hi - lo + 1, np.int64)
    masks[slot - lo] = chosen
    return _bitmap(spark, lo, masks, nulls)


def _valid(slots: pa.Table) -> tuple[np.ndarray, np.ndarray, bool]:
    """(slot, chosen) of the rows of a non-null slot, as int64 arrays, and whether a null slot is
    among ``slots`` (null ids chosen)."""
    valid = slots.filter(slots.column("slot").is_valid())
    slot = valid.column("slot").to_numpy().astype(np.int64)
    nulls = valid.num_rows < slots.num_rows
    return slot, valid.column("chosen").to_numpy().astype(np.int64), nulls


def _ids(slot: np.ndarray, chosen: np.ndarray, nulls: bool) -> np.ndarray:
    """The ids whose bits are set in ``chosen`` (their slots' masks), and ``NULL_ID`` with ``nulls``."""
    bits = np.unpackbits(chosen.astype("<i8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    row, bit = np.nonzero(bits)
    ids = (slot[row] << SLOT_BITS) + bit
    return np.append(ids, NULL_ID) if nulls else ids


def _bitmap(spark: SparkSession, lo: int, masks: np.ndarray, nulls: bool) -> IdFilter:
    """The rows whose id's bit is set in ``masks`` (slot ``lo`` first), and with ``nulls`` those with
    a null id. The masks are one row, broadcast once and read by a cross join's condition."""
    values = pa.ListArray.from_arrays(pa.array([0, len(masks)], pa.int32()), pa.array(masks, pa.int64()))
    frame = F.broadcast(spark.createDataFrame(pa.table({"c_masks": values})))
    lid = F.col("ledger_id")
    slot = F.shiftright(lid, SLOT_BITS) - F.lit(lo)
    bit = F.call_function(
        "shiftright", F.get(F.col("c_masks"), slot.cast("int")), lid.bitwiseAND(63).cast("int")
    ).bitwiseAND(1)
    # outside the bitmap (the int cast of such a slot could wrap into it) and null ids: not chosen
    hit = F.when((slot >= 0) & (slot < len(masks)), bit == 1).otherwise(F.lit(False))
    if nulls:
        hit = hit | lid.isNull()
    return lambda df: df.crossJoin(frame).where(hit).drop("c_masks")
