"""Plan items <-> ``PendingDeleteLedgerInfo`` (PIP-186), the payload of the deletion topic.

PIP-186 sends one message per ledger and, separately, one per offload copy (``ledgerType``
``LEDGER`` or ``OFFLOAD_LEDGER``); ledgerlens adds ``LOAD_TOPIC`` for its ``load_topic`` items
and binds every message to an approved plan item (``planHash``, ``itemId``). The deleter rebuilds
the message it expects from the approved item and compares: any field that differs makes the
message a forgery or a stale copy, and it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledgerlens.errors import DecodeError
from ledgerlens.formats.names import managed_ledger_to_topic
from ledgerlens.formats.uuids import uuid_to_bits
from ledgerlens.proto import pending_delete_pb2 as pb

DELETION_TOPIC = "persistent://pulsar/system/__ledger_deletion"
SUBSCRIPTION = "ledgerlens-deleter"


def retry_topic(topic: str) -> str:
    """PIP-186's retry topic of a deletion topic (``<topic>-RETRY``)."""
    return topic + "-RETRY"


def dlq_topic(topic: str) -> str:
    """PIP-186's dead-letter topic of a deletion topic (``<topic>-DLQ``)."""
    return topic + "-DLQ"


COMPONENTS: dict[str, int] = {
    "managed-ledger": pb.MANAGED_LEDGER,
    "cursor": pb.MANAGED_CURSOR,
    "schema": pb.SCHEMA_STORAGE,
    "delayed-index-bucket": pb.DELAYED_INDEX_BUCKET,
    "compacted-ledger": pb.COMPACTED_LEDGER,
    "offload": pb.MANAGED_LEDGER,
}
LEDGER_TYPES = {
    "delete_ledger": pb.LEDGER,
    "delete_object": pb.OFFLOAD_LEDGER,
    "load_topic": pb.LOAD_TOPIC,
    "delete_remote_segment": pb.REMOTE_SEGMENT,
}
TYPE_NAMES = {
    pb.LEDGER: "ledger",
    pb.OFFLOAD_LEDGER: "offload",
    pb.LOAD_TOPIC: "topic",
    pb.REMOTE_SEGMENT: "remote_segment",
}

# message properties (also readable without decoding the payload)
PROP_PLAN = "ledgerlens.plan_hash"
PROP_ITEM = "ledgerlens.item_id"
PROP_APPROVAL = "ledgerlens.approval_id"
PROP_ATTEMPT = "RECONSUMETIMES"  # the retry count, PIP-186's property name
PROP_REASON = "ledgerlens.last_failure"


def _topic_of(item: Mapping[str, Any]) -> str | None:
    exp = item.get("expected") or {}
    custom = exp.get("custom_metadata") or {}
    for key in ("pulsar/compactedTopic", "pulsar/delayedIndexTopic"):
        if custom.get(key):
            return str(custom[key])
    ml = (
        custom.get("pulsar/managed-ledger")
        or exp.get("managed_ledger")
        or (item.get("finding") or {}).get("managed_ledger")
    )
    if ml:
        try:
            return managed_ledger_to_topic(str(ml))
        except Exception:  # noqa: BLE001 - a name that does not parse simply has no topic field
            return None
    return None


def item_to_message(item: Mapping[str, Any], plan_hash: str) -> pb.PendingDeleteLedgerInfo:
    """The one message that stands for ``item`` of the plan ``plan_hash``."""
    action = item["action"]
    finding = item.get("finding") or {}
    exp = item.get("expected") or {}
    msg = pb.PendingDeleteLedgerInfo()
    msg.ledgerType = LEDGER_TYPES[action]  # type: ignore[assignment]
    msg.planHash = plan_hash
    msg.itemId = item["item_id"]
    msg.findingKind = str(finding.get("kind") or "")
    if item.get("bytes") is not None:
        msg.expectedBytes = int(item["bytes"])
    if action == "delete_remote_segment":  # a Kafka segment: its topic, first object and store
        if exp.get("topic"):
            msg.topicName = str(exp["topic"])
        msg.objectKey = str(exp["objects"][0]["key"])
        msg.bucket = str(exp["store"])
        return msg
    topic = _topic_of(item)
    if topic:
        msg.topicName = topic
    comp = COMPONENTS.get(str(finding.get("component") or ""), pb.MANAGED_LEDGER)
    msg.ledgerComponent = comp  # type: ignore[assignment]
    if action == "delete_ledger":
        custom = exp.get("custom_metadata") or {}
        msg.ledgerId = int(exp["ledger_id"])
        if custom.get("pulsar/managed-ledger"):
            msg.managedLedgerName = str(custom["pulsar/managed-ledger"])
        if custom.get("pulsar/cursor"):
            msg.cursorName = str(custom["pulsar/cursor"])
        if custom.get("pulsar/schemaId"):
            msg.schemaId = str(custom["pulsar/schemaId"])
    elif action == "delete_object":
        if exp.get("ledger_id") is not None:
            msg.ledgerId = int(exp["ledger_id"])
        if exp.get("managed_ledger"):
            msg.managedLedgerName = str(exp["managed_ledger"])
        msg.objectKey = str(exp["objects"][0]["key"])
        if exp.get("bucket"):
            msg.bucket = str(exp["bucket"])
        msb, lsb = uuid_to_bits(str(exp["uuid"]))
        msg.context.uidMsb = msb
        msg.context.uidLsb = lsb
    else:
        msg.managedLedgerName = str(exp["managed_ledger"])
    return msg


def properties(item: Mapping[str, Any], plan_hash: str, approval_id: str) -> dict[str, str]:
    """Message properties of an item's message."""
    return {PROP_PLAN: plan_hash, PROP_ITEM: str(item["item_id"]), PROP_APPROVAL: approval_id}


def decode(data: bytes) -> pb.PendingDeleteLedgerInfo:
    """A message payload -> PendingDeleteLedgerInfo; DecodeError for anything else."""
    msg = pb.PendingDeleteLedgerInfo()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf raises DecodeError or RuntimeWarning subclasses
        raise DecodeError("deletion message", f"payload is not a PendingDeleteLedgerInfo ({e})") from e
    if not msg.HasField("ledgerType") or not msg.planHash or not msg.itemId:
        raise DecodeError("deletion message", "payload lacks ledgerType, planHash or itemId")
    return msg


def describe(msg: pb.PendingDeleteLedgerInfo) -> dict[str, Any]:
    """The message's fields as a plain dict, for the journal."""
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        if field.name == "context":
            out["context"] = {"uidMsb": msg.context.uidMsb, "uidLsb": msg.context.uidLsb}
        elif field.enum_type is not None:
            out[field.name] = field.enum_type.values_by_number[value].name
        else:
            out[field.name] = value
    return out
