"""The audit rules of docs/audit-rules.md as DataFrame -> DataFrame transforms.

Each function returns raw findings (``findings.RAW_COLUMNS``). The expensive part is shared: the
managed ledgers' ledger lists are walked once per managed ledger (retention, window functions) and
then joined once with BookKeeper's ledgers by id, together with every other reference (one full
outer join answers orphan, unattributed, missing, open-ledger, retention and the BookKeeper side of
the offload rules).

One module per Pulsar subject: ``retention`` (the trimming walk), ``ledgers`` (orphan, foreign,
unattributed, missing, open and overdue ledgers), ``cursors``, ``corrupt`` (metadata that does not
decode), ``offload`` and ``offload_objects`` (the verified objects); ``planner`` holds the physical
plan (the join of references with BookKeeper's ledgers, in one or two phases).
"""

from __future__ import annotations

from ledgerlens.audit.rules.common import MB
from ledgerlens.audit.rules.conditions import OFFLOAD_ROW, selected
from ledgerlens.audit.rules.corrupt import corrupt_looks, corrupt_metadata
from ledgerlens.audit.rules.cursors import (
    IDLE,
    IDLE_BROADCAST_ROWS,
    idle_cursor_look,
    idle_cursors,
    inactive_cursors,
)
from ledgerlens.audit.rules.ledgers import (
    COMPACTION,
    compaction_look,
    corrupt_bookie_entries,
    ledger_rules,
    without_compaction_in_flight,
)
from ledgerlens.audit.rules.offload import STREAMING, offload_rules, streaming_looks
from ledgerlens.audit.rules.planner import (
    BK_IDS,
    CANDIDATES_BROADCAST_ROWS,
    DENSE_IDS,
    TWO_PHASE_BYTES,
    dense_ids,
    id_keys,
    is_large,
    join_bookkeeper,
    join_candidates,
    selected_slots,
)
from ledgerlens.audit.rules.retention import (
    WALK_BROADCAST_ROWS,
    ManagedLedgerReferences,
    policies_by_namespace,
)

__all__ = [
    "BK_IDS",
    "CANDIDATES_BROADCAST_ROWS",
    "COMPACTION",
    "DENSE_IDS",
    "IDLE",
    "IDLE_BROADCAST_ROWS",
    "MB",
    "ManagedLedgerReferences",
    "OFFLOAD_ROW",
    "STREAMING",
    "TWO_PHASE_BYTES",
    "WALK_BROADCAST_ROWS",
    "id_keys",
    "selected",
    "selected_slots",
    "compaction_look",
    "corrupt_bookie_entries",
    "corrupt_looks",
    "corrupt_metadata",
    "dense_ids",
    "idle_cursor_look",
    "idle_cursors",
    "inactive_cursors",
    "is_large",
    "join_bookkeeper",
    "join_candidates",
    "ledger_rules",
    "offload_rules",
    "policies_by_namespace",
    "streaming_looks",
    "without_compaction_in_flight",
]
