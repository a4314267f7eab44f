"""Write a generated Pulsar cluster straight into a ZooKeeper 3.9 data directory (benchmarks only).

A ZooKeeper of 10,000,000 ledgers takes hours to fill through its API; this writes the snapshot
file ZooKeeper itself would write for the same tree (``version-2/snapshot.<zxid>``, plain, jute
encoded, Adler-32 sealed), in minutes. The tree mirrors ``sandbox.cluster.generate_bulk`` (real
paths, no chroot), plus offloads and a few planted anomalies:

- ``/ledgers``: LAYOUT, INSTANCEID, available; ``--ledgers`` v3 ledgers (hierarchical paths), each
  topic's ledgers consecutive, the last OPEN and an hour old, with Pulsar's managed-ledger custom
  metadata; then the planted orphans (closed five days ago, their managed ledger does not list them);
- ``/managed-ledgers/bench/load/persistent/topic-NNNNNNN``: ``--topics`` ManagedLedgerInfo nodes
  listing their ledgers, one cursor ``reader`` each; the first ``--offloaded`` topics also list one
  older ledger offloaded to S3 (complete, BookKeeper copy deleted, so no ledger znode);
- ``/admin/policies/bench`` (tenant) and ``bench/load`` (infinite retention, offload to the bucket),
  ``/admin/clusters/<cluster>``; ``/zookeeper``, ``/zookeeper/quota``, ``/zookeeper/config``.

The offload objects (an index and a data object per offloaded ledger, valid) are not files here:
:func:`upload_objects` writes them into an S3 bucket. Planted findings (``manifest.json``,
``expected``): ``orphan_ledger`` for each orphan and ``missing_offload_object`` for the data object
of the first offloaded ledger, which is never uploaded.

Each data directory is cached under ``~/.cache/ledgerlens/bench/`` keyed by its parameters;
``manifest.json`` is written last (a directory without it is incomplete). Usage::

    .venv/bin/python bench/zk_snapshot_writer.py --ledgers 50000 --topics 5000 --offloaded 200
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import struct
import sys
import threading
import time
import urllib.parse
import uuid as uuidlib
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.settings.config import cache_dir
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.cluster import BOOKIES, DAY, HOUR, MINUTE, _policies

NS = "bench/load"
FIRST_LEDGER = 10_000
ENTRIES, ENTRY_BYTES = 1000, 256  # each closed ledger
OFF_ENTRIES, OFF_PAYLOAD = 10, 100  # each offloaded ledger (small objects)
FORMAT = 1  # bump when the tree written changes: the cache key holds it

_I = struct.Struct(">i")
_TAIL = struct.Struct(">qqqqqiiiqq")  # ACL index, then StatPersisted
_SNAP_MAGIC = 0x5A4B534E
_OPEN_ACL = 1  # the one ACL list: world:anyone, all permissions
_FLUSH = 8 << 20


@dataclass(frozen=True)
class Params:
    """What a generated data directory holds (its cache key)."""

    ledgers: int = 10_000_000
    topics: int = 1_000_000
    offloaded: int = 20_000
    orphans: int = 5
    bucket: str = "ledgerlens-bench"
    cluster: str = "bench"
    seed: int = 45

    def key(self) -> str:
        return (
            f"zksnap-v{FORMAT}-{self.ledgers}l-{self.topics}t-{self.offloaded}o-{self.orphans}x"
            f"-{self.bucket}-{self.cluster}-{self.seed}"
        )

    def topic(self, t: int) -> str:
        return f"{NS}/persistent/topic-{t:07d}"


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_LEN = [_varint(i) for i in range(1 << 14)]  # varints of lengths, looked up


class _Snapshot:
    """A snapshot being written: records go into a buffer that is sealed and flushed in big writes."""

    def __init__(self, out: IO[bytes], now: int) -> None:
        self.out = out
        self.now = now
        self.adler = 1
        self.parts: list[bytes] = []
        self.size = 0
        self.zxid = 0
        self.nodes = 0
        self.bytes = 0

    def raw(self, b: bytes) -> None:
        self.parts.append(b)
        self.size += len(b)
        if self.size >= _FLUSH:
            self.flush()

    def flush(self) -> None:
        data = b"".join(self.parts)
        self.adler = zlib.adler32(data, self.adler)
        self.out.write(data)
        self.bytes += len(data)
        self.parts, self.size = [], 0

    def node(self, path: str, data: bytes = b"", ctime: int | None = None) -> None:
        """One node record: path, data, ACL index and a stat as ZooKeeper's of a plain create."""
        self.zxid += 1
        self.nodes += 1
        z = self.zxid
        t = self.now if ctime is None else ctime
        p = path.encode()
        self.parts += (
            _I.pack(len(p)),
            p,
            _I.pack(len(data)),
            data,
            _TAIL.pack(_OPEN_ACL, z, z, t, t, 0, 0, 0, 0, z),
        )
        self.size += 80 + len(p) + len(data)
        if self.size >= _FLUSH:
            self.flush()

    def append_file(self, path: Path) -> None:
        """Append the records another ``_Snapshot`` wrote to ``path`` (its own flushes, no header)."""
        self.flush()
        with path.open("rb") as f:
            while chunk := f.read(_FLUSH):
                self.adler = zlib.adler32(chunk, self.adler)
                self.out.write(chunk)
                self.bytes += len(chunk)


def _string(s: str) -> bytes:
    b = s.encode()
    return _I.pack(len(b)) + b


def _header() -> bytes:
    """Magic, version 2, dbid -1; no sessions; the ACL cache with one list (index 1: world:anyone)."""
    head = struct.pack(">iiq", _SNAP_MAGIC, 2, -1) + _I.pack(0)
    acl = _I.pack(1) + struct.pack(">q", _OPEN_ACL) + _I.pack(1) + _I.pack(31) + _string("world")
    return head + acl + _string("anyone")


# -- the BookKeeper ledger metadata, from templates --------------------------------------------------
class _LedgerTemplates:
    """v3 ledger metadata bytes: the serialized fields before ``ctime`` (closed or open), then
    ``ctime``, the custom metadata (per managed ledger) and ``cToken`` (fields in number order, as
    protobuf writes them)."""

    def __init__(self) -> None:
        ensemble = list(BOOKIES[:2])
        self.closed = self._head(ensemble, ENTRIES * ENTRY_BYTES, ENTRIES - 1, "CLOSED")
        self.open = self._head(ensemble, 0, -1, "OPEN")
        self.header = wire.bk_header(3)

    @staticmethod
    def _head(ensemble: list[str], length: int, last: int, state: str) -> bytes:
        md = wire.ledger_metadata(
            ensemble=ensemble, write_quorum=2, ack_quorum=2, length=length, last_entry_id=last, state=state
        )
        return md.SerializeToString()

    @staticmethod
    def custom(ml: str, component: str = "managed-ledger") -> bytes:
        md = bk.LedgerMetadataFormat()
        for k, v in (("application", "pulsar"), ("component", component), ("pulsar/managed-ledger", ml)):
            md.customMetadata.add(key=k, value=v.encode())
        return md.SerializePartialToString()

    def encode(self, head: bytes, ctime: int, custom: bytes, ctoken: int) -> bytes:
        body = b"".join((head, b"\x50", _varint(ctime), custom, b"\x60", _varint(ctoken)))
        return self.header + _LEN[len(body)] + body


def _ledger_path(lid: int) -> tuple[str, str, str]:
    """(level-1 dir, level-2 dir, leaf) of a ledger id below 2**31 (``wire.short_ledger_path``)."""
    s = f"{lid:010d}"
    l1 = "/ledgers/" + s[0:2]
    l2 = l1 + "/" + s[2:6]
    return l1, l2, l2 + "/L" + s[6:10]


# -- the tree ------------------------------------------------------------------------------------------
@dataclass
class _Offload:
    topic: int
    ledger_id: int
    uuid: str
    ctime: int
    timestamp: int
    offloaded_at: int


def _offloads(p: Params, now: int) -> list[_Offload]:
    rng = random.Random(p.seed)
    out = []
    for t in range(p.offloaded):
        ctime = now - 40 * DAY + t * MINUTE // 100
        u = str(uuidlib.UUID(int=rng.getrandbits(128), version=4))
        out.append(_Offload(t, FIRST_LEDGER + t, u, ctime, ctime + HOUR, ctime + 6 * HOUR))
    return out


def _driver_metadata(bucket: str) -> mlpb.OffloadDriverMetadata:
    dm = mlpb.OffloadDriverMetadata(name="aws-s3")
    for k, v in (
        ("managedLedgerOffloadDriver", "aws-s3"),
        ("bucket", bucket),
        ("region", "us-east-1"),
        ("serviceEndpoint", ""),
    ):
        dm.properties.add(key=k, value=v)
    return dm


def _offload_info(o: _Offload, bucket: str) -> bytes:
    """The ``ledgerInfo`` field (one repeated entry) of an offloaded ledger."""
    info = mlpb.ManagedLedgerInfo()
    li = info.ledgerInfo.add(
        ledgerId=o.ledger_id, entries=OFF_ENTRIES, size=OFF_ENTRIES * OFF_PAYLOAD, timestamp=o.timestamp
    )
    msb, lsb = wire.uuid_bits(o.uuid)
    oc = li.offloadContext
    oc.uidMsb, oc.uidLsb, oc.complete, oc.bookkeeperDeleted, oc.timestamp = (
        msb,
        lsb,
        True,
        True,
        o.offloaded_at,
    )
    oc.driverMetadata.CopyFrom(_driver_metadata(bucket))
    return info.SerializeToString()


def _closed_info(lid: int, ts: int) -> bytes:
    body = b"\x08" + _varint(lid) + b"\x10\xe8\x07\x18\x80\xd0\x0f\x20" + _varint(ts)
    return b"\x0a" + _LEN[len(body)] + body


def _open_info(lid: int) -> bytes:
    body = b"\x08" + _varint(lid) + b"\x20\x00"
    return b"\x0a" + _LEN[len(body)] + body


def _cursor(first: int, now: int) -> bytes:
    cur = mlpb.ManagedCursorInfo(
        cursorsLedgerId=-1, markDeleteLedgerId=first, markDeleteEntryId=-1, lastActive=now - MINUTE
    )
    return cur.SerializeToString()


def _fixed_nodes(p: Params, now: int) -> Iterator[tuple[str, bytes]]:
    """The nodes before the ledgers: ZooKeeper's own, /admin, the ledgers root and its layout nodes."""
    yield "", b""
    yield "/zookeeper", b""
    yield "/zookeeper/quota", b""
    yield "/zookeeper/config", b""
    yield "/admin", b""
    yield "/admin/clusters", b""
    yield f"/admin/clusters/{p.cluster}", json.dumps({"serviceUrl": "http://127.0.0.1:8080"}).encode()
    yield "/admin/policies", b""
    yield "/admin/policies/bench", json.dumps({"adminRoles": [], "allowedClusters": [p.cluster]}).encode()
    pol = _policies(retention=(-1, -1), offload_lag_ms=HOUR, bucket=p.bucket, endpoint="")
    yield f"/admin/policies/{NS}", pol
    yield "/ledgers", b""
    yield "/ledgers/LAYOUT", b"2\norg.apache.pulsar.metadata.bookkeeper.PulsarLedgerManagerFactory:1"
    yield "/ledgers/INSTANCEID", str(uuidlib.UUID(int=p.seed, version=4)).encode()
    yield "/ledgers/available", b""


def write_snapshot(p: Params, data_dir: Path, now: int) -> dict[str, Any]:
    """Write ``data_dir/version-2/snapshot.<zxid>``; returns counts and the planted findings."""
    if p.ledgers < p.topics or p.topics < max(1, p.offloaded) or p.topics > 10_000_000:
        raise ValueError("need ledgers >= topics >= offloaded, topics <= 10,000,000")
    v2 = data_dir / "version-2"
    v2.mkdir(parents=True, exist_ok=True)
    tmp_main, tmp_ml = v2 / "snapshot.tmp", v2 / "ml-nodes.tmp"
    tpl = _LedgerTemplates()
    offloads = _offloads(p, now)
    t0 = time.perf_counter()
    with tmp_main.open("wb", buffering=0) as fm, tmp_ml.open("wb", buffering=0) as fl:
        snap, mls = _Snapshot(fm, now), _Snapshot(fl, now)
        snap.raw(_header())
        for path, data in _fixed_nodes(p, now):
            snap.node(path, data)
        for path in ("/managed-ledgers", "/managed-ledgers/bench", f"/managed-ledgers/{NS}"):
            mls.node(path)
        mls.node(f"/managed-ledgers/{NS}/persistent")
        dirs: tuple[str, str] = ("", "")

        def ledger(lid: int, data: bytes, ctime: int) -> None:
            nonlocal dirs
            l1, l2, leaf = _ledger_path(lid)
            if l2 != dirs[1]:
                if l1 != dirs[0]:
                    snap.node(l1)
                snap.node(l2)
                dirs = (l1, l2)
            snap.node(leaf, data, ctime)

        per, extra = divmod(p.ledgers, p.topics)
        lid = FIRST_LEDGER + p.offloaded
        closed, opened, enc = tpl.closed, tpl.open, tpl.encode
        for t in range(p.topics):
            name = p.topic(t)
            custom = tpl.custom(name)
            count = per + (1 if t < extra else 0)
            infos = [_offload_info(offloads[t], p.bucket)] if t < p.offloaded else []
            first = lid
            for k in range(count - 1):
                ctime = now - (count - k) * HOUR
                ledger(lid, enc(closed, ctime, custom, lid), ctime)
                infos.append(_closed_info(lid, ctime + HOUR))
                lid += 1
            ledger(lid, enc(opened, now - HOUR, custom, lid), now - HOUR)
            infos.append(_open_info(lid))
            lid += 1
            ml_path = f"/managed-ledgers/{name}"
            mls.node(ml_path, b"".join(infos), now - HOUR)
            mls.node(ml_path + "/reader", _cursor(first, now), now - MINUTE)
        expected = _orphans(p, lid, now, ledger, tpl)
        mls.flush()
        snap.zxid += mls.zxid
        snap.nodes += mls.nodes
        snap.append_file(tmp_ml)
        snap.raw(_string("/"))
        snap.flush()
        fm.write(struct.pack(">q", snap.adler) + _string("/"))
    tmp_ml.unlink()
    final = v2 / f"snapshot.{snap.zxid:x}"
    os.replace(tmp_main, final)
    missing = offloads[0] if offloads else None
    if missing is not None:
        expected.append(
            {
                "kind": "missing_offload_object",
                "severity": "critical",
                "ledger_id": missing.ledger_id,
                "managed_ledger": p.topic(missing.topic),
                "object_key": wire.offload_data_key(missing.uuid, missing.ledger_id),
            }
        )
    return {
        "snapshot": final.name,
        "znodes": snap.nodes,
        "snapshot_bytes": final.stat().st_size,
        "bk_ledgers": p.ledgers + p.orphans,
        "managed_ledgers": p.topics,
        "cursors": p.topics,
        "offloaded_ledgers": p.offloaded,
        "offload_objects": 2 * p.offloaded - (1 if missing else 0),
        "write_s": round(time.perf_counter() - t0, 1),
        "expected": expected,
        "offloads": [asdict(o) for o in offloads],
    }


def _orphans(p: Params, lid: int, now: int, ledger: Any, tpl: _LedgerTemplates) -> list[dict[str, Any]]:
    """The planted orphan ledgers (after every other ledger); their expected findings."""
    out = []
    old = now - 5 * DAY
    for i in range(p.orphans):
        ml = p.topic(0) if i == 0 else f"{NS}/persistent/deleted-topic-{i}"
        ledger(lid, tpl.encode(tpl.closed, old, tpl.custom(ml), lid), old)
        out.append(
            {
                "kind": "orphan_ledger",
                "severity": "warning",
                "ledger_id": lid,
                "managed_ledger": ml,
                "object_key": None,
            }
        )
        lid += 1
    return out


# -- S3 -------------------------------------------------------------------------------------------------
def _objects(p: Params, manifest: dict[str, Any]) -> Iterator[tuple[str, bytes, dict[str, str]]]:
    """Every offload object of the cluster (the first offload's data object is planted missing)."""
    entries = [
        (i, wire.pulsar_entry(bytes([i % 251]) * (OFF_PAYLOAD - 40), sequence_id=i))
        for i in range(OFF_ENTRIES)
    ]
    blob, idx = wire.offload_data_object(entries, max_block_size=4096)
    for n, o in enumerate(manifest["offloads"]):
        ml = p.topic(o["topic"])
        md = wire.ledger_metadata(
            ensemble=list(BOOKIES[:2]),
            write_quorum=2,
            ack_quorum=2,
            length=OFF_ENTRIES * OFF_PAYLOAD,
            last_entry_id=OFF_ENTRIES - 1,
            ctime_ms=o["ctime"],
            custom={"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": ml},
        )
        if n:
            meta = wire.offload_user_metadata("data", ml, cluster=p.cluster)
            yield wire.offload_data_key(o["uuid"], o["ledger_id"]), blob, meta
        meta = wire.offload_user_metadata("index", ml, cluster=p.cluster)
        yield (
            wire.offload_index_key(o["uuid"], o["ledger_id"]),
            wire.offload_index_v1(md, idx, len(blob)),
            meta,
        )


def upload_objects(endpoint: str, p: Params, manifest: dict[str, Any], threads: int = 8) -> int:
    """Create the bucket and PUT every offload object over plain HTTP (the local S3 server checks
    no signature), ``threads`` connections at once; returns the count."""
    url = urllib.parse.urlsplit(endpoint)
    local = threading.local()

    def request(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}")

    request("PUT", f"/{p.bucket}")

    def put(obj: tuple[str, bytes, dict[str, str]]) -> None:
        meta = {f"x-amz-meta-{k}": v for k, v in obj[2].items()}
        request("PUT", f"/{p.bucket}/{urllib.parse.quote(obj[0])}", obj[1], meta)

    with ThreadPoolExecutor(threads) as pool:
        return sum(1 for _ in pool.map(put, _objects(p, manifest)))


# -- the cache ------------------------------------------------------------------------------------------
def ensure(
    p: Params, *, reuse: bool, root: Path | None = None, log: Any = print
) -> tuple[Path, dict[str, Any]]:
    """The data directory of ``p`` (generated unless ``reuse`` finds it complete) and its manifest."""
    where = (root or cache_dir() / "bench") / p.key()
    manifest_path = where / "manifest.json"
    if reuse and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        log(f"reusing {where} ({manifest['znodes']:,} znodes, generated in {manifest['write_s']} s)")
        return where / "data", manifest
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    now = (int(time.time() * 1000) // MINUTE) * MINUTE
    log(f"writing {p.ledgers:,} ledgers / {p.topics:,} topics as a ZooKeeper snapshot under {where}")
    manifest = write_snapshot(p, where / "data", now)
    manifest.update(now_ms=now, params=asdict(p))
    manifest_path.write_text(json.dumps(manifest))
    mib = manifest["snapshot_bytes"] / 2**20
    log(f"wrote {manifest['znodes']:,} znodes ({mib:,.0f} MiB) in {manifest['write_s']} s")
    return where / "data", manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = Params()
    ap.add_argument("--ledgers", type=int, default=d.ledgers)
    ap.add_argument("--topics", type=int, default=d.topics)
    ap.add_argument("--offloaded", type=int, default=d.offloaded)
    ap.add_argument("--orphans", type=int, default=d.orphans)
    ap.add_argument("--reuse", action="store_true", help="keep a complete cached data directory")
    args = ap.parse_args(argv)
    p = Params(args.ledgers, args.topics, args.offloaded, args.orphans)
    data_dir, _ = ensure(p, reuse=args.reuse)
    print(data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
