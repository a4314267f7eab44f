"""Contexts against a generated cluster on a real ZooKeeper, a real S3 server and Spark.

The audit by ``--context NAME`` finds exactly what the audit by flags finds (the planted ground
truth); ZooKeeper digest credentials named by a context are applied to every kazoo session;
``contexts check`` answers for a healthy context, and fails store by store, within a bounded
time, for one whose ZooKeeper, bucket and admin URL do not answer.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens import cli
from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.settings import contexts
from ledgerlens_sandbox.cluster import default_now_ms, generate, restrict

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW_MS = default_now_ms()
DIGEST = "auditor:zk-digest-s3cr3t"
SASL_PASSWORD = "bob-sasl-s3cr3t"


def _keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and v != v) else v

    return sorted((tuple(norm(r.get(k)) for k in FINDING_KEYS) for r in rows), key=repr)


def _findings(out: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return list(pq.read_table(out / "findings.parquet").to_pylist())


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("LEDGERLENS_"):
            monkeypatch.delenv(k)


@pytest.fixture(scope="module")
def planted(zookeeper: Any, s3_server: Any) -> dict[str, Any]:
    """A planted cluster in its own chroot and bucket."""
    return generated_cluster(zookeeper, s3_server, "ctx", now_ms=NOW_MS)


def _context(name: str, hosts: str, bucket: str, endpoint: str, extra: str = "") -> str:
    return f"""
[contexts.{name}.metadata]
zookeeper = "{hosts}"

[contexts.{name}.s3]
bucket = "{bucket}"
endpoint = "{endpoint}"
region = "us-east-1"

[contexts.{name}.audit]
min-orphan-age = "24h"
{extra}"""


@pytest.fixture(scope="module")
def by_name(planted: dict[str, Any], spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``ledgerlens audit --context generated`` on the planted cluster."""
    tmp = tmp_path_factory.mktemp("by-name")
    config = _write(
        tmp / "contexts.toml", _context("generated", planted["hosts"], planted["bucket"], planted["endpoint"])
    )
    out = tmp / "audit"
    with pytest.MonkeyPatch.context() as mp:
        for k in list(os.environ):
            if k.startswith("LEDGERLENS_"):
                mp.delenv(k)
        mp.setenv(contexts.CONFIG_ENV, str(config))
        code = cli.main(
            ["audit", "--context", "generated", "--out", str(out), "--as-of", str(NOW_MS), "--no-progress"]
        )
    assert code == 0
    return {"out": out, "config": config}


def test_audit_by_context_finds_exactly_the_planted_findings(
    planted: dict[str, Any], by_name: dict[str, Any]
) -> None:
    assert _keys(_findings(by_name["out"])) == _keys(planted["truth"].expected)
    summary = json.loads((by_name["out"] / "summary.json").read_text())
    assert summary["context"]["name"] == "generated"
    assert summary["context"]["settings"]["metadata.zookeeper"] == {
        "value": planted["hosts"],
        "origin": f"context generated ({by_name['config']}:3)",
    }
    assert summary["context"]["settings"]["audit.min-orphan-age"]["value"] == "24h"


@pytest.mark.slow
def test_audit_by_flags_finds_the_same(
    planted: dict[str, Any], by_name: dict[str, Any], spark: Any, tmp_path: Path, clean_env: None
) -> None:
    flags = [
        "--zookeeper",
        planted["hosts"],
        "--bucket",
        planted["bucket"],
        "--s3-endpoint",
        planted["endpoint"],
    ]
    by_flags = tmp_path / "by-flags"
    argv = ["audit", *flags, "--s3-region", "us-east-1", "--out", str(by_flags), "--as-of", str(NOW_MS)]
    assert cli.main([*argv, "--no-progress"]) == 0
    assert _keys(_findings(by_flags)) == _keys(_findings(by_name["out"]))
    flagged = json.loads((by_flags / "summary.json").read_text())["context"]
    assert flagged["name"] == "" and flagged["settings"]["metadata.zookeeper"]["origin"] == "flag --zookeeper"


@pytest.fixture
def digest_cluster(zookeeper: Any) -> Iterator[str]:
    """A healthy cluster in a chroot whose every node only ``auditor`` (digest) may read."""
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    chroot = f"/acl-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    client.ensure_path(chroot)
    generate(zookeeper.hosts + chroot, root="", scenario="healthy", now_ms=NOW_MS)
    user, password = DIGEST.split(":", 1)
    client.add_auth("digest", DIGEST)
    acl = [make_digest_acl(user, password, all=True)]
    restrict(client, chroot, acl)
    client.stop()
    client.close()
    yield zookeeper.hosts + chroot


def test_zookeeper_digest_is_applied_to_every_session(
    digest_cluster: str,
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    server, chroot = digest_cluster.split("/", 1)
    anonymous = KazooClient(hosts=server)
    anonymous.start()
    with pytest.raises(NoAuthError):  # the ACLs hold: nobody else reads this cluster
        anonymous.get_children(f"/{chroot}/ledgers")
    anonymous.stop()
    anonymous.close()

    # A file, not a variable: Spark's executors started before this test, with their own environment.
    digest_file = _write(tmp_path / "zk-digest", DIGEST + "\n")
    config = _write(
        tmp_path / "contexts.toml",
        f"""
[contexts.locked.metadata]
zookeeper = "{digest_cluster}"

[contexts.locked.auth]
zookeeper-digest-file = "{digest_file}"

[contexts.nokey.metadata]
zookeeper = "{digest_cluster}"
""",
    )
    monkeypatch.setenv(contexts.CONFIG_ENV, str(config))

    assert cli.main(["contexts", "check", "nokey"]) == cli.EXIT_CHECK_FAILED
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:2] == ["zookeeper", "FAIL"] and "not authorized (NoAuthError)" in out

    assert cli.main(["contexts", "check", "locked"]) == cli.EXIT_OK
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["zookeeper", "ok"]

    out_dir = tmp_path / "audit"
    assert cli.main(["audit", "--context", "locked", "--out", str(out_dir), "--as-of", str(NOW_MS)]) == 0
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["total_findings"] == 0, summary
    assert summary["inventory_counts"]["bk_ledgers"] > 0 and summary["inventory_counts"]["ml_ledgers"] > 0
    text = (out_dir / "summary.json").read_text() + capsys.readouterr().out
    assert "zk-digest-s3cr3t" not in text
    assert (
        summary["context"]["settings"]["auth.zookeeper-digest-file"]["value"] == f"{digest_file} (readable)"
    )


def test_check_healthy_context(
    planted: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None, capsys: Any
) -> None:
    config = _write(
        tmp_path / "contexts.toml",
        _context(
            "generated",
            planted["hosts"],
            planted["bucket"],
            planted["endpoint"],
            # the generated bucket also holds another cluster's objects: a healthy context names its own
            extra='\n[contexts.generated.pulsar]\ncluster-name = "sandbox"\n',
        ),
    )
    monkeypatch.setenv(contexts.CONFIG_ENV, str(config))
    t0 = time.monotonic()
    assert cli.main(["contexts", "check", "generated"]) == cli.EXIT_OK
    elapsed = time.monotonic() - t0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "context generated:"
    stores = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert stores == {"zookeeper": "ok", "bucket": "ok", "safety": "ok"}, lines
    zk_line = next(line for line in lines if line.startswith("zookeeper"))
    assert "/ledgers (" in zk_line and "/managed-ledgers (" in zk_line
    assert "cluster(s) " in next(line for line in lines if line.startswith("bucket"))
    assert elapsed < 10, elapsed


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_check_fails_store_by_store_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None, capsys: Any
) -> None:
    """Refused connections (nothing listens) and silent servers (listening, never answering)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # never accepted: connects succeed, nothing ever answers
    quiet = f"127.0.0.1:{silent.getsockname()[1]}"
    refused = f"127.0.0.1:{_closed_port()}"
    text = ""
    for name, hostport in (("refused", refused), ("silent", quiet)):
        text += f"""
[contexts.{name}.pulsar]
admin-url = "http://{hostport}"

[contexts.{name}.metadata]
zookeeper = "{hostport}"

[contexts.{name}.s3]
bucket = "b"
endpoint = "http://{hostport}"
"""
    monkeypatch.setenv(contexts.CONFIG_ENV, str(_write(tmp_path / "contexts.toml", text)))
    try:
        for name, limit, argv in (("refused", 10.0, []), ("silent", 4.0, ["--timeout", "4"])):
            t0 = time.monotonic()
            assert cli.main(["contexts", "check", name, *argv]) == cli.EXIT_CHECK_FAILED
            elapsed = time.monotonic() - t0
            lines = capsys.readouterr().out.splitlines()[1:]
            by_store = {line.split()[0]: line for line in lines}
            assert set(by_store) == {"zookeeper", "bucket", "admin", "safety"}, lines
            for store in ("zookeeper", "bucket", "admin"):
                assert by_store[store].split()[1] == "FAIL", lines
                seconds = float(by_store[store].split()[2].rstrip("s"))
                assert seconds <= limit + 1.5, lines
            assert "cannot connect" in by_store["zookeeper"]
            assert by_store["bucket"].count("cannot list") == 1
            # the bucket could not be listed: whether it is shared is unknown, never "ok"
            assert by_store["safety"].split()[1] == "unknown" and "not known" in by_store["safety"], lines
            assert elapsed < limit + 3, (name, elapsed, lines)
    finally:
        silent.close()


def test_check_flags_a_shared_bucket_without_cluster_name(
    planted: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None, capsys: Any
) -> None:
    args = (planted["hosts"], planted["bucket"], planted["endpoint"])
    text = _context("east", *args) + _context("west", *args)
    config = _write(tmp_path / "contexts.toml", text)
    monkeypatch.setenv(contexts.CONFIG_ENV, str(config))
    assert cli.main(["contexts", "check", "east"]) == cli.EXIT_CHECK_FAILED
    lines = capsys.readouterr().out.splitlines()
    safety = next(line for line in lines if line.startswith("safety"))
    assert "FAIL" in safety and "contexts west use it too" in safety and "pulsar.cluster-name" in safety
    assert all(" ok " in line for line in lines[1:] if not line.startswith("safety")), lines

    named = text.replace(
        "[contexts.east.metadata]",
        '[contexts.east.pulsar]\ncluster-name = "sandbox"\n\n[contexts.east.metadata]',
    )
    _write(config, named)
    assert cli.main(["contexts", "check", "east"]) == cli.EXIT_OK
    assert "shared; objects attributed by cluster sandbox" in capsys.readouterr().out


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ZooKeeper that accepts SASL DIGEST-MD5 logins, holding a healthy cluster only ``bob`` may read."""
    from kazoo.client import KazooClient
    from kazoo.security import ACL, Id, Permissions

    from ledgerlens.errors import SandboxError
    from ledgerlens_sandbox.servers import ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zk-sasl"), sasl_users={"bob": SASL_PASSWORD})
    try:
        server.start(timeout=120)
    except SandboxError as e:
        pytest.fail(f"SASL ZooKeeper did not start: {e}", pytrace=False)
    try:
        generate(server.hosts, root="/c", scenario="healthy", now_ms=NOW_MS)
        client = KazooClient(
            hosts=server.hosts,
            sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": SASL_PASSWORD},
        )
        client.start()
        acl = [ACL(Permissions.ALL, Id("sasl", "bob"))]
        restrict(client, "/c", acl)
        client.stop()
        client.close()
        yield server.hosts
    finally:
        server.stop()


def test_zookeeper_sasl_jaas_file_is_applied(
    sasl_zookeeper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None, capsys: Any
) -> None:
    jaas = _write(
        tmp_path / "client-jaas.conf",
        "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="bob"\n  password="{SASL_PASSWORD}";\n}};\n',
    )
    roots = 'ledgers-root = "/c/ledgers"\nmanaged-ledgers-root = "/c/managed-ledgers"\n'
    config = _write(
        tmp_path / "contexts.toml",
        f'[contexts.sasl.metadata]\nzookeeper = "{sasl_zookeeper}"\n{roots}\n'
        f'[contexts.sasl.auth]\nzookeeper-sasl-jaas-file = "{jaas}"\n\n'
        f'[contexts.anonymous.metadata]\nzookeeper = "{sasl_zookeeper}"\n{roots}',
    )
    monkeypatch.setenv(contexts.CONFIG_ENV, str(config))
    assert cli.main(["contexts", "check", "anonymous"]) == cli.EXIT_CHECK_FAILED
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:2] == ["zookeeper", "FAIL"] and "not authorized" in out, out
    assert cli.main(["contexts", "check", "sasl"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:2] == ["zookeeper", "ok"], out
    assert "/c/ledgers (" in out and "/c/managed-ledgers (" in out
    assert cli.main(["contexts", "show", "sasl"]) == cli.EXIT_OK
    shown = capsys.readouterr().out
    assert f"{jaas} (readable)" in shown and SASL_PASSWORD not in shown
