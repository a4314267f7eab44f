"""The one interface every inventory source implements.

A source is a small, picklable object that knows one store (a live ZooKeeper, a ZooKeeper data
directory, an admin API, an S3 bucket). For each collection *stage* it provides, it plans its own
partitions on the driver (cheap listings only) and turns a list of partitions into rows of the
inventory tables on an executor. It never calls back into the scheduler: ``ledgerlens.inventory.collect``
only schedules partitions as Spark tasks, hands each task its share of the rate limit and writes
the tables.

Stages, in the order the audit rules require (BookKeeper first, then Pulsar metadata, then S3)::

    bk_ledgers          -> bk_ledgers
    managed_ledgers     -> managed_ledgers, ml_ledgers, cursors
    schema_ledgers      -> schema_ledgers
    namespace_policies  -> namespace_policies, pulsar_tenants
    offload_objects     -> offload_objects
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BOOKKEEPER_STAGES",
    "PULSAR_STAGES",
    "STAGES",
    "STAGE_TABLES",
    "InventorySource",
    "MetadataStore",
    "Row",
    "stage_roots",
]

STAGE_TABLES: Mapping[str, tuple[str, ...]] = {
    "bk_ledgers": ("bk_ledgers",),
    "managed_ledgers": ("managed_ledgers", "ml_ledgers", "cursors"),
    "schema_ledgers": ("schema_ledgers",),
    "namespace_policies": ("namespace_policies", "pulsar_tenants"),
    "offload_objects": ("offload_objects",),
}
STAGES: tuple[str, ...] = tuple(STAGE_TABLES)
BOOKKEEPER_STAGES: tuple[str, ...] = ("bk_ledgers",)
PULSAR_STAGES: tuple[str, ...] = ("managed_ledgers", "schema_ledgers", "namespace_policies")

# The setting that holds the metadata root each stage reads (a ``ZooKeeperSource``'s, a store's own).
_ROOT_SETTINGS: Mapping[str, str] = {
    "bk_ledgers": "ledgers_root",
    "managed_ledgers": "managed_ledgers_root",
    "schema_ledgers": "schemas_root",
    "namespace_policies": "policies_root",
}


def stage_roots(settings: object, stages: Sequence[str]) -> dict[str, str]:
    """The metadata root of each of ``stages`` that reads one, from ``settings``' ``*_root`` attributes."""
    return {s: getattr(settings, a) for s, a in _ROOT_SETTINGS.items() if s in stages}


# One row of an inventory table: (table name, column -> value); absent columns are null. A source
# that reads millions of rows may hand out many at once: (table name, an Arrow record batch of the
# table's schema, as ``ledgerlens.inventory.schemas`` defines it).
Row = tuple[str, "dict[str, Any] | pa.RecordBatch"]


class InventorySource(ABC):
    """A store that can be inventoried in partitions.

    Subclasses are frozen dataclasses (they travel to executors) holding only settings: no
    connection, no credentials. ``kind`` is the source kind of the CLI (``zk``, ``zk-snapshot``,
    ``admin``, ``s3``).
    """

    kind: str = ""

    @property
    @abstractmethod
    def stages(self) -> tuple[str, ...]:
        """The stages (keys of ``STAGE_TABLES``) this source provides."""

    @property
    def location(self) -> str:
        """Where the store is, for messages and ``summary.json`` (no credentials)."""
        return self.kind

    @property
    def rate_limit(self) -> float | None:
        """Reads per second across the whole scan of this source; None: unlimited."""
        return None

    @property
    def tasks(self) -> int | None:
        """Spark tasks per stage; None: the scheduler's default."""
        return None

    def describe(self) -> dict[str, Any]:
        """``{"kind", "location", "stages", ...}``: what this source is and which point in time it shows."""
        return {"kind": self.kind, "location": self.location, "stages": list(self.stages), "as_of": "live"}

    def check(self) -> None:  # noqa: B027 - optional hook
        """Fail fast on the driver (``SourceError``) when the store cannot be read at all."""

    def small(self, stage: str) -> bool:
        """True when one cheap request showed that ``stage`` holds little enough to read on the
        driver, without Spark tasks (driver side; False: cannot tell cheaply)."""
        return False

    def clusters(self) -> list[str] | None:
        """The Pulsar clusters this (Pulsar) store declares under ``/admin/clusters``, sorted,
        without ``global``; None when the store cannot tell (driver side)."""
        return None

    @abstractmethod
    def plan(self, stage: str) -> list[str]:
        """The partitions of ``stage``: short strings, each read by exactly one task (driver side)."""

    @abstractmethod
    def read(
        self, stage: str, partitions: Sequence[str], *, rate_limit: float | None, stats: Counter[str]
    ) -> Iterator[Row]:
        """Rows of the tables of ``stage`` for ``partitions`` (executor side).

        ``rate_limit`` is this task's share of the scan-wide limit; counters (reads, errors,
        vanished nodes...) go into ``stats``.
        """


class MetadataStore(InventorySource):
    """A store of Pulsar and/or BookKeeper metadata: it provides the stages it is given
    (``provides``, a dataclass field of each subclass), each read under its metadata root."""

    provides: tuple[str, ...] = ()

    @property
    def stages(self) -> tuple[str, ...]:
        return self.provides
