"""Benchmark: ``ledgerlens audit`` of a small generated cluster against a trivial Spark job.

Starts a local sandbox (``ledgerlens sandbox-local``: ZooKeeper + S3 server, the planted generated
cluster, ~90 ledgers), then alternates, ``--repeats`` times, in fresh processes:

(t) starting a Spark session the way the CLI does and running one trivial job;
(a) ``ledgerlens audit --sandbox DIR --out OUT`` end to end (collection, rules, re-verification,
    write).

and prints the times, the load average, each run's (a)/(t) and their median (target <= 2.5x).
Both start as a fresh install does (``--class-archive off``); with ``on`` both map the class
archive of ``ledgerlens warm-up``, which takes about 4 s off each. One unmeasured (t) and (a) come
first: the sandbox's ZooKeeper and S3 server were started seconds before (a production ZooKeeper
has been up for days, its JIT warm) and would otherwise spend the
first audit's cores compiling themselves::

    .venv/bin/python bench/bench_small_audit.py --repeats 2

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ledgerlens.runtime.class_archive import DISABLE_ENV, archive

TRIVIAL = (
    "from ledgerlens.runtime.spark import get_session\n"
    "s = get_session(app_name='bench-trivial')\n"
    "s.range(1).count()\n"
    "s.stop()\n"
)


def ledgerlens_cmd() -> list[str]:
    """This interpreter's ``ledgerlens`` entry point."""
    exe = Path(sys.executable).with_name("ledgerlens")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ledgerlens.cli"]


def timed(cmd: list[str]) -> tuple[float, str]:
    """Seconds ``cmd`` took (it must succeed) and its stdout."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return dt, p.stdout


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--workdir", default=None, help="sandbox directory, kept (default: a temporary one, then removed)"
    )
    ap.add_argument(
        "--class-archive",
        choices=["off", "on"],
        default="off",
        help="off (default): a fresh install's starts, no archive read; on: both (t) and (a) map the "
        "class archive of `ledgerlens warm-up` (written first when there is none)",
    )
    args = ap.parse_args(argv)

    ll = ledgerlens_cmd()
    if args.class_archive == "off":
        os.environ[DISABLE_ENV] = "off"  # inherited by (t) and (a)
    else:
        os.environ.pop(DISABLE_ENV, None)
        if archive() is None:
            timed([*ll, "warm-up"])
    print(f"class archive: {args.class_archive} (ledgerlens warm-up)", flush=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ll-bench-small-"))
    if not args.workdir:  # removed however the run ends (a sandbox that fails to start included)
        atexit.register(shutil.rmtree, work, ignore_errors=True)
    sandbox = work / "sandbox"
    shutil.rmtree(sandbox, ignore_errors=True)
    timed([*ll, "sandbox-local", "up", "--workdir", str(sandbox)])
    try:
        timed([*ll, "sandbox-local", "seed", "--workdir", str(sandbox)])
        trivial: list[float] = []
        audit: list[float] = []
        summary: dict = {}
        warm = work / "audit-warm-up"  # not measured: warms the freshly started sandbox servers
        timed([sys.executable, "-c", TRIVIAL])
        timed([*ll, "audit", "--sandbox", str(sandbox), "--out", str(warm)])
        for i in range(args.repeats):
            print(f"run {i + 1}/{args.repeats}: load average {load()}", flush=True)
            dt, _ = timed([sys.executable, "-c", TRIVIAL])
            trivial.append(dt)
            print(f"  (t) spark session + trivial job   {dt:7.1f} s", flush=True)
            out = work / f"audit-{i}"
            shutil.rmtree(out, ignore_errors=True)
            dt, _ = timed([*ll, "audit", "--sandbox", str(sandbox), "--out", str(out)])
            audit.append(dt)
            summary = json.loads((out / "summary.json").read_text())
            pair = dt / trivial[-1]
            print(f"  (a) ledgerlens audit end to end   {dt:7.1f} s  (a)/(t) = {pair:.2f}x", flush=True)
            phases = {k: v for k, v in summary["timings"].items() if "." not in k}
            print(f"      phases: {json.dumps(phases)}", flush=True)
    finally:
        timed([*ll, "sandbox-local", "down", "--workdir", str(sandbox)])
    ledgers = summary.get("inventory_counts", {}).get("bk_ledgers", 0)
    t, a = statistics.median(trivial), statistics.median(audit)
    # each run's ratio pairs two measurements taken back to back (the load of a shared machine
    # moves between runs): the table's ratio is the median of the runs' ratios
    ratio = statistics.median(x / y for x, y in zip(audit, trivial, strict=True))
    print()
    print(f"generated cluster: {ledgers} ledgers, {summary.get('total_findings', 0)} findings; load {load()}")
    print("| measure | seconds |")
    print("|---|---:|")
    print(f"| (t) spark session + one trivial job (median of {len(trivial)}) | {t:.1f} |")
    print(f"| (a) ledgerlens audit end to end (median of {len(audit)}) | {a:.1f} |")
    print(f"| ratio (a) / (t) (median of the runs' ratios) | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
