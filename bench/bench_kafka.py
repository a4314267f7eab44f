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

from ledgerlens.formats.kafka_remote_log import (
    SegmentRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    decode_record,
    encode_record,
    uuid_from_bytes,
)
from ledgerlens.inventory import schemas
from ledgerlens.kafka.audit import KafkaAuditConfig, run_kafka_audit
from ledgerlens.kafka.replay import MetadataRecord, replay
from ledgerlens.runtime.spark import configure

NOW = 1_800_000_000_000
H = 3_600_000


def generate(segments: int, partitions: int) -> list[MetadataRecord]:
    """Records of ``segments`` segments spread over ``partitions`` user partitions of 100 topics.

    Each user partition's record prefix is encoded once by ``encode_record`` and the per-segment
    fields are packed behind it (the bytes are identical; checked on the first segment).
    """
    import struct

    tips = [
        TopicIdPartition(f"topic-{p % 100}", uuid_from_bytes((p % 100 + 1).to_bytes(16, "big")), p // 100)
        for p in range(partitions)
    ]
    marker = bytes(range(1, 17))  # a segment id found nowhere else in the record
    sid0 = uuid_from_bytes(marker)
    heads, upd_heads = [], []
    for tip in tips:
        start = encode_record(
            SegmentRecord(tip, sid0, 0, 0, 1, 0, 0, ((0, 0),), 0, None, "COPY_SEGMENT_STARTED")
        )
        upd = encode_record(SegmentUpdateRecord(tip, sid0, 1, 0, None, "COPY_SEGMENT_FINISHED"))
        heads.append(start[: start.index(marker)])
        upd_heads.append(upd[: upd.index(marker)])
    body = struct.Struct(">qqiqq")
    epoch = struct.Struct(">iq")
    upd_body = struct.Struct(">iq")
    per = segments // partitions
    out: list[MetadataRecord] = []
    off = 0
    for i in range(segments):
        p = i % partitions
        raw_sid = (i + 1_000_000_000).to_bytes(16, "big")
        lo = (i // partitions) * 1000
        ms = NOW - 48 * H + (i // partitions) * 1000
        start = (
            heads[p] + raw_sid + b"\x00" + body.pack(lo, lo + 999, 1, ms, ms)
            + b"\x02" + epoch.pack(0, lo) + b"\x00" + (1 << 20).to_bytes(4, "big") + b"\x00\x00\x00"
        )  # fmt: skip
        if i == 0:
            sid = uuid_from_bytes(raw_sid)
            want = SegmentRecord(
                tips[p], sid, lo, lo + 999, 1, ms, ms, ((0, lo),), 1 << 20, None, "COPY_SEGMENT_STARTED"
            )
            assert start == encode_record(want)
        out.append(MetadataRecord(0, off, ms, start))
        states = [(ms + 5, 1)]
        if i // partitions < per // 10:  # the oldest tenth deleted by retention
            states += [(ms + 9, 2), (ms + 9, 3)]
        for k, (t, state) in enumerate(states, 1):
            out.append(MetadataRecord(0, off + k, ms, upd_heads[p] + raw_sid + b"\x00" + upd_body.pack(1, t)
                                      + b"\x00" + bytes([state, 0])))  # fmt: skip
        off += 1 + len(states)
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
                    "etag": pa.nulls(n, pa.string()),
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
