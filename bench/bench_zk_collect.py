"""Benchmark: reading BookKeeper ledger metadata from ZooKeeper, three ways.

(a) a plain sequential kazoo ``get`` loop, (b) the best raw pipelined kazoo read in one process
(``get_async`` windows, and ZooKeeper 3.6+ ``multiRead`` batches over kazoo's connection; no
decoding; the best of them counts), (c) the ``bk_ledgers`` stage of ``collect_inventory`` on a
local Spark (pipelined and decoded, written as Parquet: on the driver up to 20 partitions when Spark
has at most two task slots, else distributed tasks; once cold, then ``--warm-runs`` times warm, the
best rate counting as for (b): one run takes about a second, and the ratio went from 0.83 to 0.55
between two ``make bench`` runs of the same code), (d) the same stage forced into Spark tasks (into
a local directory: each task writes its own Parquet file with pyarrow, the JVM gets file names).
Prints ledgers/s and the ratios (c)/(a), (c)/(b) and (d)/(b).

Usage (starts nothing; needs a ZooKeeper)::

    .venv/bin/python bench/bench_zk_collect.py --zk 127.0.0.1:2181 --ledgers 100000 --master 'local[2]'

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kazoo.client import KazooClient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ledgerlens.settings.config import ZooKeeperSource


def write_ledgers(
    client: KazooClient, root: str, n: int, *, now_ms: int, batch: int = 100, window: int = 8
) -> None:
    """Create ``n`` ledger znodes (v3 metadata, Pulsar custom metadata) with batched transactions."""
    from ledgerlens.formats.paths import ledger_path
    from ledgerlens_sandbox import wire

    paths = [ledger_path(i, root) for i in range(1, n + 1)]
    parents = sorted({p.rsplit("/", 1)[0] for p in paths})
    for p in parents:
        client.ensure_path(p)
    pending: deque = deque()

    def value(i: int) -> bytes:
        md = wire.ledger_metadata(
            ensemble=["bookie-1:3181", "bookie-2:3181"],
            write_quorum=2,
            ack_quorum=2,
            length=1024 * i,
            last_entry_id=99,
            ctime_ms=now_ms - i,
            custom={
                "application": "pulsar",
                "component": "managed-ledger",
                "pulsar/managed-ledger": f"bench/ns/persistent/topic-{i % 1000}",
            },
        )
        return wire.bk_metadata_v3(md)

    for start in range(0, n, batch):
        tx = client.transaction()
        for i in range(start + 1, min(n, start + batch) + 1):
            tx.create(paths[i - 1], value(i))
        pending.append(tx.commit_async())
        if len(pending) >= window:
            _check(pending.popleft().get())
    while pending:
        _check(pending.popleft().get())


def _check(results: list) -> None:
    for r in results:
        if isinstance(r, Exception):
            raise r


def ledger_paths(client: KazooClient, root: str) -> list[str]:
    """All ledger leaf paths under ``root`` (listed once, outside the timed reads)."""
    from ledgerlens.sources.zk_client import PipelinedReader
    from ledgerlens.sources.zookeeper import _walk_ledger_leaves

    level1 = [c for c in client.get_children(root) if c.isdigit()]
    return list(_walk_ledger_leaves(PipelinedReader(client, max_in_flight=500), root, level1, []))


def sequential(client: KazooClient, paths: list[str]) -> float:
    t0 = time.perf_counter()
    for p in paths:
        client.get(p)
    return time.perf_counter() - t0


def pipelined(client: KazooClient, paths: list[str], window: int) -> float:
    t0 = time.perf_counter()
    q: deque = deque()
    get_async = client.get_async
    for p in paths:
        if len(q) >= window:
            q.popleft().get()
        q.append(get_async(p))
    while q:
        q.popleft().get()
    return time.perf_counter() - t0


def multi_read(client: KazooClient, paths: list[str], batch: int) -> float:
    """ZooKeeper 3.6+ multiRead through ledgerlens' reader, no decoding (window 40 requests)."""
    from ledgerlens.sources.zk_client import PipelinedReader

    reader = PipelinedReader(client, max_in_flight=40 * batch, multi_read=batch)
    t0 = time.perf_counter()
    for _ in reader.get(paths):
        pass
    return time.perf_counter() - t0


def timed(label: str, n: int, fn: Callable[[], float]) -> float:
    dt = fn()
    print(f"{label:<58} {n:>8} ledgers {dt:8.2f} s {n / dt:10,.0f} ledgers/s", flush=True)
    return n / dt


def _cpu_seconds(roots: set[int]) -> dict[str, float]:
    """CPU seconds so far of this process's descendants (and ``roots``'), by kind: ZooKeeper, the
    Spark JVMs (driver and executors), Python workers, this process."""
    tck = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    info: dict[int, tuple[str, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            f = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(f[1])
        info[int(d)] = (cmd, (int(f[11]) + int(f[12])) / tck)
    me = os.getpid()
    out: dict[str, float] = {}
    for pid, (cmd, cpu) in info.items():
        p = pid
        while p > 1 and p != me and p not in roots:
            p = parent.get(p, 0)
        if p <= 1:
            continue
        if "ZooKeeperServerMain" in cmd or "QuorumPeerMain" in cmd:
            kind = "zookeeper"
        elif "java" in cmd.split(" ", 1)[0]:
            kind = "spark jvm"
        elif pid == me:
            kind = "bench python"
        else:
            kind = "python workers"
        out[kind] = out.get(kind, 0.0) + cpu
    return out


def spark_tasks(
    spark: SparkSession, zk: ZooKeeperSource, out: str, n: int, master: str, warm: int
) -> tuple[float, float]:
    """(d): ``bk_ledgers`` forced into Spark tasks, the first job then ``warm`` runs; (best warm rate,
    first job's rate). Prints each run with the CPU seconds of ZooKeeper, the JVMs and Python."""
    from ledgerlens.inventory.collect import collect_inventory
    from ledgerlens.sources.zookeeper import LiveZooKeeper

    ledgers_only = [LiveZooKeeper(zk, provides=("bk_ledgers",))]  # the CPU counted is the stage's
    roots = {int(x) for x in os.environ.get("BENCH_ZK_PIDS", "").split(",") if x}
    rates: list[float] = []
    for run in ("first job", *["warm"] * max(1, warm)):
        c0 = _cpu_seconds(roots)
        inv = collect_inventory(spark, ledgers_only, None, out, progress=False, driver_reads=False)
        c1 = _cpu_seconds(roots)
        assert inv.counts["bk_ledgers"] == n, inv.counts
        dt = inv.timings["bk_ledgers"]
        rates.append(n / dt)
        cpu = ", ".join(f"{k} {c1[k] - c0.get(k, 0.0):.2f}" for k in sorted(c1))
        label = f"(d) as Spark tasks on {master} ({run})"
        print(f"{label:<58} {n:>8} ledgers {dt:8.2f} s {n / dt:10,.0f} ledgers/s  CPU s: {cpu}", flush=True)
    return max(rates[1:]), rates[0]


def _executors(spark: SparkSession) -> int:
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1  # type: ignore[union-attr]


def cluster_runs(args: argparse.Namespace, zk: ZooKeeperSource, n: int, raw: float) -> None:
    """(d) on each ``--cluster-masters`` master (``local-cluster[workers,cores,MiB]``: executors in
    JVMs of their own, as on a real cluster): per master, warm / raw read and first job / warm."""
    import pyspark
    from pyspark.sql import SparkSession

    from ledgerlens.runtime.spark import configure

    for master in (m.strip() for m in args.cluster_masters.split(";") if m.strip()):
        os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))  # the workers' launcher
        workers = int(master.split("[", 1)[1].split(",", 1)[0]) if master.startswith("local-cluster") else 0
        b = configure(SparkSession.builder, master=master, app_name="bench-zk-collect-cluster")
        spark = b.config("spark.executor.memory", "1g").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        t0 = time.perf_counter()
        while _executors(spark) < workers and time.perf_counter() - t0 < 120:
            time.sleep(0.1)
        with tempfile.TemporaryDirectory() as out:
            warm, first = spark_tasks(spark, zk, out, n, master, args.warm_runs)
        spark.stop()
        print(f"(d) on {master}: warm / raw = {warm / raw:.2f}  (target >= 0.6)", flush=True)
        print(f"(d) on {master}: first job / warm = {warm / first:.2f}  (target <= 2)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zk", default=None, help="ZooKeeper host:port (default: start a local one)")
    ap.add_argument("--ledgers", type=int, default=100_000)
    ap.add_argument(
        "--zk-heap",
        default=None,
        help="heap of the ZooKeeper started here (default: 512m, 6g from 500,000 ledgers on)",
    )
    ap.add_argument("--root", default=None, help="existing root to reuse (skips generation)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--tasks", type=int, default=None)
    ap.add_argument("--window", type=int, default=1000, help="max_in_flight per task")
    ap.add_argument("--rate", type=float, default=0.0, help="scan-wide ops/s limit (0: none)")
    ap.add_argument("--raw-windows", default="200,1000,4000", help="get_async windows for (b); '' to skip")
    ap.add_argument("--multi-batches", default="50,100", help="multiRead sizes for (b); '' to skip")
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument(
        "--cluster-masters",
        default="local-cluster[1,2,1024];local-cluster[2,1,1024]",
        help="';'-separated masters (d) runs on too, each in a session of its own ('' to skip)",
    )
    ap.add_argument(
        "--warm-runs",
        type=int,
        default=3,
        help="(c) runs once cold, then this many times warm; the best rate counts, as for (b)",
    )
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.zk is None:
        import atexit
        import shutil

        from ledgerlens_sandbox.servers import ZooKeeperServer

        data = Path(tempfile.mkdtemp(prefix="ll-bench-zk-"))
        atexit.register(shutil.rmtree, data, ignore_errors=True)  # at exit after the server stops
        heap = args.zk_heap or ("6g" if args.ledgers >= 500_000 else "512m")
        server = ZooKeeperServer(data, heap=heap).start(timeout=120)
        atexit.register(server.stop)
        args.zk = server.hosts
        if server.pid is not None:
            os.environ["BENCH_ZK_PIDS"] = str(server.pid)
    client = KazooClient(hosts=args.zk, timeout=60)
    client.start(timeout=30)
    root = args.root
    if root is None:
        root = f"/bench-{uuid.uuid4().hex[:8]}/ledgers"
        now_ms = int(time.time() * 1000)
        t0 = time.perf_counter()
        try:
            from ledgerlens_sandbox.cluster import generate_bulk

            base = root.rsplit("/", 1)[0]
            generate_bulk(args.zk, root=base, n_ledgers=args.ledgers, n_topics=1000, now_ms=now_ms)
            how = "sandbox.cluster.generate_bulk"
        except ImportError:
            write_ledgers(client, root, args.ledgers, now_ms=now_ms)
            how = "bench batched transactions"
        dt = time.perf_counter() - t0
        print(f"generated {args.ledgers} ledgers under {root} with {how} in {dt:.1f} s", flush=True)
    paths = ledger_paths(client, root)
    n = len(paths)
    print(f"{n} ledger znodes under {root}; cpus={os.cpu_count()}", flush=True)

    seq = None
    if not args.skip_sequential:
        seq = timed("(a) sequential kazoo get", n, lambda: sequential(client, paths))
    raw = 0.0
    for w in (int(x) for x in args.raw_windows.split(",") if x):

        def run_raw(w: int = w) -> float:
            return pipelined(client, paths, w)

        raw = max(raw, timed(f"(b) pipelined get_async, window {w}", n, run_raw))
    for batch in (int(x) for x in args.multi_batches.split(",") if x):

        def run_multi(batch: int = batch) -> float:
            return multi_read(client, paths, batch)

        raw = max(raw, timed(f"(b) pipelined multiRead, {batch} reads/request", n, run_multi))
    client.stop()
    client.close()

    from pyspark.sql import SparkSession

    from ledgerlens.inventory.collect import collect_inventory
    from ledgerlens.runtime.spark import configure
    from ledgerlens.settings.config import ZooKeeperSource

    spark = configure(SparkSession.builder, master=args.master, app_name="bench-zk-collect").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    absent = f"/bench-absent-{uuid.uuid4().hex[:8]}"
    zk = ZooKeeperSource(
        hosts=args.zk,
        ledgers_root=root,
        managed_ledgers_root=absent,
        schemas_root=absent,
        policies_root=absent,
        rate_limit=args.rate,
        max_in_flight=args.window,
        tasks=args.tasks,
    )
    best = 0.0
    with tempfile.TemporaryDirectory() as out:
        for run in ("cold", *["warm"] * max(1, args.warm_runs)):
            inv = collect_inventory(spark, zk, None, out, progress=False)
            assert inv.counts["bk_ledgers"] == n, inv.counts
            rate = n / inv.timings["bk_ledgers"]
            best = max(best, rate)
            label = f"(c) collect_inventory bk_ledgers on {args.master} ({run})"
            dt = inv.timings["bk_ledgers"]
            print(f"{label:<58} {n:>8} ledgers {dt:8.2f} s {rate:10,.0f} ledgers/s", flush=True)
        # the same stage forced into Spark tasks (what (c) is on more than two task slots, or with
        # --tasks): the first of these runs is the session's first Spark job
        tasks_best = spark_tasks(spark, zk, out, n, args.master, args.warm_runs)
    spark.stop()
    if seq:
        print(f"(c)/(a) = {best / seq:.2f}  (target >= 10)")
    print(f"(c)/(b) = {best / raw:.2f}  (target >= 0.5)")
    print(f"(d)/(b) = {tasks_best[0] / raw:.2f}  Spark tasks against the raw read")
    cluster_runs(args, zk, n, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
