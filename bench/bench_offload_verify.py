"""Benchmark: verifying offloaded objects by ranged reads, against reading them whole.

Writes ``--ledgers`` per-ledger offloads of ``--ledger-mb`` MB each (data object in 1 MiB blocks
plus its V1 index, real wire format) into a local S3 server (moto, started here unless
``--s3-endpoint`` is given), then verifies the bucket three ways with the same library code the
collector runs in its Spark tasks:

(a) default mode, one request at a time (``max_in_flight=1``): the sequential baseline;
(b) default mode, pipelined (``--in-flight`` GETs at once): what ``ledgerlens audit`` does;
(c) deep mode (``--deep-offload-check``): every data block streamed, the cost of reading it all.

Prints bytes read against offloaded bytes (the default mode must stay under 1%), objects/s of
each, and the ratios (b)/(a) and (b)/(c).

Then the incremental verification (``ledgerlens.offload.verdicts``) on another bucket of
``--incremental-ledgers`` small offloads: a first run verifies every object and keeps its verdicts
(``offload_verdicts.parquet``, as an audit does); after 1% new offloads, a second run reuses the
verdicts of the unchanged objects. Prints the GETs of each (counted by the verification and by a
botocore hook on the client) and their ratio (target: at most 0.02), and checks that the second
run's rows equal a fresh verification's. Not part of the test suite.

Usage::

    .venv/bin/python bench/bench_offload_verify.py --ledgers 40 --ledger-mb 4 --incremental-ledgers 1500
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any


def write_bucket(
    client: Any, bucket: str, ledgers: int, ledger_mb: float, *, first: int = 1, in_flight: int = 1
) -> tuple[list[dict[str, Any]], int]:
    """Write the offloads of ledgers ``first``.. (``in_flight`` at once); returns the OFFLOAD_OBJECTS
    rows of the bucket and the bytes written."""
    from concurrent.futures import ThreadPoolExecutor

    from ledgerlens.sources.s3 import list_offload_objects
    from ledgerlens_sandbox import wire

    payload = 4096 if ledger_mb >= 0.01 else 256
    n_entries = max(1, int(ledger_mb * 1024 * 1024 / (payload + 12)))
    entries = [(i, bytes([i % 251]) * payload) for i in range(n_entries)]
    blob, index = wire.offload_data_object(entries, max_block_size=1024 * 1024)
    md = wire.ledger_metadata(
        ensemble=["bookie-1:3181"],
        write_quorum=1,
        ack_quorum=1,
        length=n_entries * payload,
        last_entry_id=n_entries - 1,
        ctime_ms=1_700_000_000_000,
        custom={"application": "pulsar", "component": "managed-ledger"},
    )
    idx = wire.offload_index_v1(md, index, len(blob))

    def put(lid: int) -> int:
        u = str(uuid.uuid4())
        meta = wire.offload_user_metadata("data", f"bench/ns/persistent/topic-{lid % 7}")
        client.put_object(Bucket=bucket, Key=wire.offload_data_key(u, lid), Body=blob, Metadata=meta)
        client.put_object(
            Bucket=bucket, Key=wire.offload_index_key(u, lid), Body=idx, Metadata={**meta, "role": "index"}
        )
        return len(blob) + len(idx)

    with ThreadPoolExecutor(max_workers=max(1, in_flight)) as pool:
        written = sum(pool.map(put, range(first, first + ledgers)))
    return list(list_offload_objects(client, bucket)), written


def run(client: Any, objects: list[dict[str, Any]], *, deep: bool, in_flight: int) -> tuple[float, Any]:
    from ledgerlens.offload.verify import VerifyStats, verify_objects

    stats = VerifyStats()
    t0 = time.perf_counter()
    rows = list(verify_objects(client, objects, deep=deep, max_in_flight=in_flight, stats=stats))
    elapsed = time.perf_counter() - t0
    bad = [r["key"] for r in rows if r["problems"] or r["error"]]
    if bad:
        raise SystemExit(f"verification found problems in a healthy bucket: {bad[:3]}")
    return elapsed, stats


class GetCounter:
    """GetObject calls a boto3 client makes, counted by a botocore event hook."""

    def __init__(self, client: Any) -> None:
        self._lock = threading.Lock()
        self._n = 0
        client.meta.events.register("before-call.s3.GetObject", self._count)

    def _count(self, **_: Any) -> None:
        with self._lock:
            self._n += 1

    def take(self) -> int:
        """The calls since the last ``take``."""
        with self._lock:
            n, self._n = self._n, 0
        return n


def _keep_verdicts(where: Path, rows: list[dict[str, Any]]) -> None:
    """``where/offload_verdicts.parquet`` as an audit keeps it (its verified rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ledgerlens.offload.verdicts import VERDICTS_ARROW, VERDICTS_NAME

    (where / VERDICTS_NAME).mkdir(parents=True)
    kept = [r for r in rows if r["error"] is None]
    pq.write_table(
        pa.Table.from_pylist(kept, schema=VERDICTS_ARROW), str(where / VERDICTS_NAME / "part-0.parquet")
    )


def incremental(client: Any, ledgers: int, in_flight: int) -> int:
    """The first run, 1% new offloads, the second run: prints the GET counts and their ratio."""
    from ledgerlens.offload.verdicts import load_verdicts, verify_incrementally
    from ledgerlens.offload.verify import VerifyStats

    bucket = f"bench-incremental-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    t0 = time.perf_counter()
    objects, _ = write_bucket(client, bucket, ledgers, 0.001, in_flight=in_flight)
    print(f"incremental bucket: {ledgers} offloads, {len(objects)} objects (written in "
          f"{time.perf_counter() - t0:.1f} s)")  # fmt: skip
    gets = GetCounter(client)
    keep = Path(tempfile.mkdtemp(prefix="bench-verdicts-"))
    one = VerifyStats()
    _keep_verdicts(keep, list(verify_incrementally(client, objects, max_in_flight=in_flight, stats=one)))
    first = gets.take()
    new = max(1, ledgers // 100)
    objects, _ = write_bucket(client, bucket, new, 0.001, first=ledgers + 1, in_flight=in_flight)
    two = VerifyStats()
    previous = load_verdicts(keep, deep=False)
    rows = list(verify_incrementally(client, objects, previous=previous, max_in_flight=in_flight, stats=two))
    second = gets.take()
    fresh = list(verify_incrementally(client, objects, max_in_flight=in_flight))
    if sorted(rows, key=lambda r: r["key"]) != sorted(fresh, key=lambda r: r["key"]):
        raise SystemExit("the second run's rows differ from a fresh verification's")
    if (first, second) != (one.requests, two.requests):
        raise SystemExit(f"GETs counted {one.requests}, {two.requests}; the client made {first}, {second}")
    ratio = second / first
    print(f"incremental verification: first run GETs = {first:,} ({one.objects:,} objects verified)")
    print(
        f"incremental verification: second run GETs after 1% new objects = {second:,} "
        f"({two.objects:,} objects verified, {two.reused:,} verdicts reused)"
    )
    print(f"incremental verification: second run GETs / first run GETs = {ratio:.4f} (target <= 0.02)")
    if ratio > 0.02:
        print("FAIL: the second run issued more than 2% of the first run's GETs", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledgers", type=int, default=40)
    p.add_argument("--ledger-mb", type=float, default=4.0)
    p.add_argument("--in-flight", type=int, default=16)
    p.add_argument("--s3-endpoint", default="", help="an S3 server to use (default: start moto here)")
    p.add_argument(
        "--incremental-ledgers",
        type=int,
        default=1000,
        help="offloads of the incremental verification's bucket (two objects each; 0: skip it)",
    )
    args = p.parse_args(argv)

    import boto3
    from botocore.config import Config

    from ledgerlens.report.text import human_bytes

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    server = None
    endpoint = args.s3_endpoint
    if not endpoint:
        from ledgerlens_sandbox.servers import S3Server

        server = S3Server(Path(tempfile.mkdtemp(prefix="bench-s3-")))
        server.start(timeout=60)
        endpoint = server.endpoint_url
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            config=Config(max_pool_connections=max(10, args.in_flight)),
        )
        bucket = f"bench-offload-{uuid.uuid4().hex[:8]}"
        client.create_bucket(Bucket=bucket)
        t0 = time.perf_counter()
        objects, written = write_bucket(client, bucket, args.ledgers, args.ledger_mb)
        print(
            f"bucket: {args.ledgers} ledgers x {args.ledger_mb} MB, {len(objects)} objects, "
            f"{human_bytes(written)} offloaded (written in {time.perf_counter() - t0:.1f} s)"
        )
        seq_s, seq = run(client, objects, deep=False, in_flight=1)
        par_s, par = run(client, objects, deep=False, in_flight=args.in_flight)
        deep_s, deep = run(client, objects, deep=True, in_flight=args.in_flight)
        n = len(objects)
        share = par.bytes_read / written
        print(f"(a) default, sequential:  {n / seq_s:8.1f} objects/s  {human_bytes(seq.bytes_read):>10} read")
        print(
            f"(b) default, {args.in_flight:>2} in flight: {n / par_s:8.1f} objects/s  "
            f"{human_bytes(par.bytes_read):>10} read = {100 * share:.3f}% of the offloaded bytes"
        )
        print(
            f"(c) deep, {args.in_flight:>2} in flight:    {n / deep_s:8.1f} objects/s  "
            f"{human_bytes(deep.bytes_read):>10} read"
        )
        print(f"ratios: (b)/(a) {seq_s / par_s:.2f}x, (b)/(c) {deep_s / par_s:.2f}x; requests {par.requests}")
        status = 0
        if share > 0.01:
            print("FAIL: the default mode read more than 1% of the offloaded bytes", file=sys.stderr)
            status = 1
        if args.incremental_ledgers > 0:
            status = max(status, incremental(client, args.incremental_ledgers, args.in_flight))
        return status
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
