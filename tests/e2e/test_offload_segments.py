"""Offload verification against objects a real Pulsar 4.0.8 broker offloaded to S3 (moto).

Every object the broker wrote verifies clean, in the default mode and streamed block by block;
the objects the planting damaged (``ground_truth.json`` ``damaged_objects``) fail the checks a
reader of the object alone can see. The audit's exact findings on them are asserted by
``test_pulsar_sandbox.py::test_audit_reports_exactly_the_planted_anomalies``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgerlens_sandbox.failures import OTHER_CLUSTER

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]


def test_broker_objects_verify_clean_and_damage_is_seen(pulsar_env: Any, spark: Any, tmp_path: Path) -> None:
    from ledgerlens.inventory import schemas
    from ledgerlens.inventory.collect import collect_inventory
    from ledgerlens.settings.config import S3Source, ZooKeeperSource

    state = pulsar_env.state
    inv = collect_inventory(
        spark,
        ZooKeeperSource(hosts=state["zookeeper_hosts"]),
        S3Source(bucket=state["bucket"], endpoint_url=state["s3_endpoint"], region=state["region"]),
        str(tmp_path / "inventory"),
        progress=False,
        deep_offload_check=True,
    )
    rows = [
        r.asDict(recursive=True)
        for r in spark.read.schema(schemas.OFFLOAD_SEGMENTS).parquet(inv.tables["offload_segments"]).collect()
    ]
    damaged = set(pulsar_env.truth["damaged_objects"])
    healthy = [r for r in rows if r["key"] not in damaged]
    assert len(healthy) >= 10
    bad = [(r["key"], r["problems"], r["error"]) for r in healthy if r["problems"] or r["error"]]
    assert bad == []
    by_healthy = {r["key"] for r in healthy}
    for r in healthy:
        assert r["format_version"] == "1" and r["cluster_name"] == "standalone", r
        assert r["managed_ledger"] and r["managed_ledger"].count("/") == 3, r
        if r["role"] == "index":
            assert r["index_version"] == 1 and r["ledgers"][0]["state"] == "CLOSED", r
            assert r["ledgers"][0]["ledger_id"] == r["ledger_id"]
        elif r["key"] + "-index" in by_healthy:
            assert r["deep_checked"] and r["deep_entries"] > 0, r  # every entry of every block
    by_key = {r["key"]: r for r in rows}
    truth = {f["object_key"]: f for f in pulsar_env.truth["expected"] if f["object_key"] in damaged}
    checks = {k: {p["check"] for p in by_key[k]["problems"]} for k in truth}
    corrupt = [k for k, f in truth.items() if f["kind"] == "corrupt_offload_object"]
    assert sum(1 for k in corrupt if checks[k]) >= 3  # truncated index, wrong magic, short data
    assert any("index_decode" in checks[k] for k in corrupt)
    assert any("data_header" in checks[k] for k in corrupt)
    assert any("data_length" in checks[k] for k in corrupt)
    foreign = [k for k, f in truth.items() if f["kind"] == "foreign_offload_object"]
    assert [by_key[k]["cluster_name"] for k in foreign] == [OTHER_CLUSTER]
    read = sum(r["bytes_read"] for r in rows)
    assert read >= sum(r["size"] for r in healthy if r["role"] == "data")  # deep: everything streamed
