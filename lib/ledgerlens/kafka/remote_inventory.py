"""Collect the KIP-405 inventory: the metadata topic replayed, the remote storage listed, the topics.

Order matters for safety: the metadata topic is read first (its end offsets taken at the start),
then the remote storage is listed. An object written after the metadata read looks unknown; the
minimum orphan age and re-verification keep it from being reported.

The metadata topic is read one Spark task per metadata partition; each task replays its own
partition (a user partition's records all live in one metadata partition) and returns Arrow
batches of the three replay tables, tagged by table. The storage is listed one task per top-level
directory (topic, or topic-partition in the local layout).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.inventory import schemas
from ledgerlens.inventory.tasks import batches, tagged_batches, tagged_schema
from ledgerlens.kafka.replay import Replay, replay
from ledgerlens.sources.kafka_metadata import (
    KafkaSource,
    PartitionRange,
    describe_topics,
    end_offsets,
    read_dump,
    read_partition,
)
from ledgerlens.sources.remote_storage import RemoteStore, list_items, list_objects

__all__ = ["KafkaInventory", "collect_kafka_inventory", "load_kafka_inventory"]

_REPLAY_TABLES = ("remote_segments", "remote_partitions", "remote_log_events")
_TAGGED = tagged_schema(_REPLAY_TABLES, schemas.KAFKA_INVENTORY)


@dataclass
class KafkaInventory:
    """Where the tables were written, row counts, the metadata offsets read, timings."""

    out_dir: str
    tables: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    ranges: list[PartitionRange] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    topics_known: bool = False


def _path(out_dir: str, table: str) -> str:
    return f"{out_dir.rstrip('/')}/{table}"


def _replay_rows(state: Replay) -> Iterator[tuple[str, dict[str, Any]]]:
    for r in state.segment_rows():
        yield "remote_segments", r
    for p in state.partitions.values():
        yield "remote_partitions", p
    for e in state.events:
        yield "remote_log_events", e


def _write_replay_local(state: Replay, out_dir: str) -> None:
    """Write a driver-side replay (dump files) straight to Parquet."""
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in _REPLAY_TABLES}
    for t, r in _replay_rows(state):
        rows[t].append(r)
    for t in _REPLAY_TABLES:
        d = Path(_path(out_dir, t))
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.parquet"):
            old.unlink()
        arrow = to_arrow_schema(schemas.KAFKA_INVENTORY[t])
        pq.write_table(pa.Table.from_pylist(rows[t], schema=arrow), str(d / "part-00000.parquet"))


def collect_kafka_inventory(
    spark: SparkSession,
    out_dir: str,
    *,
    source: KafkaSource | None,
    store: RemoteStore | None,
    dump: str | None = None,
    progress: bool = True,
) -> KafkaInventory:
    """Read the metadata (``source`` or ``dump``), list ``store``, describe topics; write Parquet."""
    inv = KafkaInventory(out_dir)
    t0 = time.monotonic()
    if dump:
        state = replay(read_dump(dump))
        _write_replay_local(state, out_dir)
    elif source is not None:
        ranges = end_offsets(source)
        inv.ranges = ranges
        rng_df = spark.createDataFrame(
            [(r.partition, r.low, r.high) for r in ranges], "partition int, low long, high long"
        ).repartition(max(1, len(ranges)), "partition")
        src = source

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                for p, lo, hi in zip(*(b.column(i).to_pylist() for i in range(3)), strict=True):
                    st = replay(read_partition(src, PartitionRange(p, lo, hi)), src.metadata_topic)
                    yield from tagged_batches(_replay_rows(st), _REPLAY_TABLES, schemas.KAFKA_INVENTORY)

        tagged_path = _path(out_dir, "_remote_log_replay")
        rng_df.mapInArrow(task, _TAGGED).write.mode("overwrite").parquet(tagged_path)
        tagged = spark.read.schema(_TAGGED).parquet(tagged_path)
        for t in _REPLAY_TABLES:
            tagged.filter(tagged["table"] == t).select(f"{t}.*").write.mode("overwrite").parquet(
                _path(out_dir, t)
            )
    else:
        raise ValueError("collect_kafka_inventory: give a Kafka source or a dump file")
    inv.timings["metadata"] = time.monotonic() - t0

    t1 = time.monotonic()
    obj_schema = schemas.REMOTE_OBJECTS
    if store is not None:
        items = list_items(store)
        st_ = store

        def list_task(batches_in: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches_in:
                for item in b.column(0).to_pylist():
                    yield from batches(list_objects(st_, item), obj_schema)

        items_df = spark.createDataFrame([(i,) for i in items], "item string")
        if items:
            items_df = items_df.repartition(min(len(items), 4 * spark.sparkContext.defaultParallelism))
        items_df.mapInArrow(list_task, obj_schema).write.mode("overwrite").parquet(
            _path(out_dir, "remote_objects")
        )
    else:
        spark.createDataFrame([], obj_schema).write.mode("overwrite").parquet(
            _path(out_dir, "remote_objects")
        )
    inv.timings["objects"] = time.monotonic() - t1

    t2 = time.monotonic()
    topic_rows: list[dict[str, Any]] = describe_topics(source) if source is not None else []
    inv.topics_known = source is not None
    spark.createDataFrame(
        [schemas.to_row(schemas.KAFKA_TOPICS, r) for r in topic_rows], schemas.KAFKA_TOPICS
    ).coalesce(1).write.mode("overwrite").parquet(_path(out_dir, "kafka_topics"))
    inv.timings["topics"] = time.monotonic() - t2

    tables = load_kafka_inventory(spark, out_dir)
    for name, df in tables.items():
        inv.tables[name] = _path(out_dir, name)
        inv.counts[name] = df.count()
    return inv


def load_kafka_inventory(spark: SparkSession, out_dir: str) -> dict[str, DataFrame]:
    """The KIP-405 inventory tables under ``out_dir``, read with their declared schemas."""
    return {
        name: spark.read.schema(schema).parquet(_path(out_dir, name))
        for name, schema in schemas.KAFKA_INVENTORY.items()
    }
