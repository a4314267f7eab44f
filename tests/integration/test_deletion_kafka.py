"""Kafka orphan remote-segment objects through plan, approval and the deleter's re-verification.

Real S3 server (moto), real Spark (``ledgerlens kafka-audit``), metadata from a dump file
(tests/kafka_leaks.py): the audit's orphan and deleted-partition objects become
``delete_remote_segment`` plan items (never a foreign object, never a segment the metadata knows);
right before deleting, a segment the metadata learned about since the plan is kept, a rewritten
object is refused, an unknown topic id is refused; exactly the approved objects go, every other
object is byte-for-byte what it was. (The same through publish and the deleter on Pulsar:
tests/e2e/test_deletion.py::test_kafka_segments_through_publish_and_deleter.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from kafka_leaks import DROPPED, FOREIGN, HEALTHY, LEARNED, ORPHAN, PREFIX, REWRITTEN, make_leaks, uid
from ledgerlens.deletion import messages as m
from ledgerlens.deletion.actions.delete_remote_segment import (
    KafkaLive,
    delete_remote_objects,
    verify_remote_segments,
)
from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.plan import PlanError, build_plan, write_plan
from ledgerlens.errors import ConfigError
from ledgerlens.proto import pending_delete_pb2 as pb

pytestmark = pytest.mark.integration


def test_kafka_orphan_segments_planned_reverified_and_deleted(
    s3_server: Any, bucket: str, spark: Any, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    leaks = make_leaks(s3, bucket, s3_server.endpoint_url, tmp_path)
    out = leaks.audit(tmp_path / "audit")

    plan = build_plan(out)  # a Kafka audit's default kinds: its orphan and deleted-partition objects
    assert plan["kinds"] == ["remote_segment_orphan_object", "remote_segment_deleted_partition_object"]
    by_segment = {i["expected"]["segment_id"]: i for i in plan["items"]}
    assert set(by_segment) == {ORPHAN, LEARNED, REWRITTEN, DROPPED}  # never HEALTHY, never FOREIGN
    assert HEALTHY not in by_segment and FOREIGN not in by_segment
    assert {i["action"] for i in plan["items"]} == {"delete_remote_segment"}
    item = by_segment[ORPHAN]
    assert item["item_id"] == f"remote-segment:{uid(1)}:0:{ORPHAN}"
    assert sorted(o["key"] for o in item["expected"]["objects"]) == sorted(leaks.keys[ORPHAN].values())
    head = s3.head_object(Bucket=bucket, Key=leaks.keys[ORPHAN]["log"])
    log = next(o for o in item["expected"]["objects"] if o["key"] == leaks.keys[ORPHAN]["log"])
    assert (log["size"], log["etag"]) == (head["ContentLength"], head["ETag"].strip('"'))
    assert item["expected"]["store"] == f"s3://{bucket}/{PREFIX}"
    msg = m.item_to_message(item, plan["plan_hash"])
    assert msg.ledgerType == pb.REMOTE_SEGMENT and msg.bucket == f"s3://{bucket}/{PREFIX}"
    with pytest.raises(PlanError, match="never a deletion candidate"):
        build_plan(out, kinds=["remote_segment_foreign_object"])

    journal = Journal(tmp_path / "journal.jsonl")
    plan_path = write_plan(plan, tmp_path / "plan.json")
    approval = approve(plan_path, journal, plan_hash_given=plan["plan_hash"], approver="kim",
                       reason="INC-7 leaked segments", out=tmp_path / "approval.json")  # fmt: skip
    assert len(approval["items"]) == 4

    # after the approval: the metadata learns about one segment, an object of another is rewritten
    leaks.learn()
    leaks.rewrite()
    before = leaks.inventory()

    items = [by_segment[s] for s in (ORPHAN, LEARNED, REWRITTEN, DROPPED)]
    live = KafkaLive(dump=str(leaks.dump), endpoint_url=s3_server.endpoint_url)
    verdicts = verify_remote_segments(items, live)
    assert [v.decision for v, _ in verdicts] == ["delete", "skipped_in_use", "skipped_mismatch", "delete"]
    assert (
        "COPY_SEGMENT_STARTED" in verdicts[1][0].reason and "changed since the plan" in verdicts[2][0].reason
    )
    for item_, (verdict, keys) in zip(items, verdicts, strict=True):
        if verdict.decision == "delete":
            delete_remote_objects(item_, keys, live)

    after = leaks.inventory()
    gone = set(leaks.keys[ORPHAN].values()) | set(leaks.keys[DROPPED].values())
    assert not gone & set(after)
    assert {k: v for k, v in before.items() if k not in gone} == after  # everything else byte for byte

    # a second message for the same items: already gone, nothing more happens (idempotent)
    again = verify_remote_segments([items[0], items[3]], live)
    assert [v.decision for v, _ in again] == ["already_gone", "already_gone"]
    # an item naming a topic id the metadata never had is refused; a key outside the item never deleted
    forged = {**items[1], "expected": {**items[1]["expected"], "topic_id": uid(99), "segment_id": FOREIGN}}
    forged["expected"]["objects"] = [
        {
            "key": k,
            "size": s3.head_object(Bucket=bucket, Key=k)["ContentLength"],
            "etag": after[k][0].strip('"'),
        }
        for k in leaks.keys[FOREIGN].values()
    ]
    [(v_forged, _)] = verify_remote_segments([forged], live)
    assert v_forged.decision == "skipped_mismatch" and "unknown to the cluster's metadata" in v_forged.reason
    with pytest.raises(ConfigError, match="not an object of the approved item"):
        delete_remote_objects(items[1], [leaks.keys[FOREIGN]["log"]], live)
    assert leaks.inventory() == after
