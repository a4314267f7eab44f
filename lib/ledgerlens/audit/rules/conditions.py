"""The ledger rules' conditions, declared once: which joined rows are candidates, and for which
findings (``SELECTIONS``). The planner derives what it reads from them; the ledger and offload rules
evaluate the rows."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from ledgerlens.audit.rules.common import ML_COMPONENT, OFFLOAD_COLUMNS, false_if_null, offload_complete
from ledgerlens.report import kinds
from ledgerlens.report.kinds import Kind
from ledgerlens.settings.config import AuditConfig

OFFLOAD_RULE = kinds.offload.ORPHAN_OFFLOAD_OBJECT.rule
"""The offload rules' module, as their kinds declare it (``report/kinds/offload.py``)."""


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


def retention_selected() -> Column:
    """Of a reference: selected whatever BookKeeper has (its managed ledger's retention is overdue)."""
    return (F.col("ref_component") == ML_COMPONENT) & false_if_null(F.col("ret_overdue"))


Other = Literal["absent", "present", "either"]


@dataclass(frozen=True)
class Selection:
    """The rows of ``planner.join_bookkeeper`` that may hold a finding of ``kinds``, declared by a
    condition on each side of the join: ``bookkeeper`` reads only BookKeeper's columns (null where no
    ledger has the id), ``reference`` only a reference's (null where nothing references it); ``other``
    says what the other side must be: ``absent`` (no row of it has the id), ``present`` (both
    conditions hold, which each does only where its side is present) or ``either``.

    The planner reads the rows some selection selects and no other (``selected``), and in a large
    audit decides which ledger ids those are without the join (``planner.selected_slots``): each
    side's condition becomes a bit mask by slot of ids. ``offload_only``: read only when the audit
    checks offloads (the rows ``offload_rules`` reads). The rules themselves (``ledgers.py``,
    ``offload.py``) then decide each finding exactly; a selection is their cheap superset."""

    kinds: tuple[Kind, ...]
    other: Other
    bookkeeper: Callable[[AuditConfig], Column] | None = None
    reference: Callable[[AuditConfig], Column] | None = None
    offload_only: bool = False

    def __post_init__(self) -> None:
        sides = (self.bookkeeper is not None) + (self.reference is not None)
        if sides != (2 if self.other == "present" else 1):
            raise ValueError(f"{[k.name for k in self.kinds]}: other={self.other!r} takes {sides} side(s)")

    def of_row(self, config: AuditConfig) -> Column:
        """The selection as a condition on a joined row."""
        if self.other == "present":
            assert self.bookkeeper is not None and self.reference is not None
            return self.reference(config) & self.bookkeeper(config)
        if self.bookkeeper is not None:
            own = self.bookkeeper(config)
            return F.col("ref_component").isNull() & own if self.other == "absent" else own
        assert self.reference is not None
        own = self.reference(config)
        if self.other == "absent":
            return F.col("bk_present").isNull() & F.col("ref_component").isNotNull() & own
        return own


SELECTIONS: tuple[Selection, ...] = (
    Selection(
        (kinds.ledgers.ORPHAN_LEDGER, kinds.ledgers.FOREIGN_LEDGER, kinds.ledgers.UNATTRIBUTED_LEDGER),
        "absent",
        bookkeeper=orphan_if_unreferenced,
    ),
    Selection((kinds.ledgers.MISSING_LEDGER,), "absent", reference=lambda _config: missing_if_absent()),
    Selection(
        (kinds.retention.OPEN_LEDGER_OVERDUE,),
        "present",
        bookkeeper=open_too_long,
        reference=lambda _config: overdue_if_open(),
    ),
    Selection((kinds.retention.RETENTION_OVERDUE,), "either", reference=lambda _config: retention_selected()),
    Selection(
        tuple(k for k in kinds.PULSAR if k.rule == OFFLOAD_RULE),
        "either",
        reference=lambda _config: is_offloaded(),
        offload_only=True,
    ),
)
"""Every row the ledger rules and the offload rules read, by the kinds it may hold."""


def in_plan(*, offload: bool) -> tuple[Selection, ...]:
    """The selections an audit reads: with ``offload``, those of the offloaded ledgers too."""
    return tuple(s for s in SELECTIONS if offload or not s.offload_only)


def is_candidate(config: AuditConfig) -> Column:
    """A joined row some ledger rule may flag: cheap conditions, a superset of ``_ledger_items``'."""
    return selected(config, offload=False)


def selected(config: AuditConfig, *, offload: bool) -> Column:
    """The joined rows ``ledger_rules`` reads: candidates, and with ``offload`` offloaded ledgers."""
    return reduce(operator.or_, (s.of_row(config) for s in in_plan(offload=offload)))
