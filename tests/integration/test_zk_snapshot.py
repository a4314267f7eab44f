"""The ZooKeeper snapshot source against real ZooKeeper data directories.

A real ZooKeeper 3.9 server with a small ``snapCount`` writes snapshots (plain, gzip, snappy) and
transaction logs while a generated cluster is written into it; the snapshot source must rebuild the
same tree (replaying the logs after the newest snapshot, or up to ``--zk-until``), give the same
findings as the live scan, and refuse damaged files with the file and offset in the message.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens.audit import pipeline
from ledgerlens.errors import DecodeError, LedgerLensError
from ledgerlens.formats import zkdata
from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens.sources.stores import Stores
from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot, find_files
from ledgerlens_sandbox.cluster import default_now_ms
from ledgerlens_sandbox.servers import ZooKeeperServer

pytestmark = [pytest.mark.integration]

NOW_MS = default_now_ms()


def _kazoo(hosts: str) -> Any:
    from kazoo.client import KazooClient

    c = KazooClient(hosts=hosts, timeout=30)
    c.start(timeout=30)
    return c


@pytest.fixture(scope="module", params=["", "gz", "snappy"])
def zk_server(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper taking a snapshot every few dozen transactions, with the given compression."""
    server = ZooKeeperServer(
        tmp_path_factory.mktemp(f"zk-snap-{request.param or 'plain'}"),
        snap_count=40,
        snapshot_compression=request.param,
    )
    try:
        server.start(timeout=60)
    except LedgerLensError as e:
        pytest.fail(f"ZooKeeper did not start: {e}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def changes(zk_server: ZooKeeperServer) -> dict[str, Any]:
    """Creates, updates, deletes, a multi and an ACL change, spread over several snapshots and logs."""
    from kazoo.security import make_acl

    c = _kazoo(zk_server.hosts)
    root = f"/r-{uuid.uuid4().hex[:6]}"
    try:
        for i in range(200):
            c.create(f"{root}/n{i:03d}", b"v%d" % i, makepath=True)
        mid = c.get(f"{root}/n199")[1].mzxid
        c.set(f"{root}/n001", b"changed")
        c.delete(f"{root}/n002")
        t = c.transaction()
        t.create(f"{root}/multi", b"m")
        t.set_data(f"{root}/n003", b"mm")
        t.delete(f"{root}/n004")
        t.commit()
        c.create(f"{root}/locked", b"secret", acl=[make_acl("world", "anyone", read=False, write=True)])
        c.set_acls(f"{root}/n005", [make_acl("world", "anyone", read=False, write=True, admin=True)])
        last = c.get(f"{root}/multi")[1].mzxid
    finally:
        c.stop()
        c.close()
    expected = {f"{root}/n{i:03d}": b"v%d" % i for i in range(200)}
    expected.update({f"{root}/n001": b"changed", f"{root}/n002": None, f"{root}/n003": b"mm"})
    expected.update({f"{root}/n004": None, f"{root}/multi": b"m"})
    return {"root": root, "expected": expected, "mid_zxid": mid, "last_zxid": last}


def test_the_running_servers_files_rebuild_the_tree(
    zk_server: ZooKeeperServer, changes: dict[str, Any]
) -> None:
    from kazoo.exceptions import NoAuthError

    snaps, logs = find_files(str(zk_server.data_dir))
    assert len(snaps) >= 2 and logs  # several snapshots were taken while writing
    suffix = {"": "", "gz": ".gz", "snappy": ".snappy"}[zk_server.snapshot_compression]
    assert snaps[-1][1].endswith(f"snapshot.{snaps[-1][0]:x}{suffix}")
    src = ZooKeeperSnapshot(str(zk_server.data_dir), ledgers_root=changes["root"], provides=("bk_ledgers",))
    got = src.reads().get_many([*changes["expected"], f"{changes['root']}/locked", f"{changes['root']}/n005"])
    assert isinstance(got.pop(f"{changes['root']}/locked"), NoAuthError)  # what the live scan sees
    assert isinstance(got.pop(f"{changes['root']}/n005"), NoAuthError)  # setACL replayed
    assert got == {k: v for k, v in changes["expected"].items() if not k.endswith("/n005")}
    plan = src.prepare()
    assert plan.last_zxid >= changes["last_zxid"] and plan.replayed > 0

    # the state at an earlier zxid: the later changes are not there
    past = ZooKeeperSnapshot(
        str(zk_server.data_dir),
        until=hex(changes["mid_zxid"]),
        ledgers_root=changes["root"],
        provides=("bk_ledgers",),
    )
    before = past.reads().get_many(
        [f"{changes['root']}/n001", f"{changes['root']}/n002", f"{changes['root']}/multi"]
    )
    assert before == {
        f"{changes['root']}/n001": b"v1",
        f"{changes['root']}/n002": b"v2",
        f"{changes['root']}/multi": None,
    }
    assert past.prepare().last_zxid == changes["mid_zxid"]


def test_a_pinned_store_reads_the_state_its_plan_read(
    zk_server: ZooKeeperServer, changes: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-verification reads a snapshot store pinned to the state the inventory read: the same plan,
    not a second pass over the snapshot while the files are unchanged; and that state, not a newer
    one, once the server has written more (the pinned store then makes its plan at that zxid)."""
    if zk_server.snapshot_compression:
        pytest.skip("pinning does not depend on the compression")
    copy = tmp_path / "data"
    shutil.copytree(zk_server.data_dir, copy)
    src = ZooKeeperSnapshot(str(copy), ledgers_root=changes["root"], provides=("bk_ledgers",))
    plan = src.prepare()
    real_prepare = ZooKeeperSnapshot._prepare

    def no_second_pass(self: ZooKeeperSnapshot) -> Any:
        raise AssertionError(f"a second plan of {self.data_dir} (until {self.until!r})")

    monkeypatch.setattr(ZooKeeperSnapshot, "_prepare", no_second_pass)
    pinned = src.pinned()
    assert pinned.until == hex(plan.last_zxid) and pinned.prepare() is plan
    n001 = f"{changes['root']}/n001"
    assert pinned.reads().get_many([n001]) == {n001: b"changed"}

    # the server writes on; its newer log reaches the copy: the pin stays at the inventory's state
    c = _kazoo(zk_server.hosts)
    try:
        c.set(n001, b"after the inventory")
    finally:
        c.stop()
        c.close()
    for _, log in find_files(str(zk_server.data_dir))[1]:
        shutil.copy(log, copy / "version-2" / os.path.basename(log))
    monkeypatch.setattr(ZooKeeperSnapshot, "_prepare", real_prepare)
    later = src.pinned()
    assert later.until == hex(plan.last_zxid)
    assert later.reads().get_many([n001]) == {n001: b"changed"}
    assert src.reads().get_many([n001]) == {n001: b"after the inventory"}  # unpinned: the newest state
    c = _kazoo(zk_server.hosts)
    try:
        c.set(n001, b"changed")  # as the module's other tests expect it
    finally:
        c.stop()
        c.close()


def test_damaged_files_name_the_file_and_offset(
    zk_server: ZooKeeperServer, changes: dict[str, Any], tmp_path: Path
) -> None:
    if zk_server.snapshot_compression:
        pytest.skip("byte-level damage is checked on the uncompressed files")  # gz/snappy: their own checks
    copy = tmp_path / "data"
    shutil.copytree(zk_server.data_dir, copy)
    snaps, logs = find_files(str(copy))
    snap = snaps[-1][1]
    size = os.path.getsize(snap)
    # truncated snapshot
    with open(snap, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(DecodeError, match=rf"{os.path.basename(snap)} offset \d+: truncated"):
        list(zkdata.SnapshotReader(snap).nodes())
    # with no older snapshot to fall back to (see the test below), it is an error naming the file
    only = tmp_path / "only"
    shutil.copytree(copy, only)
    for _, older in find_files(str(only))[0][:-1]:
        os.remove(older)
    with pytest.raises(LedgerLensError, match=rf"{os.path.basename(snap)} offset \d+: truncated"):
        ZooKeeperSnapshot(str(only), ledgers_root=changes["root"], provides=("bk_ledgers",)).prepare()
    # a flipped byte inside node data: the checksum catches it, and damage is never skipped over
    shutil.copy(zk_server.data_dir / "version-2" / os.path.basename(snap), snap)
    data = bytearray(Path(snap).read_bytes())
    at = data.find(changes["root"].encode() + b"/n")
    assert at > 0
    data[at + 3] ^= 0x01
    Path(snap).write_bytes(bytes(data))
    with pytest.raises(DecodeError, match="checksum mismatch.*corrupt"):
        list(zkdata.SnapshotReader(snap).nodes())
    with pytest.raises(LedgerLensError, match=rf"{os.path.basename(snap)} offset \d+: checksum mismatch"):
        ZooKeeperSnapshot(str(copy), ledgers_root=changes["root"], provides=("bk_ledgers",)).prepare()
    # wrong magic
    Path(snap).write_bytes(b"XXXX" + bytes(data[4:]))
    with pytest.raises(DecodeError, match=r"offset 0: not a ZooKeeper snapshot"):
        list(zkdata.SnapshotReader(snap).nodes())
    # a corrupt record in a transaction log
    log = logs[-1][1]
    raw = bytearray(Path(log).read_bytes())
    raw[40] ^= 0xFF
    Path(log).write_bytes(bytes(raw))
    with pytest.raises(DecodeError, match=rf"{os.path.basename(log)} offset 16: .*(checksum|corrupt)"):
        list(zkdata.read_log(log))


def test_an_unfinished_newest_snapshot_gives_way_to_the_one_before(
    zk_server: ZooKeeperServer, changes: dict[str, Any], tmp_path: Path
) -> None:
    """ZooKeeper writes a snapshot in place, in the background: in a running server's dataDir the
    newest file can end early. Like ZooKeeper, the source then rebuilds the tree from the snapshot
    before it and the logs, and says which file it skipped (plain, gzip and snappy)."""
    from kazoo.exceptions import NoAuthError

    copy = tmp_path / "data"
    shutil.copytree(zk_server.data_dir, copy)
    snaps, _ = find_files(str(copy))
    snap = snaps[-1][1]
    with open(snap, "r+b") as f:
        f.truncate(os.path.getsize(snap) * 2 // 3)
    src = ZooKeeperSnapshot(str(copy), ledgers_root=changes["root"], provides=("bk_ledgers",))
    plan = src.prepare()
    assert plan.snapshot == snaps[-2][1] and plan.last_zxid >= max(snaps[-1][0], changes["last_zxid"])
    assert plan.skipped.startswith(f"{os.path.basename(snap)}: ended early (ZooKeeper may still be writing")
    assert src.describe()["skipped_snapshot"] == plan.skipped
    got = src.reads().get_many(changes["expected"])
    assert isinstance(got.pop(f"{changes['root']}/n005"), NoAuthError)
    assert got == {k: v for k, v in changes["expected"].items() if not k.endswith("/n005")}
    # the state at a point in time (every snapshot a candidate): the unfinished one is passed over too
    now_ms = str(int(time.time() * 1000))
    at = ZooKeeperSnapshot(str(copy), until=now_ms, ledgers_root=changes["root"], provides=("bk_ledgers",))
    assert at.prepare().snapshot != snap and at.prepare().skipped == plan.skipped
    got = at.reads().get_many(changes["expected"])
    assert isinstance(got.pop(f"{changes['root']}/n005"), NoAuthError)
    assert got == {k: v for k, v in changes["expected"].items() if not k.endswith("/n005")}
    # without the logs that reach the unfinished snapshot's zxid, nothing holds that state: an error
    for _, log in find_files(str(copy))[1]:
        os.remove(log)
    with pytest.raises(LedgerLensError, match=rf"{os.path.basename(snap)} ends early .* before its zxid"):
        ZooKeeperSnapshot(str(copy), ledgers_root=changes["root"], provides=("bk_ledgers",)).prepare()


def test_a_past_state_never_holds_a_later_change(
    zk_server: ZooKeeperServer, changes: dict[str, Any], tmp_path: Path
) -> None:
    """ZooKeeper writes a snapshot while it works: the file named zxid X can hold changes made after
    X. Here the newest snapshot is renamed to an earlier zxid ``u``, so it holds nodes created after
    ``u``: the state at ``u`` must not show them (an older snapshot plus the logs is the base)."""
    if zk_server.snapshot_compression:
        pytest.skip("the choice of the base snapshot does not depend on the compression")
    copy = tmp_path / "data"
    shutil.copytree(zk_server.data_dir, copy)
    snaps, _ = find_files(str(copy))
    (older, _), (newest, newest_path) = snaps[-2], snaps[-1]
    c = _kazoo(zk_server.hosts)
    try:
        created = {  # the n### nodes: created in order, world-readable but n005 (its ACL changed)
            f"{changes['root']}/{n}": c.exists(f"{changes['root']}/{n}").czxid
            for n in c.get_children(changes["root"])
            if n.startswith("n") and n != "n005"
        }
    finally:
        c.stop()
        c.close()
    late = sorted((z, p) for p, z in created.items() if older + 2 <= z <= newest)
    assert late, f"no node created between the last two snapshots ({older:#x}, {newest:#x}]"
    zxid, path = late[0]
    u = zxid - 1
    os.rename(newest_path, os.path.join(os.path.dirname(newest_path), f"snapshot.{u:x}"))
    past = ZooKeeperSnapshot(str(copy), until=hex(u), ledgers_root=changes["root"], provides=("bk_ledgers",))
    assert past.reads().get_many([path]) == {path: None}
    assert past.prepare().snapshot_zxid == older
    now = ZooKeeperSnapshot(
        str(copy), until=hex(zxid), ledgers_root=changes["root"], provides=("bk_ledgers",)
    )
    assert now.reads().get_many([path]) == {path: changes["expected"][path]}


@pytest.mark.spark
def test_snapshot_and_live_scan_give_identical_findings(
    zk_server: ZooKeeperServer, s3_server: Any, spark: Any, tmp_path: Path
) -> None:
    if zk_server.snapshot_compression:
        pytest.skip("one compression is enough for the whole audit; the others are checked above")
    cluster = generated_cluster(zk_server, s3_server, "snap", now_ms=NOW_MS)
    hosts, truth = cluster["hosts"], cluster["truth"]
    s3 = S3Source(bucket=cluster["bucket"], endpoint_url=s3_server.endpoint_url)
    cfg = AuditConfig(as_of_ms=NOW_MS)
    live = pipeline.run(
        spark, ZooKeeperSource(hosts=hosts, rate_limit=50_000), s3, cfg, tmp_path / "live", progress=False
    )
    stores = Stores.from_options(hosts, source="zk-snapshot", zk_data_dir=str(zk_server.data_dir))
    snap = pipeline.run(spark, None, s3, cfg, tmp_path / "snap", progress=False, stores=stores)

    def keys(run: pipeline.AuditRun) -> list[tuple[Any, ...]]:
        rows = run.findings_pandas().to_dict("records")
        return sorted((tuple(None if r[k] != r[k] else r[k] for k in FINDING_KEYS) for r in rows), key=repr)

    assert keys(snap) == keys(live)
    assert len(keys(live)) == len(truth.expected)
    for t in (
        "bk_ledgers",
        "managed_ledgers",
        "ml_ledgers",
        "cursors",
        "schema_ledgers",
        "namespace_policies",
    ):
        assert snap.summary["inventory_counts"][t] == live.summary["inventory_counts"][t], t
    src = snap.summary["sources"]["bookkeeper"]
    assert src["kind"] == "zk-snapshot" and src["snapshot"].startswith("snapshot.")
    assert int(src["last_zxid"], 16) >= int(src["snapshot_zxid"], 16)
