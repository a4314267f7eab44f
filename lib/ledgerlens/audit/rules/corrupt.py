"""``corrupt_metadata`` and ``unreadable_metadata``: nodes that do not decode, or that the audit may
not read."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.findings import finding
from ledgerlens.audit.frames import Look, union_all
from ledgerlens.audit.rules.common import ML_COMPONENT, place_columns

_CORRUPT_METADATA = {  # table: component, ledger id, managed ledger, cursor, tenant, namespace columns
    "bk_ledgers": (None, "ledger_id", None, None, None, None),
    "managed_ledgers": (ML_COMPONENT, None, "managed_ledger", None, "tenant", "namespace"),
    "cursors": ("cursor", None, "managed_ledger", "cursor", "tenant", "namespace"),
    "schema_ledgers": ("schema", "ledger_id", None, None, "tenant", "namespace"),
    "namespace_policies": (None, None, None, None, "tenant", "namespace"),
}


def corrupt_finding(
    rows: DataFrame, *, component: str | None, evidence: Column, **place: str | None
) -> DataFrame:
    """``corrupt_metadata`` (critical, to investigate) for every row of ``rows``; ``place``: the column
    names of :func:`place_columns`."""
    return finding(
        rows,
        kind="corrupt_metadata",
        component=component,
        action="investigate",
        evidence=evidence,
        **place_columns(**place),
    )


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
        parts.append(
            corrupt_finding(
                tables[look.table].filter(look.where),
                component=component,
                ledger_id=lid,
                managed_ledger=ml,
                cursor=cur,
                tenant=tenant,
                namespace=ns,
                evidence=F.struct(F.lit(look.table).alias("table"), F.col("error").alias("problem")),
            )
        )
    return union_all(parts) if parts else None
