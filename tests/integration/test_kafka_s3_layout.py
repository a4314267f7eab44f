"""kafka-audit over the S3 plugin layout on a real S3 server (moto), metadata from a dump file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest

from ledgerlens.cli import main
from ledgerlens.formats.kafka_remote_keys import segment_keys
from ledgerlens.formats.kafka_remote_log import (
    PartitionDeleteRecord,
    SegmentRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    encode_record,
    uuid_from_bytes,
)
from ledgerlens.kafka.replay import MetadataRecord
from ledgerlens.sources.kafka_metadata import write_dump

pytestmark = pytest.mark.integration

PREFIX = "tiered/"


def uid(n: int) -> str:
    return uuid_from_bytes(n.to_bytes(16, "big"))


def test_s3_plugin_layout_from_a_dump(s3_server, bucket, spark, tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    old = now - 3 * 3_600_000
    pay0 = TopicIdPartition("payments", uid(1), 0)
    pay1 = TopicIdPartition("payments", uid(1), 1)
    healthy, lost, stuck, orphan, dropped = uid(11), uid(12), uid(13), uid(14), uid(15)

    def start(tip, sid, lo, ms):
        return SegmentRecord(tip, sid, lo, lo + 99, 2, ms, ms, ((0, lo),), 1000, None, "COPY_SEGMENT_STARTED")

    recs = [
        start(pay0, healthy, 0, old),
        SegmentUpdateRecord(pay0, healthy, 2, old, None, "COPY_SEGMENT_FINISHED"),
        start(pay0, lost, 100, old),
        SegmentUpdateRecord(pay0, lost, 2, old, None, "COPY_SEGMENT_FINISHED"),
        start(pay0, stuck, 200, old),
        start(pay1, dropped, 0, old),
        SegmentUpdateRecord(pay1, dropped, 2, old, None, "COPY_SEGMENT_FINISHED"),
        PartitionDeleteRecord(pay1, 2, old, "DELETE_PARTITION_MARKED"),
        PartitionDeleteRecord(pay1, 2, old, "DELETE_PARTITION_STARTED"),
        PartitionDeleteRecord(pay1, 2, old, "DELETE_PARTITION_FINISHED"),
    ]
    dump = tmp_path / "rlm.jsonl"
    write_dump(dump, [MetadataRecord(i % 2, i, old, encode_record(r)) for i, r in enumerate(recs)])

    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")

    def put(tip, sid, lo, roles=("log", "indexes", "rsm-manifest")):
        keys = segment_keys("s3-plugin", tip.topic, tip.topic_id, tip.partition, lo, sid, prefix=PREFIX)
        for role in roles:
            s3.put_object(Bucket=bucket, Key=keys[role], Body=b"s" * 64)
        return keys

    put(pay0, healthy, 0)
    lost_keys = put(pay0, lost, 100, roles=("indexes", "rsm-manifest"))
    stuck_keys = put(pay0, stuck, 200, roles=("log",))
    orphan_keys = put(pay0, orphan, 300)
    dropped_keys = put(pay1, dropped, 0)
    s3.put_object(Bucket=bucket, Key="other/not-kafka.txt", Body=b"x")
    s3.put_object(Bucket=bucket, Key=PREFIX + "README", Body=b"x")

    out = tmp_path / "audit"
    code = main(
        [
            "kafka-audit",
            "--metadata-dump",
            str(dump),
            "--bucket",
            bucket,
            "--s3-endpoint",
            s3_server.endpoint_url,
            "--prefix",
            PREFIX,
            "--out",
            str(out),
            "--min-orphan-age",
            "0s",
            "--stuck-after",
            "1h",
            "--no-progress",
            "--fail-on",
            "critical",
        ]
    )
    assert code == 3  # a critical finding (the lost segment) exists
    rows = pq.read_table(out / "findings.parquet").to_pylist()
    found = sorted((r["kind"], r["object_key"], r["action"]) for r in rows)
    assert found == sorted(
        [("remote_segment_orphan_object", orphan_keys[r], "delete_object") for r in orphan_keys]
        + [
            ("remote_segment_deleted_partition_object", dropped_keys[r], "delete_object")
            for r in dropped_keys
        ]
        + [
            ("remote_segment_missing_object", lost_keys["log"], "investigate"),
            ("remote_segment_stuck_copy", stuck_keys["log"], "investigate"),
        ]
    )
    orphan_row = next(r for r in rows if r["object_key"] == orphan_keys["log"])
    assert orphan_row["bytes"] == 64 and orphan_row["severity"] == "warning"
    ev = json.loads(orphan_row["evidence"])
    assert ev["store"] == f"s3://{bucket}/{PREFIX}" and ev["reason"].startswith("no segment metadata")
    # what a deleter must find again: the object's key, size and ETag
    assert ev["etag"] == s3.head_object(Bucket=bucket, Key=orphan_keys["log"])["ETag"].strip('"')
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inventory_counts"]["remote_objects"] == 12
    assert summary["reverified"] == 7 and summary["dropped_on_reverify"] == {}


def test_kafka_audit_usage_errors(spark, tmp_path: Path, capsys) -> None:
    assert main(["kafka-audit", "--bucket", "b", "--out", str(tmp_path)]) == 2
    assert "--bootstrap-servers" in capsys.readouterr().err
    assert main(["kafka-audit", "--bootstrap-servers", "h:1", "--out", str(tmp_path)]) == 2
    assert "--bucket NAME or --remote-dir DIR" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"partition": 0, "offset": 1, "value": "%%%"}\n')
    args = [
        "kafka-audit",
        "--metadata-dump",
        str(bad),
        "--remote-dir",
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.jsonl" in err and "line 1" in err
