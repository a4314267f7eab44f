"""Benchmark: ``ledgerlens audit`` end to end on a live ZooKeeper and S3 server, against its floor.

Starts a ZooKeeper 3.9 and the moto S3 server, generates a cluster (``--ledgers`` BookKeeper ledgers
over ``--topics`` managed ledgers with a cursor each; the first ``--offloaded`` topics have one more
ledger, offloaded completely with its BookKeeper copy deleted: a data and an index object each;
``--orphans`` planted ``orphan_ledger`` and one ``orphan_offload_object``), restarts ZooKeeper so
that its newest snapshot holds the whole tree, uploads the objects (16 PUTs at once; not timed),
then measures in this one run:

(z) the raw pipelined multiRead (100 reads a request, 40 requests in flight, no decoding) of the
    data of every znode the generator wrote (every one the audit reads), best of 2;
(s) a raw listing of the bucket and the GETs the verification makes (the whole index object, the
    first 128 bytes of the data object), 16 at once with boto3, once;
(r) a full read of the inventory the audit wrote (every column of every table, ``sum(hash(*))``,
    as bench_audit.py), best of 2, in a warm Spark session of this process;
(a) ``ledgerlens audit`` (the CLI, a fresh process) with the ZooKeeper rate limit lifted
    (``LEDGERLENS_ZK_RATE_LIMIT=0``): wall time, peak RSS of its process tree (Python and the JVM),
    ZooKeeper packets (``mntr`` before and after), S3 requests (listing pages and GETs, from its
    inventory);
(d) the same with the default rate limit (what it costs);
(n) ``ledgerlens audit --source zk-snapshot --zk-data-dir`` while ZooKeeper stays up: its ZooKeeper
    packets (must be 0) and its speed-up over the live run (d) with the default limit (target >= 1.5)
    and over (a);

and prints ``end-to-end <size>: audit / floor = X.XX (target <= 2)`` with floor = (z)+(s)+(r).
Every run must report exactly the planted findings (the same identities in each). Usage::

    .venv/bin/python bench/bench_end_to_end.py --ledgers 1000000 --topics 100000 --offloaded 20000

``--reuse`` starts ZooKeeper from a cached copy of the generated data directory
(``~/.cache/ledgerlens/bench/e2e-<size>``) when one is there and young enough (the S3 objects,
written each run, must be over a day older than the audit's ``--as-of``). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ledgerlens.settings.config import cache_dir
from ledgerlens_sandbox.cluster import CLUSTER, DAY, bulk_cluster, write_bulk_znodes, write_objects_parallel
from ledgerlens_sandbox.servers import S3Server, ZooKeeperServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tree_rss import measured_run  # noqa: E402  (bench/ is not a package)

BUCKET = "offload-bench"
AWS = {"AWS_ACCESS_KEY_ID": "ledgerlens-bench", "AWS_SECRET_ACCESS_KEY": "ledgerlens-bench",
       "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
ID_COLS = ("kind", "ledger_id", "object_key", "path", "managed_ledger", "cursor")
GIB = 1024**3


def size_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def mntr(port: int) -> dict[str, str]:
    """ZooKeeper's ``mntr`` four-letter word (not a request: its packet counters do not count it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"mntr")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return dict(line.split("\t", 1) for line in data.decode().splitlines() if "\t" in line)


def packets(port: int) -> int:
    m = mntr(port)
    return int(m["zk_packets_received"]) + int(m["zk_packets_sent"])


def run_audit(
    args: argparse.Namespace, label: str, extra: list[str], env: dict[str, str], out: Path, zk_port: int
) -> dict[str, Any]:
    """One ``ledgerlens audit`` process: wall time, peak RSS, ZooKeeper packets; its console tail."""
    cmd = [str(Path(sys.executable).parent / "ledgerlens"), "audit", "--out", str(out), "--no-progress"]
    cmd += ["--cluster-name", CLUSTER, "--as-of", str(args.now_ms), *extra]
    before = packets(zk_port)
    run = measured_run(cmd, env)
    text, wall = run.output, run.secs
    delta = packets(zk_port) - before - args.mntr_self
    if run.returncode != 0:
        print(text)
        raise SystemExit(f"{label}: ledgerlens audit exited {run.returncode}")
    summary = json.loads((out / "summary.json").read_text())
    print(f"--- {label}: {wall:.1f} s, peak RSS {run.peak / GIB:.2f} GiB (JVM {run.peak_jvm / GIB:.2f} GiB), "
          f"ZooKeeper packets {delta:,}", flush=True)  # fmt: skip
    print("\n".join("    " + line for line in text.strip().splitlines()[-args.console_lines :]), flush=True)
    t = summary.get("timings", {})
    print(
        f"    timings (summary.json): {', '.join(f'{k} {v:.1f} s' for k, v in t.items())}; "
        f"outside the pipeline (start-up, report, exit) {wall - t.get('total', 0):.1f} s",
        flush=True,
    )
    return {"wall": wall, "rss": run.peak, "jvm": run.peak_jvm, "zk_packets": delta, "summary": summary,
            "findings": finding_ids(out)}  # fmt: skip


def finding_ids(out: Path) -> set[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    table = pq.read_table(out / "findings.parquet", columns=list(ID_COLS))
    return set(zip(*(table.column(c).to_pylist() for c in ID_COLS), strict=True))


def check_findings(label: str, found: set[tuple[Any, ...]], expected: Sequence[tuple[str, str]]) -> None:
    got = sorted((k, str(lid) if k == "orphan_ledger" else key) for k, lid, key, *_ in found)
    want = sorted(expected)
    if got != want:
        raise SystemExit(f"{label}: findings differ from the planted ones\n  got  {got}\n  want {want}")


def inventory_tables(out: Path) -> list[Path]:
    """The Parquet tables of the inventory the audit wrote under ``out``."""
    found = sorted({p.parent for p in out.rglob("*.parquet") if "inventory" in p.parts})
    return found or sorted({p.parent for p in out.rglob("part-*.parquet")})


def s3_counts(out: Path) -> tuple[int, int]:
    """(objects listed, verified objects) from the written inventory."""
    import pyarrow.dataset as ds

    n_obj = n_seg = 0
    for t in inventory_tables(out):
        if t.name == "offload_objects":
            n_obj = ds.dataset(str(t)).count_rows()
        if t.name == "offload_segments":
            n_seg = ds.dataset(str(t)).count_rows()
    return n_obj, n_seg


def floor_zk(hosts: str, paths: list[str], runs: int) -> float:
    from kazoo.client import KazooClient

    from ledgerlens.sources.zk_client import PipelinedReader

    client = KazooClient(hosts=hosts, timeout=60)
    client.start(timeout=30)
    best = float("inf")
    try:
        for _ in range(runs):
            reader = PipelinedReader(client, max_in_flight=40 * 100, multi_read=100)
            t0 = time.perf_counter()
            n = sum(1 for _ in reader.get(paths))
            best = min(best, time.perf_counter() - t0)
            assert n == len(paths), (n, len(paths))
    finally:
        client.stop()
        client.close()
    return best


def floor_s3(endpoint: str, threads: int = 16) -> tuple[float, float, int, int]:
    """(listing seconds, GET seconds, objects, bytes read): the listing and the verification's GETs."""
    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      config=Config(max_pool_connections=threads))  # fmt: skip
    t0 = time.perf_counter()
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", [])]  # fmt: skip
    t1 = time.perf_counter()

    def get(key: str) -> int:
        if key.endswith("-index"):
            return len(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        return len(s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=0-127")["Body"].read())

    with ThreadPoolExecutor(threads) as pool:
        nbytes = sum(pool.map(get, keys))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(keys), nbytes


def floor_read(out: Path, runs: int) -> tuple[float, int]:
    """Best of ``runs`` full reads of every inventory table (every column decoded), warm Spark."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ledgerlens.runtime.spark import configure

    spark = configure(SparkSession.builder, master="local[2]", app_name="bench-e2e-read").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    tables = inventory_tables(out)
    best, rows = float("inf"), 0
    try:
        for _ in range(runs + 1):  # the first warms the session up
            t0 = time.perf_counter()
            rows = 0
            for t in tables:
                df = spark.read.parquet(str(t))
                cols = [F.map_entries(f.name) if isinstance(f.dataType, T.MapType) else F.col(f.name)
                        for f in df.schema]  # fmt: skip
                rows += int(df.select(F.sum(F.hash(*cols).cast("long")), F.count(F.lit(1))).collect()[0][1])
            best = min(best, time.perf_counter() - t0)
    finally:
        spark.stop()
    return best, rows


class Upload(threading.Thread):
    """The objects PUT to the bucket in the background (while ZooKeeper is written or loads)."""

    def __init__(self, endpoint: str, objects: list[tuple[str, bytes, dict[str, str]]]) -> None:
        super().__init__(daemon=True)
        self.endpoint, self.objects, self.secs = endpoint, objects, 0.0
        self.start()

    def run(self) -> None:
        t0 = time.perf_counter()
        write_objects_parallel(self.endpoint, BUCKET, self.objects)
        self.secs = time.perf_counter() - t0


def prepare(args: argparse.Namespace, work: Path) -> tuple[ZooKeeperServer, dict[str, Any], Upload]:
    """A started ZooKeeper holding the cluster (its newest snapshot the whole tree), its metadata and
    the upload of its objects (started)."""
    cache = cache_dir() / "bench" / f"e2e-{args.ledgers}-{args.topics}-{args.offloaded}-{args.orphans}"
    meta_file = cache / "meta.pickle"
    zk = lambda: ZooKeeperServer(work / "zk", heap=args.heap)  # noqa: E731
    if args.reuse and meta_file.exists():
        meta = pickle.loads(meta_file.read_bytes())
        if meta["now_ms"] - time.time() * 1000 > DAY + 2 * 3600 * 1000:
            upload = Upload(args.s3_endpoint, meta["objects"])
            shutil.copytree(cache / "zk-data", work / "zk" / "zk-data")
            t0 = time.perf_counter()
            server = zk().start(timeout=600)
            print(f"reused {cache} (ZooKeeper loaded it in {time.perf_counter() - t0:.1f} s)", flush=True)
            return server, meta, upload
        print(f"{cache}: too old to reuse (S3 objects would not be over a day old), generating", flush=True)
    now_ms = int(time.time() * 1000) + 2 * DAY
    t0 = time.perf_counter()
    bulk = bulk_cluster(root="", n_ledgers=args.ledgers, n_topics=args.topics, now_ms=now_ms,
                        n_offloaded=args.offloaded, bucket=BUCKET, s3_endpoint=None,
                        n_orphans=args.orphans)  # fmt: skip
    t1 = time.perf_counter()
    upload = Upload(args.s3_endpoint, bulk.objects)
    server = zk().start(timeout=120)
    created = write_bulk_znodes(server.hosts, bulk.nodes)
    t2 = time.perf_counter()
    server.stop()
    meta = {"now_ms": now_ms, "paths": sorted(bulk.nodes), "objects": bulk.objects, "expected": bulk.expected,
            "counts": bulk.counts}  # fmt: skip
    print(
        f"generated {created:,} znodes ({bulk.counts}) in {t2 - t0:.1f} s (built {t1 - t0:.1f} s)", flush=True
    )
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(work / "zk" / "zk-data", cache / "zk-data")
    meta_file.write_bytes(pickle.dumps(meta))
    t0 = time.perf_counter()
    server = zk().start(timeout=600)  # loading its data, ZooKeeper snapshots the whole tree
    print(
        f"restarted ZooKeeper (a snapshot of the whole tree) in {time.perf_counter() - t0:.1f} s", flush=True
    )
    return server, meta, upload


def measure_floor(
    args: argparse.Namespace, server: ZooKeeperServer, meta: dict[str, Any]
) -> dict[str, float]:
    t_zk = floor_zk(server.hosts, meta["paths"], runs=2)
    n = len(meta["paths"])
    print(
        f"(z) raw pipelined multiRead, {n:,} znodes, best of 2: {t_zk:.2f} s ({n / t_zk:,.0f}/s)", flush=True
    )
    t_list, t_get, n_obj, nbytes = floor_s3(args.s3_endpoint)
    print(f"(s) raw S3: listing {n_obj:,} objects {t_list:.2f} s; {n_obj:,} GETs ({nbytes / 2**20:,.1f} MiB) "
          f"{t_get:.2f} s ({n_obj / t_get:,.0f}/s), once", flush=True)  # fmt: skip
    return {"zk": t_zk, "s3_list": t_list, "s3_get": t_get, "objects": n_obj}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ledgers", type=int, default=1_000_000)
    ap.add_argument("--topics", type=int, default=100_000)
    ap.add_argument("--offloaded", type=int, default=20_000)
    ap.add_argument("--orphans", type=int, default=5, help="planted orphan_ledger (and one orphan object)")
    ap.add_argument("--heap", default="6g", help="ZooKeeper heap")
    ap.add_argument("--reuse", action="store_true", help="start from the cached generated ZooKeeper data")
    ap.add_argument("--skip-default-rate", action="store_true", help="no run (d) with the default rate limit")
    ap.add_argument("--console-lines", type=int, default=12, help="lines of each audit's console shown")
    args = ap.parse_args(argv)
    os.environ.update(AWS)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    size = size_label(args.ledgers)
    work = Path(tempfile.mkdtemp(prefix="ll-bench-e2e-"))
    s3 = S3Server(work / "s3").start(timeout=60)
    server: ZooKeeperServer | None = None
    try:
        args.s3_endpoint = s3.endpoint_url
        import boto3

        boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        server, meta, upload = prepare(args, work)
        args.now_ms = meta["now_ms"]
        t0 = time.perf_counter()
        upload.join()
        print(f"uploaded {len(upload.objects):,} objects in {upload.secs:.1f} s, 16 at once "
              f"(waited {time.perf_counter() - t0:.1f} s for it after ZooKeeper)", flush=True)  # fmt: skip
        first = packets(server.port)
        args.mntr_self = packets(server.port) - first
        print(
            f"mntr: packets received + sent between two mntr reads with no client = {args.mntr_self} "
            "(ZooKeeper counts the 4lw connection itself; subtracted from every delta)",
            flush=True,
        )
        report(args, size, server, s3, meta, work)
    finally:
        if server is not None:
            server.stop()
        s3.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


class S3Log:
    """Requests the S3 server logged (werkzeug's access log: one line a request) since ``mark``."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.log.stat().st_size

    def since(self) -> dict[str, int]:
        with self.log.open("rb") as f:
            f.seek(self.offset)
            text = f.read().decode(errors="replace")
        # one line a request; werkzeug colours some (206 answers) with ANSI escapes
        reqs = re.findall(r'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT) (\S+)', text)
        listing = sum(1 for m, path in reqs if m == "GET" and "list-type" in path)
        counts = {m: sum(1 for x, _ in reqs if x == m) for m in ("GET", "HEAD", "PUT")}
        return {**counts, "GET": counts["GET"] - listing, "LIST": listing}


def report(
    args: argparse.Namespace,
    size: str,
    server: ZooKeeperServer,
    s3: S3Server,
    meta: dict[str, Any],
    work: Path,
) -> None:
    floor = measure_floor(args, server, meta)
    base = {k: v for k, v in os.environ.items() if k != "LEDGERLENS_ZK_RATE_LIMIT"}
    lifted = {**base, "LEDGERLENS_ZK_RATE_LIMIT": "0"}
    live = ["--zookeeper", server.hosts]
    bucket = ["--s3-endpoint", s3.endpoint_url, "--bucket", BUCKET]
    snap = ["--source", "zk-snapshot", "--zk-data-dir", str(server.data_dir)]
    s3log = S3Log(s3.log_path)
    runs: dict[str, dict[str, Any]] = {}
    runs["l"] = run_audit(
        args, "(l) live, rate limit lifted, metadata only", live, lifted, work / "o-l", server.port
    )
    s3log.mark()
    runs["a"] = run_audit(args, "(a) live, rate limit lifted, with the bucket", live + bucket, lifted,
                          work / "o-a", server.port)  # fmt: skip
    s3_req = s3log.since()
    if not args.skip_default_rate:
        runs["d"] = run_audit(args, "(d) live, default rate limit, metadata only", live, base, work / "o-d",
                              server.port)  # fmt: skip
    runs["n"] = run_audit(args, "(n) zk-snapshot, metadata only", snap, lifted, work / "o-n", server.port)
    t_read, rows = floor_read(work / "o-a", runs=2)
    print(
        f"(r) full read of the written inventory, {rows:,} rows, best of 2 (warm): {t_read:.2f} s", flush=True
    )
    orphans = [e for e in meta["expected"] if e[0] == "orphan_ledger"]
    for key, r in runs.items():
        check_findings(key, r["findings"], meta["expected"] if key == "a" else orphans)
    for key in ("d", "n"):
        if key in runs:
            assert runs[key]["findings"] == runs["l"]["findings"], f"({key}) and (l) findings differ"
    kinds = ", ".join(sorted({k for k, _ in meta["expected"]}))
    print(f"findings: (a) reported exactly the {len(meta['expected'])} planted ones ({kinds}); (l), (d), (n) "
          f"exactly the {len(orphans)} orphan_ledger, the same identities", flush=True)  # fmt: skip
    print_table(args, size, floor, t_read, rows, runs, s3_req, meta)


def print_table(
    args: argparse.Namespace,
    size: str,
    floor: dict[str, float],
    t_read: float,
    rows: int,
    runs: dict[str, dict[str, Any]],
    s3_req: dict[str, int],
    meta: dict[str, Any],
) -> None:
    total_floor = floor["zk"] + floor["s3_list"] + floor["s3_get"] + t_read
    a, n, l_ = runs["a"], runs["n"], runs["l"]
    print()
    print(f"| measure ({size} ledgers, {args.topics:,} topics, {args.offloaded:,} offloaded) | value |")
    print("|---|---:|")
    print(f"| (z) raw multiRead of {len(meta['paths']):,} znodes | {floor['zk']:.1f} s |")
    print(f"| (s) raw S3 listing + {floor['objects']:,} GETs | {floor['s3_list'] + floor['s3_get']:.1f} s |")
    print(f"| (r) full read of the inventory ({rows:,} rows) | {t_read:.1f} s |")
    print(f"| floor (z)+(s)+(r) | {total_floor:.1f} s |")
    what = {"a": "live, rate limit lifted, with the bucket", "l": "live, rate limit lifted, metadata only",
            "d": "live, default rate limit, metadata only", "n": "zk-snapshot, metadata only"}  # fmt: skip
    for key, r in runs.items():
        print(f"| ({key}) ledgerlens audit, {what[key]}: wall | {r['wall']:.1f} s |")
        print(f"| ({key}) peak RSS of the audit's process tree (JVM) | {r['rss'] / GIB:.2f} GiB "
              f"({r['jvm'] / GIB:.2f} GiB) |")  # fmt: skip
        print(f"| ({key}) requests to ZooKeeper (mntr packets received + sent) | {r['zk_packets']:,} |")
    print(f"| (a) requests to S3 (the server's access log) | {s3_req['LIST']:,} LIST, {s3_req['GET']:,} GET, "
          f"{s3_req['HEAD']:,} HEAD |")  # fmt: skip
    if "d" in runs:
        print(f"| default rate limit costs, (d) - (l) | {runs['d']['wall'] - l_['wall']:.1f} s |")
    print()
    print(f"end-to-end {size}: audit / floor = {a['wall'] / total_floor:.2f} (target <= 2)")
    print(f"zk-snapshot: ZooKeeper packets during the run = {n['zk_packets']}")
    ref = runs.get("d", l_)
    which = "(d) the default rate limit" if "d" in runs else "(l) rate limit lifted"
    print(f"zk-snapshot speed-up over live = {ref['wall'] / n['wall']:.2f} (target >= 1.5) (live: {which})")
    print(
        f"zk-snapshot speed-up over live with the rate limit lifted, (l) / (n) = {l_['wall'] / n['wall']:.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
