"""Verification that does not repeat itself, through the real ``ledgerlens`` command on the generated
(planted) cluster, a real ZooKeeper and a real S3 server (moto).

The S3 server's own request log counts the GETs of objects (a listing is a GET of the bucket with a
query; re-verification sends HEADs): the first audit reads every object; after one new offload (a
copy of an existing one under a new uuid) and one object rewritten in place (same key, new
content), the second reads exactly those two offloads' objects, and its findings equal those of a
fresh ``--reverify-objects all`` run. A run with ``--s3-max-requests`` reports the objects left
unverified as ``undecidable`` and no orphan among them (of the planted ones), with the exit status
of a full run; the next budgeted run continues where it stopped. The same holds when the objects
are verified in Spark tasks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest

from generated import generated_cluster
from ledgerlens.formats.offload import ledger_object_keys, parse_offload_key
from ledgerlens.inventory.collect import collect_inventory
from ledgerlens.offload.verdicts import NOT_VERIFIED, VERDICTS_NAME, Incremental
from ledgerlens.settings.config import S3Source, ZooKeeperSource
from ledgerlens_sandbox.cluster import default_now_ms

pytestmark = [pytest.mark.integration, pytest.mark.spark]

NOW_MS = default_now_ms()
LEDGERLENS = str(Path(sys.executable).with_name("ledgerlens"))
_GET = re.compile(r'"(?:\x1b\[[0-9;]*m)*GET /([^/?" ]+)/([^?" ]+) HTTP')  # 206 lines are coloured


def _ledgerlens(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.run([LEDGERLENS, *argv], capture_output=True, text=True, env=env, timeout=900)


class ServerGets:
    """The object GETs the S3 server logged for one bucket since the last call."""

    def __init__(self, server: Any, bucket: str) -> None:
        self.path = Path(server.log_path)
        self.bucket = bucket
        self.offset = self.path.stat().st_size

    def since(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode("utf-8", "replace")
            self.offset = f.tell()
        return [m.group(2) for m in _GET.finditer(text) if m.group(1) == self.bucket]


def _findings(out: Path) -> list[tuple[Any, ...]]:
    """Every finding as a sorted tuple of its columns, but those of the comparison with a previous run."""
    rows = pq.read_table(out / "findings.parquet").to_pylist()
    cols = [c for c in rows[0] if c not in ("first_seen", "new")] if rows else []
    return sorted(tuple(str(r[c]) for c in cols) for r in rows)


@pytest.fixture()
def cluster(zookeeper: Any, s3_server: Any) -> dict[str, Any]:
    c = generated_cluster(zookeeper, s3_server, "incr", now_ms=NOW_MS, scenario="planted")
    c["args"] = ["--zookeeper", c["hosts"], "--s3-endpoint", s3_server.endpoint_url, "--bucket", c["bucket"],
                 "--no-progress", "--spark-master", "local[2]", "--as-of", str(NOW_MS)]  # fmt: skip
    c["s3"] = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    c["gets"] = ServerGets(s3_server, c["bucket"])
    return c


def _listed(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for page in c["s3"].get_paginator("list_objects_v2").paginate(Bucket=c["bucket"]):
        for o in page.get("Contents", []):
            out[o["Key"]] = o
    return out


def _plant_new_and_changed(c: dict[str, Any], out: Path) -> tuple[set[str], str]:
    """A copy of a referenced per-ledger offload under a new uuid (two new objects) and the index
    of another referenced offload rewritten in place, truncated (same key, new ETag); returns the
    keys the next run must read and the rewritten index's key."""
    segments = pq.read_table(out / "inventory" / "offload_segments").to_pylist()
    keys = {r["key"] for r in segments}
    ok = sorted(
        r["key"]
        for r in segments
        if r["role"] == "index"
        and r["layout"] == "ledger"
        and not r["problems"]
        and r["error"] is None
        and r["key"].removesuffix("-index") in keys  # its data object too
    )
    assert len(ok) >= 2, "the planted cluster has healthy per-ledger offloads"
    s3, bucket = c["s3"], c["bucket"]
    source = parse_offload_key(ok[0])
    assert source is not None and source.ledger_id is not None
    new_data, new_index = ledger_object_keys("00000000-1111-2222-3333-444444444444", source.ledger_id)
    old_data, old_index = ledger_object_keys(source.uuid, source.ledger_id)
    for src, dst in ((old_data, new_data), (old_index, new_index)):
        s3.copy_object(Bucket=bucket, Key=dst, CopySource={"Bucket": bucket, "Key": src})
    changed = ok[1]
    body = s3.get_object(Bucket=bucket, Key=changed)
    data, meta = body["Body"].read(), body["Metadata"]
    s3.put_object(Bucket=bucket, Key=changed, Body=data[: len(data) // 2], Metadata=meta)
    k = parse_offload_key(changed)
    assert k is not None
    changed_group = set(ledger_object_keys(k.uuid, k.ledger_id))
    c["gets"].since()  # the planting's own reads are not the audit's
    return {new_data, new_index} | changed_group, changed


def test_second_run_reads_only_new_and_changed_objects(cluster: dict[str, Any], tmp_path: Path) -> None:
    c = cluster
    out, fresh = tmp_path / "out", tmp_path / "fresh"

    first = _ledgerlens("audit", *c["args"], "--out", str(out))
    assert first.returncode == 0, first.stderr
    s1 = json.loads((out / "summary.json").read_text())
    listed = _listed(c)
    v1 = s1["offload_verification"]
    assert v1["verified"] == len(listed) > 0 and v1["reused"] == 0 and v1["not_verified"] == 0
    served = c["gets"].since()
    assert v1["gets"] == len(served) and sorted(served) == sorted(listed)  # one GET per object
    assert (out / VERDICTS_NAME).is_dir()
    entry = sorted((out / "history").iterdir())[-1]
    assert (entry / VERDICTS_NAME).is_dir()  # the history entry keeps the verdicts

    must_read, changed = _plant_new_and_changed(c, out)
    second = _ledgerlens("audit", *c["args"], "--out", str(out))
    assert second.returncode == 0, second.stderr
    s2 = json.loads((out / "summary.json").read_text())
    v2 = s2["offload_verification"]
    served = c["gets"].since()
    assert sorted(served) == sorted(must_read)  # the server saw GETs of exactly those objects
    assert v2 == {"verified": 4, "reused": len(listed) - 2, "not_verified": 0, "gets": 4}
    rows = {r["key"]: r for r in pq.read_table(out / "inventory" / "offload_segments").to_pylist()}
    assert rows[changed]["problems"]  # the rewritten index was read again: truncated
    assert len(sorted((out / "history").iterdir())) == 2
    older, newest = sorted((out / "history").iterdir())
    assert not (older / VERDICTS_NAME).exists() and (newest / VERDICTS_NAME).is_dir()  # slim history

    third = _ledgerlens("audit", *c["args"], "--out", str(fresh), "--previous", str(out),
                        "--reverify-objects", "all")  # fmt: skip
    assert third.returncode == 0, third.stderr
    s3 = json.loads((fresh / "summary.json").read_text())
    assert s3["offload_verification"]["reused"] == 0
    assert s3["offload_verification"]["verified"] == len(listed) + 2
    assert len(c["gets"].since()) == s3["offload_verification"]["gets"]
    assert _findings(out) == _findings(fresh)  # reused verdicts change no finding


def _make_newest(c: dict[str, Any], keys: set[str]) -> None:
    """Write ``keys`` again, same bytes and metadata, a second after every other object: the objects
    of one generated cluster share their second, and a budget spent oldest first (ties by key, a
    random uuid) would otherwise sometimes verify the orphans first."""
    s3, bucket = c["s3"], c["bucket"]
    time.sleep(1.1)
    for key in sorted(keys):
        body = s3.get_object(Bucket=bucket, Key=key)
        s3.put_object(Bucket=bucket, Key=key, Body=body["Body"].read(), Metadata=body["Metadata"],
                      ContentType=body.get("ContentType", "binary/octet-stream"))  # fmt: skip
    newest = {k: o["LastModified"] for k, o in _listed(c).items()}
    assert min(newest[k] for k in keys) > max(t for k, t in newest.items() if k not in keys)
    c["gets"].since()  # the re-writing's own reads are not the audit's


def test_request_budget_leaves_objects_undecidable_never_orphans(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    c = cluster
    budget = tmp_path / "budget"
    truth = c["truth"]
    orphans = {f["object_key"] for f in truth.expected_of("orphan_offload_object")}
    assert orphans, "the planted cluster has orphan offload objects"
    critical = any(f["severity"] == "critical" for f in truth.expected)
    _make_newest(c, orphans)  # oldest first: the budget runs out before the orphans' offload

    run = _ledgerlens("audit", *c["args"], "--out", str(budget), "--fail-on", "critical",
                      "--s3-max-requests", "2")  # fmt: skip
    assert run.returncode == (3 if critical else 0), run.stderr  # --fail-on decides as for a full run
    s = json.loads((budget / "summary.json").read_text())
    v = s["offload_verification"]
    listed = _listed(c)
    assert v["gets"] == len(c["gets"].since()) <= 2
    assert v["verified"] + v["not_verified"] == len(listed) and v["not_verified"] > 0
    assert s["undecidable"]["offload_objects_not_verified"] == v["not_verified"]
    said = [line for line in run.stderr.splitlines() if "not verified" in line]
    assert said == [
        f"ledgerlens: {v['not_verified']:,} offload objects not verified: the S3 request budget "
        "(--s3-max-requests 2) was reached; the next run continues"
    ]
    segments = pq.read_table(budget / "inventory" / "offload_segments").to_pylist()
    unverified = {r["key"] for r in segments if r["error"] == NOT_VERIFIED}
    assert len(unverified) == v["not_verified"] and unverified & orphans  # the test means something
    found = pq.read_table(budget / "findings.parquet").to_pylist()
    assert not [f for f in found if f["object_key"] in unverified and f["kind"].endswith("offload_object")]

    again = _ledgerlens("audit", *c["args"], "--out", str(budget), "--s3-max-requests", "2")
    assert again.returncode == 0, again.stderr
    v2 = json.loads((budget / "summary.json").read_text())["offload_verification"]
    # the next run reuses what the first verified and continues with the next oldest offloads
    assert v2["reused"] == v["verified"] and 0 < v2["verified"] and v2["gets"] <= 2
    assert v2["not_verified"] == v["not_verified"] - v2["verified"]


def test_spark_tasks_reuse_verdicts_and_share_the_budget(
    cluster: dict[str, Any], spark: Any, tmp_path: Path
) -> None:
    """The same through ``collect_inventory``'s Spark tasks (``driver_reads=False``): the previous
    verdicts joined onto the listing, each task's share of the budget."""
    c = cluster
    zk = ZooKeeperSource(hosts=c["hosts"])
    s3 = S3Source(bucket=c["bucket"], endpoint_url=c["endpoint"], region="us-east-1")

    def collect(name: str, **kw: Any) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
        out = tmp_path / name
        inc = Incremental(verdicts_out=str(out / VERDICTS_NAME), **kw)
        inv = collect_inventory(
            spark, zk, s3, str(out / "inventory"), progress=False, driver_reads=False, incremental=inc
        )
        rows = pq.read_table(out / "inventory" / "offload_segments").to_pylist()
        return inv.counts, {r["key"]: r for r in rows}

    counts, rows = collect("first")
    listed = _listed(c)
    assert set(rows) == set(listed) and counts["offload_segments.requests"] == len(c["gets"].since())
    kept = pq.read_table(tmp_path / "first" / VERDICTS_NAME).to_pylist()
    assert {r["key"] for r in kept} == {k for k, r in rows.items() if r["error"] is None}
    assert {r["etag"] for r in kept} <= {o["ETag"] for o in listed.values()}

    must_read, changed = _plant_new_and_changed(c, tmp_path / "first")
    counts, second = collect("second", previous=tmp_path / "first")
    assert sorted(c["gets"].since()) == sorted(must_read)
    assert counts["offload_segments.requests"] == 4 and counts["offload_segments.reused"] == len(listed) - 2
    assert second[changed]["problems"]
    counts, fresh = collect("fresh", previous=tmp_path / "first", reverify_all=True)
    assert counts["offload_segments.reused"] == 0 and counts["offload_segments.objects"] == len(listed) + 2
    assert second == fresh  # every row exactly as a fresh verification's
    c["gets"].since()

    counts, budget = collect("budget", max_requests=5)
    not_verified = {k for k, r in budget.items() if r["error"] == NOT_VERIFIED}
    assert counts["offload_segments.requests"] == len(c["gets"].since()) <= 5
    assert len(not_verified) == counts["offload_segments.not_verified"] > 0
    # one task holds the whole budget (a share of 5 GETs over 8 tasks would verify nothing)
    assert counts["offload_segments.objects"] == counts["offload_segments.requests"] >= 4
    assert counts["offload_segments.objects"] + len(not_verified) == len(listed) + 2
    assert all(budget[k]["cluster_name"] is None and not budget[k]["checks"] for k in not_verified)


def test_reuse_rule_and_budget_order() -> None:
    """An offload's verdicts stand only when every object is unchanged (key, size, ETag), the
    offload has as many objects and the depth is the same; the budget takes the oldest first."""
    from ledgerlens.offload.verdicts import reusable_rows, within_budget

    def obj(key: str, role: str, lm: int, size: int = 10, etag: str = '"e"') -> dict[str, Any]:
        return {"bucket": "b", "key": key, "uuid": key[:1], "ledger_id": 1, "role": role,
                "layout": "ledger", "size": size, "last_modified_ms": lm, "etag": etag}  # fmt: skip

    group = [obj("a-ledger-1", "data", 5), obj("a-ledger-1-index", "index", 6)]
    kept = {o["key"]: {**o, "last_modified_ms": 1, "error": None, "deep": False, "group_objects": 2,
                       "checks": ["data_header"], "problems": []} for o in group}  # fmt: skip
    rows = reusable_rows(group, kept, deep=False)
    assert rows is not None and [r["last_modified_ms"] for r in rows] == [5, 6]  # this listing's
    assert reusable_rows(group, kept, deep=True) is None  # a default verdict never stands for deep
    assert reusable_rows([group[0]], kept, deep=False) is None  # its index is gone: read again
    assert reusable_rows([{**group[0], "etag": '"f"'}, group[1]], kept, deep=False) is None
    assert reusable_rows([{**group[0], "size": 11}, group[1]], kept, deep=False) is None
    assert (
        reusable_rows(group, {**kept, "a-ledger-1": {**kept["a-ledger-1"], "error": "x"}}, deep=False) is None
    )

    old = [obj("c-ledger-1", "data", 1), obj("c-ledger-1-index", "index", 1)]
    young = [obj("d-ledger-1", "data", 9), obj("d-ledger-1-index", "index", 9)]
    fit, rest = within_budget([young, group, old], 5, deep=False)
    assert (fit, rest) == ([old, group], [young])
    fit, rest = within_budget([young, group, old], 5, deep=True)  # 3 GETs an offload
    assert (fit, rest) == ([old], [group, young])
    assert within_budget([young, old], None, deep=False) == ([young, old], [])
