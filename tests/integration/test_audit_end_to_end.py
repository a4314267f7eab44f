"""The whole audit against a generated cluster on a real ZooKeeper, a real S3 server and Spark.

A planted cluster must give exactly the planted findings; the same cluster without the anomalies
must give none at all.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledgerlens.audit import pipeline
from ledgerlens.audit.findings import PULSAR_KINDS as KINDS
from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens_sandbox.cluster import default_now_ms, generate

pytestmark = [pytest.mark.integration, pytest.mark.spark]

KEY = FINDING_KEYS
# "now" two days ahead of the clock: S3 stamps objects with the real time, and they must count as old.
NOW_MS = default_now_ms()


def _chroot(zk_client: Any, name: str) -> str:
    path = f"/{name}-{uuid.uuid4().hex[:8]}"
    zk_client.ensure_path(path)
    return path


def _audit(spark: Any, hosts: str, s3_endpoint: str, bucket: str, out: Path) -> pipeline.AuditRun:
    return pipeline.run(
        spark,
        ZooKeeperSource(hosts=hosts, rate_limit=50_000),
        S3Source(bucket=bucket, endpoint_url=s3_endpoint),
        AuditConfig(as_of_ms=NOW_MS),
        out,
        progress=False,
    )


def _bucket(s3_endpoint: str, prefix: str) -> str:
    import boto3

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return name


def _keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and v != v) else v

    return sorted((tuple(norm(r.get(k)) for k in KEY) for r in rows), key=repr)


@pytest.fixture(scope="module")
def planted(zookeeper, s3_server, spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    chroot = _chroot(client, "planted")
    client.stop()
    bucket = _bucket(s3_server.endpoint_url, "planted")
    hosts = zookeeper.hosts + chroot
    truth = generate(
        hosts, root="", s3_endpoint=s3_server.endpoint_url, bucket=bucket, scenario="planted", now_ms=NOW_MS
    )
    run = _audit(spark, hosts, s3_server.endpoint_url, bucket, tmp_path_factory.mktemp("planted"))
    return truth, run, hosts


def test_planted_cluster_reports_exactly_the_planted_findings(planted) -> None:  # type: ignore[no-untyped-def]
    truth, run, _ = planted
    found = run.findings_pandas().to_dict("records")
    expected = _keys(truth.expected)
    got = _keys(found)
    missing = [e for e in expected if e not in got]
    extra = [g for g in got if g not in expected]
    assert not missing and not extra, json.dumps({"missing": missing, "extra": extra}, indent=1, default=str)


def test_planted_cluster_covers_every_kind(planted) -> None:  # type: ignore[no-untyped-def]
    truth, run, _ = planted
    kinds = set(run.summary["counts_by_kind"])
    for kind in KINDS:
        assert kind in kinds, kind
    components = {r["component"] for r in truth.expected if r["kind"] == "orphan_ledger"}
    assert components == {"managed-ledger", "cursor", "schema", "delayed-index-bucket", "compacted-ledger"}


def test_corrupt_metadata_names_the_paths_and_the_audit_completes(planted) -> None:  # type: ignore[no-untyped-def]
    truth, run, _ = planted
    df = run.findings_pandas()
    corrupt = df[df["kind"] == "corrupt_metadata"]
    expected_paths = {r["path"] for r in truth.expected if r["kind"] == "corrupt_metadata"}
    assert set(corrupt["path"]) == expected_paths
    assert all(json.loads(e)["problem"] for e in corrupt["evidence"])
    # the rest of the audit went on: the other kinds are there too
    assert (df["kind"] != "corrupt_metadata").sum() > 0


def test_summary_file_matches_findings(planted) -> None:  # type: ignore[no-untyped-def]
    _, run, _ = planted
    summary = json.loads((run.out_dir / "summary.json").read_text())
    df = run.findings_pandas()
    assert summary["total_findings"] == len(df)
    assert summary["counts_by_kind"] == df.groupby("kind").size().to_dict()


def test_healthy_cluster_has_no_finding_at_all(zookeeper, s3_server, spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    chroot = _chroot(client, "healthy")
    client.stop()
    bucket = _bucket(s3_server.endpoint_url, "healthy")
    hosts = zookeeper.hosts + chroot
    truth = generate(
        hosts, root="", s3_endpoint=s3_server.endpoint_url, bucket=bucket, scenario="healthy", now_ms=NOW_MS
    )
    assert truth.expected == []
    run = _audit(spark, hosts, s3_server.endpoint_url, bucket, tmp_path)
    df = run.findings_pandas()
    assert df.empty, df[list(KEY)].to_string()
    assert run.summary["inventory_counts"]["bk_ledgers"] > 0
    assert run.summary["inventory_counts"]["offload_objects"] > 0


def test_reverification_drops_candidates_that_changed_after_the_scan(planted, s3_server) -> None:  # type: ignore[no-untyped-def]
    """Deleted-since and created-since candidates are dropped, with the reason counted."""
    from kazoo.client import KazooClient

    from ledgerlens.audit.reverify import reverify
    from ledgerlens.formats.paths import ledger_path

    truth, run, hosts = planted
    df = run.findings_pandas()
    orphan = df[(df["kind"] == "orphan_ledger") & (df["component"] == "managed-ledger")].iloc[0].to_dict()
    missing = df[df["kind"] == "missing_ledger"].iloc[0].to_dict()
    zk = ZooKeeperSource(hosts=hosts)
    before = reverify([orphan, missing], zk, None)
    assert len(before.keep) == 2, before.dropped  # still true right after the audit

    client = KazooClient(hosts=hosts)
    client.start()
    try:
        client.delete(ledger_path(int(orphan["ledger_id"])))
        client.create(
            ledger_path(int(missing["ledger_id"])), b"BookieMetadataFormatVersion\t3\n", makepath=True
        )
    finally:
        client.stop()
    after = reverify([orphan, missing], zk, None)
    assert after.keep == []
    assert after.dropped == {
        "orphan_ledger: ledger deleted since the scan": 1,
        "missing_ledger: ledger exists (created after the scan)": 1,
    }


def test_blind_spots_are_the_managed_ledgers_reported_corrupt(planted, spark) -> None:  # type: ignore[no-untyped-def]
    """Re-verification hides what the same nodes hide in the audit: the corrupt managed ledgers."""
    from ledgerlens.inventory.collect import load_inventory

    _, run, _ = planted
    df = run.findings_pandas()
    corrupt = df[(df["kind"] == "corrupt_metadata") & df["component"].isin(["managed-ledger", "cursor"])]
    assert len(corrupt) >= 2
    spots = pipeline.blind_spots(load_inventory(spark, str(run.out_dir / "inventory")))
    assert spots == sorted(set(corrupt["managed_ledger"]))


def test_suspicious_metadata_is_reported_and_never_a_deletion(planted) -> None:  # type: ignore[no-untyped-def]
    _truth, run, _ = planted
    df = run.findings_pandas()
    emptied = df[df["kind"] == "emptied_managed_ledger"]
    assert len(emptied) == 1
    ev = json.loads(emptied.iloc[0]["evidence"])
    assert ev["znode_version"] >= 1 and ev["data_bytes"] == 0 and ev["path"] == emptied.iloc[0]["path"]
    owned = df[(df["kind"] == "orphan_ledger") & (df["managed_ledger"] == emptied.iloc[0]["managed_ledger"])]
    assert len(owned) == 2 and set(owned["action"]) == {"investigate"}
    assert all(json.loads(e)["owner_emptied"] is True for e in owned["evidence"])
    unreadable = df[df["kind"] == "unreadable_metadata"]
    assert len(unreadable) == 1 and "ZooKeeper authentication" in unreadable.iloc[0]["evidence"]
    assert not len(df[(df["kind"] == "corrupt_metadata") & df["evidence"].str.contains("NoAuth")])
