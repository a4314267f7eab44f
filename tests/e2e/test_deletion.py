"""Approve and delete against a real Pulsar standalone: PIP-186 two-phase deletion from outside the broker.

- ``test_fabricated_orphans_deleted_on_the_shared_sandbox`` (in ``make test``): the whole flow on
  the session's sandbox, on orphans fabricated in a tenant of their own; removes what it made.

The other (slow) deletion tests mutate the cluster, so they run their own sandbox (module fixture),
never the session one that other e2e tests audit for exact findings. It is seeded and planted like the
shared one (real traffic, real leaks), plus orphans for the race and forgery tests, and its bookie
runs its garbage collector every two seconds so that "the bookie no longer serves a deleted
ledger" is observable within the test.

- ``test_approved_orphans_are_deleted_and_nothing_else``: audit, plan, approve, publish (twice),
  dry run, execute; every approved orphan is gone (metadata removed, the bookie refuses its
  entries, objects gone), every other ledger and object is byte-for-byte what it was, the audit
  afterwards reports none of them, journal and counters agree.
- ``test_races_and_forgery_are_refused_and_journaled``: a ledger referenced again after approval,
  hand-made messages (a live ledger, another managed ledger's ledger, an item of no approved plan,
  a poison payload) are refused and journaled, the poison ends in the dead-letter topic; a
  tampered journal stops the deleter.
- ``test_faults_repeated`` (slow): deleter SIGKILLed at random points, S3 stopped mid-run,
  ZooKeeper session expired, over several runs with a fixed seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from ledgerlens.deletion import messages as m
from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.deleter import Deleter, DeleterConfig
from ledgerlens.deletion.journal import Journal, JournalTampered
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.plan import build_plan, write_plan
from ledgerlens.deletion.publish import publish, pulsar_client
from ledgerlens.deletion.status import dead_letters, final_outcomes, in_flight
from ledgerlens.errors import SandboxError
from ledgerlens.formats.paths import ledger_path
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens_sandbox.failures import expected_findings
from ledgerlens_sandbox.pulsar import AWS_DUMMY, PulsarSandbox, admin, topic_path

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
RACE_TOPIC = "persistent://ll-fail/ns/race victims"
RACE_ML = "ll-fail/ns/persistent/race+victims"
AGE_S = 30


# --- helpers ---------------------------------------------------------------------------------------


def bookie_read(port: int, ledger_id: int, entry_id: int = 0) -> int:
    """Read one entry straight from the bookie (v2 wire protocol); returns its rc (0: served)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">iiqq", 20, (2 << 24) | (2 << 16), ledger_id, entry_id))

        def recv(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise EOFError("bookie closed the connection")
                buf += chunk
            return buf

        (size,) = struct.unpack(">i", recv(4))
        _, rc, _, _ = struct.unpack(">iiqq", recv(size)[:24])
        return int(rc)


@dataclasses.dataclass
class Inventory:
    """Every ledger znode (bytes, version), every object (ETag, SHA-256 of its bytes), and what the
    managed ledgers reference (ledger ids in lists and cursors, offload uuids)."""

    ledgers: dict[int, tuple[bytes, int]]
    objects: dict[str, tuple[str, str]]
    referenced: set[int]
    uuids: set[str]
    newest_ref: dict[str, int]  # managed ledger -> the highest ledger id it (or a cursor) references


def snapshot(zk: Any, s3: Any, bucket: str) -> Inventory:
    """The full inventory of the sandbox's BookKeeper metadata, bucket and managed-ledger references."""
    from ledgerlens.deletion.verify import LiveReader
    from ledgerlens.formats.paths import is_ledger_level1, ledger_id_from_path

    ledgers: dict[int, tuple[bytes, int]] = {}
    stack = [f"/ledgers/{c}" for c in zk.get_children("/ledgers") if is_ledger_level1(c)]
    while stack:
        p = stack.pop()
        try:
            children = zk.get_children(p)
        except NoNodeError:  # BookKeeper removes a parent node its last ledger left
            continue
        for c in children:
            child = f"{p}/{c}"
            if c.startswith("L"):
                try:
                    data, stat = zk.get(child)
                except NoNodeError:  # vanished between list and read
                    continue
                if b"pulsar/system/persistent/__ledger_deletion" in data:
                    continue  # the deletion topics' own ledgers: the broker rolls and trims them
                ledgers[ledger_id_from_path(child)] = (data, stat.version)
            else:
                stack.append(child)
    objects: dict[str, tuple[str, str]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            objects[o["Key"]] = (o["ETag"], hashlib.sha256(body).hexdigest())
    level = [""]
    for _ in range(4):  # tenant / namespace / domain / topic
        level = [
            f"{p}/{c}" if p else c
            for p in level
            for c in zk.get_children("/managed-ledgers" + (f"/{p}" if p else ""))
        ]
    mls = level
    referenced: set[int] = set()
    uuids: set[str] = set()
    newest: dict[str, int] = {}
    for ml, got in LiveReader(zk, zk).managed_ledgers(mls).items():
        assert not isinstance(got, Exception), got
        refs, info = got
        referenced |= refs
        uuids |= info["uuids"]
        newest[ml] = max(refs, default=-1)
    return Inventory(ledgers, objects, referenced, uuids, newest)


def make_race_orphans(state: dict[str, Any], zk: Any) -> list[Any]:
    """Three orphan ledgers of one topic (dropped from its list by version-checked edits); returns
    their LedgerInfo messages so that a test can reference one again."""
    from ledgerlens_sandbox.pulsar import make_client
    from ledgerlens_sandbox.seed import ensure_namespace, produce

    ensure_namespace(state["web_url"], "ll-fail/ns", {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    client = make_client(state)
    try:
        produce(client, RACE_TOPIC, 230)
    finally:
        client.close()
    admin(state["web_url"], "PUT", topic_path(RACE_TOPIC) + "/unload")
    path = f"/managed-ledgers/{RACE_ML}"
    data, stat = zk.get(path)
    info = mlpb.ManagedLedgerInfo()
    info.ParseFromString(data)
    if len(info.ledgerInfo) < 5:
        raise SandboxError(f"{path}: expected at least 5 ledgers, got {len(info.ledgerInfo)}")
    dropped = [info.ledgerInfo[i] for i in (0, 1, 2)]
    kept = [li for li in info.ledgerInfo if li not in dropped]
    copies = []
    for li in dropped:
        c = mlpb.ManagedLedgerInfo.LedgerInfo()
        c.CopyFrom(li)
        copies.append(c)
    del info.ledgerInfo[:]
    info.ledgerInfo.extend(kept)
    zk.set(path, info.SerializeToString(), version=stat.version)
    return copies


def reference_again(zk: Any, li: Any) -> None:
    """Put a dropped ledger back into its managed ledger's list (version-checked), oldest first."""
    path = f"/managed-ledgers/{RACE_ML}"
    data, stat = zk.get(path)
    info = mlpb.ManagedLedgerInfo()
    info.ParseFromString(data)
    ledgers = sorted([*info.ledgerInfo, li], key=lambda x: x.ledgerId)
    del info.ledgerInfo[:]
    info.ledgerInfo.extend(ledgers)
    zk.set(path, info.SerializeToString(), version=stat.version)


@dataclasses.dataclass
class DelEnv:
    box: PulsarSandbox
    state: dict[str, Any]
    truth: dict[str, Any]
    zk: Any
    s3: Any
    race: list[Any]
    audit_dir: Path
    plan: dict[str, Any]
    work: Path

    @property
    def bucket(self) -> str:
        return str(self.state["bucket"])

    def config(self, **kw: Any) -> DeleterConfig:
        base = DeleterConfig(
            zookeeper=self.state["zookeeper_hosts"],
            service_url=self.state["service_url"],
            web_url=self.state["web_url"],
            s3=S3Source(self.bucket, endpoint_url=self.state["s3_endpoint"]),
            until_idle_s=6,
            retry_delay_s=1,
            max_attempts=3,
            execute=True,
            batch_size=50,
        )
        return dataclasses.replace(base, **kw)


def run_audit(spark: Any, env_state: dict[str, Any], out: Path) -> Any:
    from ledgerlens.audit import pipeline

    zk = ZooKeeperSource(hosts=env_state["zookeeper_hosts"])
    s3 = S3Source(env_state["bucket"], endpoint_url=env_state["s3_endpoint"])
    cfg = AuditConfig(min_orphan_age_s=AGE_S, retention_grace_s=AGE_S)
    return pipeline.run(spark, zk, s3, cfg, out, progress=False)


@pytest.fixture(scope="module")
def del_env(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[DelEnv]:
    """A Pulsar sandbox of its own: up, seeded, extra orphans, planted; audited and planned once."""
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens_sandbox.failures import plant
    from ledgerlens_sandbox.seed import seed

    saved = {k: os.environ.get(k) for k in AWS_DUMMY}
    os.environ.update(AWS_DUMMY)
    work = tmp_path_factory.mktemp("deletion")
    box = PulsarSandbox(work / "sandbox", extra_conf={"gcWaitTime": "2000"})
    zk = None
    try:
        try:
            state = box.up(timeout=300)
            seed(state)
            zk = KazooClient(hosts=state["zookeeper_hosts"], timeout=30)
            zk.start(timeout=30)
            race = make_race_orphans(state, zk)
            truth = plant(box.state())  # waits until every planted anomaly is older than AGE_S
        except SandboxError as e:
            pytest.fail(f"Pulsar sandbox: {e}", pytrace=False)
        state = box.state()
        s3 = boto3.client("s3", endpoint_url=state["s3_endpoint"], region_name="us-east-1")
        audit = run_audit(spark, state, work / "audit-before")
        plan = build_plan(audit.out_dir)
        yield DelEnv(box, state, truth, zk, s3, race, Path(audit.out_dir), plan, work)
    finally:
        if zk is not None:
            zk.stop()
            zk.close()
        box.down()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def items_of(plan: dict[str, Any], pred: Any) -> list[dict[str, Any]]:
    return [i for i in plan["items"] if pred(i)]


def journal_counts(journal: Journal, deleter: str) -> Counter[str]:
    return Counter(
        str(r["outcome"])
        for r in journal.records()
        if r.get("type") == "outcome" and r.get("deleter") == deleter
    )


def assert_untouched(
    before: Inventory,
    after: Inventory,
    gone_ledgers: set[int] | frozenset[int] = frozenset(),
    gone_keys: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Every ledger and object of ``before`` not meant to go is still there, byte for byte; the ones
    meant to go are gone.

    The broker keeps working meanwhile, and only its own work is allowed besides: ledgers it creates
    are new (not in ``before``); a ledger of a live managed ledger it closes keeps existing (the
    deleter only ever deletes, never writes a ledger znode); a ledger or offload copy it trims was
    referenced by its managed ledger before and is no longer referenced after (the broker drops the
    reference first; the deleter never edits a managed ledger, so a live ledger it deleted would
    still be referenced); a cursor ledger it rolled over (an active subscription's cursor moves to a
    new ledger every few seconds here and the old one is deleted) is unreferenced after while its
    managed ledger references a newer ledger."""
    from ledgerlens.formats.bookkeeper import decode_ledger_metadata
    from ledgerlens.formats.offload import parse_offload_key

    def rolled_cursor_ledger(lid: int) -> bool:
        custom = decode_ledger_metadata(before.ledgers[lid][0], path=str(lid)).custom_text()
        ml = custom.get("pulsar/managed-ledger")
        return bool(custom.get("pulsar/cursor")) and ml is not None and after.newest_ref.get(ml, -1) > lid

    def key_uuid(key: str) -> str | None:
        parsed = parse_offload_key(key)
        return parsed.uuid if parsed is not None else None

    removed, trimmed, rewritten = [], [], []
    for lid, node in before.ledgers.items():
        if lid in gone_ledgers or after.ledgers.get(lid) == node:
            continue
        if lid in after.ledgers:
            rewritten.append(lid)  # the broker closed or updated one of its live ledgers
        elif lid in after.referenced:
            removed.append(lid)  # a live ledger is gone: never the broker's way
        elif lid in before.referenced or rolled_cursor_ledger(lid):
            trimmed.append(lid)
        else:
            removed.append(lid)
    assert not removed, f"ledgers removed that were neither approved nor trimmed by the broker: {removed}"
    assert not gone_ledgers & set(after.ledgers), f"still there: {sorted(gone_ledgers & set(after.ledgers))}"
    changed_keys = []
    for k, v in before.objects.items():
        if k in gone_keys or after.objects.get(k) == v:
            continue
        u = key_uuid(k)
        if k not in after.objects and u in before.uuids and u not in after.uuids:
            trimmed.append(k)  # an offloaded ledger the broker deleted by its retention
            continue
        changed_keys.append(k)
    assert not changed_keys, f"objects changed or removed: {changed_keys}"
    assert not gone_keys & set(after.objects), f"still there: {sorted(gone_keys & set(after.objects))}"
    if rewritten or trimmed:
        print(f"broker's own work meanwhile: closed/updated {rewritten}, trimmed {trimmed}")


def deleter_cmd(journal: Path, sandbox: Path, *extra: str) -> list[str]:
    """``ledgerlens deleter --execute`` on the test's sandbox, as a separate process."""
    return [sys.executable, "-m", "ledgerlens.cli", "deleter", "--journal", str(journal), "--sandbox",
            str(sandbox), "--execute", *extra]  # fmt: skip


def assert_counters_agree(journal: Journal, cfg: DeleterConfig, metrics: DeletionMetrics) -> None:
    got = journal_counts(journal, cfg.instance)
    deleted = ("deleted_ledgers", "deleted_offload_copies", "deleted_remote_segments")
    assert sum(metrics.value(name) for name in deleted) == got["deleted"]
    assert metrics.value("already_gone") == got["already_gone"]
    assert metrics.value("skipped_in_use") == got["skipped_in_use"]
    assert metrics.value("skipped_mismatch") == got["skipped_mismatch"]
    assert metrics.value("failed") == got["failed"]
    assert metrics.value("received") == sum(got.values()) == metrics.value("acked") + 0


# --- tests -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_approved_orphans_are_deleted_and_nothing_else(del_env: DelEnv, spark: Any) -> None:
    env = del_env
    race_ids = {li.ledgerId for li in env.race}
    truth = expected_findings(env.truth, bookie_reads=False)  # the deletion tests audit without them
    planted_ledgers = {e["ledger_id"] for e in truth if e["kind"] == "orphan_ledger"}
    planted_keys = {e["object_key"] for e in env.truth["expected"] if e["kind"] == "orphan_offload_object"}
    plan = env.plan
    # the plan holds the planted and race orphans, and nothing a managed ledger references: a real
    # broker sometimes leaks one more (an empty ledger created while its topic was unloaded), which
    # is an orphan too, proven here independently of the audit from the live references
    ledger_items = items_of(plan, lambda i: i["action"] == "delete_ledger")
    object_items = items_of(plan, lambda i: i["action"] == "delete_object")
    planned_ledgers = {i["expected"]["ledger_id"] for i in ledger_items}
    planned_keys = {o["key"] for i in object_items for o in i["expected"]["objects"]}
    assert planted_ledgers | race_ids <= planned_ledgers
    assert planted_keys <= planned_keys
    now = snapshot(env.zk, env.s3, env.bucket)
    extra = planned_ledgers - planted_ledgers - race_ids
    assert extra <= set(now.ledgers) and not extra & now.referenced, f"planned but referenced: {extra}"
    extra_uuids = {
        i["expected"]["uuid"]
        for i in object_items
        if not {o["key"] for o in i["expected"]["objects"]} <= planted_keys
    }
    assert not extra_uuids & now.uuids, f"planned offload copies still referenced: {extra_uuids}"
    if extra or extra_uuids:
        print(f"orphans the broker leaked besides the planted ones: ledgers {extra}, copies {extra_uuids}")
    assert not items_of(plan, lambda i: i["action"] == "load_topic")

    approved = items_of(plan, lambda i: i["item_id"] not in {f"ledger:{r}" for r in race_ids})
    ids = [i["item_id"] for i in approved]
    plan_path = write_plan(plan, env.work / "plan.json")
    journal = Journal(env.work / "journal.jsonl")
    approve(
        plan_path,
        journal,
        plan_hash_given=plan["plan_hash"],
        approver="carol",
        reason="INC-1 orphans",
        item_ids=ids,
        out=env.work / "approval.json",
    )

    gone_ledgers = {i["expected"]["ledger_id"] for i in approved if i["action"] == "delete_ledger"}
    gone_keys = {
        o["key"] for i in approved if i["action"] == "delete_object" for o in i["expected"]["objects"]
    }
    bookie = int(env.state["ports"]["bookie"])
    served_before = {lid: bookie_read(bookie, lid) for lid in gone_ledgers}
    before = snapshot(env.zk, env.s3, env.bucket)

    client = pulsar_client(env.state["service_url"])
    try:
        first = publish(env.work / "approval.json", journal, client)
        again = publish(env.work / "approval.json", journal, client)
        assert (first.sent, first.failed, again.sent, again.already) == (len(ids), [], 0, len(ids))
        assert in_flight(env.state["web_url"]) == len(ids)

        dry = Deleter(env.config(execute=False), journal).run()
        assert dry.outcomes == Counter({"would_delete": len(ids)})
        assert_untouched(before, snapshot(env.zk, env.s3, env.bucket))  # the dry run touched nothing

        cfg = env.config()
        metrics = DeletionMetrics()
        report = Deleter(cfg, journal, metrics).run()
        assert report.outcomes == Counter({"deleted": len(ids)})
        deadline = time.monotonic() + 30  # acknowledgements reach the broker's stats asynchronously
        while in_flight(env.state["web_url"]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert in_flight(env.state["web_url"]) == 0
        assert dead_letters(client) == []
    finally:
        client.close()
    assert_counters_agree(journal, cfg, metrics)
    assert metrics.value("deleted_ledgers") == len(gone_ledgers)
    assert metrics.value("deleted_offload_copies") == len(object_items)

    after = snapshot(env.zk, env.s3, env.bucket)
    assert_untouched(before, after, gone_ledgers, gone_keys)
    a_ledgers = after.ledgers
    for lid in race_ids:
        assert lid in a_ledgers

    # the bookie stops serving them once its garbage collector ran (every 2 s here)
    served = [lid for lid, rc in served_before.items() if rc == 0]
    assert served, f"the bookie served none of the approved ledgers before the deletion: {served_before}"
    deadline = time.monotonic() + 90
    while served and time.monotonic() < deadline:
        served = [lid for lid in served if bookie_read(bookie, lid) == 0]
        time.sleep(1)
    assert not served, f"bookie still serves deleted ledgers {served}"
    live = next(lid for lid in sorted(a_ledgers) if lid not in race_ids and bookie_read(bookie, lid) == 0)
    assert live not in gone_ledgers  # the bookie is up and serves the ledgers that were kept

    audit = run_audit(spark, env.state, env.work / "audit-after")
    found = audit.findings_pandas()
    assert not set(found["ledger_id"].dropna().astype(int)) & gone_ledgers
    assert not set(found["object_key"].dropna()) & gone_keys
    outcomes = final_outcomes(journal)
    assert all(outcomes[(plan["plan_hash"], i)] == ["deleted"] for i in ids)


@pytest.mark.slow
def test_races_and_forgery_are_refused_and_journaled(del_env: DelEnv, tmp_path: Path) -> None:
    env = del_env
    plan = env.plan
    v1, v2, v3 = (f"ledger:{li.ledgerId}" for li in env.race)
    journal = Journal(tmp_path / "journal.jsonl")
    plan_path = write_plan(plan, tmp_path / "plan.json")
    approval = approve(
        plan_path,
        journal,
        plan_hash_given=plan["plan_hash"],
        approver="dave",
        reason="race victims",
        item_ids=[v1, v2],
        out=tmp_path / "approval.json",
    )
    # between approval and deletion, v1 is referenced again by its managed ledger
    reference_again(env.zk, env.race[0])
    live_info = mlpb.ManagedLedgerInfo()
    live_info.ParseFromString(env.zk.get("/managed-ledgers/ll-app/orders/persistent/live")[0])
    live_topic_ledger = live_info.ledgerInfo[0].ledgerId
    item2 = next(i for i in plan["items"] if i["item_id"] == v2)

    client = pulsar_client(env.state["service_url"])
    try:
        assert publish(tmp_path / "approval.json", journal, client).sent == 2
        producer = client.create_producer(m.DELETION_TOPIC)
        hand_made = []
        a = m.item_to_message(item2, plan["plan_hash"])  # approved item id, but a live ledger
        a.ledgerId = live_topic_ledger
        hand_made.append(a)
        b = m.item_to_message(item2, plan["plan_hash"])  # approved item, another managed ledger
        b.managedLedgerName = "ll-app/orders/persistent/live"
        hand_made.append(b)
        c = m.item_to_message(item2, plan["plan_hash"])  # a live ledger under an id of no approval
        c.itemId, c.ledgerId = f"ledger:{live_topic_ledger}", live_topic_ledger
        hand_made.append(c)
        d = m.item_to_message(next(i for i in plan["items"] if i["item_id"] == v3), "f" * 64)  # no such plan
        hand_made.append(d)
        for msg in hand_made:
            producer.send(msg.SerializeToString())
        producer.send(b"\x08\x01 poison: not a PendingDeleteLedgerInfo")
        producer.close()

        cfg = env.config(max_attempts=2, retry_delay_s=1, until_idle_s=8)
        metrics = DeletionMetrics()
        Deleter(cfg, journal, metrics).run()
        dlq = dead_letters(client)
    finally:
        client.close()

    zk = env.zk
    assert zk.exists(ledger_path(env.race[0].ledgerId)) is not None  # referenced again: kept
    assert zk.exists(ledger_path(env.race[1].ledgerId)) is None  # approved, still orphaned: deleted
    assert zk.exists(ledger_path(env.race[2].ledgerId)) is not None  # not approved
    assert zk.exists(ledger_path(live_topic_ledger)) is not None
    outcomes = final_outcomes(journal)
    assert outcomes[(plan["plan_hash"], v1)] == ["skipped_in_use"]
    assert outcomes[(plan["plan_hash"], v2)][-1] == "deleted"
    refusals = [r for r in journal.records() if r.get("mismatch") in ("forged", "unapproved")]
    assert Counter(r["mismatch"] for r in refusals) == Counter({"forged": 2, "unapproved": 2})
    assert all(r["outcome"] == "skipped_mismatch" and r["reason"] for r in refusals)
    poison = [r for r in journal.records() if r.get("type") == "outcome" and r.get("item_type") == "unknown"]
    assert [r.get("next") for r in poison] == ["retry", "dead_letter"]
    assert len(dlq) == 1 and "error" in dlq[0]
    assert metrics.value("dead_lettered") == 1 and metrics.value("retried") == 1
    assert_counters_agree(journal, cfg, metrics)
    assert approval["approval_id"] in {
        r.get("approval_id") for r in journal.records() if r.get("type") == "approval"
    }

    # a tampered journal stops the deleter before it reads a message
    text = journal.path.read_text().replace('"reason":"race victims"', '"reason":"race victims!"')
    journal.path.write_text(text)
    with pytest.raises(JournalTampered):
        Deleter(env.config(), Journal(journal.path)).run()
    proc = subprocess.run(
        deleter_cmd(journal.path, env.box.workdir, "--until-idle", "2s"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "does not chain" in proc.stderr, proc.stderr


def sandbox_config(state: dict[str, Any], **kw: Any) -> DeleterConfig:
    """A deleter of the session sandbox, quick to give up when idle (dry run unless execute=True)."""
    base = DeleterConfig(
        zookeeper=state["zookeeper_hosts"],
        service_url=state["service_url"],
        web_url=state["web_url"],
        until_idle_s=5,
        retry_delay_s=1,
        max_attempts=3,
    )
    return dataclasses.replace(base, **kw)


def publish_approval(state: dict[str, Any], approval: Path, journal: Journal) -> int:
    """Phase 1 of ``approval`` on the sandbox; the number of messages sent."""
    client = pulsar_client(state["service_url"])
    try:
        return int(publish(approval, journal, client).sent)
    finally:
        client.close()


def test_fabricated_orphans_deleted_on_the_shared_sandbox(pulsar_env: Any, tmp_path: Path) -> None:
    """The whole flow on the session's sandbox, fast (in ``make test``): orphans fabricated in a tenant
    of their own (real wire formats) and decoys beside them; plan, approve, publish, dry run, execute.
    Exactly the approved ledgers and objects go, every other ledger and object of the cluster is what
    it was, the journal and the counters agree, and a second run has nothing left to do."""
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens_sandbox.orphans import audit_output, fabricate
    from ledgerlens_sandbox.seed import ensure_namespace

    state = pulsar_env.state
    bucket = str(state["bucket"])
    ensure_namespace(state["web_url"], "ll-deltest/ns", None)
    zk = KazooClient(hosts=state["zookeeper_hosts"], timeout=30)
    zk.start(timeout=30)
    s3 = boto3.client("s3", endpoint_url=state["s3_endpoint"], region_name="us-east-1")
    try:
        orphans = fabricate(zk, s3, bucket, managed_ledger="ll-deltest/ns/persistent/gone", ledgers=40,
                            copies=8, first_id=40_000_000, seed=3)  # fmt: skip
        decoys = fabricate(zk, s3, bucket, managed_ledger="ll-deltest/ns/persistent/kept", ledgers=10,
                           copies=2, first_id=41_000_000, seed=4)  # fmt: skip
        out = audit_output(tmp_path / "audit", zk, s3, bucket, ledger_ids=orphans.ledger_ids,
                           object_keys=orphans.object_keys, tenants=["ll-deltest"])  # fmt: skip
        plan = build_plan(out)
        assert plan["totals"]["delete_ledger"] == 40 and plan["totals"]["delete_object"] == 8
        journal = Journal(tmp_path / "journal.jsonl")
        approve(write_plan(plan, tmp_path / "plan.json"), journal, plan_hash_given=plan["plan_hash"],
                approver="frank", reason="fast e2e", out=tmp_path / "approval.json")  # fmt: skip
        before = snapshot(zk, s3, bucket)
        assert publish_approval(state, tmp_path / "approval.json", journal) == 48
        cfg = sandbox_config(state, s3=S3Source(bucket, endpoint_url=state["s3_endpoint"]), batch_size=20)
        client = pulsar_client(state["service_url"])  # a message that does not decode, among them
        try:
            client.create_producer(cfg.topic).send(b"\x00not a PendingDeleteLedgerInfo")
        finally:
            client.close()
        dry = Deleter(cfg, journal).run()
        assert dry.outcomes == Counter({"would_delete": 48, "failed": 1})
        verdicts = [r for r in journal.records() if r.get("type") == "verdict"]
        assert Counter(r["outcome"] for r in verdicts) == Counter({"would_delete": 48, "failed": 1})
        assert all(r["dry_run"] for r in verdicts) and not final_outcomes(journal)  # nothing decided
        assert_untouched(before, snapshot(zk, s3, bucket))
        metrics = DeletionMetrics()
        run_cfg = dataclasses.replace(cfg, execute=True)
        assert Deleter(run_cfg, journal, metrics).run().outcomes == Counter({"deleted": 48, "failed": 1})
        poison = [r for r in journal.records() if r.get("type") == "outcome" and r["outcome"] == "failed"]
        assert [(r["next"], r["attempt"]) for r in poison] == [("dead_letter", 0)], poison  # not retried
        assert "deletion message" in poison[0]["reason"] and "PendingDeleteLedgerInfo" in poison[0]["reason"]
        assert metrics.value("dead_lettered") == 1 and metrics.value("retried") == 0
        after = snapshot(zk, s3, bucket)
        assert_untouched(before, after, set(orphans.ledger_ids), set(orphans.object_keys))
        assert set(decoys.ledger_ids) <= set(after.ledgers) and set(decoys.object_keys) <= set(after.objects)
        assert_counters_agree(journal, run_cfg, metrics)
        assert (metrics.value("deleted_ledgers"), metrics.value("deleted_offload_copies")) == (40, 8)
        outcomes = final_outcomes(journal)
        assert all(outcomes[(plan["plan_hash"], i["item_id"])] == ["deleted"] for i in plan["items"])
        again = Deleter(dataclasses.replace(run_cfg, until_idle_s=3), journal).run()
        assert again.messages == 0  # every message was acknowledged: nothing in flight
        assert in_flight(state["web_url"]) == 0
    finally:  # leave the shared sandbox as it was found, also when an assertion failed
        made = [x for x in (locals().get("orphans"), locals().get("decoys")) if x is not None]
        for lid in (i for x in made for i in x.ledger_ids):
            try:
                zk.delete(ledger_path(lid))
            except NoNodeError:
                pass
        for key in (k for x in made for k in x.object_keys):
            s3.delete_object(Bucket=bucket, Key=key)
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_kafka_segments_through_publish_and_deleter(pulsar_env: Any, spark: Any, tmp_path: Path) -> None:
    """Kafka orphan remote-segment objects (issue 14 item 3) through the same flow: kafka-audit, plan,
    approve, publish, deleter; the deleter re-reads the metadata (a dump here) and the objects right
    before deleting: a segment the metadata learned about since the plan and a rewritten object are
    kept; exactly the approved objects of the others go."""
    import boto3

    from kafka_leaks import DROPPED, LEARNED, ORPHAN, REWRITTEN, make_leaks

    state = pulsar_env.state
    s3 = boto3.client("s3", endpoint_url=state["s3_endpoint"], region_name="us-east-1")
    bucket = "kafka-tiered-e2e"
    s3.create_bucket(Bucket=bucket)
    leaks = make_leaks(s3, bucket, state["s3_endpoint"], tmp_path)
    plan = build_plan(leaks.audit(tmp_path / "audit"))
    assert {i["expected"]["segment_id"] for i in plan["items"]} == {ORPHAN, LEARNED, REWRITTEN, DROPPED}
    journal = Journal(tmp_path / "journal.jsonl")
    approve(write_plan(plan, tmp_path / "plan.json"), journal, plan_hash_given=plan["plan_hash"],
            approver="kim", reason="leaked segments", out=tmp_path / "approval.json")  # fmt: skip
    leaks.learn()
    leaks.rewrite()
    before = leaks.inventory()
    assert publish_approval(state, tmp_path / "approval.json", journal) == 4
    cfg = sandbox_config(
        state, execute=True, kafka_metadata_dump=str(leaks.dump), kafka_s3_endpoint=state["s3_endpoint"]
    )
    metrics = DeletionMetrics()
    report = Deleter(cfg, journal, metrics).run()
    assert report.outcomes == Counter({"deleted": 2, "skipped_in_use": 1, "skipped_mismatch": 1})
    outcomes = final_outcomes(journal)
    by_segment = {i["expected"]["segment_id"]: i["item_id"] for i in plan["items"]}
    assert [outcomes[(plan["plan_hash"], by_segment[s])] for s in (ORPHAN, LEARNED, REWRITTEN, DROPPED)] == [
        ["deleted"],
        ["skipped_in_use"],
        ["skipped_mismatch"],
        ["deleted"],
    ]
    after = leaks.inventory()
    gone = set(leaks.keys[ORPHAN].values()) | set(leaks.keys[DROPPED].values())
    assert not gone & set(after) and {k: v for k, v in before.items() if k not in gone} == after
    assert metrics.value("deleted_remote_segments") == 2
    assert_counters_agree(journal, cfg, metrics)


# --- faults (slow) ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_faults_repeated(del_env: DelEnv, tmp_path: Path) -> None:
    """Deleter SIGKILLed at random points, S3 stopped mid-run, ZooKeeper session expired; fixed seed."""
    from ledgerlens_sandbox.failures import restore_s3
    from ledgerlens_sandbox.orphans import audit_output, fabricate

    env = del_env
    restore_s3(env.box.state())  # the deleter reaches S3 through the relay, which the test stops
    rng = random.Random(186)
    runs = int(os.environ.get("LEDGERLENS_FAULT_RUNS", "5"))
    for run in range(runs):
        base = tmp_path / f"run{run}"
        orphans = fabricate(
            env.zk,
            env.s3,
            env.bucket,
            managed_ledger="ll-fail/ns/persistent/faults",
            ledgers=300,
            copies=30,
            first_id=60_000_000 + run * 1000,
            seed=run,
        )
        decoys = fabricate(
            env.zk,
            env.s3,
            env.bucket,
            managed_ledger="ll-fail/ns/persistent/decoys",
            ledgers=30,
            copies=5,
            first_id=70_000_000 + run * 1000,
            seed=1000 + run,
        )
        out = audit_output(
            base / "audit",
            env.zk,
            env.s3,
            env.bucket,
            ledger_ids=orphans.ledger_ids,
            object_keys=orphans.object_keys,
            tenants=["ll-fail"],
        )
        plan = build_plan(out)
        plan_path = write_plan(plan, base / "plan.json")
        journal = Journal(base / "journal.jsonl")
        approve(
            plan_path,
            journal,
            plan_hash_given=plan["plan_hash"],
            approver="erin",
            reason=f"fault run {run}",
            out=base / "approval.json",
        )
        before = snapshot(env.zk, env.s3, env.bucket)
        client = pulsar_client(env.state["service_url"])
        try:
            assert publish(base / "approval.json", journal, client).sent == len(plan["items"])
        finally:
            client.close()
        textfile = base / "metrics.prom"
        cmd = deleter_cmd(
            journal.path,
            env.box.workdir,
            "--until-idle",
            "8s",
            "--retry-delay",
            "2s",
            "--max-attempts",
            "50",
            "--batch-size",
            "10",
            "--parallelism",
            "2",
            "--metrics-textfile",
            str(textfile),
        )
        fault = ["kill", "s3", "zk"][run % 3]
        if fault == "zk":  # in-process, so that the test can take its ZooKeeper session over
            cfg = env.config(
                until_idle_s=8, retry_delay_s=2, max_attempts=50, batch_size=10, textfile=str(textfile)
            )
            deleter = Deleter(cfg, journal, DeletionMetrics())
            lines = journal_lines(journal.path)
            thread = threading.Thread(target=deleter.run)
            thread.start()
            deadline = time.monotonic() + 60
            while not deleter.zookeeper_clients and time.monotonic() < deadline:
                time.sleep(0.1)
            assert deleter.zookeeper_clients, "the deleter never connected to ZooKeeper"
            wait_for_progress(journal.path, lines, None)
            time.sleep(rng.uniform(0.0, 0.5))
            for zc in deleter.zookeeper_clients:
                expire_session(env.state["zookeeper_hosts"], zc)
            thread.join(timeout=600)
            assert not thread.is_alive()
            finished = cfg.instance
        else:
            if fault == "s3":
                cmd += ["--s3-endpoint", env.state["s3_relay_endpoint"]]
            for attempt in range(3):  # killed runs, then one that finishes
                lines = journal_lines(journal.path)
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if attempt < 2 and fault == "kill":
                    wait_for_progress(journal.path, lines, proc)
                    time.sleep(rng.uniform(0.0, 0.5))  # a random point of its work
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=60)
                    assert journal_lines(journal.path) > lines, "the killed deleter had not started"
                    continue
                if fault == "s3":
                    wait_for_progress(journal.path, lines, proc)
                    time.sleep(rng.uniform(0.0, 0.3))
                    env.box.stop_s3_relay()
                    time.sleep(rng.uniform(2.0, 5.0))
                    env.box.start_s3_relay()
                _, stderr = proc.communicate(timeout=600)
                assert proc.returncode == 0, stderr
                final = re.search(r"deleter (\w+):", stderr)
                assert final is not None, stderr
                finished = final[1]
                break
        outcomes = final_outcomes(journal)
        after = snapshot(env.zk, env.s3, env.bucket)
        a_ledgers, a_objects = after.ledgers, after.objects
        assert not set(orphans.ledger_ids) & set(a_ledgers), f"run {run} ({fault}): approved ledgers left"
        assert not set(orphans.object_keys) & set(a_objects), f"run {run} ({fault}): approved objects left"
        assert set(decoys.ledger_ids) <= set(a_ledgers) and set(decoys.object_keys) <= set(a_objects)
        assert_untouched(before, after, set(orphans.ledger_ids), set(orphans.object_keys))
        for item in plan["items"]:  # exactly once in effect: ends deleted or already gone, never refused
            seen = outcomes.get((plan["plan_hash"], item["item_id"]), [])
            assert seen and seen[-1] in ("deleted", "already_gone"), (run, fault, item["item_id"], seen)
            assert "skipped_mismatch" not in seen and "skipped_in_use" not in seen
        deleted = [r for r in journal.records() if r.get("type") == "outcome" and r["outcome"] == "deleted"]
        assert len({(r["plan_hash"], r["item_id"]) for r in deleted}) == len(deleted)  # no second effect
        # the finished deleter's textfile agrees with its own journal lines
        prom = _read_prom(textfile)
        counts = journal_counts(journal, finished)
        assert (
            prom.get("ledgerlens_deletion_deleted_ledgers_total", 0)
            + prom.get("ledgerlens_deletion_deleted_offload_copies_total", 0)
            == counts["deleted"]
        )
        assert prom.get("ledgerlens_deletion_already_gone_total", 0) == counts["already_gone"]


def journal_lines(path: Path) -> int:
    try:
        return sum(1 for _ in path.open("rb"))
    except FileNotFoundError:
        return 0


def wait_for_progress(path: Path, lines: int, proc: Any, timeout: float = 120) -> None:
    """Until the journal has a line more than ``lines`` (a deleter is acting), or ``proc`` ended."""
    deadline = time.monotonic() + timeout
    while journal_lines(path) <= lines and time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the deleter ended before acting: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    assert journal_lines(path) > lines, "no deleter progress within the timeout"


def _read_prom(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name.split("{", 1)[0]] = out.get(name.split("{", 1)[0], 0.0) + float(value)
    return out


def expire_session(hosts: str, client: Any) -> None:
    """Expire a kazoo client's ZooKeeper session the way ZooKeeper does it to a lost client: another
    client takes the session over (same id and password) and closes it."""
    from kazoo.client import KazooClient

    session_id, password = client.client_id
    thief = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=10)
    thief.start(timeout=30)
    thief.stop()
    thief.close()
