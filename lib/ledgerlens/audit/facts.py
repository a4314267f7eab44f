"""The audit's facts: what one small job learns about the inventory before the rules run.

The blind spots (``references.blind_spots``) and the owned tenants (``ownership.owned_tenants``),
which probes found a row (the audit asks whether any row could reach a rule that only some
clusters need: without one, the rule's plan is left out, its findings being provably none), and
any one-row counts the caller wants from the same job (the pipeline's plausibility probes and
undecidable counts), collected to the driver at once. The rules read the facts back as a one-row
local table: its size is exact, so Spark broadcasts it, and no intermediate is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledgerlens import schemas
from ledgerlens.audit.frames import union_all
from ledgerlens.audit.ownership import OWNED, owned_of, tenant_rows
from ledgerlens.audit.references import blind_spot_rows, spots_of

__all__ = ["FACTS", "Facts", "collect_facts"]

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
    """The caller's counts (``collect_facts(counts=...)``), by the names it gave."""
    present: frozenset[str] | None = None
    """The names of the probes (``collect_facts(probes=...)``) that found a row; None: not probed
    (every probe counts as present)."""

    def has(self, probe: str) -> bool:
        """Whether ``probe`` found a row (True when nothing was probed)."""
        return self.present is None or probe in self.present

    def frame(self, spark: SparkSession) -> DataFrame:
        """The facts as the one-row ``FACTS`` table the rules join."""
        return schemas.local_frame(spark, FACTS, [{"spots": list(self.spots), OWNED: list(self.owned)}])


def collect_facts(
    tables: Mapping[str, DataFrame],
    deleted_tenants: Iterable[str] = (),
    counts: Mapping[str, DataFrame] | None = None,
    probes: Sequence[tuple[str, DataFrame]] | None = None,
) -> Facts:
    """The facts of ``tables`` (the audit's inputs, every required table present) in one job: one
    aggregate over the union of every row it looks at (one scan stage, one shuffle).

    ``counts``: the rows of each frame are counted (its distinct ``value`` column when it has one)
    and returned under its name in ``Facts.counts``. ``probes``: (name, rows) pairs; a name is in
    ``Facts.present`` when any of its frames has a row.
    """
    none = F.lit(None).cast("string")

    def tagged(
        df: DataFrame, *, spot: Column = none, tenant: Column = none, probe: str | None = None
    ) -> DataFrame:
        value = F.col("value").cast("string") if "value" in df.columns else none
        return df.select(
            spot.alias("spot"),
            tenant.alias("tenant"),
            F.lit(probe).cast("string").alias("probe"),
            value.alias("value"),
        )

    parts = [
        tagged(
            blind_spot_rows(tables["managed_ledgers"], tables["cursors"], tables["schema_ledgers"]),
            spot=F.col("spot"),
        ),
        tagged(tenant_rows(tables), tenant=F.col("tenant")),
    ]
    parts += [tagged(df, probe=name) for name, df in probes or ()]
    parts += [tagged(df, probe=f"#{name}") for name, df in (counts or {}).items()]
    probe = F.col("probe")
    numbers = [
        (
            F.size(F.collect_set(F.when(probe == f"#{name}", F.col("value"))))
            if "value" in df.columns
            else F.count(F.when(probe == f"#{name}", 1))
        ).alias(f"n{i}")
        for i, (name, df) in enumerate((counts or {}).items())
    ]
    row = (
        union_all(parts)
        .agg(
            spots_of(F.collect_set("spot")).alias("spots"),
            owned_of(F.collect_set("tenant"), deleted_tenants).alias(OWNED),
            F.collect_set(F.when(~probe.startswith("#"), probe)).alias("present"),
            *numbers,
        )
        .collect()[0]
    )
    found = {name: int(row[f"n{i}"]) for i, name in enumerate(counts or {})}
    present = frozenset(row["present"] or ()) if probes is not None else None
    return Facts(tuple(row["spots"] or ()), tuple(row[OWNED] or ()), found, present)
