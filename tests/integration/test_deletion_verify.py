"""The deleter's live re-verification, rule by rule, against a real ZooKeeper and S3 server.

Each case starts from approved orphans (real wire formats) and changes one thing in the live
stores the way a broker or another cluster would: the verdict must keep the ledger or object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from ledgerlens.deletion import verify as v
from ledgerlens.deletion.actions.delete_ledger import verify_ledgers
from ledgerlens.deletion.actions.delete_object import verify_objects
from ledgerlens.deletion.plan import build_plan
from ledgerlens.formats.paths import ledger_path
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.proto import schema_storage_pb2 as sspb
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.orphans import audit_output, fabricate

pytestmark = pytest.mark.integration

ML = "ll-app/ns/persistent/topic"


def _plan(tmp: Path, zk: Any, s3: Any, bucket: str, **kw: Any) -> dict[str, Any]:
    orphans = fabricate(zk, s3, bucket, managed_ledger=ML, cluster="ours", **kw)
    out = audit_output(
        tmp / "audit",
        zk,
        s3,
        bucket,
        ledger_ids=orphans.ledger_ids,
        object_keys=orphans.object_keys,
        tenants=["ll-app"],
    )
    return build_plan(out)


def test_ledger_verdicts(chroot_zk: Any, s3_server: Any, bucket: str, tmp_path: Path) -> None:
    zk = chroot_zk
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    plan = _plan(tmp_path, zk, s3, bucket, ledgers=9, first_id=1000)
    items = [i for i in plan["items"] if i["action"] == "delete_ledger"]
    ids = [i["expected"]["ledger_id"] for i in items]
    zk.ensure_path("/admin/policies/ll-app")
    # 1000: referenced by the managed ledger's list; 1001: a cursor's cursor ledger; 1002: the
    # __compaction cursor's CompactedTopicLedger; 1003: a delayed-bucket cursor property; 1004: the
    # schema locator; 1005: metadata rewritten (znode version moved); 1006: deleted already;
    # 1007: unreferenced (deletable); 1008: unreferenced too, but its tenant then vanishes
    info = mlpb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=ids[0], entries=10, size=100, timestamp=1)
    zk.create(f"/managed-ledgers/{ML}", info.SerializeToString(), makepath=True)
    cur = mlpb.ManagedCursorInfo(cursorsLedgerId=ids[1], markDeleteLedgerId=ids[0], markDeleteEntryId=1)
    zk.create(f"/managed-ledgers/{ML}/sub", cur.SerializeToString())
    comp = mlpb.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=ids[0], markDeleteEntryId=1)
    comp.properties.add(name="CompactedTopicLedger", value=ids[2])
    zk.create(f"/managed-ledgers/{ML}/__compaction", comp.SerializeToString())
    bucket_cur = mlpb.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=ids[0], markDeleteEntryId=1)
    bucket_cur.cursorProperties.add(name="#pulsar.internal.delayed.bucket_1_2", value=str(ids[3]))
    zk.create(f"/managed-ledgers/{ML}/delayed", bucket_cur.SerializeToString())
    loc = sspb.SchemaLocator()
    loc.info.version, loc.info.position.ledgerId, loc.info.position.entryId, loc.info.hash = (
        0,
        ids[4],
        0,
        b"h",
    )
    zk.create("/schemas/ll-app/ns/topic", loc.SerializeToString(), makepath=True)
    data, stat = zk.get(ledger_path(ids[5]))
    zk.set(ledger_path(ids[5]), data, version=stat.version)
    zk.delete(ledger_path(ids[6]))

    reader = v.LiveReader(zk, zk)
    got = [verdict for verdict, _ in verify_ledgers(items, reader)]
    assert [g.decision for g in got] == [
        v.IN_USE,
        v.IN_USE,
        v.IN_USE,
        v.IN_USE,
        v.IN_USE,
        v.MISMATCH,
        v.ALREADY_GONE,
        v.DELETE,
        v.DELETE,
    ]
    assert "schema locator" in got[4].reason and "znode version" in got[5].reason

    zk.delete("/admin/policies/ll-app")
    got = [verdict for verdict, _ in verify_ledgers(items[7:], reader)]
    assert [g.decision for g in got] == [v.MISMATCH, v.MISMATCH] and "another cluster" in got[0].reason
    got = [verdict for verdict, _ in verify_ledgers(items[7:], reader, deleted_tenants=["ll-app"])]
    assert [g.decision for g in got] == [v.DELETE, v.DELETE]  # an approved deleted tenant

    # custom metadata rewritten in place (same length of history, different owner): a forged ledger
    zk.ensure_path("/admin/policies/ll-app")
    md = wire.ledger_metadata(
        ensemble=["b:3181"],
        write_quorum=1,
        ack_quorum=1,
        length=1,
        last_entry_id=0,
        custom={"application": "pulsar", "pulsar/managed-ledger": "x/y/persistent/z"},
    )
    zk.delete(ledger_path(ids[8]))
    zk.create(ledger_path(ids[8]), wire.bk_metadata(md, 3))
    got = [verdict for verdict, _ in verify_ledgers(items[8:], reader)]
    assert got[0].decision == v.MISMATCH and "custom metadata" in got[0].reason


def test_object_verdicts(chroot_zk: Any, s3_server: Any, bucket: str, tmp_path: Path) -> None:
    zk = chroot_zk
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    plan = _plan(tmp_path, zk, s3, bucket, ledgers=0, copies=5, first_id=2000)
    items = [i for i in plan["items"] if i["action"] == "delete_object"]
    zk.ensure_path("/admin/policies/ll-app")
    # 0: referenced by its managed ledger's offload context; 1: data object rewritten (ETag moves);
    # 2: gone already; 3: the only copy of its ledger's data (no BookKeeper copy) while its managed
    # ledger exists; 4: deletable (its ledger's BookKeeper copy is there)
    uuid0 = items[0]["expected"]["uuid"]
    msb, lsb = wire.uuid_bits(uuid0)
    info = mlpb.ManagedLedgerInfo()
    li = info.ledgerInfo.add(ledgerId=items[0]["expected"]["ledger_id"], entries=4, size=400, timestamp=1)
    li.offloadContext.uidMsb, li.offloadContext.uidLsb, li.offloadContext.complete = msb, lsb, True
    zk.create(f"/managed-ledgers/{ML}", info.SerializeToString(), makepath=True)
    key1 = items[1]["expected"]["objects"][0]["key"]
    s3.put_object(Bucket=bucket, Key=key1, Body=b"rewritten", Metadata={"managedledgername": ML})
    for o in items[2]["expected"]["objects"]:
        s3.delete_object(Bucket=bucket, Key=o["key"])
    fabricate(zk, s3, bucket, managed_ledger=ML, ledgers=1, first_id=items[4]["expected"]["ledger_id"])

    reader = v.LiveReader(zk, zk)
    got = verify_objects(items, reader, s3, bucket=bucket, cluster_name="ours")
    assert [g.decision for g, _ in got] == [v.IN_USE, v.MISMATCH, v.ALREADY_GONE, v.UNPROVABLE, v.DELETE]
    assert got[3][0].detail["only_copy"] and got[3][0].detail["node"] == f"/managed-ledgers/{ML}"
    assert sorted(got[4][1]) == sorted(o["key"] for o in items[4]["expected"]["objects"])
    other = verify_objects(items[4:], reader, s3, bucket=bucket, cluster_name="theirs")
    assert other[0][0].decision == v.MISMATCH and "cluster" in other[0][0].reason
    # the managed ledger deleted: the only copy is deletable (its data was deleted with the topic)
    zk.delete(f"/managed-ledgers/{ML}")
    again = verify_objects(items[3:4], reader, s3, bucket=bucket, cluster_name="ours")
    assert again[0][0].decision == v.DELETE


def test_reference_index_is_read_again_before_it_is_too_old(chroot_zk: Any) -> None:
    """Past half its age bound the index is read again in the background; an index is never used
    older than the bound; a reference made after one read is in the next."""
    import time

    from ledgerlens.deletion.references import ReferenceScanner

    zk = chroot_zk
    info = mlpb.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=7, entries=1, size=1, timestamp=1)
    zk.create(f"/managed-ledgers/{ML}", info.SerializeToString(), makepath=True)
    zk.ensure_path("/admin/policies/ll-app")
    scans: list[Any] = []
    scanner = ReferenceScanner([zk], max_age_s=2.0, on_scan=scans.append)
    first = scanner.current()
    assert set(first.ledgers) == {7} and first.ledgers[7] == f"/managed-ledgers/{ML} (ledger list)"
    assert first.tenants == {"ll-app"} and first.managed_ledgers == {ML: "/managed-ledgers"}
    info.ledgerInfo.add(ledgerId=8, entries=1, size=1, timestamp=2)
    zk.set(f"/managed-ledgers/{ML}", info.SerializeToString())
    time.sleep(1.2)
    assert scanner.current() is first  # still young enough: used while a new read runs
    deadline = time.monotonic() + 10
    while scanner.current() is first:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = scanner.current()
    assert set(second.ledgers) == {7, 8} and len(scans) == 2
    time.sleep(2.1)
    assert scanner.current().age() <= 2.0  # too old: the caller waited for a fresh read
    zk.set(f"/managed-ledgers/{ML}", b"")  # emptied by an edit: its references are unknown now
    time.sleep(2.1)
    emptied = scanner.current()
    assert ML in emptied.unprovable and "emptied" in emptied.unprovable[ML]
    assert (
        emptied.unprovable_for([ML]) is not None
        and emptied.unprovable_for(["ll-app/ns/persistent/x"]) is None
    )
