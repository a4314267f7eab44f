"""The audit's facts: what one small job learns about the inventory before the rules run.

The blind spots (``references.blind_spot_looks``), the owned tenants (``ownership.owned_tenants``), and
for every other look (``frames.Look``) how many rows it found: the audit looks for the rows a rule
that only some clusters need would read (without one, that rule's plan is left out, its findings
being provably none), the pipeline for its plausibility and undecidable counts. Every look of a
table is read in one pass (each row tagged with the looks it matches), all tables in one
aggregate. The rules read the facts back as a one-row local table: its size is exact, so Spark
broadcasts it, and no intermediate is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledgerlens.audit.frames import Look, union_all
from ledgerlens.audit.ownership import OWNED, owned_of
from ledgerlens.audit.references import spots_of
from ledgerlens.inventory import schemas

__all__ = ["FACTS", "SPOT", "TENANT", "Facts", "collect_facts"]

SPOT, TENANT = "spot", "tenant"  # the looks whose values are collected (blind spots, tenants)

FACTS = T.StructType(
    [
        T.StructField("spots", T.ArrayType(T.StringType(), True), True),
        T.StructField(OWNED, T.ArrayType(T.StringType(), True), True),
    ]
)
"""The one row the rules read: ``spots`` (tagged blind spots) and ``owned`` (sorted tenants)."""


@dataclass(frozen=True)
class Facts:
    """The collected facts of one inventory."""

    spots: tuple[str, ...]
    owned: tuple[str, ...]
    counts: Mapping[str, int] = field(default_factory=dict)
    """Rows found per look (distinct values for a look with a value), by look name."""
    extents: Mapping[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    """Of each ``(table, column)`` asked for: its least and greatest value and how many are not null
    (0, 0, 0 when none is)."""

    def has(self, look: str) -> bool:
        """Whether ``look`` found a row (True when it was not counted)."""
        return self.counts.get(look, 1) > 0

    def frame(self, spark: SparkSession) -> DataFrame:
        """The facts as the one-row ``FACTS`` table the rules join."""
        return schemas.local_frame(spark, FACTS, [{"spots": list(self.spots), OWNED: list(self.owned)}])


def collect_facts(
    tables: Mapping[str, DataFrame],
    looks: Sequence[Look],
    deleted_tenants: Iterable[str] = (),
    extents: Sequence[tuple[str, str]] = (),
) -> Facts:
    """The facts of ``tables`` (the audit's inputs) in one job: ``SPOT`` and ``TENANT`` looks give the
    blind spots and the owned tenants (with ``deleted_tenants``), every other look its count, and
    each ``(table, column)`` of ``extents`` (a numeric column of a table in ``tables``) its least and
    greatest value and count (``Facts.extents``).
    Looks at a table absent from ``tables`` find nothing; at least one table must be looked at."""
    none = F.lit(None).cast("string")
    by_table: dict[str, list[Look]] = {}
    for look in looks:
        if look.table in tables:
            by_table.setdefault(look.table, []).append(look)
    parts = []
    for table, mine in by_table.items():
        tags = F.array(
            *[
                F.when(
                    k.where,
                    F.struct(F.lit(k.name).alias("k"), (none if k.value is None else k.value).alias("v")),
                )
                for k in mine
            ]
        )
        # exploded, then the nulls dropped: a filter with a lambda is evaluated row by row,
        # uncompiled (docs/performance.md, "The join in two phases")
        parts.append(tables[table].select(F.explode(tags).alias("t")).where(F.col("t").isNotNull()))
    counted = sorted({k.name for k in looks} - {SPOT, TENANT})
    distinct = {k.name for k in looks if k.value is not None}
    k, v = F.col("t.k"), F.col("t.v")
    numbers = [
        (
            F.size(F.collect_set(F.when(k == name, v))) if name in distinct else F.count(F.when(k == name, 1))
        ).alias(f"n{i}")
        for i, name in enumerate(counted)
    ]
    facts = union_all(parts).agg(
        spots_of(F.collect_set(F.when(k == SPOT, v))).alias("spots"),
        owned_of(F.collect_set(F.when(k == TENANT, v)), deleted_tenants).alias(OWNED),
        *numbers,
    )
    for i, (table, column) in enumerate(extents):  # one row each, joined: still one query
        c = F.col(column)
        facts = facts.crossJoin(
            tables[table].agg(F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}"), F.count(c).alias(f"c{i}"))
        )
    row = facts.collect()[0]
    counts = {name: int(row[f"n{i}"]) for i, name in enumerate(counted)}
    spans = {
        extent: (int(row[f"lo{i}"] or 0), int(row[f"hi{i}"] or 0), int(row[f"c{i}"]))
        for i, extent in enumerate(extents)
    }
    return Facts(tuple(row["spots"] or ()), tuple(row[OWNED] or ()), counts, spans)
