"""Shared intermediates of one audit: computed once, read by every rule, released together.

An audit is many rules over the same few derived tables (the BookKeeper join, the blind spots and
owned tenants, the raw findings). Left lazy, they form one plan that Catalyst analyses and
optimizes as a whole and executes once per consumer. Materialized (a local checkpoint: the rows in
Spark's block manager, the lineage cut), each rule's plan starts from a leaf.
"""

from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

__all__ = ["Intermediates", "materialized", "measured", "release", "unmeasure"]


def _blocks(df: DataFrame) -> Any:
    """The checkpointed RDD under a ``localCheckpoint`` DataFrame (a ``LogicalRDD`` leaf)."""
    return df._jdf.queryExecution().analyzed().rdd()


def materialized(df: DataFrame) -> DataFrame:
    """``df`` computed now and kept (local checkpoint); free it with :func:`release`."""
    return df.localCheckpoint(eager=True)


def release(df: DataFrame) -> None:
    """Free the rows of a :func:`materialized` DataFrame (it must not be read afterwards)."""
    _blocks(df).unpersist(False)


def measured(df: DataFrame) -> tuple[DataFrame, int]:
    """``df`` :func:`materialized` and cached with its true size (free it with :func:`unmeasure`),
    and its row count (the count that measures it).

    A local checkpoint carries the size Catalyst estimated for the plan it came from (a join's:
    the product of its sides), so every later join against it shuffles both sides. Cached and
    counted, the same rows report their real size and a small side is broadcast when planned.
    """
    out = materialized(df).persist(StorageLevel.MEMORY_AND_DISK)
    return out, out.count()


def unmeasure(df: DataFrame) -> None:
    """Free a :func:`measured` DataFrame: its cache and its checkpoint."""
    df.unpersist(blocking=False)
    release(df)


class Intermediates:
    """The materialized intermediates of one audit; :meth:`release` frees them all.

    ``enabled=False`` keeps everything lazy (one plan; nothing to release).
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._kept: list[tuple[DataFrame, bool]] = []  # (intermediate, measured)

    def keep(self, df: DataFrame, *, measure: bool = True) -> DataFrame:
        """``df`` materialized now (or ``df`` itself when disabled): :func:`measured` for a table later
        joined (its true size plans the join), else only :func:`materialized`."""
        if not self.enabled:
            return df
        out = measured(df)[0] if measure else materialized(df)
        self._kept.append((out, measure))
        return out

    def counted(self, df: DataFrame) -> tuple[DataFrame, int]:
        """``df`` :func:`materialized` and its row count, counted as the rows are computed (observed:
        no job of its own); enabled only."""
        seen = Observation()
        out = materialized(df.observe(seen, F.count(F.lit(1)).alias("rows")))
        self._kept.append((out, False))
        return out, int(seen.get["rows"])

    def release(self) -> None:
        """Free every kept intermediate."""
        for df, was_measured in self._kept:
            if was_measured:
                unmeasure(df)
            else:
                release(df)
        self._kept.clear()
