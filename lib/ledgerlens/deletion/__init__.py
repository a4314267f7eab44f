"""Approving and deleting orphans: PIP-186 two-phase deletion, run from outside the broker.

One module per role, in the order of the flow:

- :mod:`~ledgerlens.deletion.plan`: findings -> a deletion plan (``plan.json``, hash-bound).
- :mod:`~ledgerlens.deletion.journal`: the append-only, hash-chained journal every step writes to.
- :mod:`~ledgerlens.deletion.approval`: a person approves a plan (or part of it) into the journal.
- :mod:`~ledgerlens.deletion.messages`: plan items <-> ``PendingDeleteLedgerInfo`` messages.
- :mod:`~ledgerlens.deletion.publish`: phase 1, approved items to the deletion topic.
- :mod:`~ledgerlens.deletion.verify`: the live re-verification a deletion must pass.
- :mod:`~ledgerlens.deletion.deleter`: phase 2, the consumer that verifies, deletes, retries.
- :mod:`~ledgerlens.deletion.metrics`: Prometheus counters of every outcome.
- :mod:`~ledgerlens.deletion.status`: what the journal, the subscription backlog and the DLQ say.
- :mod:`~ledgerlens.deletion.commands`: the ``plan``, ``approve``, ``publish`` and ``deleter`` commands.
"""

from __future__ import annotations
