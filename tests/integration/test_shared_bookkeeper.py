"""A BookKeeper cluster and a bucket shared by two Pulsar clusters (generated, real ZooKeeper, S3, Spark).

The planted cluster's BookKeeper root and bucket also hold another Pulsar cluster's ledgers and
offloaded objects (tenant ``othercorp``), whose Pulsar metadata lives in a second tree. Audited from
its own Pulsar store (``test_audit_end_to_end``) those are ``foreign_*`` info findings only; audited
from both stores (``--pulsar-metadata`` twice) the audit reports exactly the planted anomalies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens.audit import pipeline
from ledgerlens.audit.reverify import reverify
from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens.sources.stores import Stores
from ledgerlens_sandbox.cluster import FOREIGN_TENANT, default_now_ms

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW_MS = default_now_ms()


def _keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and v != v) else v

    return sorted((tuple(norm(r.get(k)) for k in FINDING_KEYS) for r in rows), key=repr)


@pytest.fixture(scope="module")
def shared(zookeeper: Any, s3_server: Any) -> dict[str, Any]:
    return generated_cluster(zookeeper, s3_server, "shared", now_ms=NOW_MS)


def test_generated_foreign_cluster_is_info_only(shared: dict[str, Any]) -> None:
    truth = shared["truth"]
    assert truth.foreign_root == "/other-cluster"
    kinds = {f["kind"] for f in truth.foreign}
    assert kinds == {"foreign_ledger", "foreign_offload_object"}
    assert {f["severity"] for f in truth.foreign} == {"info"}
    assert {f["component"] for f in truth.foreign if f["kind"] == "foreign_ledger"} == {
        "managed-ledger",
        "cursor",
        "schema",
    }
    assert all(f in truth.expected for f in truth.foreign)


def test_audited_from_both_pulsar_stores_reports_exactly_the_planted_findings(
    shared: dict[str, Any], spark: Any, tmp_path: Path
) -> None:
    truth, hosts = shared["truth"], shared["hosts"]
    stores = Stores.parse(
        f"zk:{hosts}/ledgers",
        [f"zk:{hosts}", f"zk:{hosts}{truth.foreign_root}"],
        base=ZooKeeperSource(hosts="unused", rate_limit=50_000),
    )
    run = pipeline.run(
        spark,
        None,
        S3Source(bucket=shared["bucket"], endpoint_url=shared["endpoint"]),
        AuditConfig(as_of_ms=NOW_MS),
        tmp_path,
        progress=False,
        stores=stores,
    )
    own = [f for f in truth.expected if f not in truth.foreign]
    # the BookKeeper store is named without a chroot (its path is the ledgers root): its paths are absolute
    chroot = hosts[hosts.index("/") :]
    rows = run.findings_pandas().to_dict("records")
    for r in rows:
        if isinstance(r["path"], str) and r["path"].startswith(chroot + "/ledgers/"):
            r["path"] = r["path"][len(chroot) :]
    got = _keys(rows)
    expected = _keys(own)
    missing = [e for e in expected if e not in got]
    extra = [g for g in got if g not in expected]
    assert not missing and not extra, json.dumps({"missing": missing, "extra": extra}, indent=1, default=str)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["foreign_by_tenant"] == {}
    assert [p["location"] for p in summary["sources"]["pulsar"]] == [
        f"zk:{hosts}",
        f"zk:{hosts}{truth.foreign_root}",
    ]
    assert summary["sources"]["bookkeeper"]["roots"] == {"bk_ledgers": hosts[hosts.index("/") :] + "/ledgers"}


def test_reverification_applies_ownership_against_the_live_stores(shared: dict[str, Any]) -> None:
    """An orphan candidate of a tenant no live store knows becomes foreign_ledger; with that
    store given, its owner references it; declared deleted, it stays an orphan candidate."""
    truth, hosts = shared["truth"], shared["hosts"]
    f = next(x for x in truth.foreign if x["kind"] == "foreign_ledger" and x["component"] == "managed-ledger")
    row = {**f, "kind": "orphan_ledger", "severity": "warning", "action": "delete_ledger"}
    row.update(tenant=FOREIGN_TENANT, ml_owner=f["managed_ledger"], evidence="{}")
    own = ZooKeeperSource(hosts=hosts)
    other = ZooKeeperSource(hosts=hosts + truth.foreign_root)

    alone = reverify([row], own, None)
    assert [(r["kind"], r["severity"], r["action"]) for r in alone.keep] == [
        ("foreign_ledger", "info", "none")
    ]
    assert json.loads(alone.keep[0]["evidence"])["tenant"] == FOREIGN_TENANT

    both = reverify([row], own, None, pulsar=[own, other])
    assert both.keep == [] and both.dropped == {"orphan_ledger: referenced again since the scan": 1}

    deleted = reverify([row], own, None, deleted_tenants=[FOREIGN_TENANT])
    assert [r["kind"] for r in deleted.keep] == ["orphan_ledger"]
