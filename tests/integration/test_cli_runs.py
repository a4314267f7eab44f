# ruff: noqa: E501  (exact one-line error messages are asserted whole)
"""The ``ledgerlens`` command as an operator runs it (a subprocess, real Spark): interrupted runs and
runs started together into the same ``--out``.

- Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM: one line, exit
  130 / 143, no process of the run left, ``--out`` as it was.
- Two audits started together into one ``--out`` (a cron run overlapping a manual one), several
  times with a seeded jitter: one wins, the other is refused at once naming the holder (or runs
  after it); the published findings are exactly the planted ones, never mixed or duplicated.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.runtime.outdir import MANIFEST_NAME
from ledgerlens_sandbox.cluster import GroundTruth, default_now_ms

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW_MS = default_now_ms()
LEDGERLENS = str(Path(sys.executable).with_name("ledgerlens"))


@pytest.fixture(scope="module")
def planted(zookeeper: Any, s3_server: Any) -> tuple[GroundTruth, list[str]]:
    c = generated_cluster(zookeeper, s3_server, "planted", now_ms=NOW_MS, scenario="planted")
    hosts, bucket, truth = c["hosts"], c["bucket"], c["truth"]
    args = ["--zookeeper", hosts, "--s3-endpoint", s3_server.endpoint_url, "--bucket", bucket]
    return truth, [*args, "--as-of", str(NOW_MS), "--no-progress", "--spark-master", "local[2]"]


@pytest.fixture(scope="module")
def healthy(zookeeper: Any, s3_server: Any) -> tuple[GroundTruth, list[str]]:
    c = generated_cluster(zookeeper, s3_server, "healthy", now_ms=NOW_MS, scenario="healthy")
    hosts, bucket, truth = c["hosts"], c["bucket"], c["truth"]
    args = ["--zookeeper", hosts, "--s3-endpoint", s3_server.endpoint_url, "--bucket", bucket]
    return truth, [*args, "--as-of", str(NOW_MS), "--no-progress", "--spark-master", "local[2]"]


def _start(argv: list[str], cwd: Path | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.Popen(
        [LEDGERLENS, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        cwd=cwd,
    )


def _group_alive(pgid: int) -> list[str]:
    ps = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(pgid)], capture_output=True, text=True)
    return [line for line in ps.stdout.splitlines() if line.strip()]


def _keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and v != v) else v

    return sorted((tuple(norm(r.get(k)) for k in FINDING_KEYS) for r in rows), key=repr)


def _rows(table: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in table.glob("*.parquet"))


def _published(out: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(out / "findings.parquet").to_pylist()


@pytest.mark.parametrize(
    ("sig", "code", "word"),
    [
        (signal.SIGINT, 130, "interrupted"),
        pytest.param(signal.SIGTERM, 143, "terminated", marks=pytest.mark.slow),  # same path, other signal
    ],
)
def test_interrupted_run_ends_in_one_line_and_leaves_nothing(planted, tmp_path, sig, code, word) -> None:  # type: ignore[no-untyped-def]
    _truth, args = planted
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        out.mkdir()
        (out / "summary.json").write_text('{"previous": true}\n')
        proc = _start(["audit", *args, "--out", str(out)])
        started = time.monotonic()
        deadline = started + 300
        while not list(out.glob(".ledgerlens-staging-*/inventory")):  # Spark is writing the inventory
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached the collection"
            time.sleep(0.2)
        seen = time.monotonic()
        os.killpg(proc.pid, sig)
        sent_ns = time.time_ns()
        t0 = time.monotonic()
        stdout, stderr = proc.communicate(timeout=120)
        assert time.monotonic() - t0 < 60
        manifest = out / MANIFEST_NAME
        if proc.returncode == 0 and manifest.exists() and manifest.stat().st_mtime_ns < sent_ns - 10**8:
            # the signal left after the run had published and ended (this test was late to send it,
            # as once on a busy CI machine): not what is tested, so once more. A run that ignored
            # the signal publishes after it and fails below.
            continue
        break
    published_ms = (manifest.stat().st_mtime_ns - sent_ns) // 10**6 if manifest.exists() else None
    timing = (
        f"staged inventory seen {seen - started:.1f} s after the start, signalled {t0 - seen:.2f} s later"
    )
    assert proc.returncode == code, (
        attempt,
        stdout,
        stderr,
        timing,
        f"published {published_ms} ms after the signal",
    )
    assert stderr == f"ledgerlens audit: {word}\n" and stdout == ""
    time.sleep(2)
    assert _group_alive(proc.pid) == []  # no Spark JVM, no Python worker left
    assert {p.name: p.read_text() for p in out.iterdir()} == {"summary.json": '{"previous": true}\n'}


def _race(planted: tuple[GroundTruth, list[str]], out: Path, jitter: float) -> None:
    truth, args = planted
    first = _start(["audit", *args, "--out", str(out)])
    time.sleep(jitter)
    second = _start(["audit", *args, "--out", str(out)])
    results = [(p.wait(timeout=900), *p.communicate()) for p in (first, second)]
    codes = sorted(r[0] for r in results)
    assert codes in ([0, 0], [0, 2]), results
    for code, _stdout, stderr in results:
        if code == 2:
            assert stderr.startswith(
                f"ledgerlens audit: error: --out {out.resolve()} is in use by another ledgerlens run (pid "
            )
            assert stderr.count("\n") == 1
    found = _published(out)
    keys, expected = _keys(found), _keys(truth.expected)
    assert len(set(keys)) == len(keys), "a finding published twice"
    assert keys == expected  # exactly the generated cluster's findings: nothing mixed or doubled
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_findings"] == len(found)
    for table in ("bk_ledgers", "managed_ledgers", "cursors"):  # the inventory of one run, whole
        assert summary["inventory_counts"][table] == truth.counts[table], table
        assert _rows(out / "inventory" / table) == truth.counts[table], table
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "disk_usage.parquet",  # the bookies' bytes by state (audit/disk.py)
        "findings.parquet",
        "history",  # the runs' slim findings, one entry per run (audit/history.py)
        "inventory",
        "offload_verdicts.parquet",  # what the next run need not verify again (offload/verdicts.py)
        "resolved.parquet",
        "summary.json",
    ]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == [".ledgerlens-manifest.json"]


def test_runs_started_together_never_mix(healthy, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("an older run's report")  # not left beside the new findings
    _race(healthy, out, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11])
def test_many_runs_started_together_never_mix(planted, tmp_path, seed) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    out = tmp_path / "out"
    for _ in range(4):
        _race(planted, out, rng.random() * 3)


def _children(pid: int) -> list[int]:
    ps = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in ps.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_interrupted_report_ends_in_one_line_and_leaves_nothing(planted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C of ``ledgerlens report`` while its runbook's kernel runs Spark: the kernel (a process
    group of its own) is interrupted and shut down too, and its libraries print no traceback."""
    _truth, args = planted
    out, here = tmp_path / "rep", tmp_path / "cwd"
    here.mkdir()
    proc = _start(["report", *args, "--out", str(out)], cwd=here)
    deadline = time.monotonic() + 300
    kernels: list[int] = []
    while not list(out.glob(".ledgerlens-staging-*/inventory")):  # the kernel's Spark is writing
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the runbook never reached the collection"
        kernels = _children(proc.pid) or kernels
        time.sleep(0.2)
    kernels = _children(proc.pid) or kernels
    assert kernels, "no kernel process seen"
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    stdout, stderr = proc.communicate(timeout=120)
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr.splitlines()[-1] == "ledgerlens report: interrupted", repr(stderr[-600:])
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr
    time.sleep(3)
    assert _group_alive(proc.pid) == [] and not [k for k in kernels if _alive(k)]
    assert not out.exists() or [p.name for p in out.iterdir()] == []  # nothing published, no staging
    assert [p.name for p in here.iterdir()] == []  # no kernel sockets left in the working directory


def _progress_lines(argv: list[str], interval: float) -> tuple[int, list[tuple[float, str]], str]:
    """Run ``ledgerlens ARGV`` with progress on (stderr a pipe, as under cron); its exit status, its
    stderr lines with when each arrived (seconds after the start; first: the start, epoch seconds),
    and its stdout."""
    import threading

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, LEDGERLENS_PROGRESS_INTERVAL=str(interval))
    wall0, t0 = time.time(), time.monotonic()
    proc = subprocess.Popen(
        [LEDGERLENS, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    stdout: list[str] = []
    reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    lines = [(wall0, "")]
    for line in proc.stderr:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
    code = proc.wait(timeout=900)
    reader.join()
    return code, lines, stdout[0]


def _clock_s(line: str) -> float:
    """``[ 45%   12 s] ...`` -> 12.0; ``[ 45% 2 min 05 s] ...`` -> 125.0."""
    import re

    m = re.match(r"\[\s*\d+%\s+(?:(\d+) min )?([\d.]+) s\]", line)
    assert m, line
    return 60 * int(m.group(1) or 0) + float(m.group(2))


def _assert_progress(lines: list[tuple[float, str]], command: str, interval: float) -> None:
    """From the first seconds to the end: what is being waited for, on the command's clock, and never a
    silence much longer than the interval."""
    from datetime import UTC, datetime

    wall0 = lines.pop(0)[0]
    said = [line for _, line in lines]
    # the first line within seconds of the start (more on a machine busier than its cores), and
    # before Spark is up, the slowest start-up step
    slow = max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    assert lines[0][0] < 10 * slow, (slow, lines[:3])
    assert not any("] Spark started in " in line for _, line in lines[:2])
    assert said[0].startswith(f"ledgerlens {command}: started "), said[:3]
    started = datetime.strptime(said[0].split("started ")[1], "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
    assert abs(started.timestamp() - wall0) < 2  # in UTC, to the second
    assert any("starting Spark (local[2])" in line for line in said), said
    progress = [(t, line) for t, line in lines[1:] if line.startswith("[")]
    for t, line in progress:  # the clock shown is the wall time since the command started
        assert abs(_clock_s(line) - t) < 3, (t, line)
    beats = [line for line in said if line.endswith(" so far")]
    assert beats, said  # long waits and phases keep saying they are still running
    times = [t for t, _ in progress]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) < 2 * interval + 5, list(zip(gaps, said[2:], strict=False))


def test_progress_speaks_from_the_first_seconds_and_keeps_ticking(planted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``audit`` off a terminal (cron, a log file): a line within seconds of the start, one when
    Spark starts, a heartbeat during long waits and phases, the command's wall clock throughout."""
    _truth, args = planted
    argv = [a for a in args if a != "--no-progress"]
    code, lines, stdout = _progress_lines(["audit", *argv, "--out", str(tmp_path / "out")], interval=2)
    assert code == 0, lines
    said = [line for _, line in lines]
    _assert_progress(lines, "audit", 2)
    assert any("] audit rules, " in line for line in said) and any("write done in" in line for line in said)
    assert stdout.splitlines()[-1].startswith("ledgerlens: ")  # the summary line stays last on stdout


@pytest.mark.slow
def test_report_relays_the_runbook_kernels_progress_on_the_commands_clock(planted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``report``: the kernel's lines (its Spark start, the phases) reach stderr as they come, on the
    command's clock, and the command says what runs while the kernel is silent."""
    _truth, args = planted
    argv = [a for a in args if a != "--no-progress"]
    code, lines, _stdout = _progress_lines(["report", *argv, "--out", str(tmp_path / "rep")], interval=2)
    assert code == 0, lines
    said = [line for _, line in lines]
    _assert_progress(lines, "report", 2)
    kernel_spark = next(i for i, line in enumerate(said) if line.endswith("] starting Spark (local[2])"))
    runbook = next(
        i for i, line in enumerate(said) if line.endswith("] running the runbook in a Jupyter kernel")
    )
    assert runbook < kernel_spark < next(i for i, line in enumerate(said) if "collect done in" in line)


def test_interrupted_lab_ends_in_one_line_and_leaves_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C of ``ledgerlens lab``: JupyterLab and its kernels stop, the command ends in one line."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _start(["lab", "--workdir", str(tmp_path / "lab"), "--no-browser", "--port", str(port)])
    deadline = time.monotonic() + 120
    while True:  # JupyterLab answers
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "JupyterLab never listened"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr.splitlines()[-1] == "ledgerlens lab: interrupted" and "Traceback" not in stderr
    time.sleep(2)
    assert _group_alive(proc.pid) == []


def test_interrupted_kafka_audit_ends_in_one_line_and_leaves_nothing(s3_server: Any, tmp_path: Path) -> None:
    """Ctrl-C of ``ledgerlens kafka-audit`` once its Spark JVM runs: one line, 130, nothing left."""
    import uuid

    import boto3

    from kafka_leaks import PREFIX, make_leaks

    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    bucket = f"kafka-int-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    leaks = make_leaks(s3, bucket, s3_server.endpoint_url, tmp_path)
    out = tmp_path / "out"
    proc = _start(["kafka-audit", "--metadata-dump", str(leaks.dump), "--bucket", bucket, "--s3-endpoint",
                   s3_server.endpoint_url, "--prefix", PREFIX, "--out", str(out), "--no-progress"])  # fmt: skip
    deadline = time.monotonic() + 120
    while not any("java" in line for line in _group_alive(proc.pid)):  # Spark's JVM is up
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no Spark JVM seen"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert stderr == "ledgerlens kafka-audit: interrupted\n" and stdout == ""
    time.sleep(2)
    assert _group_alive(proc.pid) == []
    assert not out.exists() or [p.name for p in out.iterdir()] == []
