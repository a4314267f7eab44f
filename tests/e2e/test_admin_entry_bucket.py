"""Real Pulsar: ``ledgerlens audit --source admin --admin-url URL --bucket B`` as an operator runs it.

Issue 42: with a bucket, the command refused the real sandbox ("no managed ledger found, but
bucket ... holds objects"): the plausibility gate before Spark never counted what the admin source
sees. Clusters on etcd or Oxia always give a bucket. Here the command (its preflight included)
audits the seeded and planted sandbox through the broker's admin REST API, with BookKeeper's ledgers
from the sandbox ZooKeeper (``--zookeeper``, as ``tests/e2e/test_admin_source.py`` does), and
gives the live scan's findings (the same command without ``--source admin``) minus exactly the
admin source's documented blind spots on this sandbox (docs/audit-rules.md, "Admin API source"):
the planted delayed-index bucket anomalies, whose cursor properties the API does not show.
The preflight's listings load no planted topic.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ledgerlens import cli
from ledgerlens.settings import contexts
from ledgerlens_sandbox.failures import MAX_AGE_S, expected_findings, finding_key
from ledgerlens_sandbox.pulsar import admin

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1800)]


def _findings(out: Path) -> set[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    return {finding_key(r) for r in pq.read_table(out / "findings.parquet").to_pylist()}


def _loaded_topics(web: str) -> set[str]:
    """Topics the broker has loaded (its own stats: listing them loads nothing)."""
    stats = admin(web, "GET", "/admin/v2/broker-stats/topics")
    return {
        t
        for bundles in stats.values()
        for domains in bundles.values()
        for topics in domains.values()
        for t in topics
    }


@pytest.fixture
def flags_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No context file and no LEDGERLENS_* setting of the machine: every input is a flag."""
    for k in list(os.environ):
        if k.startswith("LEDGERLENS_") and k != "LEDGERLENS_E2E_WORKDIR":
            monkeypatch.delenv(k)
    empty = tmp_path / "no-contexts.toml"
    empty.write_text("")
    monkeypatch.setenv(contexts.CONFIG_ENV, str(empty))
    monkeypatch.setenv("LEDGERLENS_INCOMPLETE_OFFLOAD_AGE", f"{MAX_AGE_S}s")  # no flag for it


def test_admin_source_with_a_bucket_is_not_refused_and_gives_the_live_findings(
    pulsar_env: Any, spark: Any, flags_only: None, tmp_path: Path, capsys: Any
) -> None:
    state = pulsar_env.state
    as_of = str(int(time.time() * 1000))
    common = [
        "--zookeeper",
        state["zookeeper_hosts"],
        "--bucket",
        state["bucket"],
        "--s3-endpoint",
        state["s3_endpoint"],
        "--s3-region",
        state["region"],
        "--min-orphan-age",
        f"{MAX_AGE_S}s",
        "--retention-grace",
        f"{MAX_AGE_S}s",
        "--as-of",
        as_of,
        "--no-progress",
    ]
    before = _loaded_topics(state["web_url"])
    t0 = time.monotonic()
    code = cli.main(
        [
            "audit",
            "--source",
            "admin",
            "--admin-url",
            state["web_url"],
            *common,
            "--out",
            str(tmp_path / "api"),
        ]
    )
    wall = time.monotonic() - t0
    printed = capsys.readouterr()
    assert code == 0, printed.err  # not refused: the gate counted the API's tenants and topics
    assert "no managed ledger found" not in printed.err
    # neither the preflight's listings nor the collection loaded a planted topic
    assert not (_loaded_topics(state["web_url"]) - before) & set(pulsar_env.truth["topics"])

    assert cli.main(["audit", *common, "--out", str(tmp_path / "zk")]) == 0, capsys.readouterr().err
    got, want = _findings(tmp_path / "api"), _findings(tmp_path / "zk")
    # the admin source's blind spots on this sandbox: the planted delayed-index bucket findings
    buckets = {
        finding_key(f) for f in pulsar_env.truth["expected"] if f["component"] == "delayed-index-bucket"
    }
    assert {f[0] for f in buckets} == {"orphan_ledger", "missing_ledger"}, buckets
    report = json.dumps(
        {"only_live": sorted(want - got, key=repr), "only_api": sorted(got - want, key=repr)}, default=str
    )
    assert got - want == set(), report
    assert want - got == buckets, report
    # and the live scan is the planted truth (no bookie reads): the comparison is not vacuous
    truth = {finding_key(f) for f in expected_findings(pulsar_env.truth, bookie_reads=False)}
    assert want == truth, json.dumps(
        {"missing": sorted(truth - want, key=repr), "extra": sorted(want - truth, key=repr)}, default=str
    )
    assert any(f[0].endswith("offload_object") or f[0] == "incomplete_offload" for f in got), got

    summary = json.loads((tmp_path / "api" / "summary.json").read_text())
    assert summary["sources"]["pulsar"][0]["location"] == f"admin:{state['web_url']}"
    assert summary["undecidable"]["cursors_without_string_properties"] >= 8, summary["undecidable"]
    print(f"admin source audit with bucket {state['bucket']}: {wall:.1f}s, {len(got)} findings")
