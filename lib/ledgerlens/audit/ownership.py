"""What the audited Pulsar cluster owns: the one definition of ownership.

A BookKeeper cluster (or a bucket) may be shared by several Pulsar clusters, and BookKeeper's
metadata may live apart from Pulsar's. A ledger or object may only become an orphan candidate when
it is proven to belong to the audited cluster. The proof is its owner's tenant:

- the audited cluster **owns** a tenant that has a tenant node (``/admin/policies/<tenant>``),
  namespace policies, managed ledgers or schemas in at least one of the given Pulsar metadata
  stores (the ``pulsar_tenants``, ``namespace_policies``, ``managed_ledgers`` and
  ``schema_ledgers`` inventory tables, error rows included);
- ``AuditConfig.deleted_tenants`` (``--deleted-tenant``) are tenants the operator knows were deleted
  from this cluster: they count as owned again, so their leftovers are orphan candidates;
- anything else is **foreign**: a ledger whose owner's tenant is foreign, or whose owner is
  unknown (no tenant to prove anything with), is ``foreign_ledger`` (info), never an orphan.

Spark side: :func:`owned_tenants` (one row, one ``owned`` array column, broadcast onto candidate
rows) and :func:`is_owned`. Python side: :func:`collect_ownership` -> :class:`Ownership`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.frames import Look, union_all

__all__ = [
    "OWNED",
    "OWNERSHIP_TABLES",
    "Ownership",
    "collect_ownership",
    "is_owned",
    "owned_of",
    "owned_tenants",
    "tenant_of_name",
]

OWNED = "owned"  # the broadcast column of :func:`owned_tenants`
OWNERSHIP_TABLES = ("pulsar_tenants", "namespace_policies", "managed_ledgers", "schema_ledgers")


def tenant_of_name(name: Column) -> Column:
    """The tenant of a managed-ledger name or schema id (``tenant/...``): its first segment; else null."""
    first = F.split(F.regexp_replace(name, "^/+", ""), "/").getItem(0)
    return F.when(name.isNotNull() & (first != ""), first)


def tenant_looks() -> list[Look]:
    """The tenant names of the ownership tables (``tenant`` looks, value the name)."""
    named = F.col("tenant").isNotNull() & (F.col("tenant") != "")
    return [Look(t, "tenant", named, F.col("tenant")) for t in OWNERSHIP_TABLES]


def _tenants(tables: Mapping[str, DataFrame]) -> DataFrame:
    """One row per tenant name seen in the ownership tables (column ``tenant``, repeats possible)."""
    parts = [
        tables[k.table].filter(k.where).select(F.col("tenant")) for k in tenant_looks() if k.table in tables
    ]
    if not parts:
        raise ValueError("ownership: none of the Pulsar inventory tables was given")
    return union_all(parts)


def owned_of(collected: Column, deleted_tenants: Iterable[str] = ()) -> Column:
    """The ``owned`` column from the collected values of :func:`tenant_looks` and the deleted tenants."""
    deleted = sorted(set(deleted_tenants))
    extra = F.array(*[F.lit(t) for t in deleted]) if deleted else F.array().cast("array<string>")
    return F.array_sort(F.array_union(F.coalesce(collected, F.array().cast("array<string>")), extra))


def owned_tenants(tables: Mapping[str, DataFrame], deleted_tenants: Iterable[str] = ()) -> DataFrame:
    """One row, one column ``owned``: the sorted tenants the audited cluster owns (plus the deleted ones)."""
    agg = _tenants(tables).agg(F.collect_set("tenant").alias("t"))
    return agg.select(owned_of(F.col("t"), deleted_tenants).alias(OWNED))


def is_owned(tenant: Column) -> Column:
    """True when ``tenant`` is owned; False for a foreign or null tenant (needs the ``owned`` column)."""
    return F.coalesce(F.array_contains(F.col(OWNED), tenant), F.lit(False))


@dataclass(frozen=True)
class Ownership:
    """The owned tenants, collected to the driver (tenants are few)."""

    tenants: frozenset[str]
    deleted: frozenset[str] = frozenset()

    def owns(self, tenant: str | None) -> bool:
        """True when ``tenant`` belongs to the audited cluster (or was declared deleted from it)."""
        return tenant is not None and (tenant in self.tenants or tenant in self.deleted)

    def is_foreign(self, tenant: str | None) -> bool:
        """True when nothing proves ``tenant`` belongs to the audited cluster (null included)."""
        return not self.owns(tenant)


def collect_ownership(tables: Mapping[str, DataFrame], deleted_tenants: Iterable[str] = ()) -> Ownership:
    """:class:`Ownership` of the inventory (one small Spark job)."""
    rows = _tenants(tables).distinct().collect()
    return Ownership(frozenset(r["tenant"] for r in rows), frozenset(deleted_tenants))
