"""Real Pulsar: the admin API source (``--source admin``) against the live ZooKeeper scan.

Both audit the seeded and planted sandbox (BookKeeper's ledgers from the sandbox ZooKeeper in both;
Pulsar's metadata from the ZooKeeper scan in one, from the broker's admin REST API in the other).
They give the same findings, except what the admin API cannot show (docs/audit-rules.md, "Admin
API source"): the delayed-index bucket properties of cursors, so the planted orphan bucket
snapshot and the planted dangling bucket property are not decidable and not reported; the summary
says so. Reading through the API loads no topic: the planted failure topics stay unloaded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ledgerlens.audit import pipeline
from ledgerlens.settings.config import S3Source
from ledgerlens.sources.stores import Stores
from ledgerlens_sandbox.failures import audit_config, finding_key
from ledgerlens_sandbox.pulsar import admin

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1200)]


def _audit(spark: Any, state: dict[str, Any], stores: Stores, out: Path) -> pipeline.AuditRun:
    return pipeline.run(
        spark,
        None,
        S3Source(bucket=state["bucket"], endpoint_url=state["s3_endpoint"], region=state["region"]),
        audit_config(),
        out,
        progress=False,
        stores=stores,
    )


def _loaded_topics(web: str) -> set[str]:
    """Topics the broker has loaded (its own stats: listing them loads nothing)."""
    stats = admin(web, "GET", "/admin/v2/broker-stats/topics")
    out: set[str] = set()
    for bundles in stats.values():
        for domains in bundles.values():
            for topics in domains.values():
                out.update(topics)
    return out


def test_admin_source_gives_the_live_scans_findings(pulsar_env: Any, spark: Any, tmp_path: Path) -> None:
    state = pulsar_env.state
    hosts = state["zookeeper_hosts"]
    before = _loaded_topics(state["web_url"])
    t0 = time.monotonic()
    via_api = _audit(
        spark, state, Stores.from_options(hosts, source="admin", admin_url=state["web_url"]), tmp_path / "api"
    )
    wall = time.monotonic() - t0
    live = _audit(spark, state, Stores.from_options(hosts), tmp_path / "zk")
    # the API read loaded none of the planted topics (the broker would trim / rewrite them)
    assert not (_loaded_topics(state["web_url"]) - before) & set(pulsar_env.truth["topics"])

    got = {finding_key(r) for r in via_api.findings_pandas().to_dict("records")}
    want = {finding_key(r) for r in live.findings_pandas().to_dict("records")}
    # not decidable through the API: the planted findings of delayed-index buckets, nothing else
    buckets = {
        finding_key(f) for f in pulsar_env.truth["expected"] if f["component"] == "delayed-index-bucket"
    }
    assert {f[0] for f in buckets} == {"orphan_ledger", "missing_ledger"}, buckets
    report = json.dumps(
        {"only_live": sorted(want - got, key=repr), "only_api": sorted(got - want, key=repr)}, default=str
    )
    assert got - want == set(), report
    assert want - got == buckets, report

    s = via_api.summary
    print(f"admin source audit: {wall:.1f}s, {len(got)} findings, undecidable {s['undecidable']}")
    assert s["sources"]["pulsar"][0]["kind"] == "admin"
    assert s["sources"]["pulsar"][0]["location"] == f"admin:{state['web_url']}"
    assert s["sources"]["bookkeeper"]["kind"] == "zk"
    und = s["undecidable"]
    assert und["cursors_without_string_properties"] >= 8 and und["schemas_without_ledger_ids"] >= 2, und
    assert und["offloads_without_completion_state"] >= 6, und
    assert live.summary["undecidable"] == {}
    assert s["inventory_counts"]["ml_ledgers"] == live.summary["inventory_counts"]["ml_ledgers"]
    assert s["inventory_counts"]["cursors"] == live.summary["inventory_counts"]["cursors"]
