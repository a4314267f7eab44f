"""ledgerlens against bytes a real Pulsar 4.0.8 standalone wrote (ZooKeeper metadata, BookKeeper, S3 offload).

(a) Every znode and object the broker wrote decodes with ledgerlens' decoders, with spot checks of
what the seeding made. (b) The audit pipeline reports exactly the planted anomalies, and nothing on
the healthy part, while a producer keeps writing and ledgers keep rolling over during the run, and
a topic keeps being compacted (bucket snapshots and cursor positions read from the bookie).

Thresholds of (b): real ledgers are seconds old, so ``as_of_ms`` is the real clock and
``min_orphan_age_s`` / ``retention_grace_s`` are ``failures.MAX_AGE_S`` (30 s): the planted anomalies are
made older than that before the audit (``plant`` waits), while the broker's own transient states
(a ledger just created and not yet in the managed-ledger list, a cursor or compacted ledger being
replaced, a consumed ledger about to be trimmed on a loaded topic) are younger than 30 s or are
dropped by the pipeline's re-verification. Every other threshold keeps its default (hours to days),
which no healthy real object reaches. Broker-default retention (0 / 0) is mirrored in the audit config.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from ledgerlens.errors import DecodeError
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.managed_ledger import decode_cursor, decode_managed_ledger
from ledgerlens.formats.names import parse_managed_ledger, topic_to_managed_ledger
from ledgerlens.formats.offload import decode_data_block_header, decode_offload_index, parse_offload_key
from ledgerlens.formats.paths import is_special_znode, ledger_id_from_path
from ledgerlens.formats.policies import decode_namespace_policies
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens_sandbox import seed as sd
from ledgerlens_sandbox.failures import (
    NEEDS_BOOKIE_READS,
    audit_config,
    expected_findings,
    finding_key,
    restore_s3,
)
from ledgerlens_sandbox.pulsar import make_client

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

_DOMAINS = {"persistent", "non-persistent"}


# --- (a) decode everything --------------------------------------------------------------------------


def _walk(zk: Any, path: str) -> list[tuple[str, bytes, Any]]:
    """Every node under ``path``. The broker keeps working while this walks (cursor ledgers roll over
    every second), so a node deleted between its parent's listing and its read is left out."""
    out = []
    stack = [path]
    while stack:
        p = stack.pop()
        try:
            data, stat = zk.get(p)
            children = zk.get_children(p)
        except NoNodeError:
            continue
        out.append((p, data, stat))
        stack.extend(f"{p.rstrip('/')}/{c}" for c in children)
    return out


def _decode_all(state: dict[str, Any], damaged: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Walk the metadata and the bucket, decode everything; returns decoded records and errors.

    ``damaged``: keys of the objects the planting damaged on purpose (not decoded here).
    """
    zk = sd.zk_client(state)
    errors: list[str] = []
    got: dict[str, Any] = {"ml": {}, "cursors": {}, "ledgers": {}, "schemas": {}, "policies": {}, "index": {}}
    try:
        for path, data, _ in _walk(zk, "/managed-ledgers"):
            parts = path.split("/")[2:]
            try:
                if len(parts) == 4 and parts[2] in _DOMAINS:
                    got["ml"][path] = decode_managed_ledger(data, path=path)
                    parse_managed_ledger("/".join(parts))
                elif len(parts) == 5 and parts[2] in _DOMAINS:
                    got["cursors"][path] = decode_cursor(data, path=path)
                elif data:
                    errors.append(f"{path}: unexpected data on an intermediate node")
            except DecodeError as e:
                errors.append(str(e))
        for path, data, _ in _walk(zk, "/ledgers"):
            name = path.rsplit("/", 1)[1]
            if not re.fullmatch(r"L\d+", name):
                continue
            if any(is_special_znode(seg) for seg in path.split("/")[2:3]):
                continue
            try:
                got["ledgers"][ledger_id_from_path(path)] = decode_ledger_metadata(data, path=path)
            except DecodeError as e:
                errors.append(str(e))
        for path, data, _ in _walk(zk, "/schemas"):
            if len(path.split("/")) == 5:
                try:
                    got["schemas"][path] = decode_schema_locator(data, path=path)
                except DecodeError as e:
                    errors.append(str(e))
        for path, data, _ in _walk(zk, "/admin/policies"):
            if len(path.split("/")) == 5:
                try:
                    got["policies"][path] = decode_namespace_policies(data, path=path)
                except DecodeError as e:
                    errors.append(str(e))
    finally:
        zk.stop()
        zk.close()
    from ledgerlens_sandbox.failures import _s3

    s3 = _s3(state)
    bucket = state["bucket"]
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]  # fmt: skip
    got["keys"] = keys
    blocks = 0
    for key in keys:
        parsed = parse_offload_key(key)
        if parsed is None:
            errors.append(f"{key}: not an offload key")
            continue
        if parsed.role != "index" or key in damaged or key.removesuffix("-index") in damaged:
            continue
        try:
            index = decode_offload_index(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), key=key)
            got["index"][key] = index
            data_key = key.removesuffix("-index")
            if data_key not in keys:
                continue  # the planted missing data object
            for led in index.ledgers:
                for entry in led.entries:
                    rng = f"bytes={entry.offset}-{entry.offset + 127}"
                    head = s3.get_object(Bucket=bucket, Key=data_key, Range=rng)["Body"].read()
                    hdr = decode_data_block_header(head, key=data_key)
                    assert hdr.first_entry_id == entry.entry_id, (data_key, hdr, entry)
                    blocks += 1
        except DecodeError as e:
            errors.append(str(e))
    got["blocks"] = blocks
    got["errors"] = errors
    return got


@pytest.fixture(scope="module")
def decoded(pulsar_env: Any) -> dict[str, Any]:
    return _decode_all(pulsar_env.state, frozenset(pulsar_env.truth.get("damaged_objects", [])))


def test_sandbox_is_running(pulsar_env: Any) -> None:
    status = pulsar_env.box.status()
    assert status["running"], status
    assert status["clusters"] == ["standalone"]
    for url in (status["web_url"], status["service_url"], status["s3_endpoint"]):
        assert "127.0.0.1" in url


def test_everything_the_broker_wrote_decodes(decoded: dict[str, Any]) -> None:
    assert decoded["errors"] == []
    assert len(decoded["ml"]) >= 10
    assert len(decoded["cursors"]) >= 8
    assert len(decoded["ledgers"]) >= 20
    assert decoded["index"] and decoded["blocks"] >= len(decoded["index"]) - 1


def test_ledger_custom_metadata(decoded: dict[str, Any]) -> None:
    components = Counter(m.custom_text().get("component") for m in decoded["ledgers"].values())
    assert components["managed-ledger"] >= 10
    assert components["schema"] >= 2
    ml = topic_to_managed_ledger(sd.TOPIC_ODD)
    mine = {i: m.custom_text() for i, m in decoded["ledgers"].items()}
    mine = {i: t for i, t in mine.items() if t.get("pulsar/managed-ledger") == ml}
    data_ledgers = {i for i, t in mine.items() if "pulsar/cursor" not in t}
    cursor_ledgers = {i: t["pulsar/cursor"] for i, t in mine.items() if "pulsar/cursor" in t}
    # cursor ledgers carry the managed ledger and the encoded cursor name (they roll over every second)
    assert set(cursor_ledgers.values()) <= {"sub+active+%C3%A9", "sub-partial", "sub+inactive+100%25"}
    listed = {li.ledger_id for li in decoded["ml"][f"/managed-ledgers/{ml}"].ledgers}
    assert data_ledgers and data_ledgers <= listed | {max(listed) + 1}
    for m in decoded["ledgers"].values():
        assert m.custom_text().get("application") == "pulsar", m
        assert m.format_version == 3


def test_cursors_with_encoded_names(decoded: dict[str, Any], pulsar_env: Any) -> None:
    ml = topic_to_managed_ledger(sd.TOPIC_ODD)
    names = {p.rsplit("/", 1)[1] for p in decoded["cursors"] if p.startswith(f"/managed-ledgers/{ml}/")}
    assert names == {"sub+active+%C3%A9", "sub-partial", "sub+inactive+100%25"}
    parts = [f"{sd.TOPIC_PARTITIONED}-partition-{i}" for i in range(sd.PARTITIONS)]
    for t in parts:
        assert f"/managed-ledgers/{topic_to_managed_ledger(t)}" in decoded["ml"]


def test_compacted_ledger_property(decoded: dict[str, Any], pulsar_env: Any) -> None:
    path = f"/managed-ledgers/{topic_to_managed_ledger(sd.TOPIC_COMPACTED)}/__compaction"
    compacted = decoded["cursors"][path].compacted_ledger_id
    assert compacted is not None and compacted in decoded["ledgers"]
    meta = decoded["ledgers"][compacted].custom_text()
    assert meta["component"] == "compacted-ledger", meta


def test_delayed_bucket_properties(decoded: dict[str, Any]) -> None:
    path = f"/managed-ledgers/{topic_to_managed_ledger(sd.TOPIC_DELAYED)}/delayed-sub"
    buckets = decoded["cursors"][path].delayed_bucket_ledgers
    assert len(buckets) >= 2, decoded["cursors"][path]
    for key, ledger_id in buckets.items():
        assert len(key.split("_")) == 3 or key.count("_") >= 2
        assert ledger_id in decoded["ledgers"]
        assert decoded["ledgers"][ledger_id].custom_text()["component"] == "delayed-index-bucket"


def test_schema_locators_with_versions(decoded: dict[str, Any]) -> None:
    avro = decoded["schemas"]["/schemas/ll-app/orders/avro-evolution"]
    assert len(avro.index) >= 3 and avro.latest.version == max(e.version for e in avro.index)
    js = decoded["schemas"]["/schemas/ll-app/orders/json+schema"]
    assert len(js.index) >= 2
    for loc in decoded["schemas"].values():
        for lid in loc.ledger_ids:
            assert decoded["ledgers"][lid].custom_text()["component"] == "schema"


def test_policies_and_offload_metadata(decoded: dict[str, Any], pulsar_env: Any) -> None:
    orders = decoded["policies"]["/admin/policies/ll-app/orders"]
    assert (orders.retention_minutes, orders.retention_mb) == (60, 100)
    assert decoded["policies"]["/admin/policies/ll-app/tiered"].offload_threshold_bytes == 0
    ml = decoded["ml"][f"/managed-ledgers/{topic_to_managed_ledger(sd.TOPIC_OFFLOAD)}"]
    off = [li for li in ml.ledgers if li.offload is not None and li.offload.complete]
    assert off and all(li.offload.bookkeeper_deleted for li in off)
    for li in off:
        assert li.offload.driver == "S3" and li.offload.bucket == pulsar_env.state["bucket"]
        key = f"{li.offload.uuid}-ledger-{li.ledger_id}-index"
        index = decoded["index"][key]
        assert index.version == 1 and index.ledgers[0].metadata is not None
        assert index.ledgers[0].metadata.last_entry_id + 1 == li.entries


# --- (b) the audit finds exactly what was planted ---------------------------------------------------


class _Producer(threading.Thread):
    """Keeps writing to healthy topics (ledgers roll over every 50 entries) until stopped."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.state = state
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            client = make_client(self.state)
            producers = [
                client.create_producer(t, batching_enabled=False) for t in (sd.TOPIC_LIVE, sd.TOPIC_ODD)
            ]
            while not self.stop.is_set():
                for p in producers:
                    p.send(f"live-{self.sent}".encode())
                    self.sent += 1
                time.sleep(0.01)
            for p in producers:
                p.close()
            client.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


class _Compactor(threading.Thread):
    """Keeps compacting the compacted topic (new keyed messages, then a compaction) until stopped:
    compacted ledgers are created and replaced while the audit runs."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.state = state
        self.stop = threading.Event()
        self.compactions = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from ledgerlens_sandbox.pulsar import admin, topic_path

        web = self.state["web_url"]
        path = topic_path(sd.TOPIC_COMPACTED) + "/compaction"
        try:
            client = make_client(self.state)
            producer = client.create_producer(sd.TOPIC_COMPACTED, batching_enabled=False)
            while not self.stop.is_set():
                for i in range(20):
                    producer.send(f"v{self.compactions}".encode(), partition_key=f"key-{i % 10}")
                admin(web, "PUT", path, ok=(200, 204, 409))
                while not self.stop.is_set() and admin(web, "GET", path).get("status") == "RUNNING":
                    time.sleep(0.2)
                self.compactions += 1
            producer.close()
            client.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def test_audit_reports_exactly_the_planted_anomalies(pulsar_env: Any, spark: Any, tmp_path: Path) -> None:
    from ledgerlens.audit import pipeline
    from ledgerlens.settings.config import BookieSource, S3Source, ZooKeeperSource

    state = pulsar_env.state
    zk = sd.zk_client(state)
    live_ml = f"/managed-ledgers/{topic_to_managed_ledger(sd.TOPIC_LIVE)}"
    before = {li.ledger_id for li in decode_managed_ledger(zk.get(live_ml)[0], path=live_ml).ledgers}
    producer = _Producer(state)
    producer.start()
    compactor = _Compactor(state)
    compactor.start()
    try:
        time.sleep(2)
        t0 = time.monotonic()
        run = pipeline.run(
            spark,
            ZooKeeperSource(hosts=state["zookeeper_hosts"]),
            S3Source(bucket=state["bucket"], endpoint_url=state["s3_endpoint"], region=state["region"]),
            audit_config(),
            tmp_path / "audit",
            progress=False,
            bookie=BookieSource(),  # bucket snapshots and cursor positions read from the bookie
        )
        wall = time.monotonic() - t0
    finally:
        producer.stop.set()
        compactor.stop.set()
        producer.join(timeout=60)
        compactor.join(timeout=60)
    after = {li.ledger_id for li in decode_managed_ledger(zk.get(live_ml)[0], path=live_ml).ledgers}
    zk.stop()
    zk.close()
    assert producer.error is None, producer.error
    assert compactor.error is None and compactor.compactions >= 1, (compactor.error, compactor.compactions)
    counts = run.summary["inventory_counts"]
    assert counts["bucket_snapshots"] >= 3 and counts["cursor_positions"] >= 5, counts
    print(f"audit wall time {wall:.1f}s, {producer.sent} messages written during it, summary {run.summary}")
    assert after - before, "no ledger rolled over during the audit"

    findings = run.findings_pandas()
    got = sorted((finding_key(r) for r in findings.to_dict("records")), key=repr)
    expected = sorted(
        (finding_key(r) for r in expected_findings(pulsar_env.truth, bookie_reads=True)), key=repr
    )
    # the planted stale compacted ledger is one the rule without bookie reads skips (the znode lags)
    stale = [f for f in pulsar_env.truth["expected"] if f.get(NEEDS_BOOKIE_READS)]
    assert [f["component"] for f in stale] == ["compacted-ledger"], pulsar_env.truth["expected"]
    assert finding_key(stale[0]) in got
    missing = [e for e in expected if e not in got]
    extra = [g for g in got if g not in expected]
    assert not missing and not extra, f"missing {missing}\nextra {extra}"


def test_s3_outage_ends(pulsar_env: Any) -> None:
    """After the audit the broker's S3 path comes back on the same port."""
    restore_s3(pulsar_env.box.state())
    state = pulsar_env.box.state()
    assert state["pids"].get("s3_relay")
    assert pulsar_env.box.status()["running"]
