"""Kafka tiered storage (KIP-405): the ``remote_segment_*`` kinds, and the explanation of a corrupt
``__remote_log_metadata`` record (``corrupt_metadata``, declared in ``kinds.metadata``); rules:
``ledgerlens.kafka.audit``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledgerlens.report.kinds.finding import NOT_OURS, Finding, lines, q
from ledgerlens.report.kinds.registry import Subject
from ledgerlens.report.text import human_duration

_KAFKA = Subject("kafka", rule="kafka/audit.py")

KAFKA_METADATA_FORMATTER = (
    "org.apache.kafka.server.log.remote.metadata.storage.serialization."
    "RemoteLogMetadataSerde$RemoteLogMetadataFormatter"
)
"""Kafka's console-consumer formatter that prints ``__remote_log_metadata`` records."""

METADATA_TOPIC = "__remote_log_metadata"
"""Kafka's topic of remote segment metadata records (KIP-405)."""


def _kafka_bootstrap(f: Finding) -> str:
    return f.where.kafka or "BOOTSTRAP"


def _kafka_topic(f: Finding) -> str:
    return str(f.ev("topic") or "TOPIC")


def _kafka_partition(f: Finding) -> str:
    """``topic-partition`` (``TOPIC-P`` when unknown)."""
    p = f.ev("partition")
    return f"{_kafka_topic(f)}-{p if p is not None else 'P'}"


def _kafka_segment(f: Finding) -> str:
    """``segment <id> of <topic>-<partition> (offsets a to b)``."""
    seg = f.ev("segment_id") or "?"
    start, end = f.ev("start_offset"), f.ev("end_offset")
    span = f" (offsets {start} to {end})" if start is not None and end is not None else ""
    if start is not None and end is None:
        span = f" (from offset {start})"
    return f"segment {seg} of {_kafka_partition(f)}{span}"


def _kafka_store(f: Finding) -> str:
    """``s3://bucket/prefix`` or ``file:///root`` of the segment files."""
    store = str(f.ev("store") or "")
    if store:
        return store
    return f"s3://{f.where.bucket}/" if f.where.bucket else "the remote storage"


def _kafka_object(f: Finding, op: str, key: str | None = None) -> str:
    """The command that looks at (``head``) or deletes (``delete``) one segment file."""
    key = key or f.key
    store = _kafka_store(f)
    if store.startswith("file://"):
        path = q(str(Path(store[len("file://") :]) / key))
        return f"ls -l {path}" if op == "head" else f"rm {path}"
    bucket = store[len("s3://") :].split("/", 1)[0] if store.startswith("s3://") else f.bucket
    endpoint = f" --endpoint-url {q(f.where.s3_endpoint)}" if f.where.s3_endpoint else ""
    verb = "head-object" if op == "head" else "delete-object"
    return f"aws s3api {verb}{endpoint} --bucket {q(bucket or 'BUCKET')} --key {q(key)}"


def _kafka_describe(f: Finding) -> str:
    return (
        f"kafka-topics.sh --bootstrap-server {q(_kafka_bootstrap(f))} --describe --topic {q(_kafka_topic(f))}"
    )


def _kafka_configs(f: Finding, topic: str | None = None) -> str:
    return (
        f"kafka-configs.sh --bootstrap-server {q(_kafka_bootstrap(f))} --entity-type topics "
        f"--entity-name {q(topic or _kafka_topic(f))} --describe --all"
    )


def _kafka_record(f: Finding) -> str:
    """The console-consumer command printing the metadata record of this finding."""
    part, off = f.ev("metadata_partition"), f.ev("metadata_offset")
    topic = str(f.ev("metadata_topic") or METADATA_TOPIC)
    return (
        f"kafka-console-consumer.sh --bootstrap-server {q(_kafka_bootstrap(f))} --topic {q(topic)} "
        f"--partition {part if part is not None else 'P'} --offset {off if off is not None else 'O'} "
        f"--max-messages 1 --formatter {q(KAFKA_METADATA_FORMATTER)}"
    )


def _kafka_rerun(f: Finding) -> str:
    return f"ledgerlens kafka-audit --bootstrap-servers {q(_kafka_bootstrap(f))} ... (same storage flags)"


def _remote_file(f: Finding, age: str = "") -> str:
    """``Remote <role> file <key> (<size><age>)``."""
    role = f.ev("role")
    return f"Remote {f'{role} file' if role else 'file'} {f.object_key or '?'} ({f.size}{age})"


def _metadata_record(f: Finding) -> str:
    """The finding's ``__remote_log_metadata`` record (or the topic itself)."""
    return str(f.path or METADATA_TOPIC)


def _reclaim(f: Finding, kind: str) -> tuple[str, str]:
    """The deletion plan of ``kind``'s findings, and deleting this one by hand."""
    plan = f"ledgerlens plan --findings DIR --kinds {kind} --out plan.json"
    return plan, f"by hand, once confirmed: {_kafka_object(f, 'delete')}"


def _remote_orphan(f: Finding) -> tuple[str, str]:
    why = f.ev("reason") or "no segment metadata record names its segment"
    reason = (
        f"{_remote_file(f, f.aged(', last modified {} ago'))} of {_kafka_segment(f)} in "
        f"{_kafka_store(f)} belongs to no live segment of the topic: {why}."
    )
    blind = f.ev("corrupt_metadata_records") or 0
    steps = [
        f"Look at it: {_kafka_object(f, 'head')}",
        f"Check the topic still exists with topic id {f.ev('topic_id') or '?'}: {_kafka_describe(f)}",
    ]
    if blind:
        steps.append(
            f"{blind} corrupt metadata record(s) may name this segment: fix them (corrupt_metadata findings) "
            "and audit again before deleting anything."
        )
    else:
        plan, by_hand = _reclaim(f, "remote_segment_orphan_object")
        steps += [
            "Kafka never reads it again: reclaim it through an approved deletion plan",
            f"  {plan}",
            by_hand,
        ]
    return reason, lines(*steps)


REMOTE_SEGMENT_ORPHAN_OBJECT = _KAFKA.declare("remote_segment_orphan_object", "warning", _remote_orphan)


def _remote_foreign(f: Finding) -> tuple[str, str]:
    reason = (
        f"{_remote_file(f, f.aged(', last modified {} ago'))} in {_kafka_store(f)} is of topic id "
        f"{f.ev('topic_id') or '?'}, which neither this cluster's metadata nor its topics know: another "
        "cluster writes to the same storage, or the topic's metadata was removed."
    )
    step = lines(
        f"Look at it: {_kafka_object(f, 'head')}",
        f"Is {_kafka_topic(f)} a topic of another Kafka cluster using this storage? Audit that cluster "
        "with ledgerlens kafka-audit against the same bucket or directory.",
        NOT_OURS,
    )
    return reason, step


REMOTE_SEGMENT_FOREIGN_OBJECT = _KAFKA.declare("remote_segment_foreign_object", "info", _remote_foreign)


def _remote_deleted_partition(f: Finding) -> tuple[str, str]:
    why = f.ev("reason") or "its topic or partition was deleted"
    reason = f"{_remote_file(f)} of {_kafka_segment(f)} is still in {_kafka_store(f)} although {why}."
    steps = [
        f"Confirm the topic is gone (expect UnknownTopicOrPartitionException): {_kafka_describe(f)}",
        f"Look at it: {_kafka_object(f, 'head')}",
    ]
    if f.get("action") == "delete_object":
        plan, by_hand = _reclaim(f, "remote_segment_deleted_partition_object")
        steps += [f"Reclaim it through an approved deletion plan: {plan}", by_hand]
    else:
        steps.append(
            "Its segment still has live metadata (or a metadata record is corrupt): wait for the broker's "
            "deletion and audit again before deleting by hand."
        )
    return reason, lines(*steps)


REMOTE_SEGMENT_DELETED_PARTITION_OBJECT = _KAFKA.declare(
    "remote_segment_deleted_partition_object", "warning", _remote_deleted_partition
)


def _remote_missing(f: Finding) -> tuple[str, str]:
    missing = f.ev("missing_roles") or []
    what = ", ".join(str(r) for r in missing) or "required"
    reason = (
        f"The metadata says {_kafka_segment(f)} ({f.size}) is copied to remote storage "
        f"(COPY_SEGMENT_FINISHED), but its {what} file(s) are absent from {_kafka_store(f)}: consumers "
        "reading these offsets from remote storage fail."
    )
    steps = [f"Confirm: {_kafka_object(f, 'head')}"]
    store = _kafka_store(f)
    if store.startswith("s3://"):
        bucket = store[len("s3://") :].split("/", 1)[0]
        steps.append(
            "Check the bucket's lifecycle rules and versioning (restore a previous version if versioned): "
            f"aws s3api get-bucket-lifecycle-configuration --bucket {q(bucket)}"
        )
    steps += [
        f"Does the leader still hold these offsets locally? {_kafka_describe(f)}",
        "If not, the offsets are lost: tell the topic's consumers before the broker deletes the segment.",
    ]
    return reason, lines(*steps)


REMOTE_SEGMENT_MISSING_OBJECT = _KAFKA.declare("remote_segment_missing_object", "critical", _remote_missing)


@dataclass(frozen=True)
class _Stuck:
    """The explainer of a segment change that started and never finished (``remote_segment_stuck_*``)."""

    change: str  # "upload", "deletion"
    state: str  # the record that started it: COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED
    files_are: str  # where the files are: "sit in", "are still in"
    errors: str  # the broker's log lines to look for: "copy", "delete"
    check: Callable[[Finding], str]  # the last step

    def __call__(self, f: Finding) -> tuple[str, str]:
        reason = (
            f"The {self.change} of {_kafka_segment(f)} started {f.age or 'long'} ago and never finished "
            f"({self.state}{f.ev_duration('threshold_s')}); {f.size} of its files {self.files_are} "
            f"{_kafka_store(f)}."
        )
        step = lines(
            f"Find the partition's leader (then its log: RemoteLogManager {self.errors} errors): "
            f"{_kafka_describe(f)}",
            f"See the record that started it: {_kafka_record(f)}",
            self.check(f),
        )
        return reason, step


REMOTE_SEGMENT_STUCK_COPY = _KAFKA.declare(
    "remote_segment_stuck_copy",
    "warning",
    _Stuck(
        "upload",
        "COPY_SEGMENT_STARTED",
        "sit in",
        "copy",
        lambda f: (
            "Check the remote storage is reachable and writable from that broker; the files stay while "
            "the metadata names the segment (never delete them by hand)."
        ),
    ),
)
REMOTE_SEGMENT_STUCK_DELETE = _KAFKA.declare(
    "remote_segment_stuck_delete",
    "warning",
    _Stuck(
        "deletion",
        "DELETE_SEGMENT_STARTED",
        "are still in",
        "delete",
        lambda f: f"Check the broker may delete from the storage: {_kafka_object(f, 'head')}",
    ),
)


def _remote_retention(f: Finding) -> tuple[str, str]:
    ms = f.ev("retention_ms")
    ret = f"retention.ms {human_duration(ms / 1000)}" if isinstance(ms, int | float) else "its retention"
    reason = (
        f"Remote {_kafka_segment(f)} ({f.size}) holds records {f.age or 'long'} old, past the topic's "
        f"{ret} plus the grace: the broker should have deleted it."
    )
    step = lines(
        f"Check the topic's retention and remote settings: {_kafka_configs(f)}",
        f"Find the partition's leader (then its log: RemoteLogManager expiration): {_kafka_describe(f)}",
        "Retention by size (retention.bytes) is not judged here: it may keep the segment on purpose.",
    )
    return reason, step


REMOTE_SEGMENT_RETENTION_OVERDUE = _KAFKA.declare(
    "remote_segment_retention_overdue", "warning", _remote_retention
)


def _remote_overlap(f: Finding) -> tuple[str, str]:
    other = f.ev("overlaps_segment") or "?"
    reason = (
        f"Remote {_kafka_segment(f)} overlaps segment {other} (which ends at offset "
        f"{f.ev('overlaps_end_offset', '?')}) with a different leader-epoch chain: the partition's history "
        "diverged (an unclean leader election), which can stop remote deletion in this partition."
    )
    step = lines(
        f"See both segments' records: {_kafka_record(f)}",
        f"Check whether unclean leader election is enabled: {_kafka_configs(f)}",
        "Compare the leader epochs in the evidence; keep both segments until the topic's owner decides.",
    )
    return reason, step


REMOTE_SEGMENT_OVERLAP = _KAFKA.declare("remote_segment_overlap", "warning", _remote_overlap)


def _remote_illegal(f: Finding) -> tuple[str, str]:
    frm, to = f.ev("from_state") or "?", f.ev("to_state") or "?"
    where = _metadata_record(f)
    what = (
        f"an update of {_kafka_segment(f)} from {frm} to {to} that Kafka's metadata manager rejects"
        if f.severity != "info"
        else f"an update of {_kafka_segment(f)} the metadata manager no longer knows (to {to})"
    )
    reason = f"Metadata record {where} is {what}, so the broker ignored it" + (
        f": {f.ev('problem')}." if f.ev("problem") else "."
    )
    step = lines(
        f"Read the record: {_kafka_record(f)}",
        "A late duplicate after DELETE_SEGMENT_FINISHED is harmless; else check the writing broker's log.",
    )
    return reason, step


REMOTE_SEGMENT_ILLEGAL_TRANSITION = _KAFKA.declare(
    "remote_segment_illegal_transition",
    "warning",
    _remote_illegal,
    also=("info",),
    varies="info for an update of a segment the metadata manager no longer knows (a late duplicate)",
)


def _remote_growth(f: Finding) -> tuple[str, str]:
    records, live = f.ev("records"), f.ev("live_segments")
    ratio = f.ev("records_per_live_segment")
    reason = (
        f"{_metadata_record(f)} holds {records if records is not None else 'many'} records for "
        f"{live if live is not None else 'few'} live remote segments ({ratio or '?'} per segment): its "
        "retention is infinite by default, so brokers replay a longer history at every restart."
    )
    step = lines(
        f"See its configuration: {_kafka_configs(f, _metadata_record(f))}",
        "Consider the broker setting remote.log.metadata.topic.retention.ms (default -1, infinite): it must "
        "stay longer than the retention of every tiered topic, or live segments lose their metadata.",
    )
    return reason, step


REMOTE_SEGMENT_METADATA_GROWTH = _KAFKA.declare("remote_segment_metadata_growth", "info", _remote_growth)


def kafka_corrupt_record(f: Finding) -> tuple[str, str]:
    """``corrupt_metadata`` of a Kafka ``__remote_log_metadata`` record (kafka-audit)."""
    problem = str(f.ev("problem") or "does not decode")
    reason = f"Metadata record {_metadata_record(f)} cannot be decoded: {problem}."
    step = lines(
        f"Read it with Kafka's own decoder: {_kafka_record(f)}",
        "Until it decodes, no remote object is offered for deletion (the record may name it).",
    )
    return reason, step
