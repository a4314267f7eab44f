"""The sandbox: servers start and answer, the generator writes what its ground truth claims.

The sandbox's writers (``ledgerlens_sandbox.wire``) are independent of the decoders
(``ledgerlens.formats``); these tests read what the generator wrote back through the decoders.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from kazoo.exceptions import NoAuthError

from ledgerlens.audit.findings import PULSAR_KINDS as KINDS
from ledgerlens.errors import DecodeError, SandboxError
from ledgerlens.formats import bookkeeper, envelope, managed_ledger, names, offload, paths, uuids
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.proto import schema_storage_pb2 as schpb
from ledgerlens_sandbox import cluster, wire
from ledgerlens_sandbox.servers import ZooKeeperServer

pytestmark = pytest.mark.integration

ALL_KINDS = set(KINDS)


# --- servers --------------------------------------------------------------------------------------


def test_zookeeper_answers(zk_client: Any, fresh_root: str) -> None:
    zk_client.create(fresh_root + "/x", b"hello", makepath=True)
    assert zk_client.get(fresh_root + "/x")[0] == b"hello"


def test_s3_answers(s3_server: Any, bucket: str) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v", Metadata={"role": "data"})
    assert s3.head_object(Bucket=bucket, Key="k")["Metadata"]["role"] == "data"


def test_spark_runs(spark: Any) -> None:
    assert spark.range(10).count() == 10


def test_zookeeper_start_failure_names_the_reason(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(SandboxError) as err:
            ZooKeeperServer(tmp_path, port=port).start(timeout=30)
    text = str(err.value)
    assert "ZooKeeperServerMain" in text and "zookeeper.log" in text
    assert not (tmp_path / "zookeeper.pid").exists()


def test_local_sandbox_from_separate_processes(tmp_path: Path) -> None:
    def run(*args: str) -> dict[str, Any]:
        cmd = [sys.executable, "-m", "ledgerlens_sandbox.local", *args, "--workdir", str(tmp_path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout))

    up = run("up")
    try:
        assert (
            up["up"]
            and up["zk_hosts"].startswith("127.0.0.1:")
            and up["s3_endpoint"].startswith("http://127.0.0.1:")
        )
        seeded = run("seed", "--root", "/cli", "--scenario", "healthy")
        assert seeded["expected_findings"] == 0 and seeded["counts"]["bk_ledgers"] > 0
        truth = cluster.GroundTruth.from_json((tmp_path / "ground_truth.json").read_text())
        assert truth.root == "/cli" and truth.bucket == up["bucket"]
        assert run("status")["up"]
    finally:
        down = run("down")
    assert sorted(down["stopped"]) == ["s3", "zookeeper"]
    assert run("status") == {"workdir": str(tmp_path), "up": False}


# --- the generator --------------------------------------------------------------------------------


def _new_bucket(endpoint: str) -> str:
    name = f"ll-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def clusters(zookeeper: Any, s3_server: Any) -> dict[str, cluster.GroundTruth]:
    now = cluster.default_now_ms()
    out = {}
    for scenario in ("planted", "healthy"):
        root = f"/{scenario}-{uuid.uuid4().hex[:8]}"
        out[scenario] = cluster.generate(
            zookeeper.hosts,
            root=root,
            s3_endpoint=s3_server.endpoint_url,
            bucket=_new_bucket(s3_server.endpoint_url),
            scenario=scenario,
            now_ms=now,
        )
    return out


def _walk(zk: Any, path: str) -> list[str]:
    out = []
    stack = [path]
    while stack:
        p = stack.pop()
        try:
            children = zk.get_children(p)
        except NoAuthError:
            continue  # the planted unreadable node: no READ, so no listing either
        for child in children:
            q = f"{p}/{child}"
            out.append(q)
            stack.append(q)
    return out


def _bk_ledger_nodes(zk: Any, root: str) -> list[str]:
    lroot = root + "/ledgers"
    out = []
    for top in zk.get_children(lroot):
        if paths.is_special_znode(top) or not paths.is_ledger_level1(top):
            continue
        out += [p for p in _walk(zk, f"{lroot}/{top}") if p.rsplit("/", 1)[1].startswith("L")]
    return out


def test_ground_truth_covers_every_kind_and_round_trips(clusters: dict[str, cluster.GroundTruth]) -> None:
    planted, healthy = clusters["planted"], clusters["healthy"]
    assert planted.s3_objects_aged
    assert {f["kind"] for f in planted.expected} == ALL_KINDS
    orphan_components = {f["component"] for f in planted.expected_of("orphan_ledger")}
    assert orphan_components == {
        "managed-ledger",
        "cursor",
        "schema",
        "delayed-index-bucket",
        "compacted-ledger",
    }
    assert all(set(f) == set(cluster.FINDING_KEYS) for f in planted.expected)
    assert {c["control"] for c in planted.controls} >= {
        "young_orphan",
        "blind_spot_ledger",
        "old_unattributed_referenced",
        "in_progress_offload_without_objects",
    }
    assert healthy.expected == []
    for truth in (planted, healthy):
        assert cluster.GroundTruth.from_json(truth.to_json()) == truth
        json.loads(truth.to_json())


def test_ledger_nodes_decode_and_match_the_ground_truth(
    clusters: dict[str, cluster.GroundTruth], zk_client: Any
) -> None:
    truth = clusters["planted"]
    corrupt = {
        f["path"]
        for kind in ("corrupt_metadata", "unreadable_metadata")
        for f in truth.expected_of(kind)
        if f["component"] is None
    }
    versions, long_ids, custom_kinds = set(), 0, set()
    nodes = _bk_ledger_nodes(zk_client, truth.root)
    assert len(nodes) == truth.counts["bk_ledgers"]
    for path in nodes:
        lid = paths.ledger_id_from_path(path, truth.root + "/ledgers")
        assert (
            wire.ledger_path(lid, truth.root + "/ledgers")
            == paths.ledger_path(lid, truth.root + "/ledgers")
            == path
        )
        long_ids += lid >= 2**31
        if path in corrupt:
            try:
                data = zk_client.get(path)[0]
            except NoAuthError:
                continue  # the unreadable one
            with pytest.raises(DecodeError):
                bookkeeper.decode_ledger_metadata(data, path=path)
            continue
        md = bookkeeper.decode_ledger_metadata(zk_client.get(path)[0], path=path)
        versions.add(md.format_version)
        custom_kinds.add(md.custom_metadata.get("component", b"").decode() or None)
        if md.custom_metadata.get("component") == b"managed-ledger":
            assert md.custom_metadata["application"] == b"pulsar"
            assert b"/persistent/" in md.custom_metadata["pulsar/managed-ledger"]
    assert versions == {1, 2, 3}
    assert long_ids >= 3
    assert custom_kinds >= {None, "managed-ledger", "schema", "compacted-ledger", "delayed-index-bucket"}
    # Every ledger finding names a node that exists (missing ones excepted).
    for f in truth.expected:
        if f["kind"] in ("orphan_ledger", "unattributed_ledger"):
            assert zk_client.exists(f["path"]), f
        if f["kind"] == "missing_ledger":
            assert not zk_client.exists(wire.ledger_path(f["ledger_id"], truth.root + "/ledgers")), f
    special = set(zk_client.get_children(truth.root + "/ledgers"))
    assert {"available", "LAYOUT", "INSTANCEID", "idgen", "underreplication", "cookies"} <= special


def test_managed_ledger_and_cursor_nodes_decode(
    clusters: dict[str, cluster.GroundTruth], zk_client: Any
) -> None:
    truth = clusters["planted"]
    mroot = truth.root + "/managed-ledgers"
    corrupt = {f["path"] for f in truth.expected_of("corrupt_metadata")}
    codecs: set[str] = set()
    n_ml = n_cursor = 0
    for path in _walk(zk_client, mroot):
        rel = path[len(mroot) + 1 :].split("/")
        if "persistent" not in rel or len(rel) == rel.index("persistent") + 1:
            continue  # tenant / (cluster /) namespace / domain levels
        is_ml = len(rel) == rel.index("persistent") + 2
        data = zk_client.get(path)[0]
        n_ml += is_ml
        n_cursor += not is_ml
        if path in corrupt:
            decode = managed_ledger.decode_managed_ledger if is_ml else managed_ledger.decode_cursor
            with pytest.raises(DecodeError):
                decode(data, path=path)
            continue
        if is_ml:
            rec = managed_ledger.decode_managed_ledger(data, path=path)
            codecs.add(rec.compression)
            if data:
                body, _ = envelope.unwrap(data, path=path)
                assert len(mlpb.ManagedLedgerInfo.FromString(body).ledgerInfo) == len(rec.ledgers)
        else:
            cur = managed_ledger.decode_cursor(data, path=path)
            codecs.add("cursor:" + cur.compression)
            if rel[-1] == "__compaction":
                assert cur.compacted_ledger_id is not None
            if rel[-1] == "scheduler":
                assert len(cur.delayed_bucket_ledgers) == 2
    assert n_ml == truth.counts["managed_ledgers"] and n_cursor == truth.counts["cursors"]
    assert {"LZ4", "ZLIB", "ZSTD", "SNAPPY", "NONE", "EMPTY"} <= codecs | {"EMPTY"}
    assert "cursor:NONE" in codecs and "cursor:SNAPPY" in codecs
    # URL-encoded names, partitions and the v1 name are where names.py puts them.
    for topic in (
        "persistent://acme/orders/user signups",
        "persistent://acme/orders/metrics%raw",
        "persistent://public/default/café-orders",
        "persistent://acme/orders/order-events-partition-2",
        "persistent://legacy/us-west/app/clicks",
    ):
        ml = names.topic_to_managed_ledger(topic)
        assert ml == wire.managed_ledger_name(topic)
        assert zk_client.exists(f"{mroot}/{ml}"), ml
    assert zk_client.exists(f"{mroot}/acme/orders/persistent/user+signups/audit+%25sub+%C3%BC")
    # Schema locators with several versions.
    loc = schpb.SchemaLocator.FromString(zk_client.get(truth.root + "/schemas/acme/orders/user+signups")[0])
    assert [e.version for e in loc.index] == [0, 1, 2] and loc.info.version == 2
    # Namespace policies with Pulsar's field names.
    pol = json.loads(zk_client.get(truth.root + "/admin/policies/acme/short-retention")[0])
    assert pol["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    pol = json.loads(zk_client.get(truth.root + "/admin/policies/acme/payments")[0])
    assert pol["offload_deletion_lag_ms"] == 3600000


def test_offload_objects_decode_and_match_the_ground_truth(
    clusters: dict[str, cluster.GroundTruth], s3_server: Any
) -> None:
    truth = clusters["planted"]
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=truth.bucket).get("Contents", [])}
    assert len(keys) == truth.counts["offload_objects"]
    for key in keys:
        obj = s3.get_object(Bucket=truth.bucket, Key=key)
        body, meta = obj["Body"].read(), obj["Metadata"]
        parsed = offload.parse_offload_key(key)
        assert parsed is not None and parsed.layout == "ledger"
        assert meta["role"] == parsed.role and meta["s3managedledgeroffloaderformatversion"] == "1"
        assert meta["managedledgername"].count("/") == 3
        if parsed.role == "data":
            header = offload.decode_data_block_header(body, key=key)
            assert header.header_length == 128 and header.first_entry_id == 0
            assert sum(1 for _ in offload.iter_block_entries(body[: header.block_length], key=key)) > 0
        else:
            index = offload.decode_offload_index(body, key=key)
            assert index.version == 1 and index.ledgers[0].metadata is not None
            assert index.ledgers[0].entries[0].part_id == 1
    for f in truth.expected:
        if f["kind"] == "missing_offload_object":
            assert f["object_key"] not in keys
        elif f["kind"] in ("orphan_offload_object", "incomplete_offload"):
            assert f["object_key"] in keys
    healthy = clusters["healthy"]
    hkeys = {o["Key"] for o in s3.list_objects_v2(Bucket=healthy.bucket).get("Contents", [])}
    assert len(hkeys) == healthy.counts["offload_objects"] > 0 and not hkeys & keys


def test_envelope_codecs_round_trip() -> None:
    info = mlpb.ManagedLedgerInfo()
    for i in range(200):
        info.ledgerInfo.add(ledgerId=1000 + i, entries=10, size=1000, timestamp=1_700_000_000_000 + i)
    payload = info.SerializeToString()
    for codec in wire.CODECS:
        data = wire.envelope(payload, codec)
        assert data[:2] == b"\x47\x78"
        body, seen = envelope.unwrap(data, path=f"/test/{codec}")
        assert (body, seen) == (payload, codec)
    assert envelope.unwrap(payload, path="/plain")[0] == payload


def test_names_paths_and_uuids_agree_with_the_decoders() -> None:
    for s in ("plain", "with space", "100%", "ü-é", "a~b*c.d_e-f", "x/y?z&=+", "日本"):
        assert wire.url_encode(s) == names.encode_component(s)
    for lid in (0, 12345, 2147483646, 2147483647, 3_000_000_000, 2**63 - 1):
        assert wire.ledger_path(lid) == paths.ledger_path(lid)
    assert wire.ledger_path(12345) == "/ledgers/00/0001/L2345"
    assert wire.ledger_path(3_000_000_000) == "/ledgers/000/0000/0030/0000/L0000"
    for _ in range(20):
        u = str(uuid.uuid4())
        msb, lsb = wire.uuid_bits(u)
        assert wire.java_uuid(msb, lsb) == uuids.uuid_from_bits(msb, lsb) == u
        assert uuids.uuid_to_bits(u) == (msb, lsb)
    assert offload.ledger_object_keys("u", 7) == (
        wire.offload_data_key("u", 7),
        wire.offload_index_key("u", 7),
    )


def test_unreadable_node_denies_read(clusters: dict[str, cluster.GroundTruth], zk_client: Any) -> None:
    truth = clusters["planted"]
    unreadable = []
    for f in truth.expected_of("corrupt_metadata") + truth.expected_of("unreadable_metadata"):
        try:
            zk_client.get(f["path"])
        except NoAuthError:
            unreadable.append(f["kind"])
    assert unreadable == ["unreadable_metadata"]  # the NoAuth node is expected as unreadable, not corrupt


def test_healthy_and_planted_do_not_collide(
    clusters: dict[str, cluster.GroundTruth], zk_client: Any, zookeeper: Any
) -> None:
    planted, healthy = clusters["planted"], clusters["healthy"]
    assert planted.root != healthy.root and planted.bucket != healthy.bucket
    hp = {p[len(healthy.root) :] for p in _walk(zk_client, healthy.root)}
    pp = {p[len(planted.root) :] for p in _walk(zk_client, planted.root)}
    assert len(hp) < len(pp)
    # Writing the same scenario again under a used root is refused, not merged.
    with pytest.raises((ValueError, RuntimeError)):
        cluster.generate(
            zookeeper.hosts,
            root=healthy.root,
            scenario="healthy",
            now_ms=healthy.now_ms,
        )


def test_generate_refuses_an_ambiguous_now(zookeeper: Any, s3_server: Any, fresh_root: str) -> None:
    with pytest.raises(ValueError, match="neither clearly"):
        cluster.generate(
            zookeeper.hosts,
            root=fresh_root,
            s3_endpoint=s3_server.endpoint_url,
            bucket="unused",
            now_ms=int(time.time() * 1000) + 24 * 3600 * 1000,
        )


def test_generate_bulk_speed(zookeeper: Any, zk_client: Any, fresh_root: str) -> None:
    n = 20_000
    stats = cluster.generate_bulk(
        zookeeper.hosts, root=fresh_root, n_ledgers=n, n_topics=20, now_ms=int(time.time() * 1000)
    )
    rate = n / stats["total_s"]
    print(
        f"\ngenerate_bulk: {n} ledgers in {stats['total_s']:.2f} s ({rate:,.0f} ledgers/s, "
        f"{stats['creates_per_s']:,} znode creates/s); 100,000 ledgers ~ {100_000 / rate:.1f} s"
    )
    assert len(_bk_ledger_nodes(zk_client, fresh_root)) == n
    assert stats["total_s"] < 30
