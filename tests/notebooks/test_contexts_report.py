"""``ledgerlens report --context NAME``: the runbook resolves the context, applies its ZooKeeper
digest, and the summary, the executed notebook and the HTML report record the context and its
settings with every secret redacted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerlens import report
from ledgerlens.settings import contexts

pytestmark = [pytest.mark.notebooks, pytest.mark.integration, pytest.mark.spark]

NOW_MS = 1_795_000_000_000
DIGEST_ENV = "LL_REPORT_ZK_AUTH"  # no secret-looking word in the name: only the context says it is one
DIGEST = "auditor:report-digest-pw"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsZWRnZXJsZW5zIn0.c2lnbmVkLWJ5LXRoZS1icm9rZXI"
ADMIN_PASSWORD = "admin-url-pw-42"


@pytest.fixture(scope="module")
def locked_cluster(zookeeper: Any) -> Iterator[str]:
    """A healthy generated cluster whose every node only the digest user may read."""
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    from ledgerlens_sandbox.cluster import generate, restrict

    chroot = f"/report-acl-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    client.ensure_path(chroot)
    generate(zookeeper.hosts + chroot, root="", scenario="healthy", now_ms=NOW_MS)
    client.add_auth("digest", DIGEST)
    acl = [make_digest_acl(*DIGEST.split(":", 1), all=True)]
    restrict(client, chroot, acl)
    client.stop()
    client.close()
    yield zookeeper.hosts + chroot


def test_report_by_context_redacts_every_secret(locked_cluster: str, tmp_path: Path) -> None:
    token = tmp_path / "admin.token"
    token.write_text(TOKEN + "\n")
    config = tmp_path / "contexts.toml"
    config.write_text(
        f"""current = "locked"

[contexts.locked.pulsar]
cluster-name = "sandbox"

[contexts.locked.metadata]
zookeeper = "{locked_cluster}"

[contexts.locked.auth]
zookeeper-digest-env = "{DIGEST_ENV}"
admin-token-file = "{token}"

[contexts.locked.audit]
min-orphan-age = "36h"

[contexts.locked.spark]
master = "local[2]"
"""
    )
    config.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERLENS_")}
    env.update(
        {
            contexts.CONFIG_ENV: str(config),
            DIGEST_ENV: DIGEST,
            "LEDGERLENS_ADMIN_URL": f"http://auditor:{ADMIN_PASSWORD}@127.0.0.1:9",
        }
    )
    out = tmp_path / "report"
    run = subprocess.run(
        [sys.executable, "-m", "ledgerlens.cli", "report", "--out", str(out), "--as-of", str(NOW_MS)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]

    summary_text = (out / "summary.json").read_text()
    executed = (out / "audit_ledgers.ipynb").read_text()
    html = (out / "report.html").read_text()
    summary = json.loads(summary_text)
    # the digest was applied inside the runbook's kernel: the locked cluster was read, and is healthy
    assert summary["total_findings"] == 0 and summary["inventory_counts"]["bk_ledgers"] > 0, summary
    assert report.read_recorded(out / "audit_ledgers.ipynb", "summary")["context"] == summary["context"]

    context = summary["context"]
    assert context["name"] == "locked"
    settings = context["settings"]
    assert settings["auth.zookeeper-digest-env"]["value"] == f"{DIGEST_ENV} (set)"
    assert settings["auth.admin-token-file"]["value"] == f"{token} (readable)"
    assert settings["pulsar.admin-url"] == {
        "value": "http://***@127.0.0.1:9",
        "origin": "env LEDGERLENS_ADMIN_URL",
    }
    assert settings["audit.min-orphan-age"]["origin"] == f"context locked ({config}:14)"
    assert settings["spark.master"]["value"] == "local[2]"

    for where, text in (
        ("summary.json", summary_text),
        ("notebook", executed),
        ("report", html),
        ("stdout", run.stdout + run.stderr),
    ):
        for secret in (DIGEST, "report-digest-pw", TOKEN, ADMIN_PASSWORD):
            assert secret not in text, (where, secret)
    assert "Context: <strong>locked</strong>" in html or "Context: **locked**" in executed
    assert "auth.zookeeper-digest-env" in html and "http://***@127.0.0.1:9" in html
