"""The remote_segment_* rules on a planted cluster: replayed records, a real local storage directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerlens.formats.kafka_remote_keys import segment_keys
from ledgerlens.formats.kafka_remote_log import (
    SegmentRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    encode_record,
    uuid_from_bytes,
)
from ledgerlens.inventory import schemas
from ledgerlens.kafka.audit import KafkaAuditConfig, run_kafka_audit
from ledgerlens.kafka.remote_inventory import collect_kafka_inventory, load_kafka_inventory
from ledgerlens.kafka.replay import MetadataRecord, replay
from ledgerlens.sources.kafka_metadata import write_dump
from ledgerlens.sources.remote_storage import RemoteStore, list_items, list_objects

pytestmark = pytest.mark.spark

DAY = 86_400_000
NOW = 1_800_000_000_000
OLD = NOW - 3 * DAY


def uid(n: int) -> str:
    return uuid_from_bytes(n.to_bytes(16, "big"))


T_ORDERS, T_GONE, T_FOREIGN = uid(101), uid(102), uid(103)
ORDERS0 = TopicIdPartition("orders", T_ORDERS, 0)
ORDERS1 = TopicIdPartition("orders", T_ORDERS, 1)
GONE0 = TopicIdPartition("gone-topic", T_GONE, 0)


def start(tip, sid, lo, hi, ms=OLD, epochs=None, max_ts=None):
    return SegmentRecord(
        tip, sid, lo, hi, 1, max_ts or ms - 1000, ms, epochs or ((0, lo),), 1000, None, "COPY_SEGMENT_STARTED"
    )


def move(tip, sid, state, ms=OLD + 1000):
    return SegmentUpdateRecord(tip, sid, 1, ms, None, state)


def lifecycle(tip, sid, lo, hi, upto, **kw):
    recs = [start(tip, sid, lo, hi, **kw)]
    order = ["COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED"]
    for s in order[: order.index(upto) + 1] if upto != "COPY_SEGMENT_STARTED" else []:
        recs.append(move(tip, sid, s))
    return recs


def write_files(root: Path, tip, sid, lo, roles=("log", "index", "timeindex"), mtime_ms=OLD):
    import os

    keys = segment_keys("local", tip.topic, tip.topic_id, tip.partition, lo, sid)
    keys["snapshot"] = keys["log"][: -len("log")] + "snapshot"
    out = {}
    for role in roles:
        p = root / keys[role]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * 100)
        os.utime(p, (mtime_ms / 1000, mtime_ms / 1000))
        out[role] = keys[role]
    return out


@pytest.fixture
def planted(tmp_path: Path):
    root = tmp_path / "remote" / "kafka-tiered-storage"
    S = {
        name: uid(i)
        for i, name in enumerate(
            [
                "healthy",
                "missing",
                "stuck_copy",
                "stuck_delete",
                "deleted",
                "orphan",
                "gone",
                "foreign",
                "ov_a",
                "ov_b",
                "overdue",
                "young_orphan",
            ],
            start=1,
        )
    }
    recs = []
    recs += lifecycle(ORDERS0, S["healthy"], 0, 99, "COPY_SEGMENT_FINISHED", max_ts=NOW - 1000)
    recs += lifecycle(ORDERS0, S["missing"], 100, 199, "COPY_SEGMENT_FINISHED", max_ts=NOW - 1000)
    recs += lifecycle(ORDERS0, S["stuck_copy"], 200, 299, "COPY_SEGMENT_STARTED")
    recs += lifecycle(ORDERS0, S["stuck_delete"], 300, 399, "DELETE_SEGMENT_STARTED")
    recs += lifecycle(ORDERS0, S["deleted"], 400, 499, "DELETE_SEGMENT_FINISHED")
    recs += lifecycle(GONE0, S["gone"], 0, 9, "DELETE_SEGMENT_FINISHED")
    recs += lifecycle(ORDERS1, S["ov_a"], 0, 99, "COPY_SEGMENT_FINISHED", max_ts=NOW - 1000)
    recs += lifecycle(
        ORDERS1, S["ov_b"], 50, 149, "COPY_SEGMENT_FINISHED", epochs=((0, 50), (1, 60)), max_ts=NOW - 1000
    )
    recs += lifecycle(ORDERS1, S["overdue"], 150, 199, "COPY_SEGMENT_FINISHED", max_ts=NOW - 10 * DAY)
    recs.append(move(ORDERS0, S["healthy"], "COPY_SEGMENT_STARTED"))  # illegal: back to the start
    values = [encode_record(r) for r in recs] + [b"\x01\x05\x00garbage"]
    records = [MetadataRecord(3, i, OLD, v) for i, v in enumerate(values)]

    files = {}
    files["healthy"] = write_files(root, ORDERS0, S["healthy"], 0)
    files["missing"] = write_files(root, ORDERS0, S["missing"], 100, roles=("index", "timeindex"))
    files["stuck_copy"] = write_files(root, ORDERS0, S["stuck_copy"], 200, roles=("log",))
    files["stuck_delete"] = write_files(root, ORDERS0, S["stuck_delete"], 300)
    files["deleted"] = write_files(root, ORDERS0, S["deleted"], 400, roles=("log",))
    files["orphan"] = write_files(root, ORDERS0, S["orphan"], 500, roles=("log", "snapshot"))
    files["young_orphan"] = write_files(root, ORDERS0, S["young_orphan"], 600, roles=("log",), mtime_ms=NOW)
    files["gone"] = write_files(root, GONE0, S["gone"], 0, roles=("log",))
    files["foreign"] = write_files(root, TopicIdPartition("x", T_FOREIGN, 0), S["foreign"], 0, roles=("log",))
    files["ov_a"] = write_files(root, ORDERS1, S["ov_a"], 0)
    files["ov_b"] = write_files(root, ORDERS1, S["ov_b"], 50)
    files["overdue"] = write_files(root, ORDERS1, S["overdue"], 150)
    (root / f"orders-0-{T_ORDERS}" / "README.txt").write_text("not a segment file")
    topics = [
        {
            "topic": "orders",
            "topic_id": T_ORDERS,
            "partitions": 2,
            "remote_storage_enable": True,
            "retention_ms": 7 * DAY,
            "retention_bytes": -1,
            "local_retention_ms": 1000,
        },
    ]
    return {
        "root": root,
        "records": records,
        "segments": S,
        "files": files,
        "topics": topics,
        "tmp": tmp_path,
    }


def _tables(spark, p):
    st = replay(p["records"])
    store = RemoteStore(layout="local", directory=str(p["root"].parent))
    objects = [r for item in list_items(store) for r in list_objects(store, item)]

    def df(name, rows):
        return spark.createDataFrame(
            [schemas.to_row(schemas.KAFKA_INVENTORY[name], r) for r in rows], schemas.KAFKA_INVENTORY[name]
        )

    return {
        "remote_segments": df("remote_segments", list(st.segment_rows())),
        "remote_partitions": df("remote_partitions", list(st.partitions.values())),
        "remote_log_events": df("remote_log_events", st.events),
        "remote_objects": df("remote_objects", objects),
        "kafka_topics": df("kafka_topics", p["topics"]),
    }


def _found(findings):
    return sorted(
        (r["kind"], r["severity"], r["action"], r["object_key"] or r["path"]) for r in findings.collect()
    )


def test_planted_leaks_found_exactly(spark, planted):
    S, files = planted["segments"], planted["files"]
    cfg = KafkaAuditConfig(
        as_of_ms=NOW,
        layout="local",
        min_orphan_age_s=3600,
        stuck_copy_s=3600,
        stuck_delete_s=3600,
        retention_grace_s=3600,
    )
    findings = run_kafka_audit(_tables(spark, planted), cfg)
    assert findings.columns == schemas.columns(schemas.FINDINGS)
    rows = {(r["kind"], r["object_key"] or r["path"]): r for r in findings.collect()}
    missing_log = segment_keys("local", "orders", T_ORDERS, 0, 100, S["missing"])["log"]
    expected = [
        ("corrupt_metadata", "critical", "investigate", "__remote_log_metadata/3@23"),
        ("remote_segment_deleted_partition_object", "warning", "delete_object", files["gone"]["log"]),
        ("remote_segment_foreign_object", "info", "investigate", files["foreign"]["log"]),
        ("remote_segment_illegal_transition", "warning", "investigate", "__remote_log_metadata/3@22"),
        ("remote_segment_missing_object", "critical", "investigate", missing_log),
        ("remote_segment_orphan_object", "warning", "investigate", files["deleted"]["log"]),
        ("remote_segment_orphan_object", "warning", "investigate", files["orphan"]["log"]),
        ("remote_segment_orphan_object", "warning", "investigate", files["orphan"]["snapshot"]),
        ("remote_segment_overlap", "warning", "investigate", files["ov_b"]["log"]),
        ("remote_segment_retention_overdue", "warning", "investigate", files["overdue"]["log"]),
        ("remote_segment_stuck_copy", "warning", "investigate", files["stuck_copy"]["log"]),
        ("remote_segment_stuck_delete", "warning", "investigate", files["stuck_delete"]["log"]),
    ]
    # a corrupt metadata record is a blind spot: nothing is offered for deletion while it stands
    expected = [(k, s, "investigate" if k != "corrupt_metadata" else a, key) for k, s, a, key in expected]
    assert _found(findings) == sorted(expected)
    ev = json.loads(rows[("corrupt_metadata", "__remote_log_metadata/3@23")]["evidence"])
    assert (ev["metadata_partition"], ev["metadata_offset"]) == (3, 23) and "api key 5" in ev["problem"]
    miss = json.loads(rows[("remote_segment_missing_object", missing_log)]["evidence"])
    assert miss["missing_roles"] == ["log"]
    orphan = rows[("remote_segment_orphan_object", files["orphan"]["log"])]
    assert orphan["bytes"] == 100 and orphan["component"] == "kafka-remote"
    assert rows[("remote_segment_stuck_copy", files["stuck_copy"]["log"])]["bytes"] == 100


def test_orphans_are_deletion_candidates_without_blind_spots(spark, planted):
    planted["records"] = planted["records"][:-2]  # drop the corrupt record and the illegal move
    cfg = KafkaAuditConfig(as_of_ms=NOW, layout="local", min_orphan_age_s=3600)
    findings = run_kafka_audit(_tables(spark, planted), cfg).filter("action = 'delete_object'")
    files = planted["files"]
    assert sorted(r["object_key"] for r in findings.collect()) == sorted(
        [files["deleted"]["log"], files["orphan"]["log"], files["orphan"]["snapshot"], files["gone"]["log"]]
    )
    assert {r["kind"] for r in findings.collect()} == {
        "remote_segment_orphan_object",
        "remote_segment_deleted_partition_object",
    }


def test_healthy_partition_gives_no_finding(spark, planted):
    S = planted["segments"]
    keep = {S["healthy"], S["ov_a"]}
    planted["records"] = [r for r in planted["records"][:-2] if _names(r.value) & keep]
    for p in planted["root"].rglob("*"):
        if p.is_file() and not any(s in p.name for s in keep):
            p.unlink()
    cfg = KafkaAuditConfig(as_of_ms=NOW, layout="local", min_orphan_age_s=0)
    assert _found(run_kafka_audit(_tables(spark, planted), cfg)) == []


def _names(value: bytes) -> set[str]:
    from ledgerlens.formats.kafka_remote_log import decode_record

    return {decode_record(value).segment_id}  # type: ignore[union-attr]


def test_collect_from_dump_and_local_directory(spark, planted):
    dump = planted["tmp"] / "rlm.jsonl"
    write_dump(dump, planted["records"])
    store = RemoteStore(layout="local", directory=str(planted["root"].parent))
    inv = collect_kafka_inventory(
        spark, str(planted["tmp"] / "inv"), source=None, store=store, dump=str(dump)
    )
    assert inv.counts["remote_segments"] == 9
    assert inv.counts["remote_log_events"] == 2
    assert inv.counts["remote_objects"] == sum(len(v) for v in planted["files"].values())
    tables = load_kafka_inventory(spark, str(planted["tmp"] / "inv"))
    seg = tables["remote_segments"].filter(f"segment_id = '{planted['segments']['ov_b']}'").first()
    assert seg["leader_epochs"][1]["epoch"] == 1 and seg["state"] == "COPY_SEGMENT_FINISHED"
