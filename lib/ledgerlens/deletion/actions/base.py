"""What every deletion action shares: the item on its way through a batch (``Work``), what the
deleter lends an action (``ActionContext``) and the two steps an action defines (``Action``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ledgerlens.deletion import messages as m
from ledgerlens.deletion.outcomes import Decision, Mismatch, Outcome
from ledgerlens.deletion.references import ReferenceIndex, Roots
from ledgerlens.deletion.verify import MISMATCH, RETRY, LiveReader, Verdict, _err
from ledgerlens.settings.config import S3Source


@dataclass
class Work:
    """One received message (or approved item) on its way through a batch."""

    msg: Any
    attempt: int
    info: Any = None  # PendingDeleteLedgerInfo once decoded
    item: dict[str, Any] | None = None
    approval_id: str | None = None
    outcome: Outcome | None = None
    reason: str = ""
    mismatch: Mismatch | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    act: Any = None  # what to execute: Node (ledger), keys (objects), True (load)

    @property
    def type(self) -> str:
        if self.info is not None and self.info.HasField("ledgerType"):
            return m.TYPE_NAMES.get(self.info.ledgerType, "unknown")
        return "unknown"

    @property
    def action(self) -> str | None:
        return None if self.item is None else str(self.item["action"])

    def fail(self, reason: str) -> None:
        self.outcome, self.reason = Outcome.FAILED, reason

    def decide(self, verdict: Verdict, act: Any) -> None:
        """Take a verification's verdict: ``act`` is what ``Action.execute`` will do (only for
        ``DELETE`` and ``LOAD``); ``RETRY`` is a failure (retried); anything else is the outcome."""
        self.reason = verdict.reason
        self.detail.update(verdict.detail)
        if verdict.decision in (Decision.DELETE, Decision.LOAD):
            self.act = act
        elif verdict.decision == Decision.RETRY:
            self.outcome = Outcome.FAILED
        else:
            self.outcome = Outcome(verdict.decision.value)
            if verdict.decision == Decision.MISMATCH:
                self.mismatch = Mismatch.FOREIGN if "another cluster" in verdict.reason else Mismatch.CHANGED


@dataclass
class ActionContext:
    """What the deleter lends an action for one batch: the live stores and its settings."""

    reader: LiveReader  # the BookKeeper and Pulsar ZooKeeper sessions
    s3: Any  # a boto3 client, or None
    s3_source: S3Source | None
    roots: Roots
    index: ReferenceIndex | None  # the current reference index (None where no item needs it)
    web_url: str | None
    cluster_name: str | None
    token: Callable[[], str | None]  # the admin API token, read when needed
    kafka_live: Callable[[], Any]  # the Kafka metadata reader, or None when not configured


class Action:
    """One kind of plan item: how it is verified right before acting, and how it is acted on.

    ``verify`` decides every item of ``group`` (``Work.decide`` or ``Work.fail``); ``execute`` acts
    on the decided ones (their ``act`` set) and sets each one's outcome. Approvals naming different
    deleted tenants are verified per distinct set (``deleted``)."""

    name: ClassVar[str]
    uses_index: ClassVar[bool] = False  # whether verification reads the reference index

    def verify(self, ctx: ActionContext, group: Sequence[Work], deleted: Sequence[str]) -> None:
        raise NotImplementedError

    def execute(self, ctx: ActionContext, work: Sequence[Work]) -> None:
        raise NotImplementedError


__all__ = ["Action", "ActionContext", "Work"]


def head_verdict(
    planned: Mapping[str, Any], head: tuple[int, Any] | Exception, planned_etag: str
) -> Verdict | None:
    """A planned object found present: RETRY when its HEAD failed, MISMATCH when its size or ETag
    (``head``: size, ETag) is not the plan's (``planned``, its ETag as the store reports it)."""
    key = planned["key"]
    if isinstance(head, Exception):
        return Verdict(RETRY, f"HEAD {key}: {_err(head)}")
    size, etag = head
    if size != int(planned["size"]) or etag != planned_etag:
        return Verdict(
            MISMATCH,
            f"{key} changed since the plan "
            f"(size {size} etag {etag}, plan {planned['size']} {planned['etag']})",
        )
    return None
