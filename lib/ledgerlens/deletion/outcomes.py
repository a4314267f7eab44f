"""What the deleter decides for an item, and what became of it: typed, so that journal lines,
reports and metric labels name the same few values (``StrEnum``: each is written as its string)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """What became of one item (a journal ``outcome`` line, a report count, a metric)."""

    DELETED = "deleted"
    LOADED = "loaded"
    ALREADY_GONE = "already_gone"
    SKIPPED_IN_USE = "skipped_in_use"
    SKIPPED_UNPROVABLE = "skipped_unprovable"
    SKIPPED_MISMATCH = "skipped_mismatch"
    FAILED = "failed"


class Decision(StrEnum):
    """A verification's verdict: act (``DELETE``, ``LOAD``), try again later (``RETRY``), or an
    outcome already (nothing to do, or not to be done)."""

    DELETE = "delete"
    LOAD = "load"
    RETRY = "retry"
    ALREADY_GONE = Outcome.ALREADY_GONE.value
    IN_USE = Outcome.SKIPPED_IN_USE.value
    UNPROVABLE = Outcome.SKIPPED_UNPROVABLE.value
    MISMATCH = Outcome.SKIPPED_MISMATCH.value


class Mismatch(StrEnum):
    """Why a ``skipped_mismatch`` item was refused (the metric's ``reason`` label)."""

    UNAPPROVED = "unapproved"  # in no approval of the journal
    FORGED = "forged"  # differs from the approved item
    CHANGED = "changed"  # the live state is not what the plan recorded
    FOREIGN = "foreign"  # another cluster's


__all__ = ["Decision", "Mismatch", "Outcome"]
