"""Benchmark: ``ledgerlens audit --source zk-snapshot`` of a generated 10M-ledger cluster, end to end.

A live ZooKeeper of 10,000,000 ledgers does not fit this machine's time budget, so the cluster is a
ZooKeeper snapshot written directly (``bench/zk_snapshot_writer.py``: a valid ZooKeeper 3.9 data
directory, cached under ``~/.cache/ledgerlens/bench/``), with ``--offloaded`` offloaded ledgers whose
index and data objects go into a local S3 server (moto, ``sandbox.servers.S3Server``) and a few
planted anomalies, whose findings must come out exactly (speed never comes from missing work).

Measured in the same run:

(f1) the raw decode of every znode the audit reads from the snapshot (records under the ledgers,
     managed-ledgers, policies and clusters roots, stepped and sliced, the checksum checked): the
     snapshot source's equivalent of the live scan's raw pipelined multiRead;
(f2) a raw listing of the bucket and the GETs of the bytes the verification reads (each index object
     whole, each data object's first block header), ``--in-flight`` at once, plain HTTP;
(a)  ``ledgerlens audit`` (the CLI, a subprocess): wall time, peak RSS of its process tree (the JVM
     and Python workers included), S3 requests (the verification's GETs and the listing's pages);
(f3) a full read of the inventory the audit wrote (every column of every table, ``sum(hash(*))``,
     as bench/bench_audit.py reads it), in a Spark session of this process.

Prints ``end-to-end 10M (zk-snapshot): audit / floor = X.XX (target <= 2)`` with floor = f1 + f2 + f3.
Usage::

    .venv/bin/python bench/bench_e2e_10m.py --reuse                     # 10M ledgers / 1M topics
    .venv/bin/python bench/bench_e2e_10m.py --ledgers 50000 --topics 5000 --offloaded 200

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zk_snapshot_writer as writer  # noqa: E402  (bench/ is not a package)
from tree_rss import measured_run  # noqa: E402

GIB = 1024**3


def floor_snapshot(data_dir: Path) -> tuple[float, int, int]:
    """(f1): seconds, znodes and bytes of every record under the roots the audit reads."""
    from ledgerlens.formats.zkdata import SnapshotReader
    from ledgerlens.sources.zk_snapshot import find_files

    snap = find_files(str(data_dir))[0][-1][1]
    roots = (b"/ledgers/", b"/managed-ledgers/", b"/admin/policies/", b"/admin/clusters/")
    t0 = time.perf_counter()
    n = size = 0
    for _at, path, data, _acl, _stat in SnapshotReader(snap).records(roots):
        n += 1
        size += len(path) + len(data or b"")
    return time.perf_counter() - t0, n, size


def floor_s3(endpoint: str, bucket: str, in_flight: int) -> tuple[float, int, int]:
    """(f2): seconds, requests and bytes of a raw listing and the GETs the verification makes (the
    same S3 client library, nothing decoded)."""
    import boto3
    from botocore.config import Config

    from ledgerlens.formats.offload import DATA_BLOCK_HEADER_SIZE

    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", config=Config(max_pool_connections=in_flight)
    )
    t0 = time.perf_counter()
    keys: list[str] = []
    pages = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        pages += 1
        keys += [o["Key"] for o in page.get("Contents", [])]
    head = f"bytes=0-{DATA_BLOCK_HEADER_SIZE - 1}"

    def one(key: str) -> int:
        if key.endswith("-index"):
            return len(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        return len(s3.get_object(Bucket=bucket, Key=key, Range=head)["Body"].read())

    with ThreadPoolExecutor(in_flight) as pool:
        got = sum(pool.map(one, keys))
    return time.perf_counter() - t0, pages + len(keys), got


def floor_inventory(inventory: Path, driver_memory: str) -> tuple[float, int]:
    """(f3): seconds and rows of a full read of every inventory table the audit wrote."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql import types as T  # noqa: N812

    from ledgerlens.runtime.spark import configure

    builder = configure(SparkSession.builder, app_name="bench-e2e-10m-floor")
    spark = builder.config("spark.driver.memory", driver_memory).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    tables = [p for p in sorted(inventory.iterdir()) if p.is_dir()]
    try:
        rows = sum(spark.read.parquet(str(t)).count() for t in tables)  # Parquet footers, as bench_audit
        t0 = time.perf_counter()
        for t in tables:
            df = spark.read.parquet(str(t))
            cols = [
                F.map_entries(f.name) if isinstance(f.dataType, T.MapType) else F.col(f.name)
                for f in df.schema
            ]
            df.select(F.sum(F.hash(*cols).cast("long"))).collect()
        return time.perf_counter() - t0, rows
    finally:
        spark.stop()


def run_audit(
    args: argparse.Namespace, data_dir: Path, endpoint: str, now_ms: int, out: Path
) -> dict[str, Any]:
    """(a): the CLI audit as a subprocess; its wall time and the peak RSS of its process tree."""
    cmd = [str(Path(sys.executable).with_name("ledgerlens")), "audit", "--source", "zk-snapshot"]
    cmd += ["--zk-data-dir", str(data_dir), "--s3-endpoint", endpoint, "--bucket", writer.Params.bucket]
    cmd += ["--as-of", str(now_ms), "--out", str(out), "--no-progress"]
    env = dict(os.environ, LEDGERLENS_SPARK_CONF=f"spark.driver.memory={args.driver_memory}")
    env.setdefault("AWS_ACCESS_KEY_ID", "bench")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    peak = measured_run(cmd, env)
    text, secs = peak.output, peak.secs
    if peak.returncode not in (0, 3):
        raise SystemExit(f"ledgerlens audit failed (exit {peak.returncode}):\n{text[-4000:]}")
    print(f"(a) audit: {secs:.1f} s, peak RSS {peak.peak / GIB:.2f} GiB (JVM {peak.peak_jvm / GIB:.2f} GiB)")
    print("(a) timings:", (out / "summary.json").read_text().split('"timings":')[-1][:600], flush=True)
    return {"secs": secs, "peak": peak.peak, "jvm": peak.peak_jvm, "output": text}


def check_findings(out: Path, expected: list[dict[str, Any]]) -> int:
    """The findings must be exactly the planted ones (kind, ledger, managed ledger, object key)."""
    import pyarrow.parquet as pq

    cols = ("kind", "ledger_id", "managed_ledger", "object_key")
    got = sorted(tuple(r[c] for c in cols) for r in pq.read_table(out / "findings.parquet").to_pylist())
    want = sorted(tuple(f[c] for c in cols) for f in expected)
    if got != want:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        raise SystemExit(
            f"findings differ from the planted ones: missing {missing[:5]}, unexpected {extra[:5]}"
        )
    return len(got)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = writer.Params()
    ap.add_argument("--ledgers", type=int, default=d.ledgers)
    ap.add_argument("--topics", type=int, default=d.topics)
    ap.add_argument("--offloaded", type=int, default=d.offloaded)
    ap.add_argument("--orphans", type=int, default=d.orphans)
    ap.add_argument("--reuse", action="store_true", help="reuse the cached snapshot of these parameters")
    ap.add_argument("--driver-memory", default="4g", help="JVM heap of the audit and of the floor's read")
    ap.add_argument(
        "--in-flight", type=int, default=16, help="(f2) GETs at once (the verification's default)"
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")

    from ledgerlens_sandbox.servers import S3Server

    p = writer.Params(args.ledgers, args.topics, args.offloaded, args.orphans)
    t0 = time.perf_counter()
    data_dir, manifest = writer.ensure(p, reuse=args.reuse, log=lambda s: print(s, flush=True))
    print(f"snapshot ready in {time.perf_counter() - t0:.0f} s: {data_dir}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="ll-bench-e2e10m-"))
    s3 = S3Server(work / "s3").start(timeout=60)
    try:
        t0 = time.perf_counter()
        n_obj = writer.upload_objects(s3.endpoint_url, p, manifest)
        print(f"uploaded {n_obj:,} offload objects in {time.perf_counter() - t0:.0f} s", flush=True)
        audit = run_audit(args, data_dir, s3.endpoint_url, manifest["now_ms"], work / "out")
        print(audit["output"].rstrip()[-1500:], flush=True)
        f1, znodes, zbytes = floor_snapshot(data_dir)
        print(
            f"(f1) snapshot raw decode: {znodes:,} znodes, {zbytes / 2**20:,.0f} MiB in {f1:.1f} s",
            flush=True,
        )
        f2, requests, sbytes = floor_s3(s3.endpoint_url, p.bucket, args.in_flight)
        print(
            f"(f2) S3 raw list + GETs: {requests:,} requests, {sbytes / 2**20:,.1f} MiB in {f2:.1f} s",
            flush=True,
        )
    finally:
        s3.stop()
    found = check_findings(work / "out", manifest["expected"])
    f3, rows = floor_inventory(work / "out" / "inventory", args.driver_memory)
    print(f"(f3) full read of the written inventory: {rows:,} rows in {f3:.1f} s", flush=True)
    report(args, manifest, audit, work / "out", found, (f1, f2, f3), znodes, requests)
    return 0


def report(
    args: argparse.Namespace,
    manifest: dict[str, Any],
    audit: dict[str, Any],
    out: Path,
    found: int,
    floors: tuple[float, float, float],
    znodes: int,
    raw_requests: int,
) -> None:
    import json

    summary = json.loads((out / "summary.json").read_text())
    counts = summary["inventory_counts"]
    timings = summary.get("timings", {})
    s3_requests = counts.get("offload_segments.requests", 0) + -(-counts.get("s3.keys", 0) // 1000)
    floor = sum(floors)
    size = f"{args.ledgers / 1e6:g}M" if args.ledgers >= 1_000_000 else f"{args.ledgers:,}"
    print()
    snap_gib = manifest["snapshot_bytes"] / GIB
    print(f"cluster: {args.ledgers:,} ledgers / {args.topics:,} topics, {manifest['znodes']:,} znodes")
    print(f"in the snapshot ({snap_gib:.2f} GiB), {manifest['offload_objects']:,} offload objects; source:")
    print(
        f"zk-snapshot (a ZooKeeper 3.9 data directory written directly); driver memory {args.driver_memory}"
    )
    print("| measure | value |")
    print("|---|---:|")
    print(f"| (f1) snapshot raw decode, znodes the audit reads | {floors[0]:.1f} s ({znodes:,} znodes) |")
    print(f"| (f2) S3 raw listing + verification GETs | {floors[1]:.1f} s ({raw_requests:,} requests) |")
    print(f"| (f3) full read of the written inventory | {floors[2]:.1f} s |")
    print(f"| floor (f1 + f2 + f3) | {floor:.1f} s |")
    print(f"| (a) ledgerlens audit, wall | {audit['secs']:.1f} s |")
    print(f"| (a) peak RSS, process tree | {audit['peak'] / GIB:.2f} GiB |")
    print(f"| (a) peak RSS, JVM | {audit['jvm'] / GIB:.2f} GiB |")
    print(f"| (a) S3 requests (GETs + list pages) | {s3_requests:,} |")
    print(f"| (a) findings (all planted, none missing) | {found} |")
    print("| (a) summary timings | " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()) + " |")
    print()
    print(
        f"end-to-end {size} (zk-snapshot): audit / floor = {audit['secs'] / floor:.2f} (target <= 2); "
        f"audit {audit['secs']:.0f} s, floor {floor:.0f} s, peak {audit['peak'] / GIB:.2f} GiB"
    )


if __name__ == "__main__":
    sys.exit(main())
