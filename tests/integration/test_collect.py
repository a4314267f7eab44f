"""collect_inventory against a generated cluster on a real ZooKeeper, a real S3 server and Spark.

The expected inventory comes from an independent, naive read of what the generator wrote (plain
sequential kazoo walk, protobuf parsing, a plain S3 listing) plus the generator's ground truth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any
from urllib.parse import unquote_plus

import boto3
import pyarrow as pa
import pytest
from kazoo.security import make_acl
from pyspark.sql import functions as F

from ledgerlens.errors import SourceError
from ledgerlens.formats.managed_ledger import decode_managed_ledger
from ledgerlens.inventory import schemas
from ledgerlens.inventory.collect import collect_inventory, load_inventory
from ledgerlens.proto import schema_storage_pb2 as schpb
from ledgerlens.settings.config import S3Source, ZooKeeperSource
from ledgerlens_sandbox.cluster import LONG_ID_BASE, default_now_ms, generate

# Spark's Python workers must import ledgerlens: run them with this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# Executors take S3 credentials from their own environment, fixed when Spark starts: tests that
# list the bucket request ``s3_server`` (which sets dummy credentials) before ``spark``.


def _source(hosts: str, root: str, **kw: Any) -> ZooKeeperSource:
    return ZooKeeperSource(
        hosts=hosts,
        ledgers_root=f"{root}/ledgers",
        managed_ledgers_root=f"{root}/managed-ledgers",
        schemas_root=f"{root}/schemas",
        policies_root=f"{root}/admin/policies",
        **kw,
    )


def _walk(zk: Any, path: str) -> dict[str, bytes]:
    """Every node under ``path`` with its data (readable ones), sequentially."""
    out: dict[str, bytes] = {}
    stack = [path]
    while stack:
        p = stack.pop()
        try:
            out[p] = zk.get(p)[0]
        except Exception:  # noqa: BLE001 - unreadable (NoAuth) nodes are still listed
            out[p] = b"<unreadable>"
        try:
            stack.extend(f"{p}/{c}" for c in zk.get_children(p))
        except Exception:  # noqa: BLE001
            pass
    return out


def _rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


@pytest.fixture
def planted(zookeeper: Any, s3_server: Any, zk_client: Any, fresh_root: str, bucket: str) -> dict[str, Any]:
    """A planted cluster plus a managed-ledger subtree that cannot be listed and non-offload keys."""
    truth = generate(
        zookeeper.hosts,
        root=fresh_root,
        s3_endpoint=s3_server.endpoint_url,
        bucket=bucket,
        scenario="planted",
        now_ms=default_now_ms(),
    )
    no_read = [make_acl("world", "anyone", read=False, write=True, create=True, delete=True, admin=True)]
    locked = f"{fresh_root}/managed-ledgers/acme/locked-ns"
    zk_client.create(locked, b"", acl=no_read)
    zk_client.create(f"{locked}/persistent", b"")
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    for key in ("README.txt", "0-not-a-uuid", "zz/notes"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    return {"truth": truth, "locked": locked}


@pytest.mark.parametrize("driver_reads", [True, False], ids=["small-on-the-driver", "spark-tasks"])
def test_collect_planted_cluster(
    driver_reads: bool,
    s3_server: Any,
    spark: Any,
    zookeeper: Any,
    zk_client: Any,
    fresh_root: str,
    bucket: str,
    planted: Any,
    tmp_path: Any,
) -> None:
    truth = planted["truth"]
    zk = _source(zookeeper.hosts, fresh_root, max_in_flight=16, rate_limit=5000.0, tasks=3)
    s3 = S3Source(bucket=bucket, endpoint_url=s3_server.endpoint_url, region="us-east-1")
    inv = collect_inventory(spark, zk, s3, str(tmp_path / "inv"), progress=False, driver_reads=driver_reads)
    assert inv.s3_scanned
    assert set(inv.tables) == set(load_inventory(spark, inv.out_dir))
    assert set(inv.timings) >= {"bk_ledgers", "managed_ledgers", "schema_ledgers", "namespace_policies"}
    tables = {k: _rows(v) for k, v in load_inventory(spark, inv.out_dir).items()}
    for name, rows in tables.items():
        assert inv.counts[name] == len(rows), name
    corrupt = {  # every node read as an error row: undecodable ones and unreadable ones (NoAuth)
        (f["component"], f["path"])
        for f in truth.expected_of("corrupt_metadata") + truth.expected_of("unreadable_metadata")
    }

    # --- bk_ledgers: every L<digits> leaf, nothing else; corrupt and unreadable ones as error rows.
    lroot = f"{fresh_root}/ledgers"
    nodes = _walk(zk_client, lroot)
    leaves = {
        p
        for p in nodes
        if p.rsplit("/", 1)[1].startswith("L")
        and p.rsplit("/", 1)[1][1:].isdigit()
        and "/underreplication" not in p
    }
    bk = tables["bk_ledgers"]
    assert {r["path"] for r in bk} == leaves
    assert len(bk) == truth.counts["bk_ledgers"]
    assert all(
        int(r["path"].replace(lroot, "").replace("/", "").replace("L", "")) == r["ledger_id"] for r in bk
    )
    assert not any(
        s in r["path"]
        for r in bk
        for s in ("/available", "/cookies", "/underreplication", "/idgen", "/LAYOUT")
    )
    assert {r["path"] for r in bk if r["error"]} == {p for c, p in corrupt if c is None}
    assert all(r["ledger_id"] is not None for r in bk)
    noauth = [r for r in bk if r["error"] and "NoAuth" in r["error"]]
    assert len(noauth) == 1
    long_rows = [r for r in bk if r["ledger_id"] >= LONG_ID_BASE]
    assert long_rows and all(r["path"].count("/") == lroot.count("/") + 5 for r in long_rows)
    assert any(not r["error"] for r in long_rows)
    good = [r for r in bk if not r["error"]]
    assert all(r["ctime_ms"] is not None and r["znode_ctime_ms"] is not None for r in good)
    assert any(r["format_version"] == 1 for r in good) and any(r["format_version"] == 2 for r in good)
    compacted = [r for r in good if r["component"] == "compacted-ledger"]
    assert compacted and all(r["compacted_topic"] and r["application"] == "pulsar" for r in compacted)
    buckets = [r for r in good if r["component"] == "delayed-index-bucket"]
    assert buckets and all(r["bucket_key"] and r["delayed_topic"] and r["delayed_cursor"] for r in buckets)
    assert any(r["cursor"] for r in good if r["component"] == "managed-ledger")
    assert any(r["schema_id"] for r in good if r["component"] == "schema")

    # --- managed ledgers: every ML node of the v2 and v1 layouts, lists as stored.
    mroot = f"{fresh_root}/managed-ledgers"
    mnodes = _walk(zk_client, mroot)
    ml_paths = {
        p
        for p in mnodes
        if (parts := p[len(mroot) + 1 :].split("/"))
        and (len(parts) == 4 and parts[2] == "persistent" or len(parts) == 5 and parts[3] == "persistent")
    }
    mls = tables["managed_ledgers"]
    assert {r["path"] for r in mls if r["path"] != planted["locked"]} == ml_paths
    assert len(ml_paths) == truth.counts["managed_ledgers"]
    assert {r["path"] for r in mls if r["error"] and r["path"] in ml_paths} == {
        p for c, p in corrupt if c == "managed-ledger"
    }
    locked = [r for r in mls if r["path"] == planted["locked"]]
    assert (
        len(locked) == 1
        and locked[0]["managed_ledger"] == "acme/locked-ns"
        and "NoAuth" in locked[0]["error"]
    )
    assert any(r["namespace"] == "legacy/us-west/app" for r in mls)
    by_ml: dict[str, list[dict[str, Any]]] = {}
    for r in tables["ml_ledgers"]:
        by_ml.setdefault(r["managed_ledger"], []).append(r)
    for r in mls:
        if r["error"]:
            assert r["managed_ledger"] not in by_ml
            continue
        assert r["managed_ledger"] == r["path"][len(mroot) + 1 :]
        want = [li.ledger_id for li in decode_managed_ledger(mnodes[r["path"]], path=r["path"]).ledgers]
        got = sorted(by_ml.get(r["managed_ledger"], []), key=lambda x: x["position"])
        assert [x["ledger_id"] for x in got] == want, r["managed_ledger"]
        assert r["ledger_count"] == len(want)
        if got:
            assert got[-1]["is_last"] and not any(x["is_last"] for x in got[:-1])
    offloaded = [r for r in tables["ml_ledgers"] if r["offload_uuid"]]
    assert offloaded and any(r["offload_complete"] and r["offload_bookkeeper_deleted"] for r in offloaded)
    assert all(r["offload_bucket"] == bucket for r in offloaded)

    # --- cursors: every child of every ML node, decoded names, properties.
    cursors = tables["cursors"]
    want_cursors = {(p, c) for p in ml_paths for c in zk_client.get_children(p)}
    assert {(r["path"].rsplit("/", 1)[0], r["cursor_node"]) for r in cursors} == want_cursors
    assert len(cursors) == truth.counts["cursors"]
    assert all(r["cursor"] == unquote_plus(r["cursor_node"]) for r in cursors)
    audit = [r for r in cursors if r["cursor"] == "audit %sub ü"]
    assert (
        len(audit) == 1
        and audit[0]["cursor_node"] == "audit+%25sub+%C3%BC"
        and audit[0]["compression"] == "SNAPPY"
    )
    compaction = [r for r in cursors if r["cursor"] == "__compaction"]
    assert compaction[0]["properties"]["CompactedTopicLedger"] in {r["ledger_id"] for r in compacted}
    sched = [r for r in cursors if r["cursor"] == "scheduler"]
    assert {int(v) for v in sched[0]["cursor_properties"].values()} <= {r["ledger_id"] for r in buckets}
    assert len(sched[0]["cursor_properties"]) == 2
    assert {r["path"] for r in cursors if r["error"]} == {p for c, p in corrupt if c == "cursor"}
    assert all(r["managed_ledger"] for r in cursors)

    # --- schemas: one row per index entry, the latest flagged.
    sroot = f"{fresh_root}/schemas"
    want_schema = set()
    for p, data in _walk(zk_client, sroot).items():
        if p.count("/") - sroot.count("/") == 3:
            loc = schpb.SchemaLocator.FromString(data)
            for e in loc.index:
                want_schema.add(
                    (p[len(sroot) + 1 :], e.version, e.position.ledgerId, e.version == loc.info.version)
                )
    sch = tables["schema_ledgers"]
    assert {(r["schema_id"], r["version"], r["ledger_id"], r["is_latest"]) for r in sch} == want_schema
    assert len({r["schema_id"] for r in sch}) == truth.counts["schemas"]
    assert not any(r["error"] for r in sch)

    # --- policies
    pol = {r["namespace"]: r for r in tables["namespace_policies"]}
    assert len(pol) == truth.counts["namespaces"]
    assert (pol["acme/orders"]["retention_minutes"], pol["acme/orders"]["retention_mb"]) == (
        7 * 24 * 60,
        10240,
    )
    assert pol["public/default"]["retention_minutes"] is None
    assert pol["acme/payments"]["offload_deletion_lag_ms"] == 3_600_000
    assert pol["legacy/us-west/app"]["retention_minutes"] == -1
    assert not any(r["error"] for r in pol.values())

    # --- offload objects: every offload key of the bucket; other keys counted only.
    s3c = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    keys = [
        o["Key"]
        for page in s3c.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page["Contents"]
    ]
    objs = tables["offload_objects"]
    assert {r["key"] for r in objs} == set(keys) - {"README.txt", "0-not-a-uuid", "zz/notes"}
    assert len(objs) == truth.counts["offload_objects"]
    assert inv.counts["s3.not_offload"] == 3 and inv.counts["s3.keys"] == len(keys)
    assert all(r["bucket"] == bucket and r["size"] > 0 and r["last_modified_ms"] > 0 for r in objs)
    assert {r["role"] for r in objs} == {"data", "index"} and {r["layout"] for r in objs} == {"ledger"}
    for r in objs:
        assert r["key"].startswith(f"{r['uuid']}-ledger-{r['ledger_id']}")


def test_small_inventory_loads_in_memory_with_the_rows_spark_reads(
    spark: Any, zookeeper: Any, fresh_root: str, tmp_path: Any, monkeypatch: Any
) -> None:
    """A small local inventory is handed to Spark as Arrow (no Parquet scan in the audit's plans):
    the same tables, schemas and rows as Spark's own read, which larger ones still get."""
    import ledgerlens.inventory.collect as collect

    generate(zookeeper.hosts, root=fresh_root, scenario="planted", now_ms=default_now_ms())
    out = str(tmp_path / "inv")
    collect_inventory(spark, _source(zookeeper.hosts, fresh_root), None, out, progress=False)
    in_memory = load_inventory(spark, out)
    monkeypatch.setattr(collect, "INTERPRETED_ROWS", 10)  # more rows than that: Spark reads Parquet
    scanned = load_inventory(spark, out)
    assert set(in_memory) == set(scanned) >= {"bk_ledgers", "ml_ledgers", "cursors"}
    for name, df in in_memory.items():
        assert df.inputFiles() == [] and scanned[name].inputFiles(), name
        assert df.schema == scanned[name].schema == schemas.INVENTORY[name], name
        rows = [
            sorted(r[0] for r in t.select(F.to_json(F.struct("*"))).collect()) for t in (df, scanned[name])
        ]
        assert rows[0] == rows[1], name
    assert sum(df.count() for df in in_memory.values()) > 10


def test_collect_without_s3_and_unreachable_zookeeper(
    spark: Any, zookeeper: Any, fresh_root: str, tmp_path: Any
) -> None:
    generate(zookeeper.hosts, root=fresh_root, scenario="healthy", now_ms=default_now_ms())
    out = str(tmp_path / "inv")
    inv = collect_inventory(spark, _source(zookeeper.hosts, fresh_root), None, out, progress=False)
    assert not inv.s3_scanned and "offload_objects" not in load_inventory(spark, out)
    assert set(load_inventory(spark, out)) == set(inv.tables)
    assert inv.counts["bk_ledgers"] > 0
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(SourceError, match="127.0.0.1:1"):
        collect_inventory(
            spark,
            ZooKeeperSource(hosts="127.0.0.1:1", timeout_s=2),
            None,
            str(tmp_path / "x"),
            progress=False,
        )
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


_LOCAL_CLUSTER = textwrap.dedent(
    """
    import json, sys, time
    from pyspark.sql import SparkSession
    from ledgerlens.runtime.spark import configure
    from ledgerlens.settings.config import ZooKeeperSource
    from ledgerlens.inventory.collect import collect_inventory
    hosts, root, out = sys.argv[1:4]
    spark = configure(SparkSession.builder, master="local-cluster[2,1,1024]").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
    deadline = time.monotonic() + 120  # both executor JVMs registered (slow on a busy machine)
    while status().size() - 1 < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    zk = ZooKeeperSource(hosts=hosts, ledgers_root=root + "/ledgers",
                         managed_ledgers_root=root + "/managed-ledgers", schemas_root=root + "/schemas",
                         policies_root=root + "/admin/policies", tasks=4)
    inv = collect_inventory(spark, zk, None, out, progress=False)
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print("RESULT " + json.dumps({"counts": inv.counts, "executors": executors,
                                  "master": spark.sparkContext.master}))
    spark.stop()
    """
)


def test_collect_on_local_cluster(zookeeper: Any, fresh_root: str, tmp_path: Any) -> None:
    """Tasks serialize and run on separate executor JVMs/Python workers (``local-cluster`` master)."""
    truth = generate(zookeeper.hosts, root=fresh_root, scenario="healthy", now_ms=default_now_ms())
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(
        [sys.executable, "-c", _LOCAL_CLUSTER, zookeeper.hosts, fresh_root, str(tmp_path / "inv")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["master"] == "local-cluster[2,1,1024]" and result["executors"] == 2
    counts = result["counts"]
    for table in ("bk_ledgers", "managed_ledgers", "cursors"):
        assert counts[table] == truth.counts[table], table
    assert counts["bk_ledgers.reads"] >= counts["bk_ledgers"]
    assert counts["bk_ledgers.errors"] == 0 and counts["managed_ledgers.errors"] == 0


@pytest.mark.parametrize("tasks", [None, 3], ids=["driver", "tasks-asked-for"])
def test_few_task_slots_read_a_few_partitions_on_the_driver(  # type: ignore[no-untyped-def]
    spark, zookeeper, zk_client, fresh_root: str, tmp_path, tasks: int | None
) -> None:
    """On local[2], ledgers spread over 12 partitions (level-2 prefixes) are read on the driver, no
    Spark job; asking for tasks keeps Spark tasks. Both give every ledger."""
    from ledgerlens.formats.paths import ledger_path
    from ledgerlens_sandbox import wire

    assert spark.sparkContext.defaultParallelism <= 2
    ids = [1 + 10_000 * k for k in range(12)]  # 00/0000 ... 00/0011: one ledger per partition
    for i in ids:
        md = wire.ledger_metadata(
            ensemble=["b1:3181"], write_quorum=1, ack_quorum=1, length=i, last_entry_id=0
        )
        zk_client.create(ledger_path(i, f"{fresh_root}/ledgers"), wire.bk_metadata_v3(md), makepath=True)
    zk = _source(zookeeper.hosts, fresh_root, tasks=tasks)
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    inv = collect_inventory(spark, zk, None, str(tmp_path / "inv"), progress=False)
    spark_jobs = set(tracker.getJobIdsForGroup()) - jobs_before
    got = load_inventory(spark, inv.out_dir)["bk_ledgers"].select("ledger_id", "length").collect()
    assert sorted((r["ledger_id"], r["length"]) for r in got) == [(i, i) for i in ids]
    if tasks is None:
        assert not spark_jobs, f"the driver read 12 partitions, yet Spark ran jobs {sorted(spark_jobs)}"
    else:
        assert spark_jobs


@pytest.mark.parametrize("multi_read", [4, 0], ids=["multiRead-replies", "single-reads"])
def test_the_compiled_ledger_scan_gives_the_python_scans_table(
    zookeeper: Any, fresh_root: str, planted: Any, multi_read: int
) -> None:
    """multiRead replies decoded whole by the compiled decoder give the table the Python decoder
    gives from each result: the planted cluster's errors, unreadable (NoAuth) node, v1/v2 values and
    long ledger ids included, with the same scan counters."""
    from ledgerlens.sources.zk_client import PipelinedReader, connect
    from ledgerlens.sources.zookeeper import scan_ledgers

    root = f"{fresh_root}/ledgers"
    client = connect(zookeeper.hosts)
    try:
        level1 = sorted(c for c in client.get_children(root) if c.isdigit())

        def scan(compiled: bool) -> tuple[pa.Table, dict[str, int]]:
            reader = PipelinedReader(client, max_in_flight=16, multi_read=multi_read)
            batches = list(scan_ledgers(reader, root, level1, compiled=compiled))
            return pa.Table.from_batches(batches), reader.stats.as_dict()

        (fast, fast_stats), (slow, slow_stats) = scan(True), scan(False)
    finally:
        client.stop()
        client.close()
    assert fast.num_rows == planted["truth"].counts["bk_ledgers"]
    assert any("NoAuth" in (e or "") for e in fast.column("error").to_pylist())
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_stats == slow_stats


def test_a_large_namespace_is_scanned_in_topic_ranges_with_the_same_rows(
    zookeeper: Any, zk_client: Any, fresh_root: str, planted: Any
) -> None:
    """A namespace of more topics than a partition holds is planned as ranges of its topics (the
    first and last open); scanned range by range, as separate tasks would, the managed ledgers,
    their ledgers and cursors are exactly the rows of the whole-namespace scan (errors included),
    and a topic created between planning and reading is read by exactly one range."""
    from collections import Counter as _Counter

    from ledgerlens.sources import zookeeper as zks
    from ledgerlens.sources.zk_client import PipelinedReader

    src = zks.LiveZooKeeper(_source(zookeeper.hosts, fresh_root))
    root = f"{fresh_root}/managed-ledgers"
    spaces = src.plan("managed_ledgers")
    items = zks.split_large_namespaces(zk_client, root, spaces, 64, per_partition=2)
    assert len([i for i in items if zks.RANGE_SEP in i]) > len(spaces), (spaces, items)
    zk_client.create(f"{root}/{[i for i in items if zks.RANGE_SEP in i][0].split(zks.RANGE_SEP)[0]}/zz-late")

    def rows(parts: list[list[str]]) -> _Counter[str]:
        got: _Counter[str] = _Counter()
        for group in parts:
            for table, got_rows in zks.scan_managed_ledgers(PipelinedReader(zk_client), root, group):
                for row in got_rows.to_pylist() if isinstance(got_rows, pa.RecordBatch) else [got_rows]:
                    got[json.dumps([table, row], sort_keys=True, default=str)] += 1
        return got

    whole, ranged = rows([spaces]), rows([[i] for i in items])
    assert ranged == whole
    assert sum(1 for k in whole if '"zz-late' in k or "/zz-late" in k) >= 1
