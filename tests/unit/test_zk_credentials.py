"""Credentials in a ZooKeeper connect string are refused everywhere, in one redacted line.

``user:password@host:port`` would be printed by errors, stored in summaries and contexts, and shown by
``contexts show``. Every way a connect string reaches ledgerlens (flag, environment, contexts file,
runbook parameter through the same resolution) refuses it with the value redacted and the supported
ways named; ``contexts check`` and ``audit`` agree on what is valid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledgerlens.errors import ConfigError
from ledgerlens.settings import contexts

pytestmark = pytest.mark.unit

SECRET = "zkSecretPass99"
HOSTS = f"zkuser:{SECRET}@127.0.0.1:38313"


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "ledgerlens.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def _one_redacted_line(rc: int, out: str, err: str) -> str:
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert SECRET not in out + err and "Traceback" not in err
    assert "credentials in a ZooKeeper connect string are refused" in lines[0]
    assert "auth.zookeeper-digest-env" in lines[0] and "***@127.0.0.1:38313" in lines[0]
    return lines[0]


@pytest.mark.parametrize("command", [["audit", "--out", "OUT"], ["report", "--out", "OUT"]])
def test_flag_and_environment(command: list[str], tmp_path: Path) -> None:
    cmd = [str(tmp_path / "o") if a == "OUT" else a for a in command]
    line = _one_redacted_line(*_run(*cmd, "--zookeeper", HOSTS)[:3])
    assert line.startswith(f"ledgerlens {command[0]}: error: --zookeeper '***@")
    line = _one_redacted_line(*_run(*cmd, env={"LEDGERLENS_ZOOKEEPER": HOSTS})[:3])
    assert "environment variable LEDGERLENS_ZOOKEEPER" in line
    assert not (tmp_path / "o").exists()


def test_deleter_flags(tmp_path: Path) -> None:
    for flag in ("--zookeeper", "--bookkeeper-zookeeper", "--reference-store"):
        extra = [] if flag == "--zookeeper" else ["--zookeeper", "127.0.0.1:2181"]
        rc, out, err, _ = _run("deleter", "--journal", str(tmp_path / "j.jsonl"), *extra, flag, HOSTS)
        _one_redacted_line(rc, out, err)


def test_contexts_file_show_check_and_audit_agree(tmp_path: Path) -> None:
    cfg = tmp_path / "contexts.toml"
    cfg.write_text(f'current = "sb"\n[contexts.sb.metadata]\nzookeeper = "{HOSTS}"\n')
    env = {"LEDGERLENS_CONFIG": str(cfg)}
    audit = ["audit", "--context", "sb", "--out", str(tmp_path / "o")]
    for args in (["contexts", "show", "sb"], ["contexts", "check", "sb"], audit):
        line = _one_redacted_line(*_run(*args, env=env)[:3])
        assert f"{cfg}:3: metadata.zookeeper" in line
    # a connect string the audit refuses, contexts check refuses too, with the same words
    cfg.write_text('current = "sb"\n[contexts.sb.metadata]\nzookeeper = "bad host:2181"\n')
    rc_c, _, err_c, _ = _run("contexts", "check", "sb", env=env)
    rc_a, _, err_a, _ = _run("audit", "--context", "sb", "--out", str(tmp_path / "o"), env=env)
    assert rc_c == rc_a == 2
    assert "bad host 'bad host'" in err_c and "bad host 'bad host'" in err_a


def test_runbook_parameters_resolve_the_same_way() -> None:
    with pytest.raises(ConfigError) as e:
        contexts.resolve(None, flags={"zookeeper": HOSTS}, flag_layer="parameter")
    assert SECRET not in str(e.value) and "***@127.0.0.1:38313" in str(e.value)
    with pytest.raises(ConfigError):
        contexts.resolve(None, flags={"pulsar_metadata": [f"zk:{HOSTS}"]})
    assert contexts.resolve(None, flags={"zookeeper": "127.0.0.1:2181/pulsar"})["metadata.zookeeper"]
