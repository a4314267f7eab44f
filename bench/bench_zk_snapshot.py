"""Benchmark: the ZooKeeper snapshot source against the live scan of the same tree, in one run.

Starts a ZooKeeper 3.9 (a small ``snapCount``, so snapshots are written while the cluster is),
writes a healthy generated cluster of ``--ledgers`` ledgers into it and restarts it (ZooKeeper
snapshots the whole tree when it loads), then measures:

(a) the live scan: the ``bk_ledgers`` stage of ``collect_inventory`` over ``--zookeeper`` (pipelined,
    multiRead, Spark tasks, decoded, written as Parquet), the baseline;
(b) raw snapshot decoding: every znode of the newest snapshot file (znodes/s, MB/s), one process;
    (b2) the planning pass over the same file (records stepped over by their lengths);
(c) the snapshot source: the same ``bk_ledgers`` stage from the data directory (planning: log
    replay and one indexing pass; then Spark tasks decoding byte ranges), ledgers/s;
(a2), (c2) the rows of (a) and (c) read in one process without Spark or Parquet: where the time
    goes when neither waits on the other (both decode every ledger's metadata into Arrow columns).

Prints the ratio (c)/(a) (target >= 10). Usage::

    .venv/bin/python bench/bench_zk_snapshot.py --ledgers 1000000 --master 'local[2]'

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


def _line(label: str, n: int, unit: str, secs: float, extra: str = "") -> None:
    print(f"{label:<46} {n:>10,} {unit:<7} {secs:8.2f} s {n / secs:10,.0f} {unit}/s{extra}", flush=True)


def _rows_in_process(source: Any) -> int:
    """Every BK_LEDGERS row of ``source`` read in this process (no Spark task, no Parquet)."""
    from collections import Counter

    n = 0
    for _, rows in source.read("bk_ledgers", source.plan("bk_ledgers"), rate_limit=None, stats=Counter()):
        n += rows.num_rows if hasattr(rows, "num_rows") else 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ledgers", type=int, default=1_000_000)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--heap", default="6g", help="ZooKeeper heap (a 1M-znode tree needs several GiB)")
    ap.add_argument("--snap-count", type=int, default=2000)
    ap.add_argument("--compression", default="", choices=["", "gz", "snappy"])
    ap.add_argument("--window", type=int, default=1000, help="live scan: max_in_flight per task")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    from ledgerlens.formats.zkdata import SnapshotReader
    from ledgerlens.inventory.collect import collect_inventory
    from ledgerlens.runtime.spark import configure
    from ledgerlens.settings.config import ZooKeeperSource
    from ledgerlens.sources.base import BOOKKEEPER_STAGES
    from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot, find_files
    from ledgerlens.sources.zookeeper import LiveZooKeeper
    from ledgerlens_sandbox.cluster import generate_bulk
    from ledgerlens_sandbox.servers import ZooKeeperServer

    work = Path(tempfile.mkdtemp(prefix="ll-bench-zksnap-"))
    server = ZooKeeperServer(
        work, snap_count=args.snap_count, snapshot_compression=args.compression, heap=args.heap
    ).start(timeout=120)
    try:
        root = f"/bench-{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        generate_bulk(
            server.hosts,
            root=root,
            n_ledgers=args.ledgers,
            n_topics=args.topics,
            now_ms=int(time.time() * 1000),
        )
        print(
            f"generated {args.ledgers:,} ledgers under {root} in {time.perf_counter() - t0:.1f} s", flush=True
        )
        # a restart: ZooKeeper writes a snapshot of the whole tree when it loads its data, so the
        # newest snapshot holds every ledger (not just the logs after an early snapshot)
        server.stop()
        server = ZooKeeperServer(
            work, snap_count=args.snap_count, snapshot_compression=args.compression, heap=args.heap
        ).start(timeout=300)
        snaps, logs = find_files(str(server.data_dir))
        snap = snaps[-1][1]
        size = os.path.getsize(snap) / 2**20
        print(f"newest snapshot {os.path.basename(snap)} ({size:,.1f} MiB), {len(logs)} logs", flush=True)

        spark = configure(
            SparkSession.builder, master=args.master, app_name="bench-zk-snapshot"
        ).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        zk = ZooKeeperSource(
            hosts=server.hosts, ledgers_root=f"{root}/ledgers", rate_limit=0.0, max_in_flight=args.window
        )
        with tempfile.TemporaryDirectory() as out:
            inv = collect_inventory(spark, [LiveZooKeeper(zk, BOOKKEEPER_STAGES)], None, out, progress=False)
            n = inv.counts["bk_ledgers"]
            live = n / inv.timings["bk_ledgers"]
            _line("(a) live scan, collect bk_ledgers", n, "ledgers", inv.timings["bk_ledgers"])

        live_src = LiveZooKeeper(zk, BOOKKEEPER_STAGES)
        t0 = time.perf_counter()
        rows = _rows_in_process(live_src)
        live1 = time.perf_counter() - t0
        _line("(a2) live scan rows, 1 process, no Spark", rows, "ledgers", live1)

        mb = os.path.getsize(snap) / 2**20
        t0 = time.perf_counter()
        count = sum(1 for _ in SnapshotReader(snap).nodes())
        dt = dt_b = time.perf_counter() - t0
        _line("(b) snapshot decode, every znode, 1 process", count, "znodes", dt, f" {mb / dt:8.1f} MB/s")
        assert count > args.ledgers, f"the newest snapshot holds {count:,} znodes: not the whole tree"
        t0 = time.perf_counter()
        reader = SnapshotReader(snap)
        leaves = sum(1 for _ in reader.records((f"{root}/ledgers/".encode(),)))
        dt = time.perf_counter() - t0
        _line(
            "(b2) planning pass: step over, keep the ledgers",
            reader.node_count,
            "znodes",
            dt,
            f" {mb / dt:8.1f} MB/s ({leaves:,} kept)",
        )

        src = ZooKeeperSnapshot(
            str(server.data_dir), ledgers_root=f"{root}/ledgers", provides=BOOKKEEPER_STAGES
        )
        t0 = time.perf_counter()
        rows = _rows_in_process(src)
        snap1 = time.perf_counter() - t0
        _line("(c2) snapshot rows, 1 process, no Spark", rows, "ledgers", snap1)
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            inv = collect_inventory(spark, [src], None, out, progress=False)
            total = time.perf_counter() - t0
            assert inv.counts["bk_ledgers"] == n, (inv.counts, n)
            rate = n / total
            plan = src.prepare()
            _line(
                "(c) snapshot source, collect bk_ledgers",
                n,
                "ledgers",
                total,
                f" ({plan.replayed:,} txns replayed)",
            )
        spark.stop()
        print(f"(b)/(a) = {count / dt_b / live:.2f}  snapshot decode (znodes/s) against the live scan")
        print(f"(c2)/(a2) = {live1 / snap1:.2f}  rows of one process: both decode every ledger's metadata")
        print(f"(c)/(a) = {rate / live:.2f}  (target >= 10)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
