"""The audit's facts: what one small job learns about the inventory before the rules run.

The blind spots (``references.blind_spots``) and the owned tenants (``ownership.owned_tenants``),
and with them any one-row counts the caller wants from the same job (the pipeline's plausibility
probes and undecidable counts), collected to the driver at once. The rules read the facts back as
a one-row local table: its size is exact, so Spark broadcasts it, and no intermediate is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledgerlens import schemas
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

    def frame(self, spark: SparkSession) -> DataFrame:
        """The facts as the one-row ``FACTS`` table the rules join."""
        return schemas.local_frame(spark, FACTS, [{"spots": list(self.spots), OWNED: list(self.owned)}])


def collect_facts(
    tables: Mapping[str, DataFrame],
    deleted_tenants: Iterable[str] = (),
    counts: Mapping[str, DataFrame] | None = None,
) -> Facts:
    """The facts of ``tables`` (the audit's inputs, every required table present) in one job.

    ``counts``: one-row frames with a numeric column ``n``, each computed by the same job and
    returned under its name in ``Facts.counts`` (no row: 0).
    """
    none = F.lit(None).cast("string")
    rows = (
        blind_spot_rows(tables["managed_ledgers"], tables["cursors"], tables["schema_ledgers"])
        .select("spot", none.alias("tenant"))
        .unionByName(tenant_rows(tables).select(none.alias("spot"), "tenant"))
    )
    agg = rows.agg(F.collect_set("spot").alias("spots"), F.collect_set("tenant").alias("t"))
    out = agg.select(
        F.lit(None).cast("string").alias("k"),
        F.lit(None).cast("long").alias("n"),
        spots_of(F.col("spots")).alias("spots"),
        owned_of(F.col("t"), deleted_tenants).alias(OWNED),
    )
    for name, df in (counts or {}).items():
        out = out.unionByName(
            df.select(F.lit(name).alias("k"), F.col("n").cast("long").alias("n")), allowMissingColumns=True
        )
    spots: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()
    found = {name: 0 for name in counts or {}}
    for r in out.collect():
        if r["k"] is None:
            spots, owned = tuple(r["spots"] or ()), tuple(r[OWNED] or ())
        else:
            found[r["k"]] = int(r["n"] or 0)
    return Facts(spots, owned, found)
