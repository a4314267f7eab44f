"""Phase 2: the deleter, a consumer of the deletion topic on a Shared subscription.

Each worker (``parallelism`` of them; several deleter processes may share the subscription and the
journal) takes a batch of messages and, for each one:

1. decodes it (a payload that does not decode goes to the dead-letter topic at once, with the
   reason: retrying cannot make it decode);
2. finds the approved item it claims to be (plan hash + item id in a verified journal) and rebuilds
   the message that item stands for: no such item (``unapproved``) or any differing field
   (``forged``) is refused, acked without deleting, and journaled;
3. re-verifies the live state through the item's action (``deletion.actions.ACTIONS``: one module
   per action holds its verification and its execution; the rules are listed in
   :mod:`ledgerlens.deletion.verify`): against the reference index of every Pulsar store
   (:mod:`ledgerlens.deletion.references`, read at the start of the run and again when older than
   ``reference_max_age_s``) and the item's own nodes read right now; anything referenced is
   ``skipped_in_use``, anything whose references are unknown ``skipped_unprovable``;
4. journals an intent for every item it is about to act on, then acts: removes the ledger znode
   with the version it just read (BookKeeper's own way: the bookies' garbage collector reclaims
   the entries), deletes the offload copy's data and index objects, or loads the topic through the
   admin REST API so that the broker trims by its own rules. Already gone counts as success;
5. journals every outcome, counts it (:mod:`ledgerlens.deletion.metrics`), then acknowledges.
   A failure goes to the retry topic with ``deliver_after`` (attempt count in ``RECONSUMETIMES``),
   or to the dead-letter topic after ``max_attempts``; the original is acked after that send.

A crash at any point leaves the message unacknowledged: it comes back, is verified again and ends
as ``already_gone`` when the first attempt had deleted it. Nothing is deleted without ``execute``;
the dry run receives the pending messages without acknowledging any, and journals (``verdict``
lines) and reports what it would do.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from ledgerlens.deletion import messages as m
from ledgerlens.deletion import verify as v
from ledgerlens.deletion.actions import ACTIONS, ActionContext, Work
from ledgerlens.deletion.actions.delete_remote_segment import KafkaLive
from ledgerlens.deletion.approval import approvals_in
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.outcomes import Mismatch, Outcome
from ledgerlens.deletion.publish import pulsar_client
from ledgerlens.deletion.references import DEFAULT_MAX_AGE_S, ReferenceIndex, ReferenceScanner
from ledgerlens.deletion.status import in_flight
from ledgerlens.errors import DecodeError, SourceError
from ledgerlens.settings.config import S3Source
from ledgerlens.settings.redact import redact

DLQ_SUBSCRIPTION = "ledgerlens-dlq"


@dataclass(frozen=True)
class DeleterConfig:
    """Where the deleter reads and deletes, and how it retries."""

    zookeeper: str  # the Pulsar metadata store (managed ledgers, schemas, tenants)
    service_url: str
    pulsar_stores: tuple[str, ...] = ()  # further Pulsar metadata stores sharing the BookKeeper
    reference_max_age_s: float = DEFAULT_MAX_AGE_S  # the reference index is read again past this age
    zookeeper_rate_limit: float | None = 20_000.0  # reads/s of the reference scan, as the audit's
    bookkeeper_zookeeper: str | None = None  # BookKeeper's store when it is another one
    web_url: str | None = None  # admin REST: load_topic items and the in-flight gauge
    s3: S3Source | None = None
    topic: str = m.DELETION_TOPIC
    subscription: str = m.SUBSCRIPTION
    parallelism: int = 2
    batch_size: int = 100
    retry_delay_s: float = 600.0  # PIP-186 twoPhaseDeletionReconsumeLaterInSeconds
    max_attempts: int = 10  # PIP-186 twoPhaseDeletionMaxRetryDeleteCount
    execute: bool = False
    until_idle_s: float | None = None  # stop after this long without a message (None: run until stopped)
    max_messages: int | None = None  # stop after this many messages (tests)
    roots: v.Roots = v.Roots()
    zookeeper_auth: Any = None  # config.ZooKeeperAuth (credentials by reference), for both stores
    cluster_name: str | None = None
    textfile: str | None = None
    pulsar_token: Any = None  # config.SecretRef of the Pulsar token (broker and admin API), by reference
    kafka_bootstrap_servers: str | None = None  # Kafka remote segments: the metadata topic's cluster
    kafka_metadata_dump: str | None = None  # ... or a dump of the metadata topic
    kafka_s3_endpoint: str | None = None  # S3 endpoint of the Kafka remote storage
    instance: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


@dataclass
class DeleterReport:
    """What one deleter run did: outcome -> count, and (dry run) what it would do per item."""

    execute: bool
    outcomes: Counter[str] = field(default_factory=Counter)
    would: list[dict[str, Any]] = field(default_factory=list)
    messages: int = 0
    seconds: float = 0.0
    signal: int | None = None  # SIGINT or SIGTERM that stopped the run (after its batch)


class Deleter:
    """The phase-2 consumer; see the module docstring."""

    def __init__(
        self,
        config: DeleterConfig,
        journal: Journal,
        metrics: DeletionMetrics | None = None,
        *,
        s3_client_factory: Callable[[], Any] | None = None,
        progress: Callable[[DeleterReport], None] | None = None,
    ) -> None:
        self.cfg = config
        self.journal = journal
        self.metrics = metrics or DeletionMetrics()
        self._s3_factory = s3_client_factory
        self._progress = progress
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._approved: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
        self._active: set[tuple[str, str]] = set()  # items a worker of this process is acting on
        self.report = DeleterReport(execute=config.execute)
        self._last_message = time.monotonic()
        self.zookeeper_clients: list[Any] = []  # the live sessions (tests expire them)
        self._error: BaseException | None = None  # a worker's unexpected error stops every worker
        self._kafka: Any = None  # delete_remote_segment.KafkaLive, made on the first Kafka item
        self.scanner: ReferenceScanner | None = None  # the reference index, made on connecting

    # -- approvals ---------------------------------------------------------------------------------

    def _absorb(self, records: Any) -> None:
        for rec in approvals_in(records).values():
            for item in rec.get("items") or []:
                self._approved.setdefault((str(rec["plan_hash"]), str(item["item_id"])), (item, rec))

    def load_approvals(self) -> int:
        """Read (and verify) the whole journal; returns the number of approved items known."""
        self._approved.clear()
        self._absorb(self.journal.records())
        return len(self._approved)

    def _lookup(self, plan_hash: str, item_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        key = (plan_hash, item_id)
        with self._lock:
            if key not in self._approved:
                self._absorb(self.journal.new_records())  # approvals journaled since we started
            return self._approved.get(key)

    # -- running -----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the workers to finish their batch and return."""
        self._stop.set()

    def _subscribe(self, client: Any, **options: Any) -> Any:
        """A Shared consumer of the deletion and retry topics, from their earliest message."""
        import pulsar  # pulsar-client: only when a broker is contacted

        return client.subscribe(
            [self.cfg.topic, m.retry_topic(self.cfg.topic)],
            self.cfg.subscription,
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(self.cfg.batch_size, -1, 200),
            **options,
        )

    def run(self) -> DeleterReport:
        """Consume until stopped, idle for ``until_idle_s`` or ``max_messages`` reached."""
        t0 = time.monotonic()
        self.load_approvals()
        if not self.cfg.execute:
            self._dry_run()
            self.report.seconds = time.monotonic() - t0
            return self.report
        import pulsar  # pulsar-client: only when a broker is contacted

        client, zk, bk, s3 = self._connect()
        old_handlers = self._signals()
        try:
            consumer = self._subscribe(client, receiver_queue_size=max(self.cfg.batch_size * 2, 100))
            client.subscribe(m.dlq_topic(self.cfg.topic), DLQ_SUBSCRIPTION,
                             initial_position=pulsar.InitialPosition.Earliest).close()  # fmt: skip
            retry = client.create_producer(m.retry_topic(self.cfg.topic), block_if_queue_full=True)
            dlq = client.create_producer(m.dlq_topic(self.cfg.topic), block_if_queue_full=True)
            reader = v.LiveReader(bk, zk, self.cfg.roots)
            workers = [
                threading.Thread(
                    target=self._worker, args=(consumer, reader, s3, retry, dlq, bk), daemon=True
                )
                for _ in range(max(1, self.cfg.parallelism))
            ]
            gauge = threading.Thread(target=self._gauge_loop, daemon=True)
            for w in workers:
                w.start()
            gauge.start()
            for w in workers:
                w.join()
            self._stop.set()
            consumer.close()  # what a worker did not acknowledge goes back to the subscription
            retry.close()
            dlq.close()
            if self._error is not None:
                raise self._error
        finally:
            self._restore(old_handlers)
            self._disconnect(client, zk, bk)
            if self.cfg.textfile:
                self.metrics.write_textfile(self.cfg.textfile)
        self.report.seconds = time.monotonic() - t0
        return self.report

    def _zookeeper(self, hosts: str) -> Any:
        """A read-write session (the audit's are read-only): deleting needs the quorum."""
        auth = self.cfg.zookeeper_auth
        options = auth.kazoo_options() if auth is not None else {}
        client = KazooClient(hosts=hosts, timeout=30, read_only=False, **options)
        try:
            client.start(timeout=30)
        except Exception as e:  # noqa: BLE001 - timeout, auth failure: one line naming the server
            client.close()
            raise SourceError(f"zookeeper {hosts}", f"cannot connect ({type(e).__name__}: {e})") from e
        return client

    def _connect(self) -> tuple[Any, Any, Any, Any]:
        """(pulsar client, Pulsar metadata ZooKeeper, BookKeeper ZooKeeper, S3 client or None)."""
        kwargs: dict[str, Any] = {}
        if self.cfg.pulsar_token is not None:
            import pulsar  # pulsar-client: only when a broker is contacted

            kwargs["authentication"] = pulsar.AuthenticationToken(self.cfg.pulsar_token.read())
        client = pulsar_client(self.cfg.service_url, **kwargs)
        try:
            zk, bk, s3 = self._stores()
        except BaseException:
            client.close()
            raise
        return client, zk, bk, s3

    def _stores(self) -> tuple[Any, Any, Any]:
        """(Pulsar metadata ZooKeeper, BookKeeper ZooKeeper, S3 client or None), and the scanner."""
        zk = self._zookeeper(self.cfg.zookeeper)
        bk = self._zookeeper(self.cfg.bookkeeper_zookeeper) if self.cfg.bookkeeper_zookeeper else zk
        self.zookeeper_clients = [zk] if bk is zk else [zk, bk]
        extra = [self._zookeeper(h) for h in self.cfg.pulsar_stores if h != self.cfg.zookeeper]
        self.zookeeper_clients += extra
        self.scanner = self.reference_scanner([zk, *extra])
        return zk, bk, self._s3_client()

    def process_items(self, plan_hash: str, item_ids: Sequence[str] | None = None) -> DeleterReport:
        """Phase 2 for approved items without the deletion topic: each item of the journal's
        approvals of ``plan_hash`` (or only ``item_ids``) goes through the same verification,
        execution (with ``execute``), journal lines and counters as its message would.

        For in-process tools and tests; an operator's deleter consumes the topic (:meth:`run`).
        """
        t0 = time.monotonic()
        self.load_approvals()
        wanted = None if item_ids is None else set(item_ids)
        work = []
        for (ph, iid), (item, approval) in sorted(self._approved.items()):
            if ph != plan_hash or (wanted is not None and iid not in wanted):
                continue
            w = Work(msg=None, attempt=0, info=m.item_to_message(item, ph), item=item)
            w.approval_id = str(approval["approval_id"])
            w.detail["deleted_tenants"] = approval.get("deleted_tenants") or []
            w.detail["cluster_name"] = approval.get("cluster_name")
            w.detail["pulsar_stores"] = approval.get("pulsar_stores") or []
            work.append(w)
        zk, bk, s3 = self._stores()
        try:
            reader = v.LiveReader(bk, zk, self.cfg.roots)
            for start in range(0, len(work), max(1, self.cfg.batch_size)):
                batch = work[start : start + max(1, self.cfg.batch_size)]
                if not self.cfg.execute:
                    self._dry_batch_work(batch, reader, s3)
                    continue
                self.report.messages += len(batch)
                self._verify(batch, reader, s3)
                acting = [w for w in batch if w.act is not None]
                if acting:
                    self.journal.append([self._intent(w) for w in acting])
                    self._execute(acting, s3, bk)
                self.journal.append([self._record(w) for w in batch])
                self._count(batch)
                self.report.outcomes.update(str(w.outcome) for w in batch)
        finally:
            for z in {id(c): c for c in self.zookeeper_clients}.values():
                z.stop()
                z.close()
        self.report.seconds = time.monotonic() - t0
        return self.report

    def reference_scanner(self, clients: Sequence[Any]) -> ReferenceScanner:
        """The reference index over these Pulsar stores; each read is journaled."""
        return ReferenceScanner(
            clients,
            self.cfg.roots,
            max_age_s=self.cfg.reference_max_age_s,
            rate_limit=self.cfg.zookeeper_rate_limit,
            on_scan=self._scanned,
        )

    def _scanned(self, index: ReferenceIndex) -> None:
        self.journal.append(
            [
                {
                    "type": "reference_scan",
                    "deleter": self.cfg.instance,
                    "started_ms": index.started_ms,
                    **index.summary(),
                    "unprovable": dict(sorted(index.unprovable.items())[:100]),
                }
            ]
        )

    def _disconnect(self, client: Any, zk: Any, bk: Any) -> None:
        client.close()
        for z in {id(c): c for c in (zk, bk, *self.zookeeper_clients)}.values():
            z.stop()
            z.close()

    def _signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        old: dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, self._on_signal)
        return old

    def _on_signal(self, signum: int, _frame: Any) -> None:
        """Finish the batch in hand (its journal lines and acknowledgements), then stop."""
        self.report.signal = self.report.signal or signum
        self.stop()

    @staticmethod
    def _restore(old: Mapping[int, Any]) -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    def _s3_client(self) -> Any:
        if self._s3_factory is not None:
            return self._s3_factory()
        if self.cfg.s3 is None:
            return None
        from ledgerlens.sources.s3 import make_client  # boto3: only with a tiered-storage bucket

        return make_client(self.cfg.s3)

    def _token(self) -> str | None:
        return self.cfg.pulsar_token.read() if self.cfg.pulsar_token is not None else None

    def _gauge_loop(self) -> None:
        while not self._stop.wait(5.0):
            if self.cfg.web_url:
                try:
                    self.metrics.in_flight.set(
                        in_flight(
                            self.cfg.web_url, self.cfg.topic, self.cfg.subscription, token=self._token()
                        )
                    )
                except (OSError, ValueError):
                    pass
            if self.cfg.textfile:
                self.metrics.write_textfile(self.cfg.textfile)

    def _done(self) -> bool:
        if self._stop.is_set():
            return True
        if self.cfg.max_messages is not None and self.report.messages >= self.cfg.max_messages:
            return True
        idle = self.cfg.until_idle_s
        return idle is not None and time.monotonic() - self._last_message > idle

    def _worker(self, consumer: Any, reader: v.LiveReader, s3: Any, retry: Any, dlq: Any, bk: Any) -> None:
        try:
            self._work(consumer, reader, s3, retry, dlq, bk)
        except BaseException as e:  # a tampered journal, a bug: stop everything, report it
            with self._lock:
                self._error = self._error or e
            self._stop.set()

    def _work(self, consumer: Any, reader: v.LiveReader, s3: Any, retry: Any, dlq: Any, bk: Any) -> None:
        while not self._done():
            try:
                msgs = list(consumer.batch_receive())
            except Exception:  # noqa: BLE001 - timeouts or a closing consumer: look again
                if self._stop.is_set():
                    return
                time.sleep(0.1)
                continue
            if not msgs:
                continue
            with self._lock:
                self._last_message = time.monotonic()
                self.report.messages += len(msgs)
            self._batch(msgs, consumer, reader, s3, retry, dlq, bk)
            with self._lock:  # idle means no message to take, not a long batch (S3 under load)
                self._last_message = time.monotonic()

    # -- one batch ---------------------------------------------------------------------------------

    def _prepare(self, msgs: Sequence[Any]) -> list[Work]:
        out = []
        for msg in msgs:
            props = msg.properties() or {}
            try:
                attempt = int(props.get(m.PROP_ATTEMPT, "0"))
            except ValueError:
                attempt = 0
            w = Work(msg=msg, attempt=attempt)
            out.append(w)
            try:
                w.info = m.decode(msg.data())
            except DecodeError as e:  # retrying cannot make it decode: to the dead-letter topic now
                w.fail(str(e))
                w.detail["undecodable"] = True
                continue
            found = self._lookup(w.info.planHash, w.info.itemId)
            if found is None:
                w.outcome, w.mismatch = Outcome.SKIPPED_MISMATCH, Mismatch.UNAPPROVED
                w.reason = (
                    f"item {w.info.itemId!r} of plan {w.info.planHash[:16]} is in no approval of the journal"
                )
                continue
            item, approval = found
            expected = m.item_to_message(item, w.info.planHash)
            if expected != w.info:
                diff = sorted(
                    {f.name for f, _ in expected.ListFields()} ^ {f.name for f, _ in w.info.ListFields()}
                    | {
                        f.name
                        for f, val in expected.ListFields()
                        if w.info.HasField(f.name) and getattr(w.info, f.name) != val
                    }
                )
                w.outcome, w.mismatch = Outcome.SKIPPED_MISMATCH, Mismatch.FORGED
                w.reason = f"message differs from the approved item in {', '.join(diff)}"
                continue
            w.item, w.approval_id = item, str(approval["approval_id"])
            w.detail["deleted_tenants"] = approval.get("deleted_tenants") or []
            w.detail["cluster_name"] = approval.get("cluster_name")
            w.detail["pulsar_stores"] = approval.get("pulsar_stores") or []
        return out

    def _verify(self, work: Sequence[Work], reader: v.LiveReader, s3: Any) -> None:
        """Each undecided item through its action's verification (``ACTIONS``)."""
        reads = 1 + len({h for h in self.cfg.pulsar_stores if h != self.cfg.zookeeper})
        for w in work:  # a store the plan's audit read and this deleter does not: blind to its references
            stores = w.detail.get("pulsar_stores") or []
            if w.outcome is None and w.item is not None and len(stores) > reads:
                w.outcome = Outcome.SKIPPED_UNPROVABLE
                w.reason = (
                    f"the plan's audit read {len(stores)} Pulsar metadata stores, this deleter {reads}: "
                    "name the others with --reference-store"
                )
        todo = [w for w in work if w.outcome is None and w.item is not None]
        needs_index = any(ACTIONS[w.action].uses_index for w in todo if w.action in ACTIONS)
        ctx = self._context(reader, s3, self.scanner.current() if needs_index and self.scanner else None)
        by_action: dict[str, list[Work]] = {}
        for w in todo:
            by_action.setdefault(str(w.action), []).append(w)
        for name, ws in by_action.items():
            action = ACTIONS.get(name)
            if action is None:
                for w in ws:
                    w.fail(f"unknown action {name!r}")
                continue
            # approvals may name different deleted tenants: verify per distinct set
            groups: dict[tuple[str, ...], list[Work]] = {}
            for w in ws:
                groups.setdefault(tuple(sorted(w.detail["deleted_tenants"])), []).append(w)
            for deleted, group in groups.items():
                action.verify(ctx, group, deleted)

    def _context(self, reader: v.LiveReader, s3: Any, index: ReferenceIndex | None = None) -> ActionContext:
        return ActionContext(
            reader=reader,
            s3=s3,
            s3_source=self.cfg.s3,
            roots=self.cfg.roots,
            index=index,
            web_url=self.cfg.web_url,
            cluster_name=self.cfg.cluster_name,
            token=self._token,
            kafka_live=self._kafka_live,
        )

    def _kafka_live(self) -> Any:
        """The Kafka metadata reader (one per deleter: its fold is incremental), or None."""
        if not (self.cfg.kafka_bootstrap_servers or self.cfg.kafka_metadata_dump):
            return None
        with self._lock:
            if self._kafka is None:
                self._kafka = KafkaLive(
                    bootstrap_servers=self.cfg.kafka_bootstrap_servers,
                    dump=self.cfg.kafka_metadata_dump,
                    endpoint_url=self.cfg.kafka_s3_endpoint,
                )
            return self._kafka

    def _execute(self, work: Sequence[Work], s3: Any, bk: Any) -> None:
        """Each verified item through its action's execution, action by action (``ACTIONS``)."""
        ctx = self._context(v.LiveReader(bk, None, self.cfg.roots), s3)
        for name, action in ACTIONS.items():
            mine = [w for w in work if w.act is not None and w.action == name]
            if mine:
                action.execute(ctx, mine)

    def _record(self, w: Work, **extra: Any) -> dict[str, Any]:
        info = w.info
        rec: dict[str, Any] = {
            "type": "outcome",
            "outcome": w.outcome,
            "reason": redact(w.reason),
            "deleter": self.cfg.instance,
            "attempt": w.attempt,
            "item_type": w.type,
        }
        if w.msg is not None:
            rec.update(message_id=str(w.msg.message_id()), topic=w.msg.topic_name())
        if w.mismatch:
            rec["mismatch"] = w.mismatch
        if w.detail.get("node"):
            rec["node"] = redact(str(w.detail["node"]))
        if info is not None:
            rec.update(plan_hash=info.planHash, item_id=info.itemId)
            if info.HasField("ledgerId"):
                rec["ledger_id"] = info.ledgerId
            if info.objectKey:
                rec["object_key"] = info.objectKey
        if w.approval_id:
            rec["approval_id"] = w.approval_id
        if w.outcome != Outcome.FAILED and w.mismatch:
            rec["message"] = m.describe(info) if info is not None else None
        rec.update(extra)
        return rec

    def _batch(
        self, msgs: Sequence[Any], consumer: Any, reader: v.LiveReader, s3: Any, retry: Any, dlq: Any, bk: Any
    ) -> None:
        work = self._prepare(msgs)
        self._verify(work, reader, s3)
        claimed: list[tuple[str, str]] = []
        with self._lock:
            for w in work:
                if w.act is None:
                    continue
                key = (w.info.planHash, w.info.itemId)
                if key in self._active:  # a duplicate message: one effect only, the other comes back later
                    w.act, w.outcome = None, Outcome.FAILED
                    w.reason = "the same item is being acted on by another worker; verified again later"
                else:
                    self._active.add(key)
                    claimed.append(key)
        try:
            self._act_and_record(work, consumer, s3, retry, dlq, bk)
        finally:
            with self._lock:
                self._active.difference_update(claimed)

    def _intent(self, w: Work) -> dict[str, Any]:
        """The journal line written before an item is acted on."""
        rec = {
            "type": "intent",
            "deleter": self.cfg.instance,
            "plan_hash": w.info.planHash,
            "item_id": w.info.itemId,
            "approval_id": w.approval_id,
            "action": w.item["action"],  # type: ignore[index]
            "znode_version": getattr(w.act, "version", None),
            "keys": list(w.act) if isinstance(w.act, list) else None,
        }
        if w.msg is not None:
            rec["message_id"] = str(w.msg.message_id())
        return rec

    def _act_and_record(
        self, work: list[Work], consumer: Any, s3: Any, retry: Any, dlq: Any, bk: Any
    ) -> None:
        acting = [w for w in work if w.act is not None]
        if acting:
            self.journal.append([self._intent(w) for w in acting])
            self._execute(acting, s3, bk)
        # failures: to the retry topic, or the dead-letter topic after max_attempts
        records = []
        for w in work:
            if w.outcome == Outcome.FAILED:
                last = w.attempt + 1 >= self.cfg.max_attempts or w.detail.get("undecodable")
                nxt = "dead_letter" if last else "retry"
                props = dict(w.msg.properties() or {})
                props[m.PROP_ATTEMPT] = str(w.attempt + 1)
                props[m.PROP_REASON] = redact(w.reason)[:500]
                try:
                    if nxt == "retry":
                        retry.send(w.msg.data(), properties=props,
                                   deliver_after=timedelta(seconds=self.cfg.retry_delay_s))  # fmt: skip
                    else:
                        props["ledgerlens.origin_topic"] = w.msg.topic_name()
                        dlq.send(w.msg.data(), properties=props)
                except Exception as e:  # noqa: BLE001 - cannot re-queue: leave unacked, it comes back
                    w.detail["unacked"] = f"{nxt} send failed: {e}"
                    records.append(self._record(w, next="redeliver"))
                    continue
                records.append(self._record(w, next=nxt))
            else:
                records.append(self._record(w))
        self.journal.append(records)
        self._count(work)
        for w in work:
            if "unacked" in w.detail:
                consumer.negative_acknowledge(w.msg)
                continue
            consumer.acknowledge(w.msg)
            self.metrics.acked.inc()
        with self._lock:
            self.report.outcomes.update(str(w.outcome) for w in work)
            if self._progress is not None:
                self._progress(self.report)

    def _count(self, work: Sequence[Work]) -> None:
        mt = self.metrics
        for w in work:
            t = w.type
            mt.received.labels(type=t).inc()
            if w.outcome == Outcome.DELETED:
                {"ledger": mt.deleted_ledgers, "remote_segment": mt.deleted_remote_segments}.get(
                    t, mt.deleted_offload_copies
                ).inc()
            elif w.outcome == Outcome.LOADED:
                mt.loaded_topics.inc()
            elif w.outcome == Outcome.ALREADY_GONE:
                mt.already_gone.labels(type=t).inc()
            elif w.outcome == Outcome.SKIPPED_IN_USE:
                mt.skipped_in_use.labels(type=t).inc()
            elif w.outcome == Outcome.SKIPPED_UNPROVABLE:
                mt.skipped_unprovable.labels(type=t).inc()
            elif w.outcome == Outcome.SKIPPED_MISMATCH:
                mt.skipped_mismatch.labels(type=t, reason=w.mismatch or Mismatch.CHANGED).inc()
            elif w.outcome == Outcome.FAILED:
                mt.failed.labels(type=t).inc()
                if "unacked" not in w.detail:
                    if w.attempt + 1 >= self.cfg.max_attempts or w.detail.get("undecodable"):
                        mt.dead_lettered.inc()
                    else:
                        mt.retried.inc()

    # -- dry run -----------------------------------------------------------------------------------

    def _dry_run(self) -> None:
        """Receive the subscription's pending messages, verify, acknowledge none: closing the consumer
        hands them back to the subscription untouched (a running deleter gets them then)."""

        client, zk, bk, s3 = self._connect()
        idle = self.cfg.until_idle_s if self.cfg.until_idle_s is not None else 5.0
        try:
            consumer = self._subscribe(client)
            reader_lr = v.LiveReader(bk, zk, self.cfg.roots)
            last = time.monotonic()
            try:
                while time.monotonic() - last < idle and not self._stop.is_set():
                    msgs = list(consumer.batch_receive())
                    if msgs:
                        last = time.monotonic()
                        self._dry_batch(msgs, reader_lr, s3)
            finally:
                consumer.close()
        finally:
            self._disconnect(client, zk, bk)

    def _dry_batch(self, msgs: Sequence[Any], reader: v.LiveReader, s3: Any) -> None:
        self._dry_batch_work(self._prepare(msgs), reader, s3)

    def _dry_batch_work(self, work: list[Work], reader: v.LiveReader, s3: Any) -> None:
        self._verify(work, reader, s3)
        self.report.messages += len(work)
        records = []
        for w in work:
            outcome = (
                ("would_" + ("load" if w.item and w.item["action"] == "load_topic" else "delete"))
                if (w.act is not None)
                else str(w.outcome)
            )
            self.report.outcomes[outcome] += 1
            self.report.would.append(
                {
                    "outcome": outcome,
                    "reason": w.reason,
                    "item_id": getattr(w.info, "itemId", None),
                    "plan_hash": getattr(w.info, "planHash", None),
                }
            )
            # a verdict, not an outcome: nothing was done, the item stays pending
            records.append({**self._record(w), "type": "verdict", "outcome": outcome, "dry_run": True})
        self.journal.append(records)


def write_report(report: DeleterReport, path: str | Path) -> None:
    """A deleter run's report as JSON."""
    Path(path).write_text(
        json.dumps(
            {"execute": report.execute, "outcomes": dict(report.outcomes), "messages": report.messages,
             "seconds": round(report.seconds, 3), "would": report.would},
            indent=1,
        ) + "\n"
    )  # fmt: skip


__all__ = ["Deleter", "DeleterConfig", "DeleterReport"]
