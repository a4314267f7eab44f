"""``delete_remote_segment``: live re-verification and deletion of Kafka (KIP-405) remote log
segment objects.

A Kafka audit (``ledgerlens kafka-audit``) reports objects of the remote storage that no live
segment metadata names (``remote_segment_orphan_object``) and objects left by deleted partitions
(``remote_segment_deleted_partition_object``). A plan groups them per segment
(``delete_remote_segment`` items: the segment's ``.log``, ``.indexes``, ``.rsm-manifest``... with
each object's size and ETag). Right before deleting, the deleter checks again:

- every planned object absent: ``already_gone`` (success);
- an object's size or ETag differs from the plan: ``skipped_mismatch`` (rewritten or not the
  planned one); the store the plan names is not a store this deleter can reach: ``skipped_mismatch``;
- the metadata (the ``__remote_log_metadata`` topic read from the start to its current end, folded
  with the manager's rules; or a dump file) does not know the segment's topic id at all:
  ``skipped_mismatch`` (not proven to be this cluster's);
- the metadata knows the segment in a live state (COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED,
  DELETE_SEGMENT_STARTED) in a partition not DELETE_PARTITION_FINISHED: ``skipped_in_use``;
- a metadata record that does not decode, an unreadable topic or object: ``retry`` (nothing can
  be proven; retried, then dead-lettered);
- else ``delete``: exactly the planned keys still present, nothing else.

The metadata is read incrementally: the first check reads every partition from its start, later
checks only the records appended since (the fold is the same), so a long-running deleter costs one
small read per batch.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerlens.deletion.actions.base import Action, ActionContext, Work, head_verdict
from ledgerlens.deletion.outcomes import Outcome
from ledgerlens.deletion.verify import ALREADY_GONE, DELETE, IN_USE, MISMATCH, RETRY, Verdict
from ledgerlens.errors import ConfigError, LedgerLensError
from ledgerlens.kafka.replay import METADATA_TOPIC, Replay, replay
from ledgerlens.settings.redact import redact
from ledgerlens.sources import kafka_metadata as metadata
from ledgerlens.sources.remote_storage import RemoteStore, s3_client

LIVE_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED")


def store_of(expected: Mapping[str, Any], endpoint_url: str | None, region: str | None = None) -> RemoteStore:
    """The remote store a plan item names (``s3://bucket/prefix`` or ``file:///root``)."""
    name = str(expected.get("store") or "")
    layout = str(expected.get("layout") or "s3-plugin")
    if name.startswith("s3://"):
        bucket, _, prefix = name[len("s3://") :].partition("/")
        if not bucket:
            raise ConfigError(f"remote store {name!r}: no bucket")
        return RemoteStore(
            layout=layout, bucket=bucket, prefix=prefix, endpoint_url=endpoint_url, region=region
        )
    if name.startswith("file://"):
        return RemoteStore(layout=layout, directory=name[len("file://") :])
    raise ConfigError(f"remote store {name!r}: expected s3://BUCKET/PREFIX or file:///DIR")


def _local_path(store: RemoteStore, key: str) -> Path:
    root = store.root().resolve()
    path = (root / key).resolve()
    if root not in path.parents:
        raise ConfigError(f"remote object {key!r} lies outside the store {root}")
    return path


@dataclass
class KafkaLive:
    """The cluster's remote log metadata now: the metadata topic (``bootstrap_servers``) or a dump."""

    bootstrap_servers: str | None = None
    dump: str | None = None
    metadata_topic: str = METADATA_TOPIC
    timeout_s: float = 30.0
    endpoint_url: str | None = None  # S3 endpoint of the remote storage
    region: str | None = None
    _state: Replay = field(default_factory=Replay)
    _offsets: dict[int, int] = field(default_factory=dict)
    _topic_ids: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _clients: dict[tuple[str | None, str | None], Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.bootstrap_servers) == bool(self.dump):
            raise ConfigError(
                "Kafka metadata: give exactly one of --kafka-bootstrap-servers or --kafka-metadata-dump"
            )

    def refresh(self) -> tuple[Replay, set[str]]:
        """Fold the records appended since the last call; (state, topic ids the cluster lists)."""
        with self._lock:
            if self.dump:
                self._state = replay(metadata.read_dump(self.dump), self.metadata_topic)
                return self._state, set()

            assert self.bootstrap_servers is not None
            source = metadata.KafkaSource(self.bootstrap_servers, self.metadata_topic, self.timeout_s)
            for now in metadata.end_offsets(source):
                low = self._offsets.get(now.partition, now.low)
                if now.high > low:
                    for rec in metadata.read_partition(
                        source, metadata.PartitionRange(now.partition, low, now.high)
                    ):
                        self._state.apply_bytes(rec, self.metadata_topic)
                self._offsets[now.partition] = max(low, now.high)
            self._topic_ids = {
                str(t["topic_id"]) for t in metadata.describe_topics(source) if t.get("topic_id")
            }
            return self._state, set(self._topic_ids)

    def client(self, store: RemoteStore) -> Any:
        """One S3 client per endpoint and region, shared by the deleter's threads."""
        key = (store.endpoint_url, store.region)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = s3_client(store)
            return self._clients[key]

    def head(self, store: RemoteStore, key: str) -> tuple[int, str] | None:
        """(size, ETag) of one object (the audit's ETag: S3's, or ``mtime_ns-size`` of a local file);
        None when absent. Errors raise."""
        if store.directory:
            try:
                st = _local_path(store, key).stat()
            except FileNotFoundError:
                return None
            return st.st_size, f"{st.st_mtime_ns}-{st.st_size}"
        from botocore.exceptions import ClientError  # botocore/boto3: only when a bucket is verified

        from ledgerlens.sources.s3 import is_not_found

        try:
            resp = self.client(store).head_object(Bucket=store.bucket, Key=key)
        except ClientError as e:
            if is_not_found(e):
                return None
            raise
        return int(resp.get("ContentLength", -1)), str(resp.get("ETag", "")).strip('"')

    def delete(self, store: RemoteStore, key: str) -> None:
        """Delete one object (absent is fine)."""
        if store.directory:
            try:
                os.unlink(_local_path(store, key))
            except FileNotFoundError:
                pass
            return
        self.client(store).delete_object(Bucket=store.bucket, Key=key)


def _err(e: BaseException) -> str:
    return redact(f"{type(e).__name__}: {e}")[:300]


def _planned_stores(items: Sequence[Mapping[str, Any]], live: KafkaLive) -> list[RemoteStore | Exception]:
    """The remote store each item names, or why it cannot be used."""
    stores: list[RemoteStore | Exception] = []
    for item in items:
        try:
            stores.append(store_of(item["expected"], live.endpoint_url, live.region))
        except ConfigError as e:
            stores.append(e)
    return stores


def _remote_heads(
    items: Sequence[Mapping[str, Any]],
    stores: Sequence[RemoteStore | Exception],
    live: KafkaLive,
    max_in_flight: int,
) -> dict[tuple[int, str], tuple[int, str] | None | Exception]:
    """(size, ETag) of every planned object of a usable store, by (item index, key); None when absent."""
    flat = [
        (n, o["key"])
        for n, item in enumerate(items)
        if not isinstance(stores[n], Exception)
        for o in item["expected"]["objects"]
    ]

    def head(nk: tuple[int, str]) -> tuple[int, str] | None | Exception:
        store = stores[nk[0]]
        assert isinstance(store, RemoteStore)
        try:
            return live.head(store, nk[1])
        except Exception as e:  # noqa: BLE001 - S3 down, refused: not provable now
            return e

    with ThreadPoolExecutor(max_workers=max(1, max_in_flight)) as pool:
        return dict(zip(flat, pool.map(head, flat), strict=True))


def _segment_metadata_verdict(
    exp: Mapping[str, Any], state: Replay, known: set[str], corrupt: int
) -> Verdict | None:
    """Why the metadata does not let the segment go (undecodable records, an unknown topic id, a live
    segment), or None."""
    if corrupt:
        return Verdict(RETRY, f"{corrupt} metadata records do not decode: cannot prove the segment unknown")
    tid, part, sid = str(exp["topic_id"]), int(exp["partition"]), str(exp["segment_id"])
    if tid not in known:
        return Verdict(
            MISMATCH,
            f"topic id {tid} is unknown to the cluster's metadata: not proven to be this cluster's",
        )
    seg = state.segments.get((tid, part, sid))
    p = state.partitions.get((tid, part)) or {}
    if (
        seg is not None
        and seg["state"] in LIVE_STATES
        and p.get("delete_state") != "DELETE_PARTITION_FINISHED"
    ):
        return Verdict(IN_USE, f"the metadata knows segment {sid} in state {seg['state']}")
    return None


def verify_remote_segments(
    items: Sequence[Mapping[str, Any]], live: KafkaLive, max_in_flight: int = 16
) -> list[tuple[Verdict, list[str]]]:
    """Verdicts for approved ``delete_remote_segment`` items, with the keys still present (to delete)."""
    try:
        state, listed = live.refresh()
    except (LedgerLensError, OSError) as e:
        return [(Verdict(RETRY, f"Kafka metadata unreadable: {_err(e)}"), []) for _ in items]
    corrupt = sum(1 for ev in state.events if ev.get("kind") == "corrupt")
    known = {tid for (tid, _) in state.partitions} | {tid for (tid, _, _) in state.segments} | listed
    stores = _planned_stores(items, live)
    heads = _remote_heads(items, stores, live, max_in_flight)
    out: list[tuple[Verdict, list[str]]] = []
    for n, item in enumerate(items):
        exp = item["expected"]
        store = stores[n]
        if isinstance(store, Exception):
            out.append((Verdict(MISMATCH, f"the plan's remote store cannot be used: {store}"), []))
            continue
        keys: list[str] = []
        verdict: Verdict | None = None
        for o in exp["objects"]:
            h = heads[(n, o["key"])]
            if h is None:
                continue
            verdict = head_verdict(o, h, str(o["etag"]).strip('"'))
            if verdict is not None:
                break
            keys.append(o["key"])
        if verdict is None and not keys:
            verdict = Verdict(ALREADY_GONE, "every planned object is absent")
        if verdict is None:
            verdict = _segment_metadata_verdict(exp, state, known, corrupt)
        out.append(
            (
                verdict or Verdict(DELETE, "no live segment metadata; objects unchanged", {"keys": keys}),
                keys if verdict is None else [],
            )
        )
    return out


def delete_remote_objects(item: Mapping[str, Any], keys: Sequence[str], live: KafkaLive) -> None:
    """Delete ``keys`` (planned objects of ``item`` found present) from the item's store."""
    store = store_of(item["expected"], live.endpoint_url, live.region)
    planned = {o["key"] for o in item["expected"]["objects"]}
    for key in keys:
        if key not in planned:  # belt and braces: never a key the approved item does not name
            raise ConfigError(f"{key}: not an object of the approved item {item['item_id']}")
        live.delete(store, key)


class DeleteRemoteSegment(Action):
    name = "delete_remote_segment"

    def verify(self, ctx: ActionContext, group: Sequence[Work], deleted: Sequence[str]) -> None:
        live = ctx.kafka_live()
        if live is None:
            for w in group:
                w.fail("no Kafka metadata (--kafka-bootstrap-servers or --kafka-metadata-dump)")
            return
        items = [w.item for w in group if w.item is not None]
        max_in_flight = ctx.s3_source.max_in_flight if ctx.s3_source else 16
        for w, (verdict, keys) in zip(group, verify_remote_segments(items, live, max_in_flight), strict=True):
            w.decide(verdict, keys)

    def execute(self, ctx: ActionContext, work: Sequence[Work]) -> None:
        def delete(w: Work) -> None:
            try:
                delete_remote_objects(w.item or {}, w.act, ctx.kafka_live())
                w.outcome, w.reason = Outcome.DELETED, f"deleted {', '.join(w.act)}"
            except Exception as e:  # noqa: BLE001 - store down or refusing: retried
                w.fail(f"remote storage delete failed: {type(e).__name__}: {e}"[:300])

        if work:
            workers = max(1, min(len(work), ctx.s3_source.max_in_flight if ctx.s3_source else 4))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(delete, work))
