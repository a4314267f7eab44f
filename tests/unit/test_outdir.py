"""One run at a time per output directory, results published whole (``ledgerlens.runtime.outdir``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import time
from pathlib import Path

import pytest

from ledgerlens.errors import ConfigError
from ledgerlens.runtime.outdir import JOURNAL_NAME, LOCK_NAME, OutputBusyError, OutputDir

pytestmark = pytest.mark.unit


def _visible(out: Path) -> dict[str, str]:
    """Name -> content of the published result files (directories: their files joined)."""
    found = {}
    for p in sorted(out.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir():
            found[p.name] = "|".join(f.read_text() for f in sorted(p.iterdir()))
        else:
            found[p.name] = p.read_text()
    return found


def _write_run(staging: Path, run: str, *, report: bool) -> None:
    (staging / "findings.parquet").mkdir()
    for i in range(3):
        (staging / "findings.parquet" / f"part-{i}").write_text(run)
    (staging / "summary.json").write_text(json.dumps({"run": run}))
    if report:
        (staging / "report.html").write_text(run)


def test_second_run_fails_at_once_naming_the_holder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputDir(out) as first:
        t0 = time.monotonic()
        with pytest.raises(OutputBusyError) as e:
            OutputDir(out).acquire()
        assert time.monotonic() - t0 < 1
        message = str(e.value)
        assert f"pid {os.getpid()}" in message and "started 20" in message
        assert re.search(r"started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", message)
        assert str(out) in message and "\n" not in message
        assert first.staging.is_dir()
    assert not (out / LOCK_NAME).exists()
    OutputDir(out).acquire().release()  # free again


def test_failed_run_leaves_out_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputDir(out) as od:
        _write_run(od.staging, "one", report=True)
        od.publish()
    before = _visible(out)
    with pytest.raises(RuntimeError), OutputDir(out) as od:
        _write_run(od.staging, "two", report=False)
        raise RuntimeError("the run failed")
    assert _visible(out) == before
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".ledgerlens-manifest.json"]
    # a run into a directory it created and that fails leaves nothing behind
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError), OutputDir(fresh):
        raise RuntimeError("failed before publishing")
    assert not fresh.exists()


def test_a_run_that_received_a_signal_publishes_nothing(tmp_path: Path) -> None:
    """A Ctrl-C whose KeyboardInterrupt a library swallowed (kazoo does, under a bare ``except``) and
    the run went on to the end: what it staged is not published, the earlier results stay."""
    import signal

    from ledgerlens.runtime import signals

    out = tmp_path / "out"
    with OutputDir(out) as od:
        _write_run(od.staging, "one", report=True)
        od.publish()
    before = _visible(out)
    signals.forget()
    try:
        with pytest.raises(KeyboardInterrupt), OutputDir(out) as od:
            _write_run(od.staging, "two", report=True)
            try:
                signals.on_signal(signal.SIGINT, None)
            except KeyboardInterrupt:
                pass  # swallowed on its way up
            od.publish()
        assert signals.received() == signal.SIGINT
    finally:
        signals.forget()
    assert _visible(out) == before
    assert not [p.name for p in out.iterdir() if p.name.startswith(".ledgerlens-staging")]


def test_the_record_of_a_signal_ends_with_the_command(tmp_path: Path) -> None:
    """A command that received a Ctrl-C has ended (``uninstall``): a later publication in the same
    process (a notebook, the next ``main``) is not refused for it."""
    import signal

    from ledgerlens.runtime import signals

    signals.forget()
    with pytest.raises(KeyboardInterrupt):
        signals.on_signal(signal.SIGINT, None)
    signals.uninstall()
    assert signals.received() is None
    out = tmp_path / "out"
    with OutputDir(out) as od:
        _write_run(od.staging, "after", report=True)
        od.publish()
    assert _visible(out)


def test_results_of_an_earlier_run_are_not_left_beside_new_ones(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("stale report of an older release")  # no manifest
    (out / "notes.txt").write_text("the operator's own file")
    with OutputDir(out) as od:
        _write_run(od.staging, "new", report=False)
        od.publish()
    assert _visible(out) == {
        "findings.parquet": "new|new|new",
        "notes.txt": "the operator's own file",
        "summary.json": '{"run": "new"}',
    }


def test_out_must_be_a_writable_directory(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        OutputDir(f).acquire()
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        OutputDir(f / "sub").acquire()


def test_interrupted_publication_is_rolled_forward(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputDir(out) as od:
        _write_run(od.staging, "one", report=True)
        od.publish()
    od = OutputDir(out).acquire()
    _write_run(od.staging, "two", report=False)
    # crash after the journal and the first rename (simulated): the next run completes it
    aside = out / ".ledgerlens-previous-crashed"
    aside.mkdir()
    journal = {
        "staging": od.staging.name,
        "aside": aside.name,
        "names": ["findings.parquet", "summary.json"],
        "old": ["findings.parquet", "report.html", "summary.json"],
    }
    (out / JOURNAL_NAME).write_text(json.dumps(journal))
    os.replace(out / "findings.parquet", aside / "findings.parquet")
    os.close(od._lock_fd)  # type: ignore[arg-type]  # the process died: the kernel drops its lock
    od._lock_fd = None
    with OutputDir(out):
        pass
    assert _visible(out) == {"findings.parquet": "two|two|two", "summary.json": '{"run": "two"}'}


def _racer(out: str, run: str, delay: float, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    time.sleep(delay)
    try:
        with OutputDir(out) as od:
            _write_run(od.staging, run, report=run.endswith("r"))
            time.sleep(0.02)
            od.publish()
        results.put((run, "ok"))
    except OutputBusyError as e:
        results.put((run, f"busy: {e}"))


@pytest.mark.parametrize("seed", [7])
def test_concurrent_runs_never_mix_or_duplicate(tmp_path: Path, seed: int) -> None:
    """Many rounds of runs started together (jittered by a fixed seed): after every round the
    published result is exactly one run's, whole; the losers were refused, naming the holder."""
    rng = random.Random(seed)
    ctx = multiprocessing.get_context("fork")
    out = tmp_path / "out"
    for round_ in range(25):
        results: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
        runs = [f"{round_}-{i}{'r' if rng.random() < 0.5 else ''}" for i in range(3)]
        procs = [ctx.Process(target=_racer, args=(str(out), r, rng.random() * 0.03, results)) for r in runs]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        outcomes = dict(results.get(timeout=5) for _ in runs)
        winners = [r for r, o in outcomes.items() if o == "ok"]
        assert winners, outcomes
        for _r, o in outcomes.items():
            if o != "ok":
                assert "in use by another ledgerlens run (pid " in o and "started" in o
        visible = _visible(out)
        last = visible["summary.json"]
        run = json.loads(last)["run"]
        assert run in winners
        expected = {"findings.parquet": f"{run}|{run}|{run}", "summary.json": last}
        if run.endswith("r"):
            expected["report.html"] = run
        assert visible == expected, (round_, outcomes)
        assert not [
            p for p in out.iterdir() if p.name.startswith((".ledgerlens-staging", ".ledgerlens-prev"))
        ]
