"""Benchmark: deletions per second through the whole PIP-186 flow, with full re-verification.

Against a real Pulsar sandbox (ZooKeeper metadata, moto S3): 10,000 approved orphan ledgers and
2,000 approved orphan offload copies (4,000 objects, data + index) are fabricated in real wire
formats (``ledgerlens.sandbox.orphans``), planned, approved, published to the deletion topic, and
deleted by ``ledgerlens deleter --execute``, which re-verifies every item against the live stores
(ledger znode version and custom metadata, owner tenant, managed-ledger list, cursors, schema
locator; object size, ETag, user metadata, owner offload contexts) before deleting it.

Baseline, measured in the same run on a separate fabricated set: the operator's way today, one
unverified delete at a time (``zk.delete`` per ledger znode, ``delete_object`` per object).

Run under the Pulsar lock (it starts its own sandbox unless ``--sandbox DIR`` names a running one)::

    flock /tmp/ll-pulsar.lock .venv/bin/python bench/bench_deletion.py [--ledgers 10000 --copies 2000]

``--reference-scan`` measures instead, without Pulsar, the deleter's reference scan
(``ledgerlens.deletion.references``: every managed ledger, cursor, schema locator and tenant, read
at the start of each run and again in the background as the index ages). It starts its own
ZooKeeper (``ZooKeeperServer``, ``--zk-heap``) unless ``--zk`` names one, writes ``--mls`` managed
ledgers (real ``ManagedLedgerInfo`` with three ledgers each, every tenth with an offload context, one
``ManagedCursorInfo`` cursor each), a schema locator for every ``--schema-every``-th topic and the
tenants, outside the timed part, then times, ``--rounds`` times in turn: the raw read of the same
znodes (the same reads, nothing decoded) with single pipelined reads and with multiRead as the
scanner's reader batches, ``ReferenceScanner`` without a rate limit and at the deleter's default
20,000 reads/s, and the scan over the read znodes held in memory (decoding and indexing alone), with
the CPU time of this process and of ZooKeeper. Prints the table, the linear extrapolation to
1,000,000 managed ledgers, the index's memory and the amortized cost by the scanner's re-read rule;
``--profile`` adds a profile of one scan::

    .venv/bin/python bench/bench_deletion.py --reference-scan [--mls 100000 --rounds 3 --profile]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.deleter import Deleter, DeleterConfig
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.plan import build_plan, write_plan
from ledgerlens.deletion.publish import publish, pulsar_client
from ledgerlens.formats.paths import ledger_path
from ledgerlens.settings.config import S3Source
from ledgerlens_sandbox.orphans import audit_output, fabricate
from ledgerlens_sandbox.pulsar import AWS_DUMMY, PulsarSandbox

TENANT_NS = "ll-bench/ns"
ML = "ll-bench/ns/persistent/bench"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sandbox", type=Path, default=None, help="a running sandbox's workdir (default: start one)"
    )
    ap.add_argument("--ledgers", type=int, default=10_000)
    ap.add_argument("--copies", type=int, default=2_000)
    ap.add_argument("--baseline-ledgers", type=int, default=1_000)
    ap.add_argument("--baseline-copies", type=int, default=200)
    ap.add_argument("--parallelism", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=200)
    scan = ap.add_argument_group("--reference-scan (no Pulsar)")
    scan.add_argument(
        "--reference-scan", action="store_true", help="measure the deleter's reference scan instead"
    )
    scan.add_argument("--zk", default=None, help="ZooKeeper host:port (default: start a local one)")
    scan.add_argument("--zk-heap", default="4g", help="heap of the ZooKeeper this benchmark starts")
    scan.add_argument("--mls", type=int, default=100_000, help="managed ledgers (one cursor each)")
    scan.add_argument("--tenants", type=int, default=10)
    scan.add_argument("--namespaces", type=int, default=10, help="namespaces per tenant")
    scan.add_argument(
        "--schema-every", type=int, default=10, help="a schema locator every N topics (0: none)"
    )
    scan.add_argument("--rounds", type=int, default=3, help="timed rounds (each: raw, scans); medians count")
    scan.add_argument("--rate-limit", type=float, default=20_000.0, help="the limited scan's reads/s")
    scan.add_argument("--profile", action="store_true", help="also profile one unlimited scan (cProfile)")
    args = ap.parse_args(argv)
    if args.reference_scan:
        return reference_scan(args)
    os.environ.update(AWS_DUMMY)
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens_sandbox.seed import ensure_namespace

    work = Path(tempfile.mkdtemp(prefix="bench-deletion-"))
    box = PulsarSandbox(args.sandbox or work / "sandbox")
    own = args.sandbox is None
    figures: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        state = box.up(timeout=300) if own else box.state()
        figures["sandbox_up_s"] = round(time.monotonic() - t0, 1)
        ensure_namespace(state["web_url"], TENANT_NS, None)
        zk = KazooClient(hosts=state["zookeeper_hosts"], timeout=30)
        zk.start(timeout=30)
        s3 = boto3.client("s3", endpoint_url=state["s3_endpoint"], region_name="us-east-1")
        bucket = state["bucket"]

        # baseline: unverified deletes, one at a time
        t0 = time.monotonic()
        base = fabricate(
            zk,
            s3,
            bucket,
            managed_ledger=ML,
            ledgers=args.baseline_ledgers,
            copies=args.baseline_copies,
            first_id=90_000_000,
            seed=7,
        )
        figures["baseline_fabricate_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        for lid in base.ledger_ids:
            zk.delete(ledger_path(lid))
        for key in base.object_keys:
            s3.delete_object(Bucket=bucket, Key=key)
        dt = time.monotonic() - t0
        base_items = len(base.ledger_ids) + args.baseline_copies
        figures["baseline_items_per_s"] = round(base_items / dt, 1)
        print(f"baseline: {base_items} items deleted unverified one at a time in {dt:.1f} s", file=sys.stderr)

        t0 = time.monotonic()
        orphans = fabricate(
            zk,
            s3,
            bucket,
            managed_ledger=ML,
            ledgers=args.ledgers,
            copies=args.copies,
            first_id=80_000_000,
            seed=11,
        )
        figures["fabricate_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        out = audit_output(
            work / "audit",
            zk,
            s3,
            bucket,
            ledger_ids=orphans.ledger_ids,
            object_keys=orphans.object_keys,
            tenants=["ll-bench"],
        )
        plan = build_plan(out)
        plan_path = write_plan(plan, work / "plan.json")
        figures["plan_s"] = round(time.monotonic() - t0, 1)
        journal = Journal(work / "journal.jsonl")
        approve(
            plan_path,
            journal,
            plan_hash_given=plan["plan_hash"],
            approver="bench",
            reason="benchmark",
            out=work / "approval.json",
        )
        items = len(plan["items"])
        client = pulsar_client(state["service_url"])
        t0 = time.monotonic()
        sent = publish(work / "approval.json", journal, client, batch_size=1000).sent
        client.close()
        dt = time.monotonic() - t0
        figures["publish_per_s"] = round(sent / dt, 1)
        print(f"published {sent} messages in {dt:.1f} s", file=sys.stderr)

        idle = 5.0
        cfg = DeleterConfig(
            zookeeper=state["zookeeper_hosts"],
            service_url=state["service_url"],
            web_url=state["web_url"],
            s3=S3Source(bucket, endpoint_url=state["s3_endpoint"], max_in_flight=32),
            execute=True,
            until_idle_s=idle,
            parallelism=args.parallelism,
            batch_size=args.batch_size,
        )
        metrics = DeletionMetrics()
        t0 = time.monotonic()
        report = Deleter(cfg, journal, metrics).run()
        dt = report.seconds - idle
        deleted = report.outcomes.get("deleted", 0)
        figures.update(
            items=items,
            deleted=deleted,
            deleter_s=round(dt, 1),
            deletions_per_s=round(deleted / dt, 1),
            ledgers_per_s=round(metrics.value("deleted_ledgers") / dt, 1),
            ratio_vs_baseline=round((deleted / dt) / figures["baseline_items_per_s"], 2),
            outcomes=dict(report.outcomes),
        )
        left = sum(
            zk.exists(ledger_path(i)) is not None for i in orphans.ledger_ids[:: max(1, args.ledgers // 500)]
        )
        figures["sampled_ledgers_left"] = left
        zk.stop()
        zk.close()
    finally:
        if own:
            box.down()
    print(json.dumps(figures, indent=2))
    print(
        f"{figures['deleted']}/{figures['items']} approved items deleted with full re-verification in "
        f"{figures['deleter_s']} s: {figures['deletions_per_s']} deletions/s "
        f"({figures['ratio_vs_baseline']}x the unverified one-at-a-time baseline of "
        f"{figures['baseline_items_per_s']}/s; target >= 200/s)"
    )
    return 0 if figures["deleted"] == figures["items"] else 1


# -- the deleter's reference scan (--reference-scan) ---------------------------------------------

ONE_MILLION = 1_000_000


def reference_tree(
    *, mls: int, tenants: int, namespaces: int, schema_every: int, now_ms: int
) -> tuple[dict[str, tuple[bytes, None]], dict[str, int]]:
    """The znodes of a Pulsar metadata store with ``mls`` managed ledgers, and what a scan of it
    must find (managed ledgers, referenced ledgers, offload uuids, schemas)."""
    from ledgerlens.proto import managed_ledger_pb2 as mlpb
    from ledgerlens.proto import schema_storage_pb2 as schpb
    from ledgerlens_sandbox import wire

    hour = 3_600_000
    nodes: dict[str, tuple[bytes, None]] = {}
    spaces = [(f"tenant-{t:02d}", f"ns-{n:02d}") for t in range(tenants) for n in range(namespaces)]
    for tenant in sorted({t for t, _ in spaces}):
        tenant_info = {"adminRoles": [], "allowedClusters": ["standalone"]}
        nodes[f"/admin/policies/{tenant}"] = (json.dumps(tenant_info).encode(), None)
    for tenant, ns in spaces:
        policies = {"replication_clusters": ["standalone"], "retention_policies": None}
        nodes[f"/admin/policies/{tenant}/{ns}"] = (json.dumps(policies).encode(), None)
    driver = mlpb.OffloadDriverMetadata(name="aws-s3")
    for key, value in (("bucket", "offload"), ("region", "us-east-1"), ("endpoint", "http://s3:9000")):
        driver.properties.add(key=key, value=value)
    lid = 1_000_000
    uuids = schemas = 0
    for i in range(mls):
        tenant, ns = spaces[i % len(spaces)]
        topic = f"topic-{i:07d}"
        path = f"/managed-ledgers/{tenant}/{ns}/persistent/{topic}"
        info = mlpb.ManagedLedgerInfo()
        first = lid
        for k in range(3):
            ctime = now_ms - (3 - k) * hour
            if k == 2:  # the open ledger: no entries recorded yet
                info.ledgerInfo.add(ledgerId=lid, timestamp=0)
            else:
                li = info.ledgerInfo.add(ledgerId=lid, entries=1000, size=256_000, timestamp=ctime + hour)
                if k == 0 and i % 10 == 0:
                    msb, lsb = wire.uuid_bits(f"{i:08x}-0000-4000-8000-{lid:012x}")
                    ctx = li.offloadContext
                    ctx.uidMsb, ctx.uidLsb, ctx.complete, ctx.timestamp = msb, lsb, True, ctime + hour
                    ctx.driverMetadata.CopyFrom(driver)
                    uuids += 1
            lid += 1
        nodes[path] = (info.SerializeToString(), None)
        cur = mlpb.ManagedCursorInfo(
            cursorsLedgerId=lid, markDeleteLedgerId=first, markDeleteEntryId=999, lastActive=now_ms - 60_000
        )
        nodes[f"{path}/sub"] = (cur.SerializeToString(), None)
        lid += 1
        if schema_every and i % schema_every == 0:
            entries = [
                schpb.IndexEntry(
                    version=v,
                    position=schpb.PositionInfo(ledgerId=lid + v, entryId=0),
                    hash=hashlib.sha256(f"{topic}-{v}".encode()).digest(),
                )
                for v in range(2)
            ]
            loc = schpb.SchemaLocator(info=entries[-1], index=entries)
            nodes[f"/schemas/{tenant}/{ns}/{topic}"] = (loc.SerializeToString(), None)
            lid += 2
            schemas += 1
    expect = {
        "managed_ledgers": mls,
        "referenced_ledgers": lid - 1_000_000,
        "offload_uuids": uuids,
        "schemas": schemas,
        "tenants": tenants,
    }
    return nodes, expect


def raw_reference_read(reader: Any, roots: Any, keep: dict[str, Any] | None = None) -> None:
    """The reads ``scan_references`` makes, in the same order, decoding nothing: list the tenants,
    the managed-ledger tree down to the topics, read each managed-ledger node with its children,
    get each cursor, list the schema tree and get each locator. ``keep``: path -> NodeRead.

    A ``reader`` with multiRead reads the managed-ledger nodes' data and children in two passes (the
    same number of reads)."""

    def listing(paths: list[str], depth: int) -> list[str]:
        for _ in range(depth):
            nxt: list[str] = []
            for r in reader.children(paths):
                if keep is not None:
                    keep[r.path] = r
                nxt.extend(f"{r.path}/{c}" for c in sorted(r.children or ()))
            paths = nxt
        return paths

    listing([roots.tenants], 1)
    cursors: list[str] = []
    mls = listing([roots.managed_ledgers.rstrip("/")], 4)
    if reader.multi_read > 1:  # multiRead takes one kind of read a request: data, then children
        for _ in reader.get(mls):
            pass
        ml_reads = reader.children(mls)
    else:
        ml_reads = reader.read(mls, data=True, children=True)
    for r in ml_reads:
        if keep is not None:
            keep[r.path] = r
        cursors.extend(f"{r.path}/{c}" for c in sorted(r.children or ()))
    for r in reader.get(cursors):
        if keep is not None:
            keep[r.path] = r
    for r in reader.get(listing([roots.schemas.rstrip("/")], 3)):
        if keep is not None:
            keep[r.path] = r


def amortized(scan_s: float, cpu_s: float, max_age: float) -> str:
    """What a scan of ``scan_s`` seconds (``cpu_s`` of CPU in the deleter's process) costs the
    deleter, by ``ReferenceScanner``'s rule: the workers wait for the first index of a run; a new
    read starts in the background once the index is older than half of ``max_age``, and the workers
    wait only while no index is younger than ``max_age``."""
    half = max_age / 2
    first = f"each run waits {scan_s:.0f} s for its first index; "
    if scan_s <= half:
        return first + (
            f"then a background read every {half:.0f} s, done before the index is {max_age:.0f} s old, "
            f"so the workers do not wait; its {cpu_s:.1f} s of CPU in the deleter's process is "
            f"{cpu_s / half:.1%} of one core over those {half:.0f} s"
        )
    if scan_s < max_age:
        wait = 2 * scan_s - max_age  # reads back to back; each index expires before the next is done
        return first + (
            f"a read outlasts half the age bound ({half:.0f} s), so reads run back to back and each "
            f"index expires {wait:.0f} s before the next is done: the workers wait {wait / scan_s:.0%} "
            f"of the time"
        )
    return first + (
        f"every index is older than {max_age:.0f} s when its read ends, so the workers never get one"
    )


@dataclass(frozen=True)
class Measured:
    """One timed read: wall seconds, reads, CPU seconds of this process and of ZooKeeper."""

    wall_s: float
    reads: int
    cpu_s: float
    zk_cpu_s: float | None


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (Linux ``/proc``), or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class MemoryReader:
    """``PipelinedReader``'s interface over znodes already read (path -> NodeRead): the scan's
    decoding and indexing without ZooKeeper."""

    def __init__(self, nodes: dict[str, Any]) -> None:
        from ledgerlens.sources.zk_client import ScanStats

        self.nodes = nodes
        self.stats = ScanStats()

    def read(self, paths: Iterable[str], *, data: bool = True, children: bool = False) -> Iterator[Any]:
        for p in paths:
            self.stats.reads += int(data) + int(children)
            r = self.nodes.get(p)
            if r is None:
                self.stats.vanished += 1
                continue
            yield r

    def get(self, paths: Iterable[str]) -> Iterator[Any]:
        return self.read(paths, data=True, children=False)

    def children(self, paths: Iterable[str]) -> Iterator[Any]:
        return self.read(paths, data=False, children=True)


def reference_scan(args: argparse.Namespace) -> int:
    """``--reference-scan``: the table described in the module docstring."""
    import atexit
    import shutil
    import uuid

    from kazoo.client import KazooClient

    from ledgerlens.deletion.references import DEFAULT_MAX_AGE_S, ReferenceScanner, Roots, scan_references
    from ledgerlens.sources.zk_client import PipelinedReader
    from ledgerlens_sandbox.cluster import write_znodes

    server = None
    hosts = args.zk
    if hosts is None:
        from ledgerlens_sandbox.servers import ZooKeeperServer

        data = Path(tempfile.mkdtemp(prefix="ll-bench-refscan-"))
        atexit.register(shutil.rmtree, data, ignore_errors=True)
        server = ZooKeeperServer(data, heap=args.zk_heap).start(timeout=120)
        atexit.register(server.stop)
        hosts = server.hosts
    else:  # a ZooKeeper in use: a fresh chroot, so that the roots are the benchmark's alone
        root = f"/ll-bench-refscan-{uuid.uuid4().hex[:8]}"
        setup = KazooClient(hosts=hosts, timeout=30)
        setup.start(timeout=30)
        setup.ensure_path(root)
        setup.stop()
        setup.close()
        hosts += root
    print(
        f"ZooKeeper {hosts} (heap {args.zk_heap if server else 'theirs'}); cpus={os.cpu_count()}",
        file=sys.stderr,
        flush=True,
    )

    t0 = time.perf_counter()
    nodes, expect = reference_tree(
        mls=args.mls,
        tenants=args.tenants,
        namespaces=args.namespaces,
        schema_every=args.schema_every,
        now_ms=int(time.time() * 1000),
    )
    build_s = time.perf_counter() - t0
    client = KazooClient(hosts=hosts, timeout=60)  # read-write, as the deleter's session
    client.start(timeout=30)
    t0 = time.perf_counter()
    created = write_znodes(client, nodes)
    write_s = time.perf_counter() - t0
    del nodes
    print(
        f"data: {created:,} znodes ({args.mls:,} managed ledgers, {expect['schemas']:,} schemas) "
        f"built in {build_s:.1f} s, written in {write_s:.1f} s (not timed below)",
        file=sys.stderr,
        flush=True,
    )

    roots = Roots()
    window = ReferenceScanner([]).max_in_flight
    multi = max(1, min(100, window // 4))  # the scanner's reader: ReferenceScanner._scan
    raw = f"raw read, single pipelined reads ({window} in flight), nothing decoded"
    raw_multi = f"raw read, multiRead {multi} reads a request (the scanner's reader)"
    unlimited = "ReferenceScanner, rate_limit=None"
    limited = f"ReferenceScanner, rate_limit={args.rate_limit:,.0f}/s (the deleter's default)"
    in_memory = "scan_references over the read znodes in memory (decode + index)"
    runs: dict[str, list[Measured]] = {k: [] for k in (raw, raw_multi, unlimited, limited, in_memory)}
    zk_pid = server.pid if server is not None else None

    def check(index: Any) -> None:
        got = index.summary()
        want = {
            "managed_ledgers": expect["managed_ledgers"],
            "referenced_ledgers": expect["referenced_ledgers"],
            "offload_uuids": expect["offload_uuids"],
            "unprovable": 0,
        }
        wrong = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        if wrong or len(index.tenants) != expect["tenants"]:
            raise SystemExit(f"the scan found (got, want) {wrong}, tenants {len(index.tenants)}")

    def timed(run: Any) -> Measured:
        """Wall time, reads, and the CPU time of this process (all its threads) and of ZooKeeper."""
        zk0, cpu0, t0 = process_cpu_s(zk_pid), time.process_time(), time.perf_counter()
        index, reads = run()
        dt, cpu, zk1 = time.perf_counter() - t0, time.process_time() - cpu0, process_cpu_s(zk_pid)
        if index is not None:
            check(index)
        return Measured(dt, reads, cpu, None if zk0 is None or zk1 is None else zk1 - zk0)

    def timed_scan(rate: float | None) -> Measured:
        scanner = ReferenceScanner([client], roots, rate_limit=rate)  # as Deleter.reference_scanner

        def run() -> tuple[Any, int]:
            index = scanner.current()
            return index, index.stats.reads

        return timed(run)

    def timed_raw(multi_read: int) -> Measured:
        reader = PipelinedReader(client, max_in_flight=window, multi_read=multi_read)

        def run() -> tuple[Any, int]:
            raw_reference_read(reader, roots)
            return None, reader.stats.reads

        return timed(run)

    def timed_index(reader: Any) -> Measured:
        def run() -> tuple[Any, int]:
            index = scan_references(reader, roots)
            return index, index.stats.reads

        return timed(run)

    held: dict[str, Any] = {}
    raw_reference_read(PipelinedReader(client, max_in_flight=window), roots, keep=held)  # untimed
    loads: list[float] = []
    for rnd in range(1, args.rounds + 1):
        loads.append(os.getloadavg()[0])
        runs[raw].append(timed_raw(0))
        runs[raw_multi].append(timed_raw(multi))
        runs[unlimited].append(timed_scan(None))
        runs[limited].append(timed_scan(args.rate_limit))
        runs[in_memory].append(timed_index(MemoryReader(held)))
        loads.append(os.getloadavg()[0])
        line = ", ".join(f"{v[-1].wall_s:.2f}" for v in runs.values())
        print(
            f"round {rnd} (s, in the table's order): {line}; load average {loads[-2]:.1f} -> {loads[-1]:.1f}",
            file=sys.stderr,
            flush=True,
        )

    import tracemalloc

    tracemalloc.start()
    index = scan_references(MemoryReader(held), roots)  # type: ignore[arg-type]
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    summary = index.summary()
    del index

    base = statistics.median(m.wall_s for m in runs[raw_multi])
    single = statistics.median(m.wall_s for m in runs[raw])
    scale = ONE_MILLION / args.mls
    print(
        f"\nReference scan of {args.mls:,} managed ledgers (+ {args.mls:,} cursors, "
        f"{expect['schemas']:,} schema locators, {args.tenants} tenants): {created:,} znodes; "
        f"median of {args.rounds} rounds (min..max); {os.cpu_count()} cpus, 1-minute load average "
        f"{min(loads):.1f} to {max(loads):.1f}"
    )
    print(
        f"{'':<72} {'wall s':>22} {'reads':>9} {'reads/s':>9} {'x raw multi':>11} {'x raw single':>12} "
        f"{'1M MLs, extrap.':>15} {'CPU us/read: here':>17} {'ZooKeeper':>9}"
    )
    figures: dict[str, Any] = {}
    for label, values in runs.items():
        secs = [m.wall_s for m in values]
        med, reads = statistics.median(secs), values[0].reads
        spread = f"{med:.2f} ({min(secs):.2f}..{max(secs):.2f})"
        cpu = statistics.median(m.cpu_s for m in values)
        zks = [m.zk_cpu_s for m in values if m.zk_cpu_s is not None]
        zk_cpu = statistics.median(zks) if zks else None
        print(
            f"{label:<72} {spread:>22} {reads:>9,} {reads / med:>9,.0f} {med / base:>11.2f} "
            f"{med / single:>12.2f} {med * scale:>13.0f} s {cpu / reads * 1e6:>17.0f} "
            f"{'-' if zk_cpu is None else format(zk_cpu / reads * 1e6, '.0f'):>9}"
        )
        figures[label] = {
            "median_s": round(med, 3),
            "min_s": round(min(secs), 3),
            "max_s": round(max(secs), 3),
            "reads": reads,
            "cpu_s": round(cpu, 2),
            "zookeeper_cpu_s": None if zk_cpu is None else round(zk_cpu, 2),
        }
    reads = runs[unlimited][0].reads
    print(
        f"\nreads per managed ledger: {reads / args.mls:.2f}; the {args.rate_limit:,.0f} reads/s limit alone "
        f"needs {reads / args.rate_limit:.1f} s here, {reads * scale / args.rate_limit:.0f} s at 1M "
        f"(1M: extrapolated linearly from {args.mls:,})"
    )
    print(
        f"the index: {summary['referenced_ledgers']:,} ledgers, {summary['offload_uuids']:,} uuids, "
        f"{index_bytes / 2**20:.0f} MiB of Python objects ({index_bytes * scale / 2**30:.2f} GiB at 1M, "
        f"extrapolated; the old index lives on while the new one is read)"
    )
    scan_s = statistics.median(m.wall_s for m in runs[limited])
    scan_cpu = statistics.median(m.cpu_s for m in runs[limited])
    for at, k in ((f"{args.mls:,}", 1.0), ("1M (extrapolated)", scale)):
        print(f"amortized at {at}: {amortized(scan_s * k, scan_cpu * k, DEFAULT_MAX_AGE_S)}")
    figures.update(
        mls=args.mls,
        znodes=created,
        write_s=round(write_s, 1),
        index_mib=round(index_bytes / 2**20, 1),
        load_average=[round(x, 1) for x in loads],
        summary=summary,
    )
    print(json.dumps(figures, indent=2))

    if args.profile:
        import cProfile
        import pstats

        reader = PipelinedReader(client, max_in_flight=window, multi_read=multi)  # the scanner's reader
        prof = cProfile.Profile()
        prof.enable()
        check(scan_references(reader, roots))
        prof.disable()
        print(
            "\nprofile of one unlimited scan_references with the scanner's reader, run in the calling "
            "thread (kazoo's connection thread is not in it):"
        )
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    client.stop()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
