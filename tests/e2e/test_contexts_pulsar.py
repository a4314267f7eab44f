"""A context pointing at a real Pulsar standalone: ``contexts check`` and the audit by name.

The context names the sandbox's ZooKeeper, bucket, S3 endpoint and region, Pulsar cluster name and
admin URL, with the thresholds of ``test_pulsar_sandbox`` (``failures.MAX_AGE_S``). ``check``
answers for every store, including the broker's admin API; the audit by ``--context`` reports
exactly the planted anomalies, as the audit by flags does.
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

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]


def _findings(out: Path) -> list[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    return sorted((finding_key(r) for r in pq.read_table(out / "findings.parquet").to_pylist()), key=repr)


@pytest.fixture
def sandbox_context(pulsar_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state = pulsar_env.state
    for k in list(os.environ):
        if k.startswith("LEDGERLENS_") and k != "LEDGERLENS_E2E_WORKDIR":
            monkeypatch.delenv(k)
    config = tmp_path / "contexts.toml"
    config.write_text(
        f"""current = "pulsar-sandbox"

[contexts.pulsar-sandbox.pulsar]
cluster-name = "{state["cluster"]}"
admin-url = "{state["web_url"]}"

[contexts.pulsar-sandbox.metadata]
zookeeper = "{state["zookeeper_hosts"]}"

[contexts.pulsar-sandbox.s3]
bucket = "{state["bucket"]}"
endpoint = "{state["s3_endpoint"]}"
region = "{state["region"]}"

[contexts.pulsar-sandbox.audit]
min-orphan-age = "{MAX_AGE_S}s"
retention-grace = "{MAX_AGE_S}s"
incomplete-offload-age = "{MAX_AGE_S}s"

[contexts.wrong-cluster.pulsar]
cluster-name = "prod-west"
admin-url = "{state["web_url"]}"

[contexts.wrong-cluster.metadata]
zookeeper = "{state["zookeeper_hosts"]}"
"""
    )
    config.chmod(0o600)
    monkeypatch.setenv(contexts.CONFIG_ENV, str(config))
    return {"state": state, "config": config}


def test_check_a_healthy_pulsar_context(sandbox_context: dict[str, Any], capsys: Any) -> None:
    t0 = time.monotonic()
    assert cli.main(["contexts", "check"]) == cli.EXIT_OK  # the file's current context
    elapsed = time.monotonic() - t0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "context pulsar-sandbox:"
    by_store = {line.split()[0]: line for line in lines[1:]}
    assert set(by_store) == {"zookeeper", "bucket", "admin", "safety"}, lines
    assert all(line.split()[1] == "ok" for line in by_store.values()), lines
    assert "/ledgers (" in by_store["zookeeper"] and "/managed-ledgers (" in by_store["zookeeper"]
    assert "clusters standalone" in by_store["admin"]
    assert elapsed < 10, elapsed

    assert cli.main(["contexts", "check", "wrong-cluster"]) == cli.EXIT_CHECK_FAILED
    admin = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("admin"))
    assert "FAIL" in admin and "cluster 'prod-west' is not among" in admin


def test_audit_by_context_reports_exactly_the_planted_anomalies(
    pulsar_env: Any, sandbox_context: dict[str, Any], spark: Any, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "by-name"
    assert cli.main(["audit", "--context", "pulsar-sandbox", "--out", str(out), "--no-progress"]) == 0
    expected = sorted(
        (finding_key(r) for r in expected_findings(pulsar_env.truth, bookie_reads=False)), key=repr
    )
    got = _findings(out)
    assert got == expected, {
        "missing": [e for e in expected if e not in got],
        "extra": [g for g in got if g not in expected],
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["context"]["name"] == "pulsar-sandbox"
    settings = summary["context"]["settings"]
    assert settings["pulsar.admin-url"]["value"] == sandbox_context["state"]["web_url"]
    assert settings["audit.min-orphan-age"]["origin"].startswith("context pulsar-sandbox (")
    assert "context: pulsar-sandbox" in capsys.readouterr().out


@pytest.mark.slow
def test_audit_by_flags_reports_the_same(
    pulsar_env: Any, sandbox_context: dict[str, Any], spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    state = sandbox_context["state"]
    empty = tmp_path / "no-contexts.toml"
    empty.write_text("")  # no context at all: every input is a flag
    monkeypatch.setenv(contexts.CONFIG_ENV, str(empty))
    out = tmp_path / "by-flags"
    argv = [
        "audit",
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
        "--incomplete-offload-age",
        f"{MAX_AGE_S}s",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert cli.main(argv) == 0
    expected = sorted(
        (finding_key(r) for r in expected_findings(pulsar_env.truth, bookie_reads=False)), key=repr
    )
    assert _findings(out) == expected
