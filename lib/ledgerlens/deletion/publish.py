"""Phase 1: one ``PendingDeleteLedgerInfo`` per approved item to the deletion topic.

``publish`` reads ``approval.json``, checks it against its journal record (the journal must verify,
the record must be there with the same items), creates the deleter's durable subscription on the
deletion and retry topics if it does not exist yet (a topic without a subscription keeps nothing),
then sends the items not yet published for this approval, in batches. Each batch's successful
sends are journaled (``type: published``) before the next batch, so a re-run sends only what is
missing. A send that succeeded but was not journaled (the process died in between) is sent again:
the deleter treats the duplicate as ``already_gone``, so a re-run never has a second effect.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerlens.deletion import messages as m
from ledgerlens.deletion.approval import ApprovalRefused, approvals_in, read_approval
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.plan import canonical
from ledgerlens.errors import ConfigError, SourceError


def pulsar_client(service_url: str, **kwargs: Any) -> Any:
    """A ``pulsar.Client``; auth from the environment only (``$LEDGERLENS_PULSAR_TOKEN``), quiet logs."""
    import pulsar

    if not service_url:
        raise ConfigError("--service-url pulsar://host:6650 is required (or --sandbox DIR)")
    quiet = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    token = os.environ.get("LEDGERLENS_PULSAR_TOKEN")
    if token:
        kwargs.setdefault("authentication", pulsar.AuthenticationToken(token))
    kwargs.setdefault("operation_timeout_seconds", 30)
    try:
        return pulsar.Client(service_url, logger=quiet, **kwargs)
    except Exception as e:  # noqa: BLE001 - the client raises several unrelated types
        raise SourceError(f"pulsar {service_url}", f"cannot create a client ({e})") from e


def ensure_subscription(client: Any, topic: str, subscription: str = m.SUBSCRIPTION) -> None:
    """Create the deleter's durable Shared subscription on the deletion and retry topics (idempotent)."""
    import pulsar

    consumer = client.subscribe(
        [topic, m.retry_topic(topic)],
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    consumer.close()


def checked_approval(approval_path: str | Path, journal: Journal) -> dict[str, Any]:
    """The approval of ``approval.json``, as recorded in the (verified) journal."""
    approval = read_approval(approval_path)
    recorded = approvals_in(journal.records()).get(str(approval.get("approval_id")))
    if recorded is None:
        raise ApprovalRefused(
            f"{approval_path}: approval {approval.get('approval_id')} is not in journal {journal.path}"
        )
    for k in ("plan_hash", "items", "approver", "reason"):
        if canonical(recorded.get(k)) != canonical(approval.get(k)):
            raise ApprovalRefused(f"{approval_path}: {k} differs from the journal's record of this approval")
    return recorded


def published_items(journal: Journal, approval_id: str) -> set[str]:
    """Item ids already published for an approval (journal ``published`` lines)."""
    return {
        str(r["item_id"])
        for r in journal.records()
        if r.get("type") == "published" and r.get("approval_id") == approval_id
    }


@dataclass
class PublishResult:
    """What one ``publish`` run did."""

    approval_id: str
    plan_hash: str
    total: int
    already: int = 0
    sent: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (item id, error)


def publish(
    approval_path: str | Path,
    journal: Journal,
    client: Any,
    *,
    topic: str = m.DELETION_TOPIC,
    batch_size: int = 500,
    metrics: DeletionMetrics | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PublishResult:
    """Send the approved items not yet published; see the module docstring."""
    approval = checked_approval(approval_path, journal)
    aid, phash = str(approval["approval_id"]), str(approval["plan_hash"])
    done = published_items(journal, aid)
    items = list(approval["items"])
    todo = [i for i in items if i["item_id"] not in done]
    result = PublishResult(aid, phash, len(items), already=len(items) - len(todo))
    if not todo:
        return result
    ensure_subscription(client, topic)
    producer = client.create_producer(
        topic,
        producer_name=None,
        block_if_queue_full=True,
        batching_enabled=False,  # one entry per message: the subscription backlog counts deletions
        max_pending_messages=max(batch_size * 2, 1000),
    )
    try:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            outcomes = _send_batch(producer, batch, phash, aid, topic)
            ok = [i for i in batch if outcomes[str(i["item_id"])] is None]
            journal.append(
                [
                    {
                        "type": "published",
                        "approval_id": aid,
                        "plan_hash": phash,
                        "item_id": i["item_id"],
                        "action": i["action"],
                        "topic": topic,
                    }
                    for i in ok
                ]
            )
            for i in ok:
                if metrics is not None:
                    metrics.sent.labels(type=_type(i)).inc()
            result.sent += len(ok)
            result.failed += [
                (str(i["item_id"]), str(outcomes[str(i["item_id"])])) for i in batch if i not in ok
            ]
            if progress is not None:
                progress(result.already + result.sent, result.total)
    finally:
        producer.close()
    return result


def _send_batch(
    producer: Any, batch: list[dict[str, Any]], phash: str, aid: str, topic: str
) -> dict[str, str | None]:
    """Send one batch asynchronously; item id -> None (sent) or the error, once every send completed."""
    import pulsar

    outcomes: dict[str, str | None] = {}
    cond = threading.Condition()

    def callback(res: Any, item_id: str) -> None:
        with cond:
            outcomes[item_id] = None if res == pulsar.Result.Ok else str(res)
            cond.notify_all()

    for item in batch:
        msg = m.item_to_message(item, phash)
        iid = str(item["item_id"])
        producer.send_async(
            msg.SerializeToString(),
            lambda res, _mid, iid=iid: callback(res, iid),
            properties=m.properties(item, phash, aid),
        )
    producer.flush()
    with cond:
        if not cond.wait_for(lambda: len(outcomes) == len(batch), timeout=120):
            raise SourceError(f"pulsar topic {topic}", f"{len(batch) - len(outcomes)} sends never completed")
    return outcomes


def _type(item: Mapping[str, Any]) -> str:
    return m.TYPE_NAMES[m.LEDGER_TYPES[item["action"]]]
