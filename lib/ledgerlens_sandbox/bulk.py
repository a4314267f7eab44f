"""A large healthy cluster built fast, for benchmarks: :func:`bulk_cluster` (in memory, deterministic),
:func:`write_bulk_znodes` and :func:`generate_bulk` (written to ZooKeeper and S3).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.model import BOOKIES, CLUSTER, DAY, HOUR, MINUTE, Ledger, Offload, _Cluster, _policies
from ledgerlens_sandbox.writer import _connect, write_objects_parallel, write_znodes

BULK_NS = "bench/load"
BULK_FIRST_LEDGER = 10_000


@dataclass
class BulkCluster:
    """What :func:`bulk_cluster` builds: znodes, offload objects and the planted findings' identities."""

    nodes: dict[str, tuple[bytes, list[Any] | None]]
    objects: list[tuple[str, bytes, dict[str, str]]]
    expected: list[tuple[str, str]]  # (kind, ledger id or object key) of every finding an audit must report
    counts: dict[str, int]


def _bulk_offloaded(c: _Cluster, name: str, lid: int, ctime: int, custom: Mapping[str, str], li: Any) -> None:
    """Ledger ``lid`` of ``name`` offloaded completely (data and index objects), BookKeeper copy deleted."""
    led = Ledger(lid, 10, 10 * 256, ctime + HOUR, ctime)
    li.entries, li.size, li.timestamp = led.entries, led.size, led.timestamp_ms
    off = Offload(c.uuid(), complete=True, bookkeeper_deleted=True, timestamp_ms=ctime + 2 * HOUR)
    c.offload_context(li, off)
    c.offload_objects(name, led, c.closed_metadata(led, custom), off.uuid, data=True, index=True)


def bulk_cluster(
    *,
    root: str,
    n_ledgers: int,
    n_topics: int,
    now_ms: int,
    n_offloaded: int = 0,
    bucket: str | None = None,
    s3_endpoint: str | None = None,
    n_orphans: int = 0,
) -> BulkCluster:
    """The znodes and offload objects of :func:`generate_bulk`, built in memory (deterministic).

    ``n_offloaded`` topics (the first ones) get one more ledger before their BookKeeper ledgers:
    completely offloaded (a data and an index object in ``bucket``), its BookKeeper copy deleted.
    ``n_orphans`` > 0 plants that many ``orphan_ledger`` (BookKeeper ledgers naming the first topic's
    managed ledger, three days old, that it does not list) and, with ``bucket``, one
    ``orphan_offload_object`` (a data object of an unreferenced offload naming the second topic).
    """
    if n_topics < 1 or n_ledgers < n_topics or n_offloaded > n_topics:
        raise ValueError("need n_topics >= 1, n_ledgers >= n_topics and n_offloaded <= n_topics")
    if n_offloaded and bucket is None:
        raise ValueError("n_offloaded needs a bucket")
    root = root.rstrip("/")
    c = _Cluster(root, now_ms, bucket, s3_endpoint, True, zlib.crc32(f"bulk|{root}|{now_ms}".encode()))
    nodes = c.nodes
    ns = BULK_NS
    nodes[f"{root}/admin/policies/bench"] = (
        json.dumps({"adminRoles": [], "allowedClusters": [CLUSTER]}).encode(),
        None,
    )
    nodes[f"{root}/admin/policies/{ns}"] = (_policies(retention=(-1, -1)), None)
    ledgers_root = root + "/ledgers"
    nodes[ledgers_root + "/LAYOUT"] = (
        b"2\norg.apache.pulsar.metadata.bookkeeper.PulsarLedgerManagerFactory:1",
        None,
    )
    nodes[ledgers_root + "/INSTANCEID"] = (c.uuid().encode(), None)  # as every bookie cluster
    nodes[ledgers_root + "/available"] = (b"", None)
    per = n_ledgers // n_topics
    extra = n_ledgers % n_topics
    lid = BULK_FIRST_LEDGER
    ensemble = list(BOOKIES[:2])
    for t in range(n_topics):
        name = f"{ns}/persistent/topic-{t:05d}"
        count = per + (1 if t < extra else 0)
        custom = {
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": name.encode(),
        }
        info = mlpb.ManagedLedgerInfo()
        first = lid
        if t < n_offloaded:
            ctime = now_ms - (count + 2) * HOUR
            _bulk_offloaded(c, name, lid, ctime, c.ml_custom(name), info.ledgerInfo.add(ledgerId=lid))
            lid += 1
        for k in range(count):
            last = k == count - 1
            ctime = now_ms - (count - k) * HOUR
            md = wire.ledger_metadata(
                ensemble=ensemble,
                write_quorum=2,
                ack_quorum=2,
                length=0 if last else 1000 * 256,
                last_entry_id=-1 if last else 999,
                state="OPEN" if last else "CLOSED",
                ctime_ms=ctime,
                custom=custom,
                ctoken=lid,
            )
            nodes[wire.ledger_path(lid, ledgers_root)] = (wire.bk_metadata_v3(md), None)
            if last:
                info.ledgerInfo.add(ledgerId=lid, timestamp=0)
            else:
                info.ledgerInfo.add(ledgerId=lid, entries=1000, size=1000 * 256, timestamp=ctime + HOUR)
            lid += 1
        ml_path = f"{root}/managed-ledgers/{name}"
        nodes[ml_path] = (info.SerializeToString(), None)
        cur = mlpb.ManagedCursorInfo(
            cursorsLedgerId=-1, markDeleteLedgerId=first, markDeleteEntryId=-1, lastActive=now_ms - MINUTE
        )
        nodes[ml_path + "/reader"] = (cur.SerializeToString(), None)
    expected = _bulk_orphans(
        c, lid, n_orphans, f"{ns}/persistent/topic-{0:05d}", f"{ns}/persistent/topic-{1:05d}"
    )
    counts = {
        "bk_ledgers": n_ledgers + len([k for k, _ in expected if k == "orphan_ledger"]),
        "ml_ledgers": n_ledgers + n_offloaded,
        "managed_ledgers": n_topics,
        "cursors": n_topics,
        "offloaded": n_offloaded,
        "offload_objects": len(c.objects),
    }
    return BulkCluster(nodes, c.objects, expected, counts)


def _bulk_orphans(c: _Cluster, lid: int, n: int, ml_name: str, object_ml: str) -> list[tuple[str, str]]:
    expected: list[tuple[str, str]] = []
    if n <= 0:
        return expected
    lid += 1000
    for _ in range(n):
        c.bk_ledger(lid, ctime_ms=c.now - 3 * DAY, entries=10, size=2560, custom=c.ml_custom(ml_name))
        expected.append(("orphan_ledger", str(lid)))
        lid += 1
    if c.bucket is not None:
        led = Ledger(lid, 10, 2560, c.now - 3 * DAY + HOUR, c.now - 3 * DAY)
        before = len(c.objects)
        data_key, _ = c.offload_objects(
            object_ml, led, c.closed_metadata(led, c.ml_custom(object_ml)), c.uuid(), data=True, index=False
        )
        assert len(c.objects) == before + 1
        expected.append(("orphan_offload_object", data_key))
    return expected


def write_bulk_znodes(zk_hosts: str, nodes: Mapping[str, tuple[bytes, list[Any] | None]]) -> int:
    """Every znode of ``nodes`` (a :class:`BulkCluster`'s) written through one connection; how many."""
    client = _connect(zk_hosts)
    try:
        return write_znodes(client, nodes)
    finally:
        client.stop()
        client.close()


def generate_bulk(
    zk_hosts: str,
    *,
    root: str,
    n_ledgers: int,
    n_topics: int,
    now_ms: int,
    n_offloaded: int = 0,
    bucket: str | None = None,
    s3_endpoint: str | None = None,
    n_orphans: int = 0,
    write_objects: bool = True,
) -> dict[str, Any]:
    """A large cluster fast: ``n_ledgers`` v3 ledgers spread over ``n_topics`` managed ledgers.

    Every topic has one cursor at its first ledger (nothing consumed), infinite retention, the last
    ledger OPEN and young. ``n_offloaded``, ``bucket``, ``s3_endpoint``, ``n_orphans``: see
    :func:`bulk_cluster`; the objects are written to the bucket (it must exist) unless
    ``write_objects`` is false. Returns counts and timings, ``expected`` (the (kind, ledger id or
    object key) of every finding an audit with ``as_of_ms = now_ms`` must report) and ``objects``.
    """
    t0 = time.perf_counter()
    bulk = bulk_cluster(
        root=root,
        n_ledgers=n_ledgers,
        n_topics=n_topics,
        now_ms=now_ms,
        n_offloaded=n_offloaded,
        bucket=bucket,
        s3_endpoint=s3_endpoint,
        n_orphans=n_orphans,
    )
    t1 = time.perf_counter()
    created = write_bulk_znodes(zk_hosts, bulk.nodes)
    t2 = time.perf_counter()
    if write_objects and bucket is not None and s3_endpoint is not None and bulk.objects:
        write_objects_parallel(s3_endpoint, bucket, bulk.objects)
    t3 = time.perf_counter()
    return {
        "root": root.rstrip("/"),
        "n_ledgers": n_ledgers,
        "n_topics": n_topics,
        "n_offloaded": n_offloaded,
        "first_ledger_id": BULK_FIRST_LEDGER,
        "znodes": created,
        "offload_objects": len(bulk.objects),
        "objects": bulk.objects,
        "expected": bulk.expected,
        "counts": bulk.counts,
        "build_s": round(t1 - t0, 3),
        "write_s": round(t2 - t1, 3),
        "objects_s": round(t3 - t2, 3),
        "total_s": round(t3 - t0, 3),
        "creates_per_s": round(created / max(t2 - t1, 1e-9)),
    }
