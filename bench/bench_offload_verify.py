"""Benchmark: verifying offloaded objects by ranged reads, against reading them whole.

Writes ``--ledgers`` per-ledger offloads of ``--ledger-mb`` MB each (data object in 1 MiB blocks
plus its V1 index, real wire format) into a local S3 server (moto, started here unless
``--s3-endpoint`` is given), then verifies the bucket three ways with the same library code the
collector runs in its Spark tasks:

(a) default mode, one request at a time (``max_in_flight=1``): the sequential baseline;
(b) default mode, pipelined (``--in-flight`` GETs at once): what ``ledgerlens audit`` does;
(c) deep mode (``--deep-offload-check``): every data block streamed, the cost of reading it all.

Prints bytes read against offloaded bytes (the default mode must stay under 1%), objects/s of
each, and the ratios (b)/(a) and (b)/(c). Not part of the test suite.

Usage::

    .venv/bin/python bench/bench_offload_verify.py --ledgers 40 --ledger-mb 4
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


def write_bucket(
    client: Any, bucket: str, ledgers: int, ledger_mb: float
) -> tuple[list[dict[str, Any]], int]:
    """Write the offloads; returns the OFFLOAD_OBJECTS rows of the bucket and the bytes written."""
    from ledgerlens.sandbox import wire
    from ledgerlens.sources.s3 import list_offload_objects

    payload = 4096
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
    written = 0
    for lid in range(1, ledgers + 1):
        u = str(uuid.uuid4())
        ml = f"bench/ns/persistent/topic-{lid % 7}"
        data_key = wire.offload_data_key(u, lid)
        meta = wire.offload_user_metadata("data", ml)
        client.put_object(Bucket=bucket, Key=data_key, Body=blob, Metadata=meta)
        idx = wire.offload_index_v1(md, index, len(blob))
        client.put_object(
            Bucket=bucket, Key=wire.offload_index_key(u, lid), Body=idx, Metadata={**meta, "role": "index"}
        )
        written += len(blob) + len(idx)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledgers", type=int, default=40)
    p.add_argument("--ledger-mb", type=float, default=4.0)
    p.add_argument("--in-flight", type=int, default=16)
    p.add_argument("--s3-endpoint", default="", help="an S3 server to use (default: start moto here)")
    args = p.parse_args(argv)

    import boto3
    from botocore.config import Config

    from ledgerlens.report.text import human_bytes

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    server = None
    endpoint = args.s3_endpoint
    if not endpoint:
        from ledgerlens.sandbox.servers import S3Server

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
        if share > 0.01:
            print("FAIL: the default mode read more than 1% of the offloaded bytes", file=sys.stderr)
            return 1
        return 0
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
