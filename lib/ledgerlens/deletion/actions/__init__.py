"""The deletion actions, one module each: how a plan item of that action is verified right before
acting and how it is acted on (``Action``). ``ACTIONS`` is the registry the deleter runs, in the order
it executes them."""

from __future__ import annotations

from ledgerlens.deletion.actions.base import Action, ActionContext, Work
from ledgerlens.deletion.actions.delete_ledger import DeleteLedger
from ledgerlens.deletion.actions.delete_object import DeleteObject
from ledgerlens.deletion.actions.delete_remote_segment import DeleteRemoteSegment
from ledgerlens.deletion.actions.load_topic import LoadTopic

ACTIONS: dict[str, Action] = {
    a.name: a for a in (DeleteLedger(), DeleteObject(), DeleteRemoteSegment(), LoadTopic())
}

__all__ = ["ACTIONS", "Action", "ActionContext", "Work"]
