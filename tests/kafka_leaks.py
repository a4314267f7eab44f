"""A Kafka tiered-storage bucket with leaked segments for the deletion tests (S3 plugin layout, a dump).

``make_leaks`` writes objects of a healthy segment, an orphan segment (no metadata record), two more
orphans (one the metadata will learn about after the plan, one whose object a broker will
rewrite), a deleted partition's segment and a foreign topic's segment, plus the metadata dump that
describes the cluster; ``audit`` runs ``ledgerlens kafka-audit`` over them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

PREFIX = "tiered/"


def uid(n: int) -> str:
    return uuid_from_bytes(n.to_bytes(16, "big"))


PAY0 = TopicIdPartition("payments", uid(1), 0)
PAY1 = TopicIdPartition("payments", uid(1), 1)
STRANGER = TopicIdPartition("payments", uid(99), 0)  # a topic id this cluster never had
HEALTHY, ORPHAN, DROPPED, LEARNED, REWRITTEN, FOREIGN = uid(11), uid(14), uid(15), uid(16), uid(17), uid(98)


@dataclass
class Leaks:
    """The bucket's segments (segment id -> role -> key) and the metadata dump."""

    s3: Any
    bucket: str
    endpoint: str
    dump: Path
    old_ms: int
    records: list[Any]
    keys: dict[str, dict[str, str]] = field(default_factory=dict)

    def start(self, tip: TopicIdPartition, sid: str, lo: int) -> SegmentRecord:
        ms = self.old_ms
        return SegmentRecord(tip, sid, lo, lo + 99, 2, ms, ms, ((0, lo),), 1000, None, "COPY_SEGMENT_STARTED")

    def write_dump(self, extra: list[Any] = ()) -> None:  # type: ignore[assignment]
        recs = [*self.records, *extra]
        write_dump(
            self.dump, [MetadataRecord(i % 2, i, self.old_ms, encode_record(r)) for i, r in enumerate(recs)]
        )

    def learn(self) -> None:
        """The metadata learns about the LEARNED segment (a copy started after the plan)."""
        self.write_dump([self.start(PAY0, LEARNED, 400)])

    def rewrite(self) -> None:
        """A broker rewrites one object of the REWRITTEN segment (its ETag moves)."""
        self.s3.put_object(
            Bucket=self.bucket, Key=self.keys[REWRITTEN]["indexes"], Body=b"rewritten by a broker"
        )

    def inventory(self) -> dict[str, tuple[str, str]]:
        """Every object of the bucket: key -> (ETag, SHA-256 of its bytes)."""
        out = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for o in page.get("Contents", []):
                body = self.s3.get_object(Bucket=self.bucket, Key=o["Key"])["Body"].read()
                out[o["Key"]] = (o["ETag"], hashlib.sha256(body).hexdigest())
        return out

    def audit(self, out: Path) -> Path:
        args = ["kafka-audit", "--metadata-dump", str(self.dump), "--bucket", self.bucket,
                "--s3-endpoint", self.endpoint, "--prefix", PREFIX, "--out", str(out),
                "--min-orphan-age", "0s", "--no-progress"]  # fmt: skip
        code = main(args)
        if code != 0:
            raise AssertionError(f"kafka-audit exited {code}")
        return out


def make_leaks(s3: Any, bucket: str, endpoint: str, workdir: Path) -> Leaks:
    """Objects and metadata of the scenario (see the module docstring)."""
    old = int(time.time() * 1000) - 3 * 3_600_000
    leaks = Leaks(s3, bucket, endpoint, workdir / "rlm.jsonl", old, [])
    leaks.records = [
        leaks.start(PAY0, HEALTHY, 0),
        SegmentUpdateRecord(PAY0, HEALTHY, 2, old, None, "COPY_SEGMENT_FINISHED"),
        leaks.start(PAY1, DROPPED, 0),
        SegmentUpdateRecord(PAY1, DROPPED, 2, old, None, "COPY_SEGMENT_FINISHED"),
        PartitionDeleteRecord(PAY1, 2, old, "DELETE_PARTITION_MARKED"),
        PartitionDeleteRecord(PAY1, 2, old, "DELETE_PARTITION_STARTED"),
        PartitionDeleteRecord(PAY1, 2, old, "DELETE_PARTITION_FINISHED"),
    ]
    leaks.write_dump()
    for tip, sid, lo in (
        (PAY0, HEALTHY, 0),
        (PAY0, ORPHAN, 300),
        (PAY0, LEARNED, 400),
        (PAY0, REWRITTEN, 500),
        (PAY1, DROPPED, 0),
        (STRANGER, FOREIGN, 0),
    ):
        keys = segment_keys("s3-plugin", tip.topic, tip.topic_id, tip.partition, lo, sid, prefix=PREFIX)
        for role, key in keys.items():
            s3.put_object(Bucket=bucket, Key=key, Body=f"{sid}:{role}".encode() * 8)
        leaks.keys[sid] = keys
    s3.put_object(Bucket=bucket, Key="other/not-kafka.txt", Body=b"x")
    return leaks
