"""What the rule modules share: units and small column predicates."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

MB = 1024 * 1024
ML_COMPONENT = "managed-ledger"
KNOWN_COMPONENTS = ("managed-ledger", "schema", "compacted-ledger", "delayed-index-bucket")


def false_if_null(c: Column) -> Column:
    return F.coalesce(c, F.lit(False))


def offload_complete() -> Column:
    """``offload_complete``; where a source could not see it (null while an offload uuid is known:
    the admin API), inferred from BookKeeper: the broker deletes a ledger's BookKeeper copy only
    after its offload completed, so an absent copy means complete, a present one not."""
    return F.coalesce(
        F.col("offload_complete"), F.col("offload_uuid").isNotNull() & F.col("bk_present").isNull()
    )


OFFLOAD_COLUMNS = (  # of an ml_ledgers row, carried into its reference as they are
    "offload_uuid",
    "offload_complete",
    "offload_bookkeeper_deleted",
    "offload_timestamp_ms",
    "offload_bucket",
    "offload_segments",
)


def place_columns(
    *,
    ledger_id: str | None = None,
    managed_ledger: str | None = "managed_ledger",
    cursor: str | None = "cursor",
    path: str | None = "path",
    tenant: str | None = "tenant",
    namespace: str | None = "namespace",
    bytes_: str | None = None,
) -> dict[str, Column | None]:
    """The keywords of ``raw_finding`` that say where a finding stands, each read from the row's column
    of the given name (None: not known); by default the names the inventory tables use."""
    names = {
        "ledger_id": ledger_id,
        "managed_ledger": managed_ledger,
        "cursor": cursor,
        "path": path,
        "tenant": tenant,
        "namespace": namespace,
        "bytes_": bytes_,
    }
    return {k: F.col(v) if v else None for k, v in names.items()}


def ml_reference_columns() -> dict[str, Column]:
    """The keywords of ``raw_finding`` of a finding on a managed ledger's reference to a ledger (a
    joined row's ``ref_*`` columns): which ledger, whose, where; the managed ledger is its owner."""
    return {
        "ledger_id": F.col("ledger_id"),
        "managed_ledger": F.col("ref_ml"),
        "tenant": F.col("ref_tenant"),
        "namespace": F.col("ref_namespace"),
        "owner_ml": F.col("ref_ml"),
    }
