"""The ledger rules' conditions, declared once: which joined rows are candidates, and for which
finding. The planner reads only the rows they can select; the ledger rules evaluate them."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from ledgerlens.audit.rules.common import ML_COMPONENT, OFFLOAD_COLUMNS, false_if_null, offload_complete
from ledgerlens.settings.config import AuditConfig


def is_offloaded() -> Column:
    return (F.col("ref_component") == ML_COMPONENT) & (
        F.col("offload_uuid").isNotNull() | (F.size(F.coalesce("offload_segments", F.array())) > 0)
    )


OFFLOAD_ROW = (
    "ledger_id",
    "ref_ml",
    "ref_tenant",
    "ref_namespace",
    "ref_size",
    "ref_entries",
    *OFFLOAD_COLUMNS,
    "lag_ms",
    "pol_error",
    "bk_present",
    "length",
    "ctime_ms",
)


def orphan_if_unreferenced(config: AuditConfig) -> Column:
    """Of a BookKeeper ledger: a candidate where no reference has its id."""
    return F.col("bk_error").isNull() & (
        F.col("ctime_ms") <= config.as_of_ms - config.min_orphan_age_s * 1000
    )


def missing_if_absent() -> Column:
    """Of a reference: a candidate where BookKeeper has no ledger of its id (``bk_present`` null)."""
    return ~((F.col("ref_component") == ML_COMPONENT) & false_if_null(offload_complete()))


def overdue_if_open() -> Column:
    """Of a reference: a candidate where its ledger is ``open_too_long``."""
    return F.col("ref_component") == ML_COMPONENT


def open_too_long(config: AuditConfig) -> Column:
    """Of a BookKeeper ledger: a candidate where a managed ledger references it."""
    return (F.col("state") == "OPEN") & (
        F.col("ctime_ms") <= config.as_of_ms - config.open_ledger_max_age_s * 1000
    )


def reference_selected(*, offload: bool) -> Column:
    """Of a reference: selected whatever BookKeeper has (retention overdue; offloaded)."""
    overdue = (F.col("ref_component") == ML_COMPONENT) & false_if_null(F.col("ret_overdue"))
    return overdue | is_offloaded() if offload else overdue


def is_candidate(config: AuditConfig) -> Column:
    """A joined row some ledger rule may flag: cheap conditions, a superset of ``_ledger_items``'.

    Each condition reads one side of the join and whether the other side matched
    (``selected_slots`` reads them so, without joining)."""
    ref = F.col("ref_component")
    return (
        (ref.isNull() & orphan_if_unreferenced(config))
        | (F.col("bk_present").isNull() & ref.isNotNull() & missing_if_absent())
        | (overdue_if_open() & open_too_long(config))
        | reference_selected(offload=False)
    )


def selected(config: AuditConfig, *, offload: bool) -> Column:
    """The joined rows ``ledger_rules`` reads: candidates, and with ``offload`` offloaded ledgers."""
    return is_candidate(config) | is_offloaded() if offload else is_candidate(config)
