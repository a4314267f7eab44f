"""Benchmark: entry read throughput of the read-only bookie client against a real bookie.

Reads every closed ledger of a running Pulsar sandbox (``ledgerlens sandbox up``) twice with the
same client, (a) one request at a time (``max_in_flight=1``: send, wait, verify, next) and (b)
pipelined (``max_in_flight=64``, the default), and prints entries/s, MB/s (entry bodies as stored,
digest verified) and the ratio (b)/(a). ``--produce N`` first writes N messages of ``--size`` bytes
to a bench topic, so there is something to read. Each way runs ``--rounds`` times; the best counts.

Usage (starts nothing; run it under the sandbox lock)::

    flock /tmp/ll-pulsar.lock sh -c '.venv/bin/ledgerlens sandbox up --workdir sb && \\
        .venv/bin/python bench/bench_bookie_read.py --sandbox sb --produce 20000; \\
        .venv/bin/ledgerlens sandbox down --workdir sb'

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

TOPIC = "persistent://public/default/ll-bench-bookie-read"


def produce(state: dict[str, Any], n: int, size: int) -> None:
    from ledgerlens_sandbox.pulsar import make_client

    client = make_client(state)
    try:
        client.subscribe(TOPIC, "bench").close()  # a subscription keeps the ledgers (retention 0)
        producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
        body = b"x" * size
        for _ in range(n):
            producer.send_async(body, None)
        producer.flush()
        producer.close()
    finally:
        client.close()


def closed_ledgers(zk: Any) -> list[Any]:
    """Every closed ledger with entries, as LedgerHandles (metadata read from ZooKeeper)."""
    from kazoo.exceptions import NoNodeError

    from ledgerlens.formats.bookkeeper import decode_ledger_metadata
    from ledgerlens.formats.paths import is_special_znode
    from ledgerlens.sources.bookie import LedgerHandle

    out = []
    stack = ["/ledgers"]
    while stack:
        path = stack.pop()
        try:
            children = zk.get_children(path)
        except NoNodeError:
            continue
        for child in children:
            p = f"{path}/{child}"
            if path == "/ledgers" and is_special_znode(child):
                continue
            if child.startswith("L") and child[1:].isdigit():
                try:
                    md = decode_ledger_metadata(zk.get(p)[0], path=p)
                except NoNodeError:
                    continue  # deleted meanwhile (trimmed, rolled over)
                if md.state == "CLOSED" and md.last_entry_id >= 0:
                    out.append(LedgerHandle(int("".join(p.split("/")[2:]).replace("L", "")), md))
            else:
                stack.append(p)
    return sorted(out, key=lambda h: h.ledger_id)


def read_all(zk: Any, ledgers: list[Any], in_flight: int) -> tuple[float, int, int]:
    from ledgerlens.errors import EntryReadError
    from ledgerlens.settings.config import BookieSource
    from ledgerlens.sources.bookie import BookieClient

    with BookieClient(BookieSource(max_in_flight=in_flight), zk=zk) as client:
        client.read_entry(ledgers[0], 0)  # connect and resolve outside the timing
        t0 = time.perf_counter()
        n = size = 0
        for h in ledgers:
            try:
                for e in client.read_entries(h, 0, h.metadata.last_entry_id):
                    n += 1
                    size += len(e.payload)
            except EntryReadError:
                continue  # deleted by the broker since it was listed (the sandbox keeps running)
        return time.perf_counter() - t0, n, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sandbox", required=True, type=Path, help="a running sandbox's workdir")
    parser.add_argument("--produce", type=int, default=0, help="write this many messages first")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes (--produce)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from ledgerlens_sandbox.seed import zk_client

    state = json.loads((args.sandbox / "state.json").read_text())
    if args.produce:
        t0 = time.perf_counter()
        produce(state, args.produce, args.size)
        print(f"produced {args.produce} messages of {args.size} B in {time.perf_counter() - t0:.1f}s")
    zk = zk_client(state)
    try:
        ledgers = closed_ledgers(zk)
        if not ledgers:
            print("no closed ledger with entries in this sandbox", file=sys.stderr)
            return 1
        results = {}
        for name, in_flight in (("one at a time", 1), ("pipelined", 64)):
            best = min((read_all(zk, ledgers, in_flight) for _ in range(args.rounds)), key=lambda r: r[0])
            secs, n, size = best
            results[name] = n / secs
            print(
                f"{name:>14}: {n} entries of {len(ledgers)} ledgers in {secs:.3f}s = "
                f"{n / secs:,.0f} entries/s, {size / secs / 1e6:.1f} MB/s"
            )
        print(f"pipelined / one at a time: {results['pipelined'] / results['one at a time']:.2f}x")
    finally:
        zk.stop()
        zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
