"""The deleter on the real Pulsar sandbox under traffic (issue 41, item 6).

``test_deleter_under_traffic`` (in ``make test``, on the session's shared sandbox): a tenant of its
own with three topics (small ledgers: the sandbox rolls a ledger every 50 entries), producers and
consumers on every topic, a topic compacted again and again and another offloaded again and again
(to the sandbox's S3 server directly, through the namespace's offload policies: the shared sandbox's
broker-wide offload path is the planted S3 outage until ``test_pulsar_sandbox`` ends it), while the
deleter deletes approved orphans fabricated in the same tenant: ledgers that name the very managed
ledgers the broker keeps rewriting, and ledgers and offload copies of a topic deleted before.

The namespace keeps everything (retention -1 / -1), so the broker trims nothing of the test's data:
BookKeeper and S3 listings taken before and after the deleter differ, for the test's tenant, by
exactly the approved orphans. Everywhere else the difference is only the broker's own work, each
removal explained (a cursor ledger rolled over, a compacted ledger replaced, the BookKeeper copy of
an offloaded ledger deleted after the offload deletion lag, a consumed ledger of another namespace
trimmed), and no ledger or object that any managed ledger, cursor or schema references at the end
is gone. Every topic is then read from its first message, offloaded ledgers included. The test
removes its topics, namespace and tenant, and sweeps whatever of its tenant the broker left behind,
so that the audits of the shared sandbox that follow see it as it was.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.deleter import Deleter, DeleterConfig
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.plan import build_plan, write_plan
from ledgerlens.deletion.publish import publish, pulsar_client
from ledgerlens.deletion.references import ReferenceIndex, scan_references
from ledgerlens.deletion.status import final_outcomes, in_flight
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.managed_ledger import decode_managed_ledger
from ledgerlens.formats.names import topic_to_managed_ledger
from ledgerlens.formats.offload import parse_offload_key
from ledgerlens.formats.paths import is_ledger_level1, ledger_id_from_path, ledger_path
from ledgerlens.formats.references import owners_of
from ledgerlens.settings.config import S3Source
from ledgerlens.sources.zk_client import PipelinedReader
from ledgerlens_sandbox.pulsar import AdminError, admin, make_client, topic_path
from ledgerlens_sandbox.seed import ensure_namespace, produce

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

TENANT = "ll-traffic"
NAMESPACE = f"{TENANT}/ns"
ROLLING = f"persistent://{NAMESPACE}/rolling events é"  # a name that needs encoding in znodes and REST
COMPACTED = f"persistent://{NAMESPACE}/compacted"
OFFLOADED = f"persistent://{NAMESPACE}/offloaded"
TOPICS = (ROLLING, COMPACTED, OFFLOADED)
RETIRED = f"persistent://{NAMESPACE}/retired"  # existed, deleted before the orphans are fabricated
PRE_MESSAGES = 100  # per topic before the traffic: two full ledgers each
RATE = 20.0  # messages per second per topic during the traffic (a ledger rolls every 2.5 s)
KEYS = 10  # keys of the compacted topic
SUBSCRIPTION = "traffic"
ORPHANS_PER_LIVE_TOPIC = 20
RETIRED_LEDGERS, RETIRED_COPIES = 30, 10
DECOY_LEDGERS, DECOY_COPIES = 6, 2
OPERATION_TIMEOUT_S = 180  # a compaction or an offload (see AdminLoop)
DELETER_TIMEOUT_S = 300
FIRST_ID = 43_000_000  # fabricated ledger ids (test_deletion.py uses 40M, 41M, 60M+ and 70M+)


def payload(topic: str, i: int) -> bytes:
    return f"{TOPICS.index(topic)}:{i:06d}".encode()


# --- traffic ---------------------------------------------------------------------------------------


class Loop(threading.Thread):
    """A background loop that records the first error instead of dying silently."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def loop(self) -> None:
        raise NotImplementedError


class Producer(Loop):
    """Sends ``RATE`` messages a second (no batching: one entry each) until stopped."""

    def __init__(self, client: Any, topic: str, start: int) -> None:
        super().__init__(f"produce {topic}")
        self.client, self.topic, self.next = client, topic, start
        self.sent: list[bytes] = []

    def loop(self) -> None:
        producer = self.client.create_producer(
            self.topic, batching_enabled=False, send_timeout_millis=60_000, block_if_queue_full=True
        )
        try:
            due = time.monotonic()
            while not self.stop.is_set():
                data = payload(self.topic, self.next)
                producer.send(data, partition_key=f"key-{self.next % KEYS}")
                self.sent.append(data)
                self.next += 1
                due += 1.0 / RATE
                time.sleep(max(0.0, due - time.monotonic()))
        finally:
            producer.close()


class Consumer(Loop):
    """Receives and acknowledges everything of the topic from its first message until stopped."""

    def __init__(self, client: Any, topic: str) -> None:
        super().__init__(f"consume {topic}")
        import pulsar

        self.received: list[bytes] = []
        self.consumer = client.subscribe(
            topic, SUBSCRIPTION, initial_position=pulsar.InitialPosition.Earliest
        )

    def loop(self) -> None:
        import pulsar

        try:
            while not self.stop.is_set():
                try:
                    msg = self.consumer.receive(timeout_millis=200)
                except pulsar.Timeout:
                    continue
                self.consumer.acknowledge(msg)
                self.received.append(msg.data())
        finally:
            self.consumer.close()


class AdminLoop(Loop):
    """Triggers an admin operation (compaction, offload), waits until it ends, again until stopped.

    An offload can wait long in the broker: its offloader threads are shared with the cleanup the
    broker keeps retrying, through the planted S3 outage, of the objects of a topic deleted during
    it (each delete ends after jclouds' 100 retries, about 50 s), for several minutes after ``plant``.
    """

    def __init__(self, name: str, start: Callable[[], None], status: Callable[[], dict[str, Any]]) -> None:
        super().__init__(name)
        self.start_op, self.status = start, status
        self.outcomes: Counter[str] = Counter()
        self.errors: list[str] = []
        self.runs: list[tuple[float, float, str]] = []  # (started, ended, status) of each operation
        self.running: float | None = None  # when the operation under way started

    def loop(self) -> None:
        while not self.stop.is_set():
            started = self.running = time.monotonic()
            self.start_op()
            deadline = started + OPERATION_TIMEOUT_S
            while True:
                st = self.status()
                if st.get("status") not in ("RUNNING", "NOT_RUN") or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            status = str(st.get("status"))
            self.runs.append((started, time.monotonic(), status))
            self.running = None
            self.outcomes[status] += 1
            if status == "ERROR":
                self.errors.append(str(st.get("lastError")))
            self.stop.wait(1.0)

    def during(self, start: float, end: float) -> Counter[str]:
        """Outcomes of the operations that ran (at least partly) between ``start`` and ``end``; one
        still under way counts as RUNNING."""
        out = Counter(status for s, e, status in self.runs if s <= end and e >= start)
        running = self.running
        if running is not None and running <= end:
            out["RUNNING"] += 1
        return out


def compactor(web: str, topic: str) -> AdminLoop:
    path = topic_path(topic) + "/compaction"
    return AdminLoop(
        f"compact {topic}",
        lambda: admin(web, "PUT", path, ok=(200, 204, 409)),
        lambda: dict(admin(web, "GET", path)),
    )


def offloader(web: str, topic: str) -> AdminLoop:
    path = topic_path(topic) + "/offload"

    def start() -> None:
        last = admin(web, "GET", topic_path(topic) + "/lastMessageId")
        body = {"ledgerId": last["ledgerId"], "entryId": last["entryId"], "partitionIndex": -1}
        admin(web, "PUT", path, body, ok=(200, 202, 204, 409))

    return AdminLoop(f"offload {topic}", start, lambda: dict(admin(web, "GET", path)))


# --- listings --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Listing:
    """Every ledger znode (bytes, version), every object (ETag, its managed ledger) and what the
    Pulsar store references (the deleter's own reference scan)."""

    ledgers: dict[int, tuple[bytes, int]]
    objects: dict[str, tuple[str, str | None]]
    refs: ReferenceIndex
    incomplete: set[str]  # uuids of the test's topics' offloads not complete (yet, or failed)


def ledger_nodes(zk: Any) -> dict[int, tuple[bytes, int]]:
    from kazoo.exceptions import NoNodeError

    out: dict[int, tuple[bytes, int]] = {}
    stack = [f"/ledgers/{c}" for c in zk.get_children("/ledgers") if is_ledger_level1(c)]
    while stack:
        p = stack.pop()
        try:
            children = zk.get_children(p)
        except NoNodeError:
            continue  # the broker deletes ledgers while we list
        for c in children:
            child = f"{p}/{c}"
            if not c.startswith("L"):
                stack.append(child)
                continue
            try:
                data, stat = zk.get(child)
            except NoNodeError:
                continue
            out[ledger_id_from_path(child)] = (data, stat.version)
    return out


def bucket_objects(s3: Any, bucket: str) -> dict[str, tuple[str, str | None]]:
    """key -> (ETag, the managed ledger its user metadata names)."""
    keys = [
        (o["Key"], o["ETag"])
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    ]

    def ml_of(key: str) -> str | None:
        try:
            meta = s3.head_object(Bucket=bucket, Key=key).get("Metadata") or {}
        except Exception:  # noqa: BLE001 - deleted between list and HEAD
            return None
        return {k.lower(): v for k, v in meta.items()}.get("managedledgername")

    with ThreadPoolExecutor(max_workers=16) as pool:
        mls = list(pool.map(ml_of, [k for k, _ in keys]))
    return {k: (etag, ml) for (k, etag), ml in zip(keys, mls, strict=True)}


def references(zk: Any) -> ReferenceIndex:
    return scan_references(PipelinedReader(zk))


def take_listing(zk: Any, s3: Any, bucket: str) -> Listing:
    """Ledgers, then objects, then references: every offload object listed has its uuid in its
    managed ledger by then (the broker records an offload's uuid before it uploads)."""
    ledgers = ledger_nodes(zk)
    objects = bucket_objects(s3, bucket)
    refs = references(zk)
    incomplete = set()
    for t in TOPICS:
        path = f"/managed-ledgers/{topic_to_managed_ledger(t)}"
        rec = decode_managed_ledger(zk.get(path)[0], path=path)
        incomplete |= {li.offload.uuid for li in rec.ledgers if li.offload and not li.offload.complete}
    return Listing(ledgers, objects, refs, {u for u in incomplete if u})


def custom_of(node: tuple[bytes, int], lid: int) -> dict[str, str]:
    return decode_ledger_metadata(node[0], path=ledger_path(lid)).custom_text()


def in_test_namespace(custom: dict[str, str]) -> bool:
    mls, schemas = owners_of(custom)
    return any(x.startswith(NAMESPACE + "/") for x in mls | schemas)


def offloaded_bk_deleted(zk: Any, mls: Iterable[str]) -> set[int]:
    """Ledgers whose offload is complete and whose BookKeeper copy the broker deleted (the ledger
    stays in its managed ledger's list, read from S3 from then on)."""
    out: set[int] = set()
    for ml in set(mls):
        path = f"/managed-ledgers/{ml}"
        if zk.exists(path) is None:
            continue
        rec = decode_managed_ledger(zk.get(path)[0], path=path)
        out |= {
            li.ledger_id
            for li in rec.ledgers
            if li.offload is not None and li.offload.complete and li.offload.bookkeeper_deleted
        }
    return out


def ml_ledgers(zk: Any, topic: str) -> list[int]:
    path = f"/managed-ledgers/{topic_to_managed_ledger(topic)}"
    return [li.ledger_id for li in decode_managed_ledger(zk.get(path)[0], path=path).ledgers]


def explain_ledger(
    lid: int, node: tuple[bytes, int], before: Listing, after: Listing, bk_deleted: set[int]
) -> str | None:
    """Why the broker removed a ledger no approval names, or None when nothing explains it."""
    custom = custom_of(node, lid)
    if custom.get("application") != "pulsar":
        return None
    referenced_after = lid in after.refs.ledgers
    if lid in bk_deleted:
        return "offloaded, BookKeeper copy deleted after the offload deletion lag"
    if referenced_after:
        return None
    if custom.get("pulsar/cursor"):
        return "cursor ledger rolled over"
    if custom.get("component") == "compacted-ledger":
        return "compacted ledger replaced by a newer compaction"
    if not in_test_namespace(custom) and lid in before.refs.ledgers:
        return "trimmed by the broker (a consumed ledger of a namespace with finite retention)"
    return None


def explain_object(key: str, ml: str | None, before: Listing, after: Listing) -> str | None:
    """Why the broker removed an object no approval names, or None."""
    parsed = parse_offload_key(key)
    uuid = parsed.uuid if parsed is not None else None
    if ml is not None and ml.startswith(NAMESPACE + "/"):
        # infinite retention: the broker deletes no complete offload copy of the test's topics
        if uuid in before.incomplete and uuid not in after.refs.uuids:
            return "a failed offload's upload, cleaned up by the broker"
        return None
    if uuid is not None and uuid in before.refs.uuids and uuid not in after.refs.uuids:
        return "offloaded ledger trimmed by the broker"
    if ml is not None and ml not in after.refs.managed_ledgers:
        return "the broker's retried offload cleanup of a deleted topic"
    return None


# --- clean-up --------------------------------------------------------------------------------------


def tenant_leftovers(zk: Any, s3: Any, bucket: str) -> tuple[list[int], list[str]]:
    """Ledgers and objects of the test's tenant still in BookKeeper and S3."""
    ledgers = []
    for lid, node in ledger_nodes(zk).items():
        try:
            mls, schemas = owners_of(custom_of(node, lid))
        except Exception:  # noqa: BLE001 - not ours to judge here
            continue
        if any(x.startswith(TENANT + "/") for x in mls | schemas):
            ledgers.append(lid)
    keys = [k for k, (_, ml) in bucket_objects(s3, bucket).items() if ml and ml.startswith(TENANT + "/")]
    return sorted(ledgers), sorted(keys)


def remove_tenant(web: str, zk: Any, s3: Any, bucket: str, made: list[Any]) -> None:
    """Delete the test's topics, namespace and tenant, and whatever of the tenant is left in
    BookKeeper and S3 (fabricated leftovers, a ledger the broker leaked): the shared sandbox is
    audited for exact findings by the tests that follow."""
    from kazoo.exceptions import NoNodeError

    for lid in (i for x in made for i in x.ledger_ids):
        try:
            zk.delete(ledger_path(lid))
        except NoNodeError:
            pass
    keys = [k for x in made for k in x.object_keys]
    if keys:
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[start : start + 1000]]
            s3.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})
    try:
        topics = admin(web, "GET", f"/admin/v2/persistent/{NAMESPACE}")
    except AdminError:
        topics = []
    for t in topics or []:
        admin(web, "DELETE", topic_path(t), params={"force": "true"}, ok=(200, 204, 404), timeout=300)
    admin(web, "DELETE", f"/admin/v2/namespaces/{NAMESPACE}", ok=(200, 204, 404), timeout=300)
    deadline = time.monotonic() + 60
    while True:  # the namespace's ownership nodes under /namespace/<tenant> go a moment after it
        try:
            admin(web, "DELETE", f"/admin/v2/tenants/{TENANT}", ok=(200, 204, 404))
            break
        except AdminError as e:
            if "NotEmpty" not in e.body or time.monotonic() > deadline:
                raise
            time.sleep(1)
    deadline = time.monotonic() + 30  # the broker deletes a deleted topic's ledgers asynchronously
    left = tenant_leftovers(zk, s3, bucket)
    while (left[0] or left[1]) and time.monotonic() < deadline:
        time.sleep(1)
        left = tenant_leftovers(zk, s3, bucket)
    if left[0] or left[1]:
        print(f"removing what the broker left of {TENANT}: ledgers {left[0]}, objects {left[1]}")
        for lid in left[0]:
            try:
                zk.delete(ledger_path(lid))
            except NoNodeError:
                pass
        for key in left[1]:
            s3.delete_object(Bucket=bucket, Key=key)
    # a topic the broker brought back to life while the namespace was deleted (its topic-policies
    # reader reconnecting) would be a managed ledger naming ledgers removed above
    for root in ("/managed-ledgers", "/schemas"):
        path = f"{root}/{TENANT}"
        if zk.exists(path) is None:
            continue
        nodes, stack = [], [path]
        while stack:
            p = stack.pop()
            try:
                data, _ = zk.get(p)
                children = zk.get_children(p)
            except NoNodeError:
                continue
            if data:
                nodes.append(p)
            stack.extend(f"{p}/{c}" for c in children)
        if nodes:
            print(f"removing what the broker left of {TENANT}: {nodes}")
        zk.delete(path, recursive=True)


# --- the test --------------------------------------------------------------------------------------


def test_deleter_under_traffic(pulsar_env: Any, tmp_path: Path) -> None:
    """Issue 41 item 6: see the module docstring."""
    import boto3
    import pulsar
    from kazoo.client import KazooClient

    from ledgerlens_sandbox.orphans import audit_output, fabricate

    t_test = time.monotonic()
    state = pulsar_env.state
    web, bucket = state["web_url"], str(state["bucket"])
    zk = KazooClient(hosts=state["zookeeper_hosts"], timeout=30)
    zk.start(timeout=30)
    s3 = boto3.client("s3", endpoint_url=state["s3_endpoint"], region_name="us-east-1")
    client = make_client(state)
    made: list[Any] = []
    loops: list[Loop] = []
    passed = False
    try:
        remove_tenant(web, zk, s3, bucket, [])  # what an interrupted run (a reused sandbox) left
        # 1. the tenant, its namespace (keeps everything; offloads straight to the S3 server) and topics
        ensure_namespace(web, NAMESPACE, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
        admin(web, "POST", f"/admin/v2/namespaces/{NAMESPACE}/offloadPolicies", {
            "managedLedgerOffloadDriver": "S3",
            "managedLedgerOffloadBucket": bucket,
            "managedLedgerOffloadRegion": state["region"],
            "managedLedgerOffloadServiceEndpoint": state["s3_endpoint"],
            "managedLedgerOffloadMaxBlockSizeInBytes": 1048576,
            "managedLedgerOffloadReadBufferSizeInBytes": 65536,
            "managedLedgerOffloadDeletionLagInMillis": 5000,
        })  # fmt: skip
        consumers = {t: Consumer(client, t) for t in TOPICS}  # subscribed before the first message
        for t in TOPICS:
            produce(client, t, PRE_MESSAGES, keys=KEYS, make=lambda i, t=t: payload(t, i))
        produce(client, RETIRED, 60)
        admin(web, "DELETE", topic_path(RETIRED), params={"force": "true"}, timeout=300)
        assert zk.exists(f"/managed-ledgers/{topic_to_managed_ledger(RETIRED)}") is None

        # 2. orphans: ledgers naming the live topics' managed ledgers (rewritten by the broker all
        # along), ledgers and offload copies of the deleted topic; decoys beside them, not approved
        for n, t in enumerate(TOPICS):
            ml = topic_to_managed_ledger(t)
            made.append(
                fabricate(zk, s3, bucket, managed_ledger=ml, ledgers=ORPHANS_PER_LIVE_TOPIC,
                          first_id=FIRST_ID + 100 * n, seed=41 + n)
            )  # fmt: skip
        made.append(fabricate(zk, s3, bucket, managed_ledger=topic_to_managed_ledger(RETIRED),
                              ledgers=RETIRED_LEDGERS, copies=RETIRED_COPIES, first_id=FIRST_ID + 10_000,
                              seed=44))  # fmt: skip
        orphans = made[:]
        decoys = fabricate(zk, s3, bucket, managed_ledger=topic_to_managed_ledger(ROLLING),
                           ledgers=DECOY_LEDGERS, copies=DECOY_COPIES, first_id=FIRST_ID + 20_000,
                           seed=45)  # fmt: skip
        made.append(decoys)
        approved_ledgers = {i for x in orphans for i in x.ledger_ids}
        approved_keys = {k for x in orphans for k in x.object_keys}
        out = audit_output(tmp_path / "audit", zk, s3, bucket, ledger_ids=sorted(approved_ledgers),
                           object_keys=sorted(approved_keys), tenants=[TENANT])  # fmt: skip
        plan = build_plan(out)
        n_ledgers = ORPHANS_PER_LIVE_TOPIC * len(TOPICS) + RETIRED_LEDGERS
        assert (plan["totals"]["delete_ledger"], plan["totals"]["delete_object"]) == (
            n_ledgers,
            RETIRED_COPIES,
        )
        journal = Journal(tmp_path / "journal.jsonl")
        approve(write_plan(plan, tmp_path / "plan.json"), journal, plan_hash_given=plan["plan_hash"],
                approver="grace", reason="issue 41: orphans under traffic",
                out=tmp_path / "approval.json")  # fmt: skip
        publisher = pulsar_client(state["service_url"])
        try:
            assert publish(tmp_path / "approval.json", journal, publisher).sent == len(plan["items"])
        finally:
            publisher.close()

        # 3. traffic: producers and consumers on every topic, then compactions and offloads
        at_start = {t: ml_ledgers(zk, t) for t in TOPICS}
        producers = {t: Producer(client, t, PRE_MESSAGES) for t in TOPICS}
        loops += [*producers.values(), *consumers.values()]
        for x in loops:
            x.start()
        time.sleep(8)  # a few rollovers on every topic
        admin_loops = [compactor(web, COMPACTED), offloader(web, OFFLOADED)]
        loops += admin_loops
        for x in admin_loops:
            x.start()
        time.sleep(2)

        # 4. before, the deleter (while the traffic, a compaction and an offload go on), after
        before = take_listing(zk, s3, bucket)
        at_deleter = {t: ml_ledgers(zk, t) for t in TOPICS}
        assert approved_ledgers <= set(before.ledgers) and approved_keys <= set(before.objects)
        cfg = DeleterConfig(
            zookeeper=state["zookeeper_hosts"],
            service_url=state["service_url"],
            web_url=web,
            s3=S3Source(bucket, endpoint_url=state["s3_endpoint"]),
            until_idle_s=5,
            retry_delay_s=1,
            max_attempts=5,
            batch_size=2,  # many small batches, spread over the traffic ...
            # ... against references read again every second or two (not 0: ReferenceScanner.current
            # waits for an index younger than the bound, which a bound shorter than a scan never gets)
            reference_max_age_s=2.0,
            execute=True,
        )
        metrics = DeletionMetrics()
        during: list[dict[str, list[int]]] = []  # the topics' ledgers after each batch of the deleter

        def progress(_: Any) -> None:
            during.append({t: ml_ledgers(zk, t) for t in TOPICS})

        t0 = time.monotonic()
        deleter = Deleter(cfg, journal, metrics, progress=progress)
        ran: dict[str, Any] = {}

        def run_deleter() -> None:
            try:
                ran["report"] = deleter.run()
            except BaseException as e:  # noqa: BLE001 - re-raised below
                ran["error"] = e

        runner = threading.Thread(target=run_deleter, name="deleter", daemon=True)
        runner.start()
        runner.join(timeout=DELETER_TIMEOUT_S)
        if runner.is_alive():
            deleter.stop()
            lines = Counter(str(r.get("type")) for r in journal.records())
            pytest.fail(f"the deleter did not finish within {DELETER_TIMEOUT_S}s; its journal: {dict(lines)}")
        if "error" in ran:
            raise ran["error"]
        report = ran["report"]
        deleter_s = time.monotonic() - t0
        after_deleter = {t: ml_ledgers(zk, t) for t in TOPICS}
        overlap = {x.name: x.during(t0, t0 + deleter_s) for x in admin_loops}
        assert all(overlap.values()), f"no compaction or offload while the deleter ran: {overlap}"
        time.sleep(4)
        for x in admin_loops:
            x.stop.set()
        for x in admin_loops:
            x.join(timeout=OPERATION_TIMEOUT_S + 60)
        for p in producers.values():
            p.stop.set()
        for p in producers.values():
            p.join(timeout=120)
        deadline = time.monotonic() + 60  # the consumers catch up, then stop
        while time.monotonic() < deadline and any(
            len(set(consumers[t].received)) < PRE_MESSAGES + len(producers[t].sent) for t in TOPICS
        ):
            time.sleep(0.2)
        for c in consumers.values():
            c.stop.set()
        for c in consumers.values():
            c.join(timeout=60)
        errors = {x.name: x.error for x in loops if x.error is not None or x.is_alive()}
        assert not errors, errors
        after = take_listing(zk, s3, bucket)
        at_end = {t: ml_ledgers(zk, t) for t in TOPICS}

        # 5. what changed: exactly the approved orphans, and the broker's own work
        compactions, offloads = admin_loops[0].outcomes, admin_loops[1].outcomes
        assert compactions["SUCCESS"] >= 1, (compactions, admin_loops[0].errors)
        assert offloads["SUCCESS"] >= 1, (offloads, admin_loops[1].errors)
        assert not approved_ledgers & set(after.ledgers), sorted(approved_ledgers & set(after.ledgers))
        assert not approved_keys & set(after.objects), sorted(approved_keys & set(after.objects))
        assert set(decoys.ledger_ids) <= set(after.ledgers) and set(decoys.object_keys) <= set(after.objects)
        removed = set(before.ledgers) - set(after.ledgers)
        owners = {ml for lid in removed for ml in owners_of(custom_of(before.ledgers[lid], lid))[0]}
        bk_deleted = offloaded_bk_deleted(zk, owners)
        explained: Counter[str] = Counter()
        unexplained = []
        for lid in sorted(removed - approved_ledgers):
            why = explain_ledger(lid, before.ledgers[lid], before, after, bk_deleted)
            if why is None:
                unexplained.append((lid, custom_of(before.ledgers[lid], lid), after.refs.ledgers.get(lid)))
            else:
                explained[why] += 1
        assert not unexplained, (
            f"ledgers removed that neither an approval nor the broker explains: {unexplained}"
        )
        # infinite retention: of the test's data ledgers, exactly the approved ones are gone
        data_removed = {
            lid
            for lid in removed
            if in_test_namespace(meta := custom_of(before.ledgers[lid], lid))
            and not meta.get("pulsar/cursor")
            and meta.get("component") == "managed-ledger"
            and lid not in bk_deleted
        }
        assert data_removed == approved_ledgers, sorted(data_removed ^ approved_ledgers)
        # nothing referenced at the end is gone (an offloaded ledger's BookKeeper copy excepted)
        lost = sorted(
            lid
            for lid in before.ledgers
            if lid in after.refs.ledgers and lid not in after.ledgers and lid not in bk_deleted
        )
        assert not lost, f"referenced ledgers deleted: {[(i, after.refs.ledgers[i]) for i in lost]}"
        removed_keys = set(before.objects) - set(after.objects)
        changed = sorted(
            k for k in set(before.objects) & set(after.objects) if before.objects[k] != after.objects[k]
        )
        assert not changed, f"objects rewritten: {changed}"
        unexplained_keys = []
        for key in sorted(removed_keys - approved_keys):
            why = explain_object(key, before.objects[key][1], before, after)
            if why is None:
                unexplained_keys.append((key, before.objects[key][1]))
            else:
                explained[why] += 1
        assert not unexplained_keys, f"objects removed that no approval explains: {unexplained_keys}"
        mine_removed = {k for k in removed_keys if (before.objects[k][1] or "").startswith(TENANT + "/")}
        assert mine_removed == approved_keys, sorted(mine_removed ^ approved_keys)
        live_uuids = set(after.refs.uuids)
        lost_keys = sorted(
            k
            for k in removed_keys
            if (parsed := parse_offload_key(k)) is not None and parsed.uuid in live_uuids
        )
        assert not lost_keys, f"objects of referenced offload copies deleted: {lost_keys}"

        # 6. every topic reads from its first message, offloaded ledgers included
        read: dict[str, int] = {}
        for t in TOPICS:
            sent = [payload(t, i) for i in range(PRE_MESSAGES)] + producers[t].sent
            consumed = list(dict.fromkeys(consumers[t].received))  # at least once: a reconnect redelivers
            assert consumed == sent, (t, len(consumed), len(sent))
            reader = client.create_reader(t, pulsar.MessageId.earliest)
            try:
                got = [reader.read_next(timeout_millis=30_000).data() for _ in sent]
                assert not reader.has_message_available()
            finally:
                reader.close()
            assert got[0] == sent[0] and got == sent, (t, len(got), len(sent))
            read[t] = len(got)
        offloaded = offloaded_bk_deleted(zk, [topic_to_managed_ledger(OFFLOADED)])

        # 7. the journal: approved items deleted (or already gone), each reference scan journaled
        outcomes = final_outcomes(journal)
        mine = {i["item_id"]: outcomes.get((plan["plan_hash"], i["item_id"]), []) for i in plan["items"]}
        bad = {i: o for i, o in mine.items() if not o or set(o) - {"deleted", "already_gone"}}
        assert not bad, bad
        records = list(journal.records())
        deleted = [r for r in records if r.get("type") == "outcome" and r.get("outcome") == "deleted"]
        assert len({r["item_id"] for r in deleted}) == len(deleted), "an item deleted twice"
        assert {r["ledger_id"] for r in deleted if r["item_type"] == "ledger"} <= approved_ledgers
        scans = [r for r in records if r.get("type") == "reference_scan" and r.get("deleter") == cfg.instance]
        assert scans, "the deleter journaled no reference scan"
        assert not any(k == "" or k.startswith(TENANT + "/") for s in scans for k in s["unprovable"]), scans
        assert metrics.value("deleted_ledgers") + metrics.value("already_gone") >= n_ledgers
        deadline = time.monotonic() + 30  # acknowledgements reach the broker's stats asynchronously
        while in_flight(web) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert in_flight(web) == 0

        rolled = {t: len(set(at_end[t]) - set(at_start[t])) for t in TOPICS}
        rolled_deleter = {t: len(set(after_deleter[t]) - set(at_deleter[t])) for t in TOPICS}
        assert sum(rolled_deleter.values()) >= 1, "no ledger rolled over while the deleter ran"
        assert during, "the deleter reported no batch"
        rolled_acting = sum(len(set(during[-1][t]) - set(at_deleter[t])) for t in TOPICS)
        acting_s = (max(r["at_ms"] for r in deleted) - min(s["at_ms"] for s in scans)) / 1000
        counts = Counter(str(o[-1]) for o in mine.values())
        print(
            f"\ntraffic test: {time.monotonic() - t_test:.1f}s, deleter {deleter_s:.1f}s "
            f"({report.messages} messages, {len(scans)} reference scans, deleting for {acting_s:.1f}s, "
            f"{rolled_acting} ledgers rolled meanwhile); approved items {dict(counts)} "
            f"({len(approved_ledgers)} ledgers, {len(approved_keys) // 2} offload copies); "
            f"produced {sum(len(p.sent) for p in producers.values()) + PRE_MESSAGES * len(TOPICS)}, "
            f"consumed {sum(len(c.received) for c in consumers.values())}, read back {sum(read.values())}; "
            f"ledgers rolled {rolled} (while the deleter ran {rolled_deleter}); "
            f"compactions {dict(compactions)}, "
            f"offloads {dict(offloads)}, offloaded ledgers of {OFFLOADED} with the BookKeeper copy deleted "
            f"{len(offloaded)}; while the deleter ran {overlap}; the broker's own removals {dict(explained)}"
        )
        passed = True
    finally:
        for x in loops:
            x.stop.set()
        for x in loops:
            if x.ident is not None:  # started
                x.join(timeout=60)
        try:
            client.close()
            remove_tenant(web, zk, s3, bucket, made)
        except Exception:
            if passed:
                raise
            traceback.print_exc()  # the test's own failure is the one to report
        finally:
            zk.stop()
            zk.close()
