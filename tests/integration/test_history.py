"""What changed since the last run, through the real ``ledgerlens`` command on the generated cluster.

Two audits into the same ``--out`` with one new orphan ledger and one repaired one between them:
the second run marks exactly the new orphan ``new`` and lists exactly the repaired one in
``resolved.parquet``; the findings that stayed keep the first run's ``first_seen``; summary.json,
the summary line and ``history/`` agree; ``--fail-on new-critical`` exits 0 (the new finding is a
warning). A third audit names the second as ``--previous`` from another ``--out`` after a ledger
a topic references was deleted: one new critical finding, exit 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from generated import generated_cluster
from ledgerlens.inventory.schemas import FINDING_IDENTITY
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.cluster import DAY, default_now_ms

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW_MS = default_now_ms()
LEDGERLENS = str(Path(sys.executable).with_name("ledgerlens"))
GONE_TOPIC = "acme/orders/persistent/deleted-topic"  # the planted scenario's deleted topic
NEW_ORPHAN_ID = 987_654


def _ledgerlens(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.run([LEDGERLENS, *argv], capture_output=True, text=True, env=env, timeout=900)


def _identity(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(None if row.get(k) != row.get(k) else row.get(k) for k in FINDING_IDENTITY)


def _since(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _zk(hosts: str) -> Any:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts)
    client.start()
    return client


@pytest.fixture()
def cluster(zookeeper: Any, s3_server: Any) -> dict[str, Any]:
    c = generated_cluster(zookeeper, s3_server, "history", now_ms=NOW_MS, scenario="planted")
    c["args"] = ["--zookeeper", c["hosts"], "--s3-endpoint", s3_server.endpoint_url, "--bucket", c["bucket"],
                 "--no-progress", "--spark-master", "local[2]"]  # fmt: skip
    return c


def _plant_orphan_and_repair_one(c: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new orphan ledger (a ledger znode of a deleted topic, five days old) and one planted orphan
    deleted (what an operator's clean-up does); returns (the new finding, the repaired finding)."""
    orphans = [f for f in c["truth"].expected_of("orphan_ledger") if f["managed_ledger"] == GONE_TOPIC]
    repaired = orphans[0]
    path = wire.ledger_path(NEW_ORPHAN_ID, "/ledgers")
    custom = {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": GONE_TOPIC}
    md = wire.ledger_metadata(
        ensemble=["127.0.0.1:3181", "127.0.0.1:3182"],
        write_quorum=2,
        ack_quorum=2,
        length=4096,
        last_entry_id=9,
        ctime_ms=NOW_MS - 5 * DAY,
        custom=custom,
    )
    zk = _zk(c["hosts"])
    try:
        zk.create(path, wire.bk_metadata(md, 3), makepath=True)
        zk.delete(repaired["path"])
    finally:
        zk.stop()
        zk.close()
    new = {"kind": "orphan_ledger", "component": "managed-ledger", "ledger_id": NEW_ORPHAN_ID,
           "managed_ledger": GONE_TOPIC, "cursor": None, "path": path, "object_key": None}  # fmt: skip
    return new, repaired


def _delete_a_referenced_ledger(out: Path, hosts: str, findings: list[dict[str, Any]]) -> int:
    """Delete the znode of a closed, never offloaded ledger a topic references and no finding
    mentions: the next audit reports it missing (critical)."""
    mentioned = {f["ledger_id"] for f in findings}
    refs = pq.read_table(out / "inventory" / "ml_ledgers").to_pylist()
    bk = {r["ledger_id"]: r["path"] for r in pq.read_table(out / "inventory" / "bk_ledgers").to_pylist()}
    ledger = next(
        r["ledger_id"]
        for r in sorted(refs, key=lambda r: r["ledger_id"])
        if not r["is_last"]
        and r["offload_uuid"] is None
        and r["ledger_id"] in bk
        and r["ledger_id"] not in mentioned
    )
    zk = _zk(hosts)
    try:
        zk.delete(bk[ledger])
    finally:
        zk.stop()
        zk.close()
    return int(ledger)


def test_the_second_run_marks_exactly_what_changed(cluster: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = cluster["args"]

    first = _ledgerlens(
        "audit", *args, "--as-of", str(NOW_MS), "--out", str(out), "--fail-on", "new-critical"
    )
    assert first.returncode == 3, first  # a first run: every finding is new, planted criticals too
    s1 = json.loads((out / "summary.json").read_text())
    assert s1["previous"] is None and s1["previous_note"] is None
    assert s1["new_total"] == s1["total_findings"] > 0 and s1["resolved_total"] == 0
    assert first.stdout.splitlines()[-1].endswith(
        f"; first run: nothing to compare; findings: {out / 'findings.parquet'}"
    )
    run1 = pq.read_table(out / "findings.parquet").to_pylist()
    assert {(r["new"], r["first_seen"]) for r in run1} == {(True, NOW_MS)}

    new, repaired = _plant_orphan_and_repair_one(cluster)
    as_of2 = NOW_MS + 60_000
    second = _ledgerlens(
        "audit", *args, "--as-of", str(as_of2), "--out", str(out), "--fail-on", "new-critical"
    )
    assert second.returncode == 0, second  # the one new finding is a warning
    run2 = pq.read_table(out / "findings.parquet").to_pylist()
    fresh = [r for r in run2 if r["new"]]
    assert [_identity(r) for r in fresh] == [_identity(new)]
    assert (fresh[0]["severity"], fresh[0]["first_seen"]) == ("warning", as_of2)
    kept = [r for r in run2 if not r["new"]]
    assert {r["first_seen"] for r in kept} == {NOW_MS}  # first seen by the first run, carried over
    assert sorted(map(_identity, kept), key=repr) == sorted(
        (_identity(r) for r in run1 if _identity(r) != _identity(repaired)), key=repr
    )
    resolved = pq.read_table(out / "resolved.parquet").to_pylist()
    assert [_identity(r) for r in resolved] == [_identity(repaired)]
    assert (resolved[0]["first_seen"], resolved[0]["last_seen"]) == (NOW_MS, NOW_MS)

    s2 = json.loads((out / "summary.json").read_text())
    assert s2["previous"] == {"as_of_ms": NOW_MS, "source": str(out.resolve())}
    assert (s2["new_total"], s2["new_by_severity"]) == (1, {"critical": 0, "warning": 1, "info": 0})
    assert (s2["resolved_total"], s2["resolved_by_severity"]) == (1, {"critical": 0, "warning": 1, "info": 0})
    last = second.stdout.splitlines()[-1]
    assert f"; 1 new, 1 resolved since {_since(NOW_MS)}; findings: " in last, last
    entries = sorted(p.name for p in (out / "history").iterdir())
    assert len(entries) == 2
    assert [json.loads((out / "history" / e / "summary.json").read_text())["as_of_ms"] for e in entries] == [
        NOW_MS,
        as_of2,
    ]
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    assert {"findings.parquet", "history", "inventory", "resolved.parquet", "summary.json"} <= names

    # another --out, the second run named explicitly; a referenced ledger deleted meanwhile
    missing = _delete_a_referenced_ledger(out, cluster["hosts"], run2)
    elsewhere = tmp_path / "elsewhere"
    as_of3 = NOW_MS + 120_000
    third = _ledgerlens("audit", *args, "--as-of", str(as_of3), "--out", str(elsewhere),
                        "--previous", str(out), "--fail-on", "new-critical")  # fmt: skip
    assert third.returncode == 3, third
    run3 = pq.read_table(elsewhere / "findings.parquet").to_pylist()
    fresh = [r for r in run3 if r["new"]]
    assert [(r["kind"], r["severity"], r["ledger_id"], r["first_seen"]) for r in fresh] == [
        ("missing_ledger", "critical", missing, as_of3)
    ]
    s3 = json.loads((elsewhere / "summary.json").read_text())
    assert s3["previous"] == {"as_of_ms": as_of2, "source": str(out.resolve())}
    assert (s3["new_by_severity"]["critical"], s3["resolved_total"]) == (1, 0)
    assert {r["first_seen"] for r in run3 if r["ledger_id"] == NEW_ORPHAN_ID} == {as_of2}
    assert len(list((elsewhere / "history").iterdir())) == 1


@pytest.mark.slow
def test_report_finds_the_previous_run_beside_its_staging_directory(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    """``ledgerlens report`` runs the audit inside the runbook, in a staging directory of --out: its
    previous run is still the one published in --out, and --history-keep reaches the runbook."""
    out = tmp_path / "rep"
    args = cluster["args"]
    first = _ledgerlens("audit", *args, "--as-of", str(NOW_MS), "--out", str(out))
    assert first.returncode == 0, first
    as_of2 = NOW_MS + 60_000
    second = _ledgerlens("report", *args, "--as-of", str(as_of2), "--out", str(out), "--history-keep", "1",
                         "--fail-on", "new-warning")  # fmt: skip
    assert second.returncode == 0, second  # nothing changed: nothing new
    s = json.loads((out / "summary.json").read_text())
    assert s["previous"] == {"as_of_ms": NOW_MS, "source": str(out.resolve())}
    assert (s["new_total"], s["resolved_total"]) == (0, 0)
    assert s["context"]["settings"]["audit.history-keep"]["value"] == "1"
    assert f"; 0 new, 0 resolved since {_since(NOW_MS)}; report: " in second.stdout.splitlines()[-1]
    rows = pq.read_table(out / "findings.parquet").to_pylist()
    assert rows and {(r["new"], r["first_seen"]) for r in rows} == {(False, NOW_MS)}
    entries = list((out / "history").iterdir())
    assert len(entries) == 1 and json.loads((entries[0] / "summary.json").read_text())["as_of_ms"] == as_of2


def test_kafka_audit_compares_with_its_previous_run(s3_server: Any, tmp_path: Path) -> None:
    """``kafka-audit`` into the same --out: one orphan segment object deleted between the runs is
    the one resolved finding, nothing is new, ``--fail-on new-warning`` exits 0."""
    import time
    import uuid

    import boto3

    from kafka_leaks import ORPHAN, PREFIX, make_leaks

    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    bucket = f"kafka-hist-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    leaks = make_leaks(s3, bucket, s3_server.endpoint_url, tmp_path)
    out = tmp_path / "out"
    argv = ["kafka-audit", "--metadata-dump", str(leaks.dump), "--bucket", bucket, "--s3-endpoint",
            s3_server.endpoint_url, "--prefix", PREFIX, "--min-orphan-age", "0s", "--out", str(out),
            "--no-progress", "--spark-master", "local[2]"]  # fmt: skip
    t1 = int(time.time() * 1000)
    first = _ledgerlens(*argv, "--as-of", str(t1))
    assert first.returncode == 0, first
    run1 = pq.read_table(out / "findings.parquet").to_pylist()
    gone = leaks.keys[ORPHAN]["log"]
    assert any(r["object_key"] == gone for r in run1) and {r["new"] for r in run1} == {True}
    s3.delete_object(Bucket=bucket, Key=gone)
    second = _ledgerlens(*argv, "--as-of", str(t1 + 60_000), "--fail-on", "new-warning")
    assert second.returncode == 0, second
    summary = json.loads((out / "summary.json").read_text())
    assert summary["previous"] == {"as_of_ms": t1, "source": str(out.resolve())}
    assert (summary["new_total"], summary["resolved_total"]) == (0, 1)
    assert [r["object_key"] for r in pq.read_table(out / "resolved.parquet").to_pylist()] == [gone]
    run2 = pq.read_table(out / "findings.parquet").to_pylist()
    assert len(run2) == len(run1) - 1 and {(r["new"], r["first_seen"]) for r in run2} == {(False, t1)}
    assert len(list((out / "history").iterdir())) == 2
