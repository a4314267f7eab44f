"""Against a real Kafka broker (KRaft, LocalTieredStorage from Kafka's own test artifact).

Small segments (``segment.ms``) and short local retention make the broker copy real segments to
the local tiered storage and write real ``__remote_log_metadata`` records. Then leaks are planted
the way they happen: an object with no metadata, a segment object deleted behind the broker's
back, a segment record stuck in COPY_SEGMENT_STARTED, and a deleted topic's objects left behind.
The audit must find exactly those, while a healthy topic keeps a producer running.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledgerlens.errors import SandboxError
from ledgerlens.formats.kafka_remote_keys import parse_remote_key, segment_keys
from ledgerlens.formats.kafka_remote_log import (
    SegmentRecord,
    TopicIdPartition,
    decode_record,
    encode_record,
    metadata_partition,
    uuid_from_bytes,
)
from ledgerlens.kafka.replay import METADATA_TOPIC, replay
from ledgerlens.sources.kafka_metadata import KafkaSource, end_offsets, kafka_uuid, read_partition
from ledgerlens_sandbox.kafka import KafkaBroker

# The one real-Kafka test of `make test` (about 2.5 min: format, start, segments rolled and copied,
# a topic deleted, one audit).
pytestmark = [pytest.mark.integration, pytest.mark.kafka]

TOPIC_CONFIG = {
    "remote.storage.enable": "true",
    "segment.ms": "1500",
    "local.retention.ms": "1000",
    "retention.ms": "-1",
    "file.delete.delay.ms": "1000",
}
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    b = KafkaBroker(tmp_path_factory.mktemp("kafka"), metadata_partitions=3)
    try:
        b.start(timeout=300)
    except SandboxError as e:
        pytest.fail(f"Kafka did not start: {e}", pytrace=False)
    yield b
    b.stop()


class Producer(threading.Thread):
    """Produces small records to ``topic`` until stopped (bounded by ``limit_s``)."""

    def __init__(self, servers: str, topic: str, partitions: int, limit_s: float = 600) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KProducer

        self.p = KProducer({"bootstrap.servers": servers, "linger.ms": 5})
        self.topic, self.partitions, self.limit_s = topic, partitions, limit_s
        self.stop_event = threading.Event()
        self.sent = 0

    def run(self) -> None:
        end = time.monotonic() + self.limit_s
        while not self.stop_event.is_set() and time.monotonic() < end:
            for _ in range(20):
                self.p.produce(self.topic, value=b"v" * 300, partition=self.sent % self.partitions)
                self.sent += 1
            self.p.poll(0)
            time.sleep(0.05)
        self.p.flush(10)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)


def create_topic(servers: str, name: str, partitions: int, **extra: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config={**TOPIC_CONFIG, **extra})])[name]
    fut.result(60)


def topic_id(servers: str, name: str) -> str:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})
    return kafka_uuid(admin.describe_topics(TopicCollection([name]))[name].result(30).topic_id)


def replayed(servers: str):
    src = KafkaSource(servers)
    records = [r for rng in end_offsets(src) for r in read_partition(src, rng)]
    return records, replay(records)


def wait_for(predicate, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(2)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def finished(state, tid: str, n: int):
    segs = [
        s for s in state.segments.values() if s["topic_id"] == tid and s["state"] == "COPY_SEGMENT_FINISHED"
    ]
    return segs if len(segs) >= n else None


def test_real_broker_records_and_planted_leaks(broker: KafkaBroker, spark, tmp_path: Path) -> None:
    servers = broker.bootstrap_servers
    root = broker.remote_dir / "kafka-tiered-storage"
    create_topic(servers, "healthy", 2)
    create_topic(servers, "victim", 1)
    create_topic(servers, "doomed", 1)
    healthy = Producer(servers, "healthy", 2)
    healthy.start()
    try:
        for name in ("victim", "doomed"):
            p = Producer(servers, name, 1, limit_s=12)
            p.start()
            p.join(60)
        ids = {n: topic_id(servers, n) for n in ("healthy", "victim", "doomed")}
        wait_for(lambda: finished(replayed(servers)[1], ids["victim"], 3), "3 victim segments copied")
        wait_for(lambda: finished(replayed(servers)[1], ids["doomed"], 2), "2 doomed segments copied")

        # Every record the broker wrote decodes, re-encodes byte for byte, and sits in the partition
        # the broker's partitioner chose.
        records, _ = replayed(servers)
        assert len(records) >= 10
        for r in records:
            rec = decode_record(r.value, f"{METADATA_TOPIC} {r.partition}@{r.offset}")
            assert encode_record(rec) == r.value
            assert metadata_partition(rec.tip.topic_id, rec.tip.partition, 3) == r.partition  # type: ignore[union-attr]

        # A deleted topic's objects left behind: keep a copy, delete the topic, wait for the broker to
        # delete its remote segments, put the files back (aged, as found much later).
        doomed_dir = root / f"doomed-0-{ids['doomed']}"
        saved = tmp_path / "doomed-copy"
        shutil.copytree(doomed_dir, saved)
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": servers})  # kept alive until the future resolves
        admin.delete_topics(["doomed"])["doomed"].result(60)

        def doomed_deleted():
            st = replayed(servers)[1]
            segs = [s for s in st.segments.values() if s["topic_id"] == ids["doomed"]]
            return segs and all(s["state"] == "DELETE_SEGMENT_FINISHED" for s in segs)

        wait_for(doomed_deleted, "the doomed topic's remote segments deleted")
        doomed_dir.mkdir(exist_ok=True)
        leftovers = []
        for f in sorted(saved.iterdir()):
            shutil.copy2(f, doomed_dir / f.name)
            leftovers.append(f"{doomed_dir.name}/{f.name}")
        # planted leaks in the live victim topic
        _, st = replayed(servers)
        victim = sorted(finished(st, ids["victim"], 3), key=lambda s: s["start_offset"])
        keys = segment_keys(
            "local", "victim", ids["victim"], 0, victim[0]["start_offset"], victim[0]["segment_id"]
        )
        (root / keys["log"]).unlink()  # a segment object deleted behind the broker's back
        missing_key = keys["log"]
        ghost_id = uuid_from_bytes(os.urandom(16))
        ghost = f"victim-0-{ids['victim']}/{victim[-1]['end_offset'] + 1:020d}-{ghost_id}.log"
        shutil.copy2(
            root
            / segment_keys(
                "local", "victim", ids["victim"], 0, victim[1]["start_offset"], victim[1]["segment_id"]
            )["log"],
            root / ghost,
        )  # no metadata
        now_ms = int(time.time() * 1000)
        for key in [ghost, *leftovers]:
            os.utime(root / key, ((now_ms - 2 * HOUR_MS) / 1000,) * 2)
        # a segment record stuck in COPY_SEGMENT_STARTED, two hours old, in the right metadata partition
        stuck_id = uuid_from_bytes(os.urandom(16))
        tip = TopicIdPartition("victim", ids["victim"], 0)
        lo = victim[-1]["end_offset"] + 1_000_000
        stuck = SegmentRecord(
            tip,
            stuck_id,
            lo,
            lo + 99,
            1,
            now_ms - 2 * HOUR_MS,
            now_ms - 2 * HOUR_MS,
            ((0, lo),),
            4096,
            None,
            "COPY_SEGMENT_STARTED",
        )
        from confluent_kafka import Producer as KProducer

        kp = KProducer({"bootstrap.servers": servers})
        kp.produce(
            METADATA_TOPIC, value=encode_record(stuck), partition=metadata_partition(tip.topic_id, 0, 3)
        )
        kp.flush(30)
        stuck_key = segment_keys("local", "victim", ids["victim"], 0, lo, stuck_id)["log"]

        from ledgerlens.cli import main

        out = tmp_path / "audit"
        code = main(
            [
                "kafka-audit",
                "--bootstrap-servers",
                servers,
                "--remote-dir",
                str(broker.remote_dir),
                "--out",
                str(out),
                "--min-orphan-age",
                "1h",
                "--stuck-after",
                "1h",
                "--no-progress",
            ]
        )
        assert code == 0
        import pyarrow.parquet as pq

        rows = pq.read_table(out / "findings.parquet").to_pylist()
    finally:
        healthy.stop()
    assert healthy.sent > 1000
    found = sorted((r["kind"], r["object_key"], r["action"]) for r in rows)
    expected = sorted(
        [
            ("remote_segment_orphan_object", ghost, "delete_object"),
            ("remote_segment_missing_object", missing_key, "investigate"),
            ("remote_segment_stuck_copy", stuck_key, "investigate"),
        ]
        + [("remote_segment_deleted_partition_object", k, "delete_object") for k in leftovers]
    )
    assert found == expected
    # nothing about the healthy topic, whose producer kept running through the audit
    assert not [r for r in rows if "healthy" in (r["path"] or "")]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inventory_counts"]["remote_segments"] >= 6
    assert all(parse_remote_key(k, "local") for k in leftovers)
