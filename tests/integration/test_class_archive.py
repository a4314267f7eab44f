"""``ledgerlens warm-up`` writes the JVM's class archive; later Spark sessions start from it, and a
session given an archive it cannot start with starts without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledgerlens.runtime import class_archive
from ledgerlens.settings.config import CACHE_ENV

pytestmark = [pytest.mark.integration]

SESSION = """
import sys
from pyspark.sql import SparkSession
from ledgerlens.runtime.spark import configure
b = configure(SparkSession.builder, master="local[1]", app_name="archive-test")
java = b._options["spark.driver.extraJavaOptions"]
b = b.config("spark.driver.extraJavaOptions", java + " -Xlog:class+load=info:file=" + sys.argv[1])
s = b.getOrCreate()
print("rows", s.range(10).count())
s.stop()
"""


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def _session(env: dict[str, str], log: Path) -> tuple[str, str]:
    """A session started as ``spark.configure`` sets it up: (its output, where SparkContext came from)."""
    p = _run([sys.executable, "-c", SESSION, str(log)], env, log.parent, 180)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    source = next(line for line in log.read_text().splitlines() if "org.apache.spark.SparkContext " in line)
    return p.stdout + p.stderr, source.split(" source: ", 1)[1]


def test_warm_up_then_sessions_map_the_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.DISABLE_ENV, raising=False)
    env = dict(os.environ)
    p = _run([sys.executable, "-m", "ledgerlens.cli", "warm-up"], env, tmp_path, 600)
    assert p.returncode == 0, p.stderr[-2000:]
    written = sorted((tmp_path / "cache").iterdir())
    assert len(written) == 1 and written[0].name.endswith(
        f"-{written[0].stat().st_size}.jsa"
    )  # no temporary file
    assert p.stdout.splitlines()[-1].startswith(f"ledgerlens warm-up: wrote {written[0]} (")
    assert written[0].stat().st_size > 50 << 20 and p.stderr == ""

    out, source = _session(env, tmp_path / "mapped.log")
    assert source == "shared objects file (top)"  # Spark's classes come from the archive
    assert "rows 10" in out and "cds" not in out and "shared" not in out.lower()

    out, source = _session({**env, class_archive.DISABLE_ENV: "off"}, tmp_path / "off.log")
    assert source.startswith(("jar:", "file:"))  # loaded one by one

    # damaged in place (the same size): its checksums fail, the JVM starts without it, silently
    whole = written[0].read_bytes()
    middle = len(whole) // 2
    written[0].chmod(0o644)
    written[0].write_bytes(whole[:middle] + bytes(4096) + whole[middle + 4096 :])
    out, source = _session(env, tmp_path / "damaged.log")
    assert source.startswith(("jar:", "file:")) and "rows 10" in out and "cds" not in out

    # an archive the JVM cannot start with (cut short, yet named as complete: the JVM crashes on it):
    # get_session starts without it, says so in one line, and removes it
    cut = class_archive.archive_named(written[0].with_name(written[0].name.rsplit("-", 1)[0]), 4 << 20)
    written[0].unlink()
    cut.write_bytes(whole[: 4 << 20])
    assert class_archive.archive() == cut
    start = (
        "from ledgerlens.runtime.spark import get_session\n"
        "s = get_session('local[1]')\n"
        "print('rows', s.range(3).count())\n"
    )
    p = _run([sys.executable, "-c", start], env, tmp_path, 180)
    assert p.returncode == 0 and "rows 3" in p.stdout, (p.stdout + p.stderr)[-3000:]
    said = [line for line in p.stderr.splitlines() if line.startswith("ledgerlens:")]
    assert said == [
        f"ledgerlens: Spark did not start with the class archive {cut}; removed it, starting without it "
        "(ledgerlens warm-up writes another)"
    ]
    assert not cut.exists() and not list(tmp_path.glob("hs_err*"))  # the crash report is in the cache


def test_a_java_that_does_not_start_leaves_no_archive(tmp_path: Path) -> None:
    java = tmp_path / "jdk"
    (java / "bin").mkdir(parents=True)
    (java / "bin" / "java").write_text("#!/bin/sh\necho 'no such Java' >&2\nexit 1\n")
    (java / "bin" / "java").chmod(0o755)
    env = {**os.environ, "JAVA_HOME": str(java), CACHE_ENV: str(tmp_path / "cache")}
    p = _run([sys.executable, "-m", "ledgerlens.cli", "warm-up"], env, tmp_path, 300)
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ledgerlens warm-up: the JVM wrote no archive"), p.stderr
    assert list((tmp_path / "cache").iterdir()) == []
