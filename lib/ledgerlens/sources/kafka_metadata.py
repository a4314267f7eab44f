"""Read Kafka's ``__remote_log_metadata`` topic, bounded, and the cluster's topic configs.

The read is bounded: the end offset of every metadata partition is taken once at the start, and
each partition is read from its earliest offset up to that end (one Spark task per partition), so
the result is a snapshot as of the start and a busy cluster cannot keep the read going forever.

Client settings beyond the bootstrap servers (security protocol, SASL, TLS) come from a
librdkafka properties file named by ``$LEDGERLENS_KAFKA_CONFIG`` (``key=value`` lines), never
from parameters, so credentials stay out of command lines, notebooks and reports.

A dump file (JSON lines: ``partition``, ``offset``, ``timestamp_ms``, ``value`` as base64 or
null) stands in for the topic when the cluster cannot be reached from where the audit runs;
:func:`write_dump` writes one from a live read.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerlens.errors import ConfigError, SourceError
from ledgerlens.formats.kafka_remote_log import METADATA_TOPIC, MetadataRecord, uuid_from_bytes

__all__ = [
    "CONFIG_ENV",
    "KafkaSource",
    "PartitionRange",
    "client_config",
    "describe_topics",
    "end_offsets",
    "kafka_uuid",
    "read_dump",
    "read_partition",
    "write_dump",
]

CONFIG_ENV = "LEDGERLENS_KAFKA_CONFIG"
_TOPIC_CONFIGS = ("remote.storage.enable", "retention.ms", "retention.bytes", "local.retention.ms")


@dataclass(frozen=True)
class KafkaSource:
    """Where the cluster is and how long a read may wait without progress."""

    bootstrap_servers: str
    metadata_topic: str = METADATA_TOPIC
    timeout_s: float = 30.0


@dataclass(frozen=True)
class PartitionRange:
    """One metadata partition and the offsets ``[low, high)`` to read."""

    partition: int
    low: int
    high: int


def client_config(source: KafkaSource) -> dict[str, Any]:
    """librdkafka settings: the bootstrap servers plus the file named by ``$LEDGERLENS_KAFKA_CONFIG``."""
    conf: dict[str, Any] = {}
    path = os.environ.get(CONFIG_ENV)
    if path:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as e:
            raise ConfigError(
                f"{CONFIG_ENV}={path}: cannot read the Kafka client config ({e.strerror})"
            ) from e
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{path} line {n}: expected key=value")
            conf[key.strip()] = value.strip()
    conf["bootstrap.servers"] = source.bootstrap_servers
    conf.setdefault("socket.timeout.ms", int(source.timeout_s * 1000))
    return conf


def _where(source: KafkaSource) -> str:
    return f"kafka {source.bootstrap_servers}"


def _consumer(source: KafkaSource) -> Any:
    from confluent_kafka import Consumer  # kafka client: only to read the topic

    conf = client_config(source)
    conf.update(
        {
            "group.id": "ledgerlens-audit",  # never committed: offsets are assigned explicitly
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "isolation.level": "read_committed",
        }
    )
    return Consumer(conf)


def end_offsets(source: KafkaSource) -> list[PartitionRange]:
    """Every metadata partition with its earliest and end offsets, taken now."""
    from confluent_kafka import KafkaException, TopicPartition  # kafka client: only to read the topic

    consumer = _consumer(source)
    try:
        try:
            md = consumer.list_topics(source.metadata_topic, timeout=source.timeout_s)
        except KafkaException as e:
            raise SourceError(_where(source), f"cannot list topic {source.metadata_topic}: {e}") from e
        topic = md.topics.get(source.metadata_topic)
        if topic is None or topic.error is not None or not topic.partitions:
            problem = topic.error if topic is not None and topic.error is not None else "no partitions"
            raise SourceError(
                _where(source),
                f"topic {source.metadata_topic} not readable ({problem}); is remote storage enabled?",
            )
        out = []
        for p in sorted(topic.partitions):
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(source.metadata_topic, p), timeout=source.timeout_s
                )
            except KafkaException as e:
                raise SourceError(
                    _where(source), f"cannot read the offsets of {source.metadata_topic} partition {p}: {e}"
                ) from e
            out.append(PartitionRange(p, int(low), int(high)))
        return out
    finally:
        consumer.close()


def read_partition(source: KafkaSource, rng: PartitionRange) -> Iterator[MetadataRecord]:
    """The records of one metadata partition in ``[rng.low, rng.high)``, in offset order.

    Raises :class:`SourceError` when no record arrives for ``source.timeout_s`` before the end.
    """
    from confluent_kafka import KafkaError, TopicPartition  # kafka client: only to read the topic

    if rng.high <= rng.low:
        return
    consumer = _consumer(source)
    name = f"{source.metadata_topic} partition {rng.partition}"
    try:
        consumer.assign([TopicPartition(source.metadata_topic, rng.partition, rng.low)])
        position = rng.low
        last_progress = time.monotonic()
        while position < rng.high:
            msgs = consumer.consume(1000, timeout=1.0)
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise SourceError(_where(source), f"reading {name} at offset {position}: {err}")
                off = m.offset()
                if off >= rng.high:
                    position = rng.high
                    break
                ts_type, ts = m.timestamp()
                yield MetadataRecord(rng.partition, off, ts if ts_type else None, m.value())
                position = off + 1
            # compaction or transaction markers leave gaps: trust the consumer's position too
            pos = consumer.position([TopicPartition(source.metadata_topic, rng.partition)])[0].offset
            if pos >= 0:
                position = max(position, pos)
            if msgs:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > source.timeout_s:
                raise SourceError(
                    _where(source),
                    f"reading {name}: no progress for {source.timeout_s:.0f}s at offset {position} "
                    f"of [{rng.low}, {rng.high})",
                )
    finally:
        consumer.close()


def kafka_uuid(value: Any) -> str:
    """A client ``Uuid`` in Kafka's own text form (URL-safe base64; the client prints standard base64)."""
    raw = struct.pack(">qq", value.get_most_significant_bits(), value.get_least_significant_bits())
    return uuid_from_bytes(raw)


def describe_topics(source: KafkaSource) -> list[dict[str, Any]]:
    """KAFKA_TOPICS rows: every topic's id, partition count and the configs the audit needs."""
    from confluent_kafka import KafkaException, TopicCollection  # kafka client: only to describe topics
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(client_config(source))
    try:
        names = sorted(
            t for t in admin.list_topics(timeout=source.timeout_s).topics if t != source.metadata_topic
        )
    except KafkaException as e:
        raise SourceError(_where(source), f"cannot list topics: {e}") from e
    rows: list[dict[str, Any]] = []
    if not names:
        return rows
    descs = admin.describe_topics(TopicCollection(names), request_timeout=source.timeout_s)
    confs = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, n) for n in names], request_timeout=source.timeout_s
    )
    by_name = {res.name: fut for res, fut in confs.items()}
    for name in names:
        row: dict[str, Any] = {"topic": name}
        try:
            d = descs[name].result()
            row["topic_id"] = kafka_uuid(d.topic_id)
            row["partitions"] = len(d.partitions)
            entries = by_name[name].result()
            values = {k: entries[k].value for k in _TOPIC_CONFIGS if k in entries}
            row["remote_storage_enable"] = str(values.get("remote.storage.enable", "false")).lower() == "true"
            for key, col in (
                ("retention.ms", "retention_ms"),
                ("retention.bytes", "retention_bytes"),
                ("local.retention.ms", "local_retention_ms"),
            ):
                v = values.get(key)
                row[col] = int(v) if v not in (None, "") else None
        except (KafkaException, KeyError, ValueError) as e:
            row["error"] = f"describe failed: {e}"
        rows.append(row)
    return rows


def read_dump(path: str | Path) -> Iterator[MetadataRecord]:
    """Records of a dump file (JSON lines); a bad line is a :class:`SourceError` naming it."""
    p = Path(path)
    try:
        fh = p.open()
    except OSError as e:
        raise SourceError(f"dump {p}", f"cannot open: {e.strerror}") from e
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                value = d.get("value")
                yield MetadataRecord(
                    int(d["partition"]),
                    int(d["offset"]),
                    None if d.get("timestamp_ms") is None else int(d["timestamp_ms"]),
                    None if value is None else base64.b64decode(value, validate=True),
                )
            except (ValueError, KeyError, TypeError) as e:
                raise SourceError(f"dump {p}", f"line {n} is not a metadata record ({e})") from e


def write_dump(path: str | Path, records: Iterable[MetadataRecord]) -> int:
    """Write ``records`` as a dump file; returns how many."""
    n = 0
    with Path(path).open("w") as fh:
        for r in records:
            value = None if r.value is None else base64.b64encode(r.value).decode("ascii")
            fh.write(
                json.dumps(
                    {
                        "partition": r.partition,
                        "offset": r.offset,
                        "timestamp_ms": r.timestamp_ms,
                        "value": value,
                    }
                )
                + "\n"
            )
            n += 1
    return n
