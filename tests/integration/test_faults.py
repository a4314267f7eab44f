# ruff: noqa: E501  (exact one-line error messages are asserted whole)
"""Stores lost mid-run and implausible inventories: one error naming the store and the phase,
nothing published, ``--out`` as it was; a suspected wrong root does not page.

The pipeline runs in-process on the test Spark session against ZooKeeper and S3 servers of this
module, which the tests stop at a chosen moment (the phase is reached through the pipeline's own
call, wrapped to stop the server first).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens.audit import pipeline
from ledgerlens.audit.gates import ImplausibleInputError
from ledgerlens.settings.config import AuditConfig, ZooKeeperSource
from ledgerlens_sandbox.cluster import default_now_ms
from ledgerlens_sandbox.servers import S3Server, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW_MS = default_now_ms()


@pytest.fixture
def own_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("own-zk"))
    server.start(timeout=60)
    yield server
    server.stop()


@pytest.fixture
def own_s3(tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("own-s3"))  # s3_server: dummy credentials are set
    server.start(timeout=60)
    yield server
    server.stop()


def _cluster(zookeeper: Any, s3: Any, scenario: str) -> tuple[str, str]:
    c = generated_cluster(zookeeper, s3, scenario, now_ms=NOW_MS, scenario=scenario)
    return c["hosts"], c["bucket"]


def _previous_run(out: Path) -> dict[str, str]:
    out.mkdir(parents=True)
    (out / "summary.json").write_text('{"previous": true}\n')
    (out / "report.html").write_text("<p>previous</p>")
    return {p.name: p.read_text() for p in out.iterdir()}


def _state(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in out.iterdir()}


def _audit(
    capsys: pytest.CaptureFixture[str], hosts: str, endpoint: str, bucket: str, out: Path
) -> tuple[int, list[str], float]:
    """``ledgerlens audit`` in-process (on the test's Spark session): exit status, stderr lines, seconds."""
    from ledgerlens import cli

    argv = ["audit", "--zookeeper", hosts, "--s3-endpoint", endpoint, "--bucket", bucket, "--out", str(out),
            "--as-of", str(NOW_MS), "--no-progress"]  # fmt: skip
    capsys.readouterr()
    t0 = time.monotonic()
    code = cli.main(argv)
    elapsed = time.monotonic() - t0
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err.splitlines(), elapsed


def test_zookeeper_lost_during_collection(
    spark, own_zookeeper, s3_server, tmp_path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    hosts, bucket = _cluster(own_zookeeper, s3_server, "healthy")
    from ledgerlens.sources.zookeeper import LiveZooKeeper

    original = LiveZooKeeper.plan

    def then_lose_zookeeper(self: LiveZooKeeper, stage: str) -> list[str]:
        items = original(self, stage)  # the driver listed the managed ledgers' namespaces ...
        if stage == "managed_ledgers":
            own_zookeeper.stop()  # ... and ZooKeeper goes away before the Spark tasks read them
        return items

    monkeypatch.setattr(LiveZooKeeper, "plan", then_lose_zookeeper)
    monkeypatch.setenv("LEDGERLENS_ZK_TIMEOUT", "3")
    out = tmp_path / "out"
    before = _previous_run(out)
    code, err, elapsed = _audit(capsys, hosts, s3_server.endpoint_url, bucket, out)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"ledgerlens audit: error: zookeeper {hosts}") and "cannot connect" in err[0]
    assert err[0].endswith("(during collection; no findings written)")
    assert elapsed < 120, f"took {elapsed:.0f} s"
    assert _state(out) == before


@pytest.mark.slow  # a planted cluster's whole audit (~1-3 min); the ZooKeeper case above stays in make test
def test_s3_lost_during_reverification(spark, zookeeper, own_s3, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    hosts, bucket = _cluster(zookeeper, own_s3, "planted")
    import ledgerlens.audit.reverify as reverify

    original = reverify.reverify
    lost: list[float] = []

    def then_lose_s3(*a: Any, **k: Any) -> Any:
        own_s3.stop()
        lost.append(time.monotonic())
        return original(*a, **k)

    monkeypatch.setattr(reverify, "reverify", then_lose_s3)
    out = tmp_path / "out"
    before = _previous_run(out)
    code, err, _elapsed = _audit(capsys, hosts, own_s3.endpoint_url, bucket, out)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"ledgerlens audit: error: s3 {own_s3.endpoint_url} bucket {bucket}")
    assert err[0].endswith("(during re-verification; no findings written)")
    assert time.monotonic() - lost[0] < 60, "re-verification kept retrying a store that is gone"
    assert _state(out) == before


def test_no_managed_ledger_next_to_pulsar_ledgers_is_refused(spark, zookeeper, s3_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A namespace exists, no topic in it (so the cheap check before Spark passes), but BookKeeper
    holds Pulsar ledgers: the metadata is not this storage's cluster."""
    from kazoo.client import KazooClient

    hosts, _bucket = _cluster(zookeeper, s3_server, "healthy")
    chroot = hosts[len(zookeeper.hosts) :]
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    client.delete(f"{chroot}/managed-ledgers", recursive=True)
    client.ensure_path(f"{chroot}/managed-ledgers/acme/empty-ns")
    client.stop()
    out = tmp_path / "out"
    with pytest.raises(ImplausibleInputError) as e:
        pipeline.run(
            spark, ZooKeeperSource(hosts=hosts), None, AuditConfig(as_of_ms=NOW_MS), out, progress=False
        )
    assert str(e.value) == (
        f"zookeeper {hosts}: no managed ledger found, but Pulsar ledgers in BookKeeper: the metadata looked at "
        "is not this storage's cluster (wrong chroot, or a bucket shared with another cluster); every object "
        "would look orphaned (if this is really intended, pass --allow-empty-metadata)"
    )
    assert not out.exists()


def test_wrong_ledgers_root_is_a_suspicion_not_a_page(spark, zookeeper, s3_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A ledgers root with the nodes of a BookKeeper cluster but not this cluster's ledgers."""
    from kazoo.client import KazooClient

    hosts, bucket = _cluster(zookeeper, s3_server, "healthy")
    chroot = hosts[len(zookeeper.hosts) :]
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    for node in ("LAYOUT", "INSTANCEID", "available"):
        client.ensure_path(f"{chroot}/other-ledgers/{node}")
    client.stop()
    zk = ZooKeeperSource(hosts=hosts, ledgers_root="/other-ledgers")
    run = pipeline.run(spark, zk, None, AuditConfig(as_of_ms=NOW_MS), tmp_path / "out", progress=False)
    suspicion = run.summary["suspected_wrong_root"]
    assert suspicion["missing_ledgers"] > 10 and suspicion["share"] > 0.5
    assert "Suspected wrong --ledgers-root or chroot" in suspicion["message"]
    assert run.summary["counts_by_severity"]["critical"] == 0
    df = run.findings_pandas()
    missing = df[df["kind"] == "missing_ledger"]
    assert missing["ledger_id"].nunique() == suspicion["missing_ledgers"] and set(missing["severity"]) == {
        "warning"
    }
    assert all(json.loads(e)["suspected_wrong_root"] is True for e in missing["evidence"])
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["suspected_wrong_root"] == suspicion
