"""Offload verification against a real S3 server (moto), on objects of an independent writer.

A bucket holds healthy per-ledger offloads, a healthy PIP-76 streaming segment spanning three
ledgers (one of them split across two segments), and each kind of damage; another cluster and a
tenant the audited store does not know share the bucket. The verification reads only index objects
and first block headers (bytes counted), the audit reports exactly the damage.
"""

from __future__ import annotations

import json
import struct
import uuid as uuid_mod
from typing import Any

import boto3
import pytest
from pyspark.sql import functions as F

import offload_writer as w
from ledgerlens.audit import run_audit
from ledgerlens.audit.ownership import owned_tenants
from ledgerlens.audit.rules.offload_objects import offload_contexts, offload_object_rules
from ledgerlens.formats.offload import ledger_object_keys, streaming_object_keys
from ledgerlens.inventory import schemas
from ledgerlens.offload.verify import VerifyStats, verify_objects
from ledgerlens.settings.config import AuditConfig
from ledgerlens.sources.s3 import list_offload_objects

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW = 1_900_000_000_000
OLD = NOW - 30 * 24 * 3_600_000
CLUSTER = "east"
A = "t/ns/persistent/a"
B = "t/ns/persistent/b"
S = "t/ns/persistent/streamed"
GONE = "t/ns/persistent/deleted topic"
ALIEN = "elsewhere/ns/persistent/x"


def _u() -> str:
    return str(uuid_mod.uuid4())


def _entries(n: int) -> list[bytes]:
    return [f"entry-{i:05d}".encode() * (1 + i % 5) for i in range(n)]


class Bucket:
    """Writes offloads into the test bucket and remembers the managed-ledger side."""

    def __init__(self, client: Any, name: str) -> None:
        self.s3 = client
        self.name = name
        self.ml_rows: list[dict[str, Any]] = []

    def put(self, key: str, body: bytes, meta: dict[str, str]) -> None:
        self.s3.put_object(Bucket=self.name, Key=key, Body=body, Metadata=meta)

    def ledger(
        self,
        ml: str,
        lid: int,
        n: int = 40,
        *,
        uuid: str | None = None,
        cluster: str | None = CLUSTER,
        in_ml: bool = True,
        data: bytes | None = None,
        index: bytes | None = None,
    ) -> tuple[str, str]:
        u = uuid or _u()
        entries = _entries(n)
        written = w.data_object([(lid, 0, entries)], block_size=300)
        size = sum(map(len, entries))
        meta = w.ledger_metadata(last_entry_id=n - 1, length=size, managed_ledger=ml)
        dkey, ikey = ledger_object_keys(u, lid)
        self.put(
            dkey, written.data if data is None else data, w.user_metadata(managed_ledger=ml, cluster=cluster)
        )
        idx = w.index_v1(written, meta) if index is None else index
        self.put(ikey, idx, w.user_metadata(managed_ledger=ml, cluster=cluster))
        if in_ml:
            self.ml_rows.append(_ml_row(ml, lid, n, size, offload_uuid=u))
        return dkey, ikey


def _ml_row(ml: str, lid: int, n: int, size: int, **kw: Any) -> dict[str, Any]:
    t = ml.split("/")
    row = {
        "managed_ledger": ml,
        "tenant": t[0],
        "namespace": "/".join(t[:2]),
        "ledger_id": lid,
        "entries": n,
        "size": size,
        "timestamp_ms": OLD,
        "offload_complete": True,
        "offload_bookkeeper_deleted": True,
        "offload_timestamp_ms": OLD,
        **kw,
    }
    return row


@pytest.fixture(scope="module")
def world(s3_server: Any, spark: Any) -> dict[str, Any]:
    name = f"ll-{uuid_mod.uuid4().hex[:16]}"
    client = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    client.create_bucket(Bucket=name)
    b = Bucket(client, name)
    keys: dict[str, Any] = {}
    # healthy per-ledger offloads
    keys["healthy"] = [*b.ledger(A, 1), *b.ledger(A, 2, 120), *b.ledger(B, 50, 60)]
    # damage, each on its own ledger of A (BookKeeper copy deleted: critical)
    good_written = w.data_object([(3, 0, _entries(40))], block_size=300)
    good_meta = w.ledger_metadata(last_entry_id=39, length=sum(map(len, _entries(40))), managed_ledger=A)
    good_index = w.index_v1(good_written, good_meta)
    keys["truncated_index"] = b.ledger(A, 3, index=good_index[: len(good_index) // 2])[1]
    keys["wrong_magic"] = b.ledger(A, 4, data=b"\x00\x00\x00\x00" + good_written.data[4:])[0]
    keys["short_data"] = b.ledger(A, 5, data=good_written.data[:-100])[0]
    # B's ledger 50 index copied over A's ledger 6 index key
    d6, i6 = b.ledger(A, 6)
    client.copy_object(Bucket=name, Key=i6, CopySource={"Bucket": name, "Key": keys["healthy"][5]})
    keys["copied_index"] = i6
    # an entry id skipped inside a block: only the deep check sees it
    skipped = bytearray(good_written.data)
    first_entry = 128  # entry 0 of block 1
    (length,) = struct.unpack_from(">i", skipped, first_entry)
    struct.pack_into(">q", skipped, first_entry + 12 + length + 4, 7)  # entry 1 claims to be entry 7
    keys["deep_only"] = b.ledger(A, 7, data=bytes(skipped))[0]
    # an extra copy of ledger 1's data under another uuid (metadata names A)
    stray, _ = ledger_object_keys(_u(), 1)
    client.copy_object(Bucket=name, Key=stray, CopySource={"Bucket": name, "Key": keys["healthy"][0]})
    keys["other_uuid"] = stray
    # another cluster's offload of ledger 2 (same ledger id, same topic name: geo-replication)
    keys["other_cluster"] = b.ledger(A, 2, cluster="west", in_ml=False)
    # a tenant the audited store does not have
    keys["other_tenant"] = b.ledger(ALIEN, 900, in_ml=False)
    # a topic of this cluster deleted with its objects left behind: orphans
    keys["orphans"] = b.ledger(GONE, 800, in_ml=False)
    # PIP-76: one segment spanning ledger 10 (entries 5..19), 11 (all), 12 (entries 0..3)
    runs = [(10, 5, _entries(15)), (11, 0, _entries(8)), (12, 0, _entries(4))]
    seg = w.data_object(runs, block_size=300, streaming=True)
    seg_uuid = _u()
    sd, si = streaming_object_keys(seg_uuid)
    b.put(sd, seg.data, w.user_metadata(managed_ledger=S, cluster=CLUSTER))
    infos = {10: w.ledger_info(10, 20, 999), 11: w.ledger_info(11, 8, 99), 12: w.ledger_info(12, 4, 9)}
    b.put(si, w.index_v2(seg, infos), w.user_metadata(managed_ledger=S, cluster=CLUSTER))
    first_seg = _u()  # ledger 10 entries 0..4 went to an earlier segment
    seg0 = w.data_object([(10, 0, _entries(5))], block_size=300, streaming=True)
    d0, i0 = streaming_object_keys(first_seg)
    b.put(d0, seg0.data, w.user_metadata(managed_ledger=S, cluster=CLUSTER))
    b.put(
        i0,
        w.index_v2(seg0, {10: w.ledger_info(10, 20, 999)}),
        w.user_metadata(managed_ledger=S, cluster=CLUSTER),
    )

    def segment(u: str) -> dict[str, Any]:
        return {"uuid": u, "complete": True, "end_entry_id": None, "assigned_ms": OLD, "offloaded_ms": OLD}

    # PIP-76 deletion rule: ledger 10 is deleted, 11 and 12 are still listed: the segment stays
    b.ml_rows += [
        _ml_row(S, 11, 8, 99, offload_segments=[segment(seg_uuid)]),
        _ml_row(S, 12, 4, 9, offload_segments=[segment(seg_uuid)]),
    ]
    keys["streaming"] = [sd, si]
    keys["streaming_orphans"] = [d0, i0]  # every ledger of that segment (10) is deleted
    objects = list(list_offload_objects(client, name))
    return {"bucket": name, "client": client, "keys": keys, "objects": objects, "ml_rows": b.ml_rows}


def test_rows_have_the_declared_columns() -> None:
    from ledgerlens.offload.verify import _COLUMNS

    assert list(_COLUMNS) == schemas.columns(schemas.OFFLOAD_SEGMENTS)


def _problems(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {r["key"]: sorted({p["check"] for p in r["problems"]}) for r in rows if r["problems"]}


def test_default_verification_reads_little_and_finds_the_object_damage(world: dict[str, Any]) -> None:
    stats = VerifyStats()
    rows = list(verify_objects(world["client"], world["objects"], max_in_flight=8, stats=stats))
    assert len(rows) == len(world["objects"]) and all(r["error"] is None for r in rows)
    k = world["keys"]
    assert _problems(rows) == {
        k["truncated_index"]: ["index_decode"],
        k["wrong_magic"]: ["data_header"],
        k["short_data"]: ["data_length"],
        k["copied_index"].removesuffix("-index"): ["data_length"],  # checked against B's index
    }
    by_key = {r["key"]: r for r in rows}
    st = by_key[k["streaming"][1]]
    assert st["index_version"] == 2 and [x["ledger_id"] for x in st["ledgers"]] == [10, 11, 12]
    assert by_key[k["streaming"][0]]["block_layout"] == "streaming"
    assert by_key[k["streaming"][0]]["block_ledger_id"] == 10
    assert by_key[k["other_cluster"][0]]["cluster_name"] == "west"
    assert by_key[k["healthy"][0]]["managed_ledger"] == A
    data = [r for r in rows if r["role"] == "data"]
    assert all(r["bytes_read"] <= 128 for r in data)
    total = sum(o["size"] for o in world["objects"])
    index_bytes = sum(o["size"] for o in world["objects"] if o["role"] == "index")
    assert stats.bytes_read <= index_bytes + 128 * len(data) < total
    assert stats.requests == len(rows)


def test_deep_check_streams_blocks_and_checks_entries(world: dict[str, Any]) -> None:
    rows = list(verify_objects(world["client"], world["objects"], deep=True, max_in_flight=4))
    k = world["keys"]
    problems = _problems(rows)
    assert problems[k["deep_only"]] == ["data_entries"]
    assert len(problems) == 5
    by_key = {r["key"]: r for r in rows}
    assert by_key[k["healthy"][2]]["deep_checked"] and by_key[k["healthy"][2]]["deep_entries"] == 120
    assert by_key[k["streaming"][0]]["deep_checked"] and by_key[k["streaming"][0]]["deep_entries"] == 27


def _tables(spark: Any, world: dict[str, Any]) -> dict[str, Any]:
    seg_rows = list(verify_objects(world["client"], world["objects"], max_in_flight=8))
    ml_names = sorted({r["managed_ledger"] for r in world["ml_rows"]})
    rows = {
        "managed_ledgers": [
            {"managed_ledger": m, "path": f"/managed-ledgers/{m}", "tenant": "t", "namespace": "t/ns"}
            for m in ml_names
        ],
        "ml_ledgers": world["ml_rows"],
        "namespace_policies": [
            {
                "tenant": "t",
                "namespace": "t/ns",
                "path": "/admin/policies/t/ns",
                "retention_minutes": -1,
                "retention_mb": -1,
            }
        ],
        "offload_objects": world["objects"],
        "offload_segments": seg_rows,
    }
    return {
        n: spark.createDataFrame([schemas.to_row(s, r) for r in rows.get(n, [])], s)
        for n, s in schemas.INVENTORY.items()
    }


CFG = AuditConfig(as_of_ms=NOW + 10**9, min_orphan_age_s=0)


@pytest.fixture(scope="module")
def tables(spark: Any, world: dict[str, Any]) -> dict[str, Any]:
    return _tables(spark, world)


def test_audit_reports_exactly_the_damage(world: dict[str, Any], tables: dict[str, Any]) -> None:
    k = world["keys"]
    df = run_audit(tables, CFG, offload_bucket=world["bucket"], cluster_name=CLUSTER)
    got = {(f["kind"], f["object_key"]): f for f in (r.asDict() for r in df.collect())}
    expected = {
        ("corrupt_offload_object", k["truncated_index"]),
        ("corrupt_offload_object", k["wrong_magic"]),
        ("corrupt_offload_object", k["short_data"]),
        ("corrupt_offload_object", k["copied_index"]),
        ("corrupt_offload_object", k["other_uuid"]),
        *(("foreign_offload_object", key) for key in (*k["other_cluster"], *k["other_tenant"])),
        *(("orphan_offload_object", key) for key in (*k["orphans"], *k["streaming_orphans"])),
    }
    assert set(got) == expected
    copied = got[("corrupt_offload_object", k["copied_index"])]
    ev = json.loads(copied["evidence"])
    assert copied["severity"] == "critical" and copied["managed_ledger"] == A and copied["ledger_id"] == 6
    assert set(ev["checks_failed"]) == {"index_ledger", "managed_ledger"}, ev
    stray = got[("corrupt_offload_object", k["other_uuid"])]
    assert stray["severity"] == "warning" and json.loads(stray["evidence"])["checks_failed"] == ["uuid"]
    west = got[("foreign_offload_object", k["other_cluster"][0])]
    assert west["severity"] == "info" and json.loads(west["evidence"])["cluster"] == "west"
    alien = json.loads(got[("foreign_offload_object", k["other_tenant"][0])]["evidence"])
    assert alien["reason"] == "tenant" and alien["tenant"] == "elsewhere"


def test_unknown_cluster_makes_no_tagged_object_an_orphan(
    world: dict[str, Any], tables: dict[str, Any]
) -> None:
    k = world["keys"]
    t = tables
    owned = owned_tenants(t).select(F.explode("owned").alias("tenant"))
    contexts = offload_contexts(t["ml_ledgers"], t["bk_ledgers"])
    v = offload_object_rules(t["offload_segments"], contexts, owned, CFG, None)
    got = {(f["kind"], f["object_key"]) for f in (r.asDict() for r in v.findings.collect())}
    assert got == {
        ("corrupt_offload_object", k[n])
        for n in ("truncated_index", "wrong_magic", "short_data", "copied_index")
    }
    # every object nobody references is tagged with a cluster name here: none may become an orphan
    unreferenced = {k["other_uuid"], *k["other_cluster"], *k["other_tenant"], *k["orphans"]}
    assert {r["key"] for r in v.not_orphans.collect()} == unreferenced | set(k["streaming_orphans"])
