"""Benchmark the Kafka (KIP-405) audit at 1,000,000 remote segments (generated records).

One run measures, each against a baseline taken in the same run:

(a) replay: records/s of ``ledgerlens.kafka.replay`` over real record bytes (each segment written as
    a COPY_SEGMENT_STARTED metadata record and a COPY_SEGMENT_FINISHED update, a tenth deleted),
    against decoding the same records alone (``decode_record``);
(b) audit: segments/s of ``run_kafka_audit`` written to Parquet over the replayed tables and a
    listing of three files per segment, against a full read of the same tables
    (``sum(hash(*columns))`` over every column).

    .venv/bin/python bench/bench_kafka.py                    # 1,000,000 segments
    .venv/bin/python bench/bench_kafka.py --segments 100000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens import schemas
from ledgerlens.formats.kafka_remote_log import (
    SegmentRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    decode_record,
    encode_record,
    uuid_from_bytes,
)
from ledgerlens.kafka.audit import KafkaAuditConfig, run_kafka_audit
from ledgerlens.kafka.replay import MetadataRecord, replay
from ledgerlens.spark import configure

NOW = 1_800_000_000_000
H = 3_600_000


def generate(segments: int, partitions: int) -> list[MetadataRecord]:
    """Records of ``segments`` segments spread over ``partitions`` user partitions of 100 topics."""
    out: list[MetadataRecord] = []
    tips = [
        TopicIdPartition(f"topic-{p % 100}", uuid_from_bytes((p % 100 + 1).to_bytes(16, "big")), p // 100)
        for p in range(partitions)
    ]
    per = segments // partitions
    off = 0
    for i in range(segments):
        tip = tips[i % partitions]
        sid = uuid_from_bytes((i + 1_000_000_000).to_bytes(16, "big"))
        lo = (i // partitions) * 1000
        ms = NOW - 48 * H + (i // partitions) * 1000
        start = SegmentRecord(
            tip, sid, lo, lo + 999, 1, ms, ms, ((0, lo),), 1 << 20, None, "COPY_SEGMENT_STARTED"
        )
        out.append(MetadataRecord(0, off, ms, encode_record(start)))
        out.append(
            MetadataRecord(
                0,
                off + 1,
                ms,
                encode_record(SegmentUpdateRecord(tip, sid, 1, ms + 5, None, "COPY_SEGMENT_FINISHED")),
            )
        )
        off += 2
        if i // partitions < per // 10:  # the oldest tenth deleted by retention
            for state in ("DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED"):
                out.append(
                    MetadataRecord(
                        0, off, ms, encode_record(SegmentUpdateRecord(tip, sid, 1, ms + 9, None, state))
                    )
                )
                off += 1
    return out


def write_tables(spark: SparkSession, state, base: Path) -> dict[str, str]:
    """Replay tables and a three-files-per-live-segment listing as Parquet."""
    paths = {}
    rows = {
        "remote_segments": list(state.segment_rows()),
        "remote_partitions": list(state.partitions.values()),
        "remote_log_events": state.events,
    }
    for name, data in rows.items():
        d = base / name
        d.mkdir(parents=True)
        pq.write_table(
            pa.Table.from_pylist(data, schema=to_arrow_schema(schemas.KAFKA_INVENTORY[name])), d / "p.parquet"
        )
        paths[name] = str(d)
    seg = pq.read_table(base / "remote_segments" / "p.parquet")
    seg = seg.filter(pc.not_equal(seg["state"], "DELETE_SEGMENT_FINISHED"))
    parts = []
    for role in ("log", "index", "timeindex"):
        name = pc.binary_join_element_wise(
            pc.utf8_lpad(pc.cast(seg["start_offset"], pa.string()), 20, "0"), seg["segment_id"], "-"
        )
        dirname = pc.binary_join_element_wise(
            seg["topic"], pc.cast(seg["partition"], pa.string()), seg["topic_id"], "-"
        )
        key = pc.binary_join_element_wise(dirname, pc.binary_join_element_wise(name, role, "."), "/")
        n = len(seg)
        parts.append(
            pa.table(
                {
                    "store": pa.array(["file:///bench"] * n),
                    "key": key,
                    "size": pa.array([1 << 20] * n, pa.int64()),
                    "last_modified_ms": pa.array([NOW - 24 * H] * n, pa.int64()),
                    "layout": pa.array(["local"] * n),
                    "topic": seg["topic"],
                    "topic_id": seg["topic_id"],
                    "partition": seg["partition"],
                    "start_offset": seg["start_offset"],
                    "segment_id": seg["segment_id"],
                    "role": pa.array([role] * n),
                }
            ).cast(to_arrow_schema(schemas.REMOTE_OBJECTS))
        )
    d = base / "remote_objects"
    d.mkdir()
    pq.write_table(pa.concat_tables(parts), d / "p.parquet")
    paths["remote_objects"] = str(d)
    topics = [
        {"topic": f"topic-{t}", "topic_id": uuid_from_bytes((t + 1).to_bytes(16, "big")), "partitions": 1,
         "remote_storage_enable": True, "retention_ms": -1}
        for t in range(100)
    ]  # fmt: skip
    d = base / "kafka_topics"
    d.mkdir()
    pq.write_table(
        pa.Table.from_pylist(topics, schema=to_arrow_schema(schemas.KAFKA_TOPICS)), d / "p.parquet"
    )
    paths["kafka_topics"] = str(d)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--dir", default="bench-out/kafka")
    ap.add_argument("--spark-master", default="local[2]")
    a = ap.parse_args()
    base = Path(a.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)

    t = time.monotonic()
    records = generate(a.segments, a.partitions)
    print(
        f"generated {len(records):,} records of {a.segments:,} segments in {time.monotonic() - t:.1f} s",
        flush=True,
    )

    t = time.monotonic()
    for r in records:
        decode_record(r.value)  # type: ignore[arg-type]
    decode_s = time.monotonic() - t
    t = time.monotonic()
    state = replay(records)
    replay_s = time.monotonic() - t
    n = len(records)
    print(f"decode only: {n / decode_s:,.0f} records/s ({decode_s:.1f} s)")
    print(
        f"replay:      {n / replay_s:,.0f} records/s ({replay_s:.1f} s), "
        f"{replay_s / decode_s:.2f}x decode only"
    )
    assert len(state.segments) == a.segments and not state.events
    del records

    spark = configure(SparkSession.builder, master=a.spark_master, shuffle_partitions=8).getOrCreate()
    paths = write_tables(spark, state, base / "inventory")
    del state
    tables = {k: spark.read.schema(schemas.KAFKA_INVENTORY[k]).parquet(v) for k, v in paths.items()}

    t = time.monotonic()
    for df in tables.values():
        df.select(F.sum(F.hash(*df.columns))).collect()
    read_s = time.monotonic() - t
    cfg = KafkaAuditConfig(as_of_ms=NOW, layout="local", min_orphan_age_s=3600)
    t = time.monotonic()
    run_kafka_audit(tables, cfg).write.mode("overwrite").parquet(str(base / "findings"))
    audit_s = time.monotonic() - t
    found = spark.read.parquet(str(base / "findings")).count()
    print(f"full read:   {read_s:.1f} s")
    print(
        f"audit:       {a.segments / audit_s:,.0f} segments/s ({audit_s:.1f} s), "
        f"{audit_s / read_s:.2f}x a full read, {found} findings"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
