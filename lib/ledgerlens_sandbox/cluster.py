"""Write a small, realistic Pulsar cluster's storage metadata (ZooKeeper) and offload objects (S3).

:func:`generate` writes the ``healthy`` cluster, or the ``planted`` one (healthy plus every anomaly
of docs/audit-rules.md plus negative controls), and returns a :class:`GroundTruth` listing exactly the
findings an audit with default ``AuditConfig`` and ``as_of_ms = now_ms`` must report.
:func:`generate_bulk` writes a large healthy cluster fast, for benchmarks.

Conventions of ``GroundTruth.expected`` where docs/audit-rules.md leaves a column open (checked
against the pipeline's output, ``ledgerlens.audit.pipeline.run``):

- ``path``: the ledger znode for ``orphan_ledger``, ``unattributed_ledger`` and BookKeeper
  ``corrupt_metadata``; the referencing cursor znode / schema locator for ``missing_ledger`` from a
  cursor / schema; the node itself for ``corrupt_metadata`` and ``inactive_cursor``; the owner
  managed-ledger znode for every other finding about a managed ledger's ledgers (``missing_ledger``,
  ``retention_overdue``, ``open_ledger_overdue``, ``offloaded_not_deleted``, ``missing_offload_object``,
  ``incomplete_offload``); null for ``orphan_offload_object``. Paths include ``root``.
- ``cursor``: the cursor name (all planted names need no URL encoding, so encoded and decoded forms
  agree) for cursor findings and cursor ledgers; the ``pulsar/delayedIndexCursor`` of an orphan
  delayed-index-bucket ledger; null otherwise.
- ``managed_ledger``: the owner managed ledger (custom metadata; the compacted / delayed topic's
  managed ledger for those components; ``ManagedLedgerName`` of an orphan offload object); null for
  schema ledgers, unattributed ledgers and BookKeeper ``corrupt_metadata``.
- ``ledger_id``: set whenever one ledger is concerned (also BookKeeper ``corrupt_metadata``, parsed
  from the path); null for cursor / managed-ledger ``corrupt_metadata`` and ``inactive_cursor``.

S3 ``LastModified`` cannot be set: objects are as old as ``now_ms`` minus the time they were written.
Object-age findings (``orphan_offload_object``, ``incomplete_offload``) are expected only when that
age is clearly over a day (``GroundTruth.s3_objects_aged``); use :func:`default_now_ms` (two days
ahead of the clock) to get them. Near the threshold :func:`generate` refuses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import struct
import time
import uuid as uuidlib
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.proto import schema_storage_pb2 as schpb
from ledgerlens_sandbox import wire

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
BOOKIES = ("127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183")
CLUSTER = "sandbox"
LONG_ID_BASE = 3_000_000_000  # >= 2^31: long hierarchical paths
S3_AGED_MS = 25 * HOUR  # object age counted as clearly over min_orphan_age / incomplete_offload_age
S3_YOUNG_MS = 23 * HOUR  # object age counted as clearly under them
SCENARIOS = ("healthy", "planted")


def default_now_ms() -> int:
    """Two days ahead of the clock, so that S3 objects written now count as old."""
    return int(time.time() * 1000) + 2 * DAY


@dataclass(frozen=True)
class GroundTruth:
    """What :func:`generate` wrote and what the audit must find (one dict per finding)."""

    scenario: str
    now_ms: int
    root: str
    bucket: str | None
    s3_endpoint: str | None
    zk_hosts: str
    written_at_ms: int
    s3_objects_aged: bool
    expected: list[dict[str, Any]]
    controls: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    # Another Pulsar cluster sharing this BookKeeper cluster and bucket (planted scenario): its
    # Pulsar metadata lives under ``foreign_root``; ``foreign`` lists the findings of ``expected``
    # (all info) that disappear when that store is audited too (``--pulsar-metadata``).
    foreign_root: str | None = None
    foreign: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        """JSON text (sorted keys, indented)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GroundTruth:
        """Inverse of :meth:`to_json`."""
        return cls(**json.loads(text))

    def expected_of(self, kind: str) -> list[dict[str, Any]]:
        """The expected findings of one kind."""
        return [f for f in self.expected if f["kind"] == kind]


# --- building blocks ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Offload:
    """An offload context on a managed ledger's ledger and which of its objects exist."""

    uuid: str
    complete: bool
    bookkeeper_deleted: bool = False
    timestamp_ms: int | None = None
    write_data: bool = True
    write_index: bool = True


@dataclass(frozen=True)
class Ledger:
    """One ledger of a managed ledger (``timestamp_ms`` 0 and state OPEN for the current one)."""

    ledger_id: int
    entries: int
    size: int
    timestamp_ms: int
    ctime_ms: int
    state: str = "CLOSED"
    in_bk: bool = True
    bk_version: int = 3
    custom: Mapping[str, str] | None = None  # None: the managed-ledger keys; {}: none (pre-2019)
    offload: Offload | None = None


@dataclass(frozen=True)
class Cursor:
    """A cursor znode."""

    name: str  # decoded subscription / cursor name
    mark_delete: tuple[int, int]
    last_active_ms: int
    cursor_ledger: int = -1  # -1: position kept in the znode
    properties: Mapping[str, int] = field(default_factory=dict)
    cursor_properties: Mapping[str, str] = field(default_factory=dict)
    codec: str | None = None
    deleted_ranges: Sequence[tuple[int, int, int, int]] = ()
    raw: bytes | None = None  # written as-is (corrupt nodes)


def _finding(kind: str, severity: str, **cols: Any) -> dict[str, Any]:
    row = dict.fromkeys(FINDING_KEYS)
    row.update(kind=kind, severity=severity, **cols)
    return row


def _message_id_data(ledger_id: int, entry_id: int) -> bytes:
    """MessageIdData {ledgerId=1, entryId=2} (``MessageId.toByteArray``)."""
    return b"\x08" + wire.varint(ledger_id) + b"\x10" + wire.varint(entry_id)


def _policies(
    *,
    retention: tuple[int, int] | None,
    offload_lag_ms: int | None = None,
    bucket: str | None = None,
    endpoint: str | None = None,
) -> bytes:
    """Namespace policies JSON with Pulsar's field names (``Policies.java``)."""
    pol: dict[str, Any] = {
        "auth_policies": {
            "namespace_auth": {},
            "destination_auth": {},
            "subscription_auth_roles": {},
            "topic_auth": {},
        },
        "replication_clusters": [CLUSTER],
        "bundles": {
            "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
            "numBundles": 4,
        },
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "message_ttl_in_seconds": None,
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "offload_threshold": -1,
        "schema_auto_update_compatibility_strategy": "Full",
        "schema_compatibility_strategy": "UNDEFINED",
        "is_allow_auto_update_schema": True,
        "schema_validation_enforced": False,
        "subscription_types_enabled": [],
        "properties": {},
    }
    if retention is not None:
        pol["retention_policies"] = {
            "retentionTimeInMinutes": retention[0],
            "retentionSizeInMB": retention[1],
        }
    if offload_lag_ms is not None:
        pol["offload_deletion_lag_ms"] = offload_lag_ms
        pol["offload_policies"] = {
            "managedLedgerOffloadDriver": "aws-s3",
            "managedLedgerOffloadBucket": bucket,
            "managedLedgerOffloadRegion": "us-east-1",
            "managedLedgerOffloadServiceEndpoint": endpoint,
            "managedLedgerOffloadDeletionLagInMillis": offload_lag_ms,
            "managedLedgerOffloadThresholdInBytes": -1,
            "managedLedgerOffloadMaxBlockSizeInBytes": 67108864,
            "managedLedgerOffloadReadBufferSizeInBytes": 1048576,
        }
    return json.dumps(pol).encode()


class _Cluster:
    """Collects znodes, S3 objects, expected findings and controls; then writes them."""

    def __init__(
        self,
        root: str,
        now_ms: int,
        bucket: str | None,
        endpoint: str | None,
        s3_aged: bool,
        seed: int,
        bk_root: str | None = None,
    ) -> None:
        self.root = root.rstrip("/")
        self.bk_root = bk_root
        self.cluster_name = CLUSTER
        self.now = now_ms
        self.bucket = bucket
        self.endpoint = endpoint
        self.s3_aged = s3_aged
        self.rng = random.Random(seed)
        self.nodes: dict[str, tuple[bytes, list[Any] | None]] = {}
        self.rewrites: dict[str, bytes] = {}  # set after creation (znode version 1)
        self.objects: list[tuple[str, bytes, dict[str, str]]] = []
        self.expected: list[dict[str, Any]] = []
        self.controls: list[dict[str, Any]] = []
        self._next_short = 1000 + self.rng.randrange(0, 500)
        self._next_long = LONG_ID_BASE + self.rng.randrange(0, 10_000)
        self.counts = {"bk_ledgers": 0, "managed_ledgers": 0, "cursors": 0, "schemas": 0, "namespaces": 0}

    # paths
    @property
    def ledgers_root(self) -> str:
        return self.bk_root or self.root + "/ledgers"

    def ml_path(self, ml_name: str) -> str:
        return f"{self.root}/managed-ledgers/{ml_name}"

    def cursor_path(self, ml_name: str, cursor: str) -> str:
        return f"{self.ml_path(ml_name)}/{wire.url_encode(cursor)}"

    def ledger_path(self, ledger_id: int) -> str:
        return wire.ledger_path(ledger_id, self.ledgers_root)

    def put(self, path: str, data: bytes = b"", acl: list[Any] | None = None) -> None:
        if path in self.nodes and self.nodes[path][0]:
            raise ValueError(f"sandbox generator wrote {path} twice")
        self.nodes[path] = (data, acl)

    def new_id(self, long: bool = False) -> int:
        if long:
            self._next_long += self.rng.randrange(1, 4)
            return self._next_long
        self._next_short += self.rng.randrange(1, 4)
        return self._next_short

    def uuid(self) -> str:
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    # BookKeeper
    def bk_ledger(
        self,
        ledger_id: int,
        *,
        ctime_ms: int,
        entries: int,
        size: int,
        custom: Mapping[str, str | bytes] | None,
        state: str = "CLOSED",
        version: int = 3,
        ensemble_size: int = 2,
    ) -> bk.LedgerMetadataFormat:
        closed = state == "CLOSED"
        ensemble = list(BOOKIES[:ensemble_size])
        md = wire.ledger_metadata(
            ensemble=ensemble,
            write_quorum=2,
            ack_quorum=2,
            length=size if closed else 0,
            last_entry_id=entries - 1 if closed else -1,
            state=state,
            ctime_ms=ctime_ms if version >= 2 else None,
            custom=custom,
            ctoken=self.rng.randrange(1, 1 << 40) if version == 3 else None,
        )
        self.put(self.ledger_path(ledger_id), wire.bk_metadata(md, version))
        self.counts["bk_ledgers"] += 1
        return md

    def ml_custom(self, ml_name: str, cursor: str | None = None) -> dict[str, str]:
        md = {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": ml_name}
        if cursor is not None:
            md["pulsar/cursor"] = wire.url_encode(cursor)
        return md

    # S3
    def closed_metadata(self, ledger: Ledger, custom: Mapping[str, str | bytes]) -> bk.LedgerMetadataFormat:
        """The metadata of a closed ``ledger`` on the first two bookies (as an offload index embeds it)."""
        return wire.ledger_metadata(
            ensemble=list(BOOKIES[:2]),
            write_quorum=2,
            ack_quorum=2,
            length=ledger.size,
            last_entry_id=ledger.entries - 1,
            ctime_ms=ledger.ctime_ms,
            custom=custom,
        )

    def offload_objects(
        self, ml_name: str, ledger: Ledger, md: bk.LedgerMetadataFormat, uuid: str, *, data: bool, index: bool
    ) -> tuple[str, str]:
        data_key = wire.offload_data_key(uuid, ledger.ledger_id)
        index_key = wire.offload_index_key(uuid, ledger.ledger_id)
        n = min(ledger.entries, 40)
        per = max(1, ledger.size // max(ledger.entries, 1) - 40)
        entries = [
            (i, wire.pulsar_entry(bytes([i % 251]) * per, sequence_id=i, publish_ms=ledger.ctime_ms + i))
            for i in range(n)
        ]
        blob, idx = wire.offload_data_object(entries, max_block_size=4096)
        if data:
            self.objects.append(
                (data_key, blob, wire.offload_user_metadata("data", ml_name, cluster=self.cluster_name))
            )
        if index:
            self.objects.append(
                (
                    index_key,
                    wire.offload_index_v1(md, idx, len(blob)),
                    wire.offload_user_metadata("index", ml_name, cluster=self.cluster_name),
                )
            )
        return data_key, index_key

    def driver_metadata(self) -> mlpb.OffloadDriverMetadata:
        dm = mlpb.OffloadDriverMetadata(name="aws-s3")
        for k, v in (
            ("managedLedgerOffloadDriver", "aws-s3"),
            ("bucket", self.bucket or ""),
            ("region", "us-east-1"),
            ("serviceEndpoint", self.endpoint or ""),
        ):
            dm.properties.add(key=k, value=v)
        return dm

    # managed ledgers
    def topic(
        self,
        topic: str,
        ledgers: Sequence[Ledger],
        cursors: Sequence[Cursor] = (),
        *,
        codec: str | None = None,
        raw: bytes | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> str:
        """Write a managed ledger (node, BK ledgers, cursors, offload objects); returns its name."""
        name = wire.managed_ledger_name(topic)
        info = mlpb.ManagedLedgerInfo()
        for led in ledgers:
            custom: Mapping[str, str] = self.ml_custom(name) if led.custom is None else led.custom
            md = self.closed_metadata(led, custom)
            if led.in_bk:
                md = self.bk_ledger(
                    led.ledger_id,
                    ctime_ms=led.ctime_ms,
                    entries=led.entries,
                    size=led.size,
                    custom=custom,
                    state=led.state,
                    version=led.bk_version,
                )
            li = info.ledgerInfo.add(ledgerId=led.ledger_id)
            if led.state == "OPEN":
                li.timestamp = 0
            else:
                li.entries, li.size, li.timestamp = led.entries, led.size, led.timestamp_ms
            if led.offload is not None:
                off = led.offload
                msb, lsb = wire.uuid_bits(off.uuid)
                oc = li.offloadContext
                oc.uidMsb, oc.uidLsb, oc.complete = msb, lsb, off.complete
                if off.complete:
                    oc.bookkeeperDeleted = off.bookkeeper_deleted
                if off.timestamp_ms is not None:
                    oc.timestamp = off.timestamp_ms
                oc.driverMetadata.CopyFrom(self.driver_metadata())
                if self.bucket is not None and (off.write_data or off.write_index):
                    self.offload_objects(name, led, md, off.uuid, data=off.write_data, index=off.write_index)
        for k, v in (properties or {}).items():
            info.properties.add(key=k, value=v)
        if raw is not None:
            value = raw
        elif not ledgers and not properties:
            value = b""  # as created: 0 bytes
        else:
            value = wire.managed_info(info, codec)
        self.put(self.ml_path(name), value)
        self.counts["managed_ledgers"] += 1
        for cur in cursors:
            self.cursor(name, cur)
        return name

    def cursor(self, ml_name: str, cur: Cursor) -> None:
        path = self.cursor_path(ml_name, cur.name)
        self.counts["cursors"] += 1
        if cur.raw is not None:
            self.put(path, cur.raw)
            return
        ci = mlpb.ManagedCursorInfo(
            cursorsLedgerId=cur.cursor_ledger,
            markDeleteLedgerId=cur.mark_delete[0],
            markDeleteEntryId=cur.mark_delete[1],
            lastActive=cur.last_active_ms,
        )
        for lo_l, lo_e, hi_l, hi_e in cur.deleted_ranges:
            r = ci.individualDeletedMessages.add()
            r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = lo_l, lo_e
            r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = hi_l, hi_e
        for k, v in cur.properties.items():
            ci.properties.add(name=k, value=v)
        for k, s in cur.cursor_properties.items():
            ci.cursorProperties.add(name=k, value=s)
        self.put(path, wire.managed_info(ci, cur.codec))

    def cursor_ledger(self, ml_name: str, cursor: str, ctime_ms: int) -> int:
        """A cursor ledger (open, as the broker keeps the current one) for ``cursor``."""
        lid = self.new_id()
        self.bk_ledger(
            lid, ctime_ms=ctime_ms, entries=0, size=0, custom=self.ml_custom(ml_name, cursor), state="OPEN"
        )
        return lid

    def schema(self, topic: str, versions: Sequence[int], *, missing: Iterable[int] = ()) -> str:
        """A schema locator with one BK ledger per version; ``missing`` ledgers are not written."""
        sid = wire.schema_id(topic)
        gone = set(missing)
        entries = []
        for v, lid in enumerate(versions):
            body = json.dumps(
                {
                    "type": "record",
                    "name": "Event",
                    "fields": [{"name": f"f{i}", "type": "long"} for i in range(v + 1)],
                }
            ).encode()
            entries.append(
                schpb.IndexEntry(
                    version=v,
                    position=schpb.PositionInfo(ledgerId=lid, entryId=0),
                    hash=hashlib.sha256(body).digest(),
                )
            )
            if lid not in gone:
                self.bk_ledger(
                    lid,
                    ctime_ms=self.now - (30 - v) * DAY,
                    entries=1,
                    size=len(body) + 64,
                    custom={"application": "pulsar", "component": "schema", "pulsar/schemaId": sid},
                )
        loc = schpb.SchemaLocator(info=entries[-1], index=entries)
        self.put(f"{self.root}/schemas/{sid}", loc.SerializeToString())
        self.counts["schemas"] += 1
        return sid

    def namespace(self, ns: str, policies: bytes) -> None:
        self.put(f"{self.root}/admin/policies/{ns}", policies)
        self.counts["namespaces"] += 1

    def expect(self, kind: str, severity: str, **cols: Any) -> None:
        self.expected.append(_finding(kind, severity, **cols))

    def expect_listed(self, group: str) -> None:
        """Expect the findings ``expected.json`` lists for planted ``group`` (its paths: below ``root``)."""
        for listed in _listed_expectations()[group]:
            cols = dict(listed, path=self.root + listed["path"])
            if cols["path"] not in self.nodes:
                raise ValueError(f"expected.json, {group}: the generator wrote no {cols['path']}")
            self.expect(**cols)

    def control(self, what: str, **cols: Any) -> None:
        self.controls.append({"control": what, **cols})


@functools.cache
def _listed_expectations() -> dict[str, list[dict[str, Any]]]:
    """``expected.json``: the planted findings no drawn ledger id or uuid enters, by planted group."""
    listed: dict[str, list[dict[str, Any]]] = json.loads(
        resources.files("ledgerlens_sandbox").joinpath("expected.json").read_text()
    )
    return listed


def _closed_series(
    c: _Cluster,
    n: int,
    *,
    first_ts: int,
    step: int,
    long: bool = False,
    last_open_ctime: int | None = None,
    entries: int = 200,
    size_per_entry: int = 300,
) -> list[Ledger]:
    """``n`` consecutive ledgers closed ``step`` apart from ``first_ts``; the last OPEN when asked."""
    out = []
    for i in range(n):
        lid = c.new_id(long)
        ts = first_ts + i * step
        e = entries + c.rng.randrange(0, entries)
        out.append(Ledger(lid, e, e * size_per_entry, ts, ts - step))
    if last_open_ctime is not None:
        out.append(Ledger(c.new_id(long), 0, 0, 0, last_open_ctime, state="OPEN"))
    return out


# --- the healthy cluster --------------------------------------------------------------------------


def _bookkeeper_special(c: _Cluster) -> None:
    lr = c.ledgers_root
    c.put(lr + "/LAYOUT", b"2\norg.apache.pulsar.metadata.bookkeeper.PulsarLedgerManagerFactory:1")
    c.put(lr + "/INSTANCEID", c.uuid().encode())
    c.put(lr + "/available", b"")
    c.put(lr + "/available/readonly", b"")
    for b in BOOKIES:
        host, port = b.split(":")
        info = bk.BookieServiceInfoFormat()
        info.endpoints.add(id="bookie", port=int(port), host=host, protocol="bookie-rpc")
        info.endpoints.add(id="http", port=8000 + int(port) - 3181, host=host, protocol="http")
        info.properties["autoRecoveryDaemonEnabled"] = "true"
        c.put(f"{lr}/available/{b}", info.SerializeToString())
        cookie = f'4\nbookieHost: "{b}"\njournalDir: "/pulsar/data/bookkeeper/journal"\n'
        cookie += 'ledgerDirs: "1\\t/pulsar/data/bookkeeper/ledgers"\ninstanceId: "sandbox"\n'
        c.put(f"{lr}/cookies/{b}", cookie.encode())
    c.put(lr + "/idgen", b"")
    c.put(lr + "/idgen-long", b"")
    c.put(lr + "/underreplication", b"")
    c.put(lr + "/underreplication/LAYOUT", b'type: "BASIC"\nversion: 1\n')
    c.put(lr + "/underreplication/locks", b"")
    c.put(lr + "/underreplication/lostBookieRecoveryDelay", b"0")
    c.put(lr + "/underreplication/checkallledgersctime", struct.pack(">q", c.now - DAY))


def _underreplicated(c: _Cluster, ledger_id: int) -> None:
    parts = [f"{(ledger_id >> s) & 0xFFFF:04x}" for s in (48, 32, 16, 0)]
    path = f"{c.ledgers_root}/underreplication/ledgers/{'/'.join(parts)}/urL{ledger_id:010d}"
    c.put(path, f'replica: "{BOOKIES[2]}"\nctime: {c.now - HOUR}\n'.encode())


def _healthy(c: _Cluster) -> dict[str, Any]:
    """The healthy cluster, namespace by namespace; returns the names :func:`_planted` builds on."""
    ctx: dict[str, Any] = {}
    _bookkeeper_special(c)
    c.put(f"{c.root}/admin/clusters/{CLUSTER}", json.dumps({"serviceUrl": "http://127.0.0.1:8080"}).encode())
    for tenant in ("acme", "public", "iot", "legacy"):
        info = {"adminRoles": [], "allowedClusters": [CLUSTER]}
        c.put(f"{c.root}/admin/policies/{tenant}", json.dumps(info).encode())
    # in this order: ledger ids and offload uuids are drawn in turn
    _acme_orders(c, ctx)
    _acme_payments(c, ctx)
    _delayed_jobs(c, ctx)
    _public_default(c)
    _iot_sensors(c)
    _legacy(c)
    return ctx


def _acme_orders(c: _Cluster, ctx: dict[str, Any]) -> None:
    """acme/orders: 7 days / 10 GB retention; partitioned topic, URL-encoded names, schemas."""
    now = c.now
    c.namespace("acme/orders", _policies(retention=(7 * 24 * 60, 10240)))
    c.put(
        f"{c.root}/admin/partitioned-topics/acme/orders/persistent/order-events",
        json.dumps({"partitions": 3, "deleted": False}).encode(),
    )
    ctx["order_events"] = []
    for p, codec in enumerate((None, "LZ4", None)):
        topic = f"persistent://acme/orders/order-events-partition-{p}"
        name = wire.managed_ledger_name(topic)
        leds = _closed_series(
            c, 2, first_ts=now - 2 * DAY, step=DAY - 4 * HOUR, last_open_ctime=now - 3 * HOUR
        )
        proc_ledger = c.cursor_ledger(name, "order-processor", now - 3 * HOUR)
        cursors = [
            Cursor(
                "order-processor",
                (leds[1].ledger_id, 57),
                now - 10 * MINUTE,
                cursor_ledger=proc_ledger,
                deleted_ranges=[(leds[1].ledger_id, 60, leds[1].ledger_id, 64)],
            ),
            Cursor("pulsar.dedup", (leds[2].ledger_id, -1), now - 5 * MINUTE),
        ]
        if p == 0:
            cursors.append(Cursor("pulsar.repl.us-east", (leds[1].ledger_id, 10), now - MINUTE, codec="NONE"))
        c.topic(topic, leds, cursors, codec=codec)
        ctx["order_events"].append(name)
    c.schema("persistent://acme/orders/order-events", [c.new_id()])

    topic = "persistent://acme/orders/user signups"
    leds = _closed_series(c, 3, first_ts=now - 3 * DAY, step=DAY, last_open_ctime=now - 2 * HOUR)
    name = wire.managed_ledger_name(topic)
    c.topic(
        topic,
        leds,
        [
            Cursor(
                "audit %sub ü",
                (leds[2].ledger_id, 3),
                now - 30 * MINUTE,
                cursor_ledger=c.cursor_ledger(name, "audit %sub ü", now - 2 * HOUR),
                codec="SNAPPY",
            ),
            Cursor("welcome-mailer", (leds[0].ledger_id, 12), now - HOUR),
        ],
        codec="ZLIB",
        properties={"pulsar.topic.creation": "sandbox"},
    )
    c.schema("persistent://acme/orders/user signups", [c.new_id(), c.new_id(), c.new_id()])

    topic = "persistent://acme/orders/metrics%raw"
    leds = _closed_series(c, 1, first_ts=now - 20 * HOUR, step=4 * HOUR, last_open_ctime=now - 16 * HOUR)
    c.topic(topic, leds, [Cursor("grafana", (leds[0].ledger_id, 5), now - 2 * MINUTE)])


def _acme_payments(c: _Cluster, ctx: dict[str, Any]) -> None:
    """acme/payments: infinite retention, offload to S3 with a 1 h deletion lag, compaction."""
    now = c.now
    c.namespace(
        "acme/payments",
        _policies(retention=(-1, -1), offload_lag_ms=HOUR, bucket=c.bucket, endpoint=c.endpoint),
    )
    topic = "persistent://acme/payments/payments-ledger"
    name = wire.managed_ledger_name(topic)
    base = _closed_series(c, 5, first_ts=now - 6 * DAY, step=DAY, last_open_ctime=now - HOUR)
    leds = []
    for i, led in enumerate(base):
        if i < 3:  # offloaded long ago, BookKeeper copy deleted
            off = Offload(c.uuid(), True, True, led.timestamp_ms + 6 * HOUR)
            leds.append(
                Ledger(
                    led.ledger_id,
                    led.entries,
                    led.size,
                    led.timestamp_ms,
                    led.ctime_ms,
                    in_bk=False,
                    offload=off,
                )
            )
        elif i == 3:  # offloaded 30 min ago, within the 1 h lag: BookKeeper copy still there
            leds.append(
                Ledger(
                    led.ledger_id,
                    led.entries,
                    led.size,
                    led.timestamp_ms,
                    led.ctime_ms,
                    offload=Offload(c.uuid(), True, False, now - 30 * MINUTE),
                )
            )
        else:
            leds.append(led)
    compacted = c.new_id()
    c.bk_ledger(
        compacted,
        ctime_ms=now - 2 * HOUR,
        entries=50,
        size=50 * 200,
        custom={
            "application": "pulsar",
            "component": "compacted-ledger",
            "pulsar/compactedTopic": topic,
            "pulsar/compactedTo": _message_id_data(leds[4].ledger_id, 120),
        },
    )
    c.topic(
        topic,
        leds,
        [
            Cursor(
                "settlement",
                (leds[4].ledger_id, 30),
                now - 3 * MINUTE,
                cursor_ledger=c.cursor_ledger(name, "settlement", now - HOUR),
            ),
            Cursor(
                "__compaction",
                (leds[4].ledger_id, 120),
                now - 2 * HOUR,
                properties={"CompactedTopicLedger": compacted},
            ),
        ],
        codec="ZSTD",
    )
    ctx["payments"] = name
    ctx["compacted_topic"] = topic


def _delayed_jobs(c: _Cluster, ctx: dict[str, Any]) -> None:
    """acme/payments/delayed-jobs: a cursor's delayed-index buckets (PIP-195)."""
    now = c.now
    topic = "persistent://acme/payments/delayed-jobs"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 2, first_ts=now - 2 * DAY, step=DAY, last_open_ctime=now - 4 * HOUR)
    buckets = {}
    for lo, hi in ((leds[0], leds[0]), (leds[0], leds[1])):
        key = f"#pulsar.internal.delayed.bucket_{lo.ledger_id}_{hi.ledger_id}"
        bid = c.new_id()
        c.bk_ledger(
            bid,
            ctime_ms=now - 5 * HOUR,
            entries=3,
            size=3 * 4096,
            custom={
                "application": "pulsar",
                "component": "delayed-index-bucket",
                "pulsar/delayedIndexBucketKey": key,
                "pulsar/delayedIndexTopic": topic,
                "pulsar/delayedIndexCursor": "scheduler",
            },
        )
        buckets[key] = str(bid)
    c.topic(
        topic,
        leds,
        [
            Cursor(
                "scheduler",
                (leds[0].ledger_id, 400),
                now - MINUTE,
                cursor_properties=buckets,
                codec="LZ4",
                cursor_ledger=c.cursor_ledger(name, "scheduler", now - 4 * HOUR),
            ),
        ],
    )
    ctx["delayed_topic"] = topic


def _public_default(c: _Cluster) -> None:
    """public/default: no retention policy (broker defaults 0/0) -> nothing may be consumed and old."""
    now = c.now
    c.namespace("public/default", _policies(retention=None))
    c.topic("persistent://public/default/fresh-topic", [], [Cursor("first-sub", (-1, -1), now - MINUTE)])
    leds = _closed_series(c, 0, first_ts=now, step=HOUR, last_open_ctime=now - 30 * MINUTE)
    c.topic("persistent://public/default/events", leds, [Cursor("sub", (leds[0].ledger_id, 4), now - MINUTE)])
    leds = _closed_series(c, 1, first_ts=now - 2 * DAY, step=DAY, last_open_ctime=now - DAY)
    c.topic(
        "persistent://public/default/café-orders",
        leds,
        [Cursor("kitchen display", (leds[0].ledger_id, -1), now - 20 * MINUTE)],
    )


def _iot_sensors(c: _Cluster) -> None:
    """iot/sensors: long ledger ids, 1-day retention, backlog not consumed."""
    now = c.now
    c.namespace("iot/sensors", _policies(retention=(1440, -1)))
    c.put(
        f"{c.root}/admin/partitioned-topics/iot/sensors/persistent/temperature",
        json.dumps({"partitions": 2, "deleted": False}).encode(),
    )
    for p, codec in enumerate(("SNAPPY", None)):
        topic = f"persistent://iot/sensors/temperature-partition-{p}"
        name = wire.managed_ledger_name(topic)
        leds = _closed_series(c, 2, first_ts=now - 3 * DAY, step=DAY, long=True, last_open_ctime=now - DAY)
        c.topic(
            topic,
            leds,
            [
                Cursor(
                    "dashboard",
                    (leds[0].ledger_id, 99),
                    now - 4 * MINUTE,
                    cursor_ledger=c.cursor_ledger(name, "dashboard", now - DAY),
                )
            ],
            codec=codec,
        )
        if p == 0:
            _underreplicated(c, leds[1].ledger_id)


def _legacy(c: _Cluster) -> None:
    """legacy/us-west/app: a v1 (cluster) namespace; pre-2019 ledgers (v1/v2 metadata, no custom metadata)."""
    now = c.now
    c.namespace("legacy/us-west/app", _policies(retention=(-1, -1)))
    topic = "persistent://legacy/us-west/app/clicks"
    old = now - 900 * DAY
    leds = [
        Ledger(c.new_id(), 500, 500 * 120, old, old - DAY, bk_version=1, custom={}),
        Ledger(c.new_id(), 800, 800 * 120, old + DAY, old, bk_version=2, custom={}),
        Ledger(c.new_id(), 300, 300 * 120, now - 5 * DAY, now - 6 * DAY, bk_version=2),
    ]
    name = c.topic(topic, leds, [Cursor("etl", (leds[0].ledger_id, 10), now - HOUR)])
    c.control(
        "old_unattributed_referenced",
        ledger_id=leds[0].ledger_id,
        managed_ledger=name,
        note="v1 metadata, no custom metadata, no ctime; referenced by the managed ledger",
    )
    c.control(
        "old_unattributed_referenced",
        ledger_id=leds[1].ledger_id,
        managed_ledger=name,
        note="v2 metadata without custom metadata, ctime 899 days ago; referenced",
    )


# --- anomalies and controls -----------------------------------------------------------------------


PLANTED_AGE = 5 * DAY  # how old the planted orphan and corrupt ledgers are


def _planted(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """The anomalies and controls planted on top of :func:`_healthy`, one group at a time.

    In this order: ledger ids and offload uuids are drawn in turn. The expected findings that no
    drawn id enters are data: ``expected.json`` (see :meth:`_Cluster.expect_listed`).
    """
    _plant_orphans(c, ctx)
    _plant_missing(c)
    _plant_offload_trouble(c)
    _plant_overdue(c)
    _plant_corrupt_managed_ledgers(c, ctx)
    _plant_corrupt_bookkeeper(c, ctx)
    _plant_emptied(c)
    _plant_last(c, ctx)


def _orphan(
    c: _Cluster,
    ledger_id: int,
    component: str,
    custom: Mapping[str, str | bytes],
    ml: str | None,
    cursor: str | None = None,
) -> None:
    """An old, unreferenced ledger of ``component``: an ``orphan_ledger``."""
    c.bk_ledger(ledger_id, ctime_ms=c.now - PLANTED_AGE, entries=100, size=100 * 300, custom=custom)
    c.expect(
        "orphan_ledger",
        "warning",
        component=component,
        ledger_id=ledger_id,
        managed_ledger=ml,
        cursor=cursor,
        path=c.ledger_path(ledger_id),
    )


def _plant_orphans(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """orphan_ledger, one per component; unattributed_ledger."""
    live = ctx["order_events"][0]
    _orphan(c, c.new_id(), "managed-ledger", c.ml_custom(live), live)
    gone = "acme/orders/persistent/deleted-topic"
    _orphan(c, c.new_id(), "managed-ledger", c.ml_custom(gone), gone)
    _orphan(c, c.new_id(long=True), "managed-ledger", c.ml_custom(gone), gone)
    stale_cursor_ml = ctx["order_events"][1]
    _orphan(
        c,
        c.new_id(),
        "cursor",
        c.ml_custom(stale_cursor_ml, "order-processor"),
        stale_cursor_ml,
        cursor="order-processor",
    )
    _orphan(c, c.new_id(), "cursor", c.ml_custom(gone, "orphaned-sub"), gone, cursor="orphaned-sub")
    _orphan(
        c,
        c.new_id(),
        "schema",
        {"application": "pulsar", "component": "schema", "pulsar/schemaId": "acme/orders/user+signups"},
        None,
    )
    dtopic = ctx["delayed_topic"]
    _orphan(
        c,
        c.new_id(),
        "delayed-index-bucket",
        {
            "application": "pulsar",
            "component": "delayed-index-bucket",
            "pulsar/delayedIndexBucketKey": "#pulsar.internal.delayed.bucket_1_2",
            "pulsar/delayedIndexTopic": dtopic,
            "pulsar/delayedIndexCursor": "scheduler",
        },
        wire.managed_ledger_name(dtopic),
        cursor="scheduler",
    )
    ctopic = ctx["compacted_topic"]
    _orphan(
        c,
        c.new_id(),
        "compacted-ledger",
        {
            "application": "pulsar",
            "component": "compacted-ledger",
            "pulsar/compactedTopic": ctopic,
            "pulsar/compactedTo": _message_id_data(1, 2),
        },
        wire.managed_ledger_name(ctopic),
    )

    # unattributed_ledger: no custom metadata (pre-2019) and another application's ledger.
    for custom in ({}, {"application": "distributedlog", "component": "log-segment"}):
        lid = c.new_id()
        c.bk_ledger(lid, ctime_ms=c.now - 400 * DAY, entries=10, size=4096, custom=custom)
        c.expect("unattributed_ledger", "info", ledger_id=lid, path=c.ledger_path(lid))


def _plant_missing(c: _Cluster) -> None:
    """missing_ledger: data ledger, cursor ledger and schema ledger referenced but absent."""
    now = c.now
    topic = "persistent://acme/orders/lost-data"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 3, first_ts=now - 3 * DAY, step=DAY, last_open_ctime=now - 2 * HOUR)
    lost = leds[1]
    leds[1] = Ledger(lost.ledger_id, lost.entries, lost.size, lost.timestamp_ms, lost.ctime_ms, in_bk=False)
    ghost = c.new_id()
    c.topic(
        topic,
        leds,
        [
            Cursor("reader", (leds[0].ledger_id, 0), now - 5 * MINUTE),
            Cursor("ghost-cursor", (leds[0].ledger_id, 0), now - 5 * MINUTE, cursor_ledger=ghost),
        ],
    )
    c.expect(
        "missing_ledger",
        "critical",
        component="managed-ledger",
        ledger_id=lost.ledger_id,
        managed_ledger=name,
        path=c.ml_path(name),
    )
    c.expect(
        "missing_ledger",
        "critical",
        component="cursor",
        ledger_id=ghost,
        managed_ledger=name,
        cursor="ghost-cursor",
        path=c.cursor_path(name, "ghost-cursor"),
    )
    schema_lost = c.new_id()
    sid = c.schema(topic, [c.new_id(), schema_lost], missing=[schema_lost])
    c.expect(
        "missing_ledger",
        "critical",
        component="schema",
        ledger_id=schema_lost,
        path=f"{c.root}/schemas/{sid}",
    )


def _with_offload(led: Ledger, off: Offload, in_bk: bool = True) -> Ledger:
    return Ledger(
        led.ledger_id, led.entries, led.size, led.timestamp_ms, led.ctime_ms, in_bk=in_bk, offload=off
    )


def _plant_offload_trouble(c: _Cluster) -> None:
    """Offload anomalies on one topic (acme/payments: offload deletion lag 1 h)."""
    now = c.now
    topic = "persistent://acme/payments/offload-trouble"
    name = wire.managed_ledger_name(topic)
    base = _closed_series(c, 6, first_ts=now - 8 * DAY, step=DAY, last_open_ctime=now - 2 * HOUR)
    m_crit, m_warn, ond, inc, young, last = base[0], base[1], base[2], base[3], base[4], base[6]
    u_crit, u_warn, u_ond, u_inc, u_young = (c.uuid() for _ in range(5))
    leds = [
        _with_offload(m_crit, Offload(u_crit, True, True, now - 6 * DAY, write_data=False), in_bk=False),
        _with_offload(m_warn, Offload(u_warn, True, False, now - 2 * DAY, write_index=False)),
        _with_offload(ond, Offload(u_ond, True, False, now - 2 * DAY)),
        _with_offload(inc, Offload(u_inc, False, write_index=False)),
        _with_offload(young, Offload(u_young, False, write_data=not c.s3_aged, write_index=not c.s3_aged)),
        base[5],
        last,
    ]
    c.topic(topic, leds, [Cursor("archiver", (leds[0].ledger_id, -1), now - 10 * MINUTE)], codec="LZ4")
    if c.bucket is None:
        return
    c.expect(
        "missing_offload_object",
        "critical",
        component="offload",
        ledger_id=m_crit.ledger_id,
        managed_ledger=name,
        path=c.ml_path(name),
        object_key=wire.offload_data_key(u_crit, m_crit.ledger_id),
    )
    c.expect(
        "missing_offload_object",
        "warning",
        component="offload",
        ledger_id=m_warn.ledger_id,
        managed_ledger=name,
        path=c.ml_path(name),
        object_key=wire.offload_index_key(u_warn, m_warn.ledger_id),
    )
    c.expect(
        "offloaded_not_deleted",
        "warning",
        component="managed-ledger",
        ledger_id=ond.ledger_id,
        managed_ledger=name,
        path=c.ml_path(name),
    )
    c.control(
        "offloaded_not_deleted_suppressed",
        ledger_id=m_warn.ledger_id,
        managed_ledger=name,
        note="complete, BookKeeper copy present past the lag, but its index object is missing",
    )
    _plant_offload_by_age(c, name, ond=ond, inc=inc, young=young, u_inc=u_inc, u_young=u_young)


def _plant_offload_by_age(
    c: _Cluster, name: str, *, ond: Ledger, inc: Ledger, young: Ledger, u_inc: str, u_young: str
) -> None:
    """What the offload-trouble topic's objects amount to: aged (findings) or young (controls)."""
    if c.s3_aged:
        c.expect(
            "incomplete_offload",
            "warning",
            component="offload",
            ledger_id=inc.ledger_id,
            managed_ledger=name,
            path=c.ml_path(name),
            object_key=wire.offload_data_key(u_inc, inc.ledger_id),
        )
        # Objects of an earlier, abandoned offload attempt of ledger `ond`: the offload context
        # names another uuid, so the uuid check fails (the broker reads only the context's uuid).
        u_orphan = c.uuid()
        md = c.closed_metadata(ond, c.ml_custom(name))
        for key in c.offload_objects(name, ond, md, u_orphan, data=True, index=True):
            c.expect(
                "corrupt_offload_object",
                "warning",
                component="offload",
                ledger_id=ond.ledger_id,
                managed_ledger=name,
                path=c.ml_path(name),
                object_key=key,
            )
        c.control("in_progress_offload_without_objects", ledger_id=young.ledger_id, managed_ledger=name)
    else:
        c.control(
            "young_incomplete_offload",
            ledger_id=young.ledger_id,
            managed_ledger=name,
            object_key=wire.offload_data_key(u_young, young.ledger_id),
        )
        c.control(
            "young_incomplete_offload",
            ledger_id=inc.ledger_id,
            managed_ledger=name,
            object_key=wire.offload_data_key(u_inc, inc.ledger_id),
            note="objects written now are younger than incomplete_offload_age",
        )


def _plant_overdue(c: _Cluster) -> None:
    """retention_overdue, open_ledger_overdue, inactive_cursor."""
    now = c.now
    # retention_overdue: 60 min retention, two consumed old ledgers still kept.
    c.namespace("acme/short-retention", _policies(retention=(60, 100)))
    topic = "persistent://acme/short-retention/billing-events"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 3, first_ts=now - 3 * DAY, step=DAY, last_open_ctime=now - 20 * HOUR)
    c.topic(topic, leds, [Cursor("billing", (leds[2].ledger_id, 5), now - 30 * MINUTE)], codec="ZSTD")
    for led in leds[:2]:
        c.expect(
            "retention_overdue",
            "warning",
            component="managed-ledger",
            ledger_id=led.ledger_id,
            managed_ledger=name,
            path=c.ml_path(name),
        )

    # open_ledger_overdue: the current ledger OPEN for 10 days.
    topic = "persistent://acme/payments/stuck-producer"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 1, first_ts=now - 12 * DAY, step=DAY, last_open_ctime=now - 10 * DAY)
    c.topic(topic, leds)
    c.expect(
        "open_ledger_overdue",
        "warning",
        component="managed-ledger",
        ledger_id=leds[1].ledger_id,
        managed_ledger=name,
        path=c.ml_path(name),
    )

    # inactive_cursor: inactive 30 days, holding two ledgers.
    topic = "persistent://acme/orders/abandoned"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 2, first_ts=now - 31 * DAY, step=11 * DAY, last_open_ctime=now - 3 * HOUR)
    c.topic(
        topic,
        leds,
        [
            Cursor("stale-reader", (leds[0].ledger_id, -1), now - 30 * DAY),
            Cursor("live-reader", (leds[2].ledger_id, 3), now - MINUTE),
        ],
    )
    c.expect_listed("overdue")  # inactive_cursor


def _plant_corrupt_managed_ledgers(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """corrupt_metadata, managed-ledger and cursor side. Their ledgers are blind spots (controls)."""
    now = c.now
    topic = "persistent://acme/orders/corrupt-ml"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 2, first_ts=now - 4 * DAY, step=DAY, last_open_ctime=now - HOUR)
    info = mlpb.ManagedLedgerInfo()
    for led in leds:
        info.ledgerInfo.add(
            ledgerId=led.ledger_id, entries=led.entries, size=led.size, timestamp=led.timestamp_ms
        )
    good = info.SerializeToString()
    truncated = good[: len(good) - 3]
    _assert_undecodable(truncated, mlpb.ManagedLedgerInfo)
    c.topic(topic, leds, [Cursor("reader", (leds[0].ledger_id, 0), now - MINUTE)], raw=truncated)
    for led in leds:
        c.control("blind_spot_ledger", ledger_id=led.ledger_id, managed_ledger=name)
    # A ledger of that managed ledger that no list references any more: still a blind spot.
    hidden = c.new_id()
    c.bk_ledger(hidden, ctime_ms=now - PLANTED_AGE, entries=10, size=3000, custom=c.ml_custom(name))
    c.control("blind_spot_ledger", ledger_id=hidden, managed_ledger=name, note="unreferenced, old")

    topic = "persistent://acme/payments/bad-envelope"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 1, first_ts=now - 4 * DAY, step=DAY, last_open_ctime=now - HOUR)
    info = mlpb.ManagedLedgerInfo()
    for led in leds:
        info.ledgerInfo.add(ledgerId=led.ledger_id)
    payload = info.SerializeToString()
    meta = mlpb.ManagedInfoMetadata(
        compressionType=mlpb.ZSTD, uncompressedSize=len(payload)
    ).SerializeToString()
    bad = struct.pack(">hi", wire.ENVELOPE_MAGIC, len(meta)) + meta + wire.compress("LZ4", payload)
    c.topic(topic, leds, raw=bad)  # says ZSTD, holds an LZ4 block
    for led in leds:
        c.control("blind_spot_ledger", ledger_id=led.ledger_id, managed_ledger=name)

    # corrupt_metadata, cursor: partition-2's cursor (makes partition-2 a blind spot).
    name = ctx["order_events"][2]
    raw = b"\x08\xe8\x07\x10" + b"\xff" * 3  # cursorsLedgerId=1000, then a truncated varint
    _assert_undecodable(raw, mlpb.ManagedCursorInfo)
    c.cursor(name, Cursor("broken-sub", (0, 0), 0, raw=raw))
    c.expect_listed("corrupt_managed_ledgers")  # corrupt-ml, bad-envelope, broken-sub


def _plant_corrupt_bookkeeper(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """corrupt_metadata and unreadable_metadata, BookKeeper side (unreferenced ledgers, component null)."""

    def bk_corrupt(
        lid: int, data: bytes, acl: list[Any] | None = None, kind: str = "corrupt_metadata"
    ) -> None:
        c.put(c.ledger_path(lid), data, acl)
        c.counts["bk_ledgers"] += 1
        c.expect(kind, "critical", ledger_id=lid, path=c.ledger_path(lid))

    bk_corrupt(c.new_id(), wire.bk_header(2) + b"quorumSize: 2\nensembleSize: banana\nsegment {{{\n")
    bk_corrupt(c.new_id(long=True), wire.bk_header(7) + b"\x00\x01future-format")
    from kazoo.security import make_acl

    no_read = [make_acl("world", "anyone", read=False, write=True, create=True, delete=True, admin=True)]
    lid = c.new_id()
    md = wire.ledger_metadata(
        ensemble=list(BOOKIES[:2]),
        write_quorum=2,
        ack_quorum=2,
        length=100,
        last_entry_id=0,
        ctime_ms=c.now - PLANTED_AGE,
        custom=c.ml_custom(ctx["order_events"][0]),
    )
    bk_corrupt(lid, wire.bk_metadata_v3(md), acl=no_read, kind="unreadable_metadata")  # NoAuth


def _plant_emptied(c: _Cluster) -> None:
    """emptied_managed_ledger: a node rewritten to 0 bytes (version 1) while its older ledgers still
    name it. Its ledgers stay orphan_ledger, with the caveat and action investigate."""
    name = wire.managed_ledger_name("persistent://acme/orders/emptied-by-edit")
    leds = _closed_series(c, 2, first_ts=c.now - PLANTED_AGE, step=HOUR)
    c.topic("persistent://acme/orders/emptied-by-edit", leds)
    c.rewrites[c.ml_path(name)] = b""
    c.expect_listed("emptied")
    for led in leds:
        c.expect(
            "orphan_ledger",
            "warning",
            component="managed-ledger",
            ledger_id=led.ledger_id,
            managed_ledger=name,
            path=c.ledger_path(led.ledger_id),
        )


def _plant_last(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """A young orphan (control) and, planted last so that the ledger ids before stay what they were,
    an orphan_offload_object."""
    now = c.now
    live = ctx["order_events"][0]
    young_id = c.new_id()
    c.bk_ledger(
        young_id, ctime_ms=now - 2 * HOUR, entries=1, size=100, custom=c.ml_custom(live), state="OPEN"
    )
    c.control("young_orphan", ledger_id=young_id, managed_ledger=live, note="ctime 2 h before now")

    # orphan_offload_object: the offloaded copy of a ledger the managed ledger trimmed (the broker
    # deleted the BookKeeper ledger and dropped it from the list, deleting the objects failed).
    if c.bucket is not None and c.s3_aged:
        name = wire.managed_ledger_name("persistent://acme/payments/offload-trouble")
        trimmed = Ledger(c.new_id(), 150, 150 * 300, now - 9 * DAY, now - 10 * DAY)
        md = c.closed_metadata(trimmed, c.ml_custom(name))
        for key in c.offload_objects(name, trimmed, md, c.uuid(), data=True, index=True):
            c.expect(
                "orphan_offload_object",
                "warning",
                component="offload",
                ledger_id=trimmed.ledger_id,
                managed_ledger=name,
                object_key=key,
            )


FOREIGN_TENANT = "othercorp"


def _foreign_cluster(c: _Cluster, root: str) -> list[dict[str, Any]]:
    """Another Pulsar cluster on the same BookKeeper cluster and bucket, healthy on its own.

    Its ledgers and offloaded objects go to ``c``'s BookKeeper root and bucket, its Pulsar
    metadata (tenant, namespace, topic, cursor, schema) under ``root``. Audited from ``c``'s Pulsar
    store alone, its old ledgers are ``foreign_ledger`` and its old objects ``foreign_offload_object``
    (info): they are added to ``c``'s expectations and returned.
    """
    o = _Cluster(root, c.now, c.bucket, c.endpoint, c.s3_aged, c.rng.randrange(1 << 30), c.ledgers_root)
    o.nodes, o.objects = c.nodes, c.objects  # one ZooKeeper, one bucket
    o.new_id = c.new_id  # type: ignore[method-assign]  # one ledger id space: one BookKeeper cluster
    o.cluster_name = "other"
    now = c.now
    info = {"adminRoles": [], "allowedClusters": [o.cluster_name]}
    o.put(f"{o.root}/admin/policies/{FOREIGN_TENANT}", json.dumps(info).encode())
    o.namespace(f"{FOREIGN_TENANT}/billing", _policies(retention=(-1, -1)))
    topic = f"persistent://{FOREIGN_TENANT}/billing/invoices"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(o, 2, first_ts=now - 3 * DAY, step=DAY, last_open_ctime=now - 3 * HOUR)
    off = Offload(o.uuid(), complete=True, bookkeeper_deleted=True, timestamp_ms=now - 2 * DAY)
    first = leds[0]
    leds[0] = Ledger(
        first.ledger_id,
        first.entries,
        first.size,
        first.timestamp_ms,
        first.ctime_ms,
        in_bk=False,
        offload=off,
    )
    sub = o.cursor_ledger(name, "billing-sub", now - 2 * DAY)
    o.topic(
        topic, leds, [Cursor("billing-sub", (leds[-1].ledger_id, 0), now - 5 * MINUTE, cursor_ledger=sub)]
    )
    schema_ledger = o.new_id()
    sid = o.schema(topic, [schema_ledger])
    c.counts["bk_ledgers"] += o.counts["bk_ledgers"]
    found = [
        _finding("foreign_ledger", "info", component="managed-ledger", ledger_id=leds[1].ledger_id,
                 managed_ledger=name, path=c.ledger_path(leds[1].ledger_id)),
        _finding("foreign_ledger", "info", component="cursor", ledger_id=sub, managed_ledger=name,
                 cursor="billing-sub", path=c.ledger_path(sub)),
        _finding("foreign_ledger", "info", component="schema", ledger_id=schema_ledger,
                 path=c.ledger_path(schema_ledger)),
    ]  # fmt: skip
    assert sid.startswith(FOREIGN_TENANT + "/")
    if c.bucket is not None and c.s3_aged:
        for key in (
            wire.offload_data_key(off.uuid, first.ledger_id),
            wire.offload_index_key(off.uuid, first.ledger_id),
        ):
            found.append(
                _finding(
                    "foreign_offload_object",
                    "info",
                    component="offload",
                    ledger_id=first.ledger_id,
                    managed_ledger=name,
                    object_key=key,
                )
            )
    c.expected.extend(found)
    return found


def _assert_undecodable(data: bytes, cls: Any) -> None:
    try:
        cls.FromString(data)
    except Exception:  # noqa: BLE001 - any decode error is what we want
        return
    raise AssertionError(f"sandbox corrupt {cls.__name__} decodes")


# --- writing --------------------------------------------------------------------------------------


def _connect(zk_hosts: str) -> Any:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_hosts, timeout=30)
    client.start(timeout=30)
    return client


def write_znodes(
    client: Any,
    nodes: Mapping[str, tuple[bytes, list[Any] | None]],
    *,
    batch: int = 100,
    in_flight: int = 8,
    batch_bytes: int = 512 * 1024,
) -> int:
    """Create ``nodes`` and every missing ancestor with pipelined transactions; returns znodes created.

    Ancestors are created parents-first; one session's requests are applied in order, so later
    transactions may create children of nodes in earlier ones.
    """
    all_nodes: dict[str, tuple[bytes, list[Any] | None]] = dict(nodes)
    for path in nodes:
        parent = path.rsplit("/", 1)[0]
        while parent and parent not in all_nodes:
            all_nodes[parent] = (b"", None)
            parent = parent.rsplit("/", 1)[0]
    # Top levels may already exist (another scenario under the same root, or the real root).
    todo = sorted(all_nodes, key=lambda p: (p.count("/"), p))
    existing = set()
    for p in todo:
        if p.count("/") > 3:
            break
        if client.exists(p):
            if all_nodes[p][0]:
                raise ValueError(f"znode {p} exists already")
            existing.add(p)
    todo = [p for p in todo if p not in existing]
    pending: list[tuple[Any, list[str]]] = []

    def settle(item: tuple[Any, list[str]]) -> None:
        result, paths = item
        for path, res in zip(paths, result.get(timeout=120), strict=True):
            if isinstance(res, Exception):
                raise RuntimeError(f"creating {path} failed: {res!r}")

    i = 0
    while i < len(todo):
        txn = client.transaction()
        paths: list[str] = []
        size = 0
        while i < len(todo) and len(paths) < batch and size < batch_bytes:
            p = todo[i]
            data, acl = all_nodes[p]
            txn.create(p, data, acl=acl)
            paths.append(p)
            size += len(data) + len(p)
            i += 1
        pending.append((txn.commit_async(), paths))
        if len(pending) >= in_flight:
            settle(pending.pop(0))
    for item in pending:
        settle(item)
    return len(todo)


def _write_objects(endpoint: str, bucket: str, objects: Sequence[tuple[str, bytes, dict[str, str]]]) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for key, body, meta in objects:
        s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata=meta)


def generate(
    zk_hosts: str,
    *,
    root: str = "",
    s3_endpoint: str | None = None,
    bucket: str | None = None,
    scenario: str = "planted",
    now_ms: int,
    seed: int | None = None,
) -> GroundTruth:
    """Write the ``healthy`` or ``planted`` cluster under ``root`` and return its ground truth.

    Parameters
    ----------
    zk_hosts
        ZooKeeper connection string.
    root
        Prefix of ``/ledgers``, ``/managed-ledgers``, ``/schemas``, ``/admin``; ``""`` = the real paths.
    s3_endpoint, bucket
        Where offload objects go (the bucket must exist). Without them no object is written and no
        offload finding is expected (the audit then skips offload rules).
    now_ms
        The audit's ``as_of_ms``; ledger and managed-ledger times are set relative to it.
    seed
        Ledger ids and offload uuids are drawn from it; by default from scenario, hosts, root and now.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: expected one of {SCENARIOS}")
    if (s3_endpoint is None) != (bucket is None):
        raise ValueError("give both s3_endpoint and bucket, or neither")
    if root and (not root.startswith("/") or root.endswith("/")):
        raise ValueError(f"root {root!r}: expected '' or '/name'")
    written = int(time.time() * 1000)
    age = now_ms - written
    if bucket is not None and S3_YOUNG_MS <= age <= S3_AGED_MS:
        raise ValueError(
            f"now_ms is {age / HOUR:.1f} h after the clock: S3 objects written now would be neither clearly "
            "young nor clearly old; use now_ms near the clock or default_now_ms()"
        )
    s3_aged = bucket is not None and age > S3_AGED_MS
    c = _Cluster(
        root,
        now_ms,
        bucket,
        s3_endpoint,
        s3_aged,
        seed if seed is not None else zlib.crc32(f"{scenario}|{zk_hosts}|{root}|{now_ms}".encode()),
    )
    ctx = _healthy(c)
    foreign: list[dict[str, Any]] = []
    foreign_root = None
    if scenario == "planted":
        _planted(c, ctx)
        foreign_root = f"{root}/other-cluster"
        foreign = _foreign_cluster(c, foreign_root)
    client = _connect(zk_hosts)
    try:
        created = write_znodes(client, c.nodes)
        for path, data in c.rewrites.items():
            client.set(path, data)
    finally:
        client.stop()
        client.close()
    if bucket is not None and s3_endpoint is not None:
        _write_objects(s3_endpoint, bucket, c.objects)
    counts = dict(c.counts, znodes=created, offload_objects=len(c.objects) if bucket else 0)
    expected = sorted(
        c.expected,
        key=lambda f: (
            f["kind"],
            f["managed_ledger"] or "",
            f["ledger_id"] or -1,
            f["object_key"] or "",
            f["path"] or "",
        ),
    )
    return GroundTruth(
        scenario=scenario,
        now_ms=now_ms,
        root=root,
        bucket=bucket,
        s3_endpoint=s3_endpoint,
        zk_hosts=zk_hosts,
        written_at_ms=written,
        s3_objects_aged=s3_aged,
        expected=expected,
        controls=c.controls,
        counts=counts,
        foreign_root=foreign_root,
        foreign=foreign,
    )


BULK_NS = "bench/load"
BULK_FIRST_LEDGER = 10_000


@dataclass
class BulkCluster:
    """What :func:`bulk_cluster` builds: znodes, offload objects and the planted findings' identities."""

    nodes: dict[str, tuple[bytes, list[Any] | None]]
    objects: list[tuple[str, bytes, dict[str, str]]]
    expected: list[tuple[str, str]]  # (kind, ledger id or object key) of every finding an audit must report
    counts: dict[str, int]


def _bulk_offloaded(c: _Cluster, name: str, lid: int, ctime: int, custom: Mapping[str, str], li: Any) -> None:
    """Ledger ``lid`` of ``name`` offloaded completely (data and index objects), BookKeeper copy deleted."""
    led = Ledger(lid, 10, 10 * 256, ctime + HOUR, ctime)
    li.entries, li.size, li.timestamp = led.entries, led.size, led.timestamp_ms
    uuid = c.uuid()
    msb, lsb = wire.uuid_bits(uuid)
    oc = li.offloadContext
    oc.uidMsb, oc.uidLsb, oc.complete, oc.bookkeeperDeleted = msb, lsb, True, True
    oc.timestamp = ctime + 2 * HOUR
    oc.driverMetadata.CopyFrom(c.driver_metadata())
    c.offload_objects(name, led, c.closed_metadata(led, custom), uuid, data=True, index=True)


def bulk_cluster(
    *,
    root: str,
    n_ledgers: int,
    n_topics: int,
    now_ms: int,
    n_offloaded: int = 0,
    bucket: str | None = None,
    s3_endpoint: str | None = None,
    n_orphans: int = 0,
) -> BulkCluster:
    """The znodes and offload objects of :func:`generate_bulk`, built in memory (deterministic).

    ``n_offloaded`` topics (the first ones) get one more ledger before their BookKeeper ledgers:
    completely offloaded (a data and an index object in ``bucket``), its BookKeeper copy deleted.
    ``n_orphans`` > 0 plants that many ``orphan_ledger`` (BookKeeper ledgers naming the first topic's
    managed ledger, three days old, that it does not list) and, with ``bucket``, one
    ``orphan_offload_object`` (a data object of an unreferenced offload naming the second topic).
    """
    if n_topics < 1 or n_ledgers < n_topics or n_offloaded > n_topics:
        raise ValueError("need n_topics >= 1, n_ledgers >= n_topics and n_offloaded <= n_topics")
    if n_offloaded and bucket is None:
        raise ValueError("n_offloaded needs a bucket")
    root = root.rstrip("/")
    c = _Cluster(root, now_ms, bucket, s3_endpoint, True, zlib.crc32(f"bulk|{root}|{now_ms}".encode()))
    nodes = c.nodes
    ns = BULK_NS
    nodes[f"{root}/admin/policies/bench"] = (
        json.dumps({"adminRoles": [], "allowedClusters": [CLUSTER]}).encode(),
        None,
    )
    nodes[f"{root}/admin/policies/{ns}"] = (_policies(retention=(-1, -1)), None)
    ledgers_root = root + "/ledgers"
    nodes[ledgers_root + "/LAYOUT"] = (
        b"2\norg.apache.pulsar.metadata.bookkeeper.PulsarLedgerManagerFactory:1",
        None,
    )
    nodes[ledgers_root + "/INSTANCEID"] = (c.uuid().encode(), None)  # as every bookie cluster
    nodes[ledgers_root + "/available"] = (b"", None)
    per = n_ledgers // n_topics
    extra = n_ledgers % n_topics
    lid = BULK_FIRST_LEDGER
    ensemble = list(BOOKIES[:2])
    for t in range(n_topics):
        name = f"{ns}/persistent/topic-{t:05d}"
        count = per + (1 if t < extra else 0)
        custom = {
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": name.encode(),
        }
        info = mlpb.ManagedLedgerInfo()
        first = lid
        if t < n_offloaded:
            ctime = now_ms - (count + 2) * HOUR
            _bulk_offloaded(c, name, lid, ctime, c.ml_custom(name), info.ledgerInfo.add(ledgerId=lid))
            lid += 1
        for k in range(count):
            last = k == count - 1
            ctime = now_ms - (count - k) * HOUR
            md = wire.ledger_metadata(
                ensemble=ensemble,
                write_quorum=2,
                ack_quorum=2,
                length=0 if last else 1000 * 256,
                last_entry_id=-1 if last else 999,
                state="OPEN" if last else "CLOSED",
                ctime_ms=ctime,
                custom=custom,
                ctoken=lid,
            )
            nodes[wire.ledger_path(lid, ledgers_root)] = (wire.bk_metadata_v3(md), None)
            if last:
                info.ledgerInfo.add(ledgerId=lid, timestamp=0)
            else:
                info.ledgerInfo.add(ledgerId=lid, entries=1000, size=1000 * 256, timestamp=ctime + HOUR)
            lid += 1
        ml_path = f"{root}/managed-ledgers/{name}"
        nodes[ml_path] = (info.SerializeToString(), None)
        cur = mlpb.ManagedCursorInfo(
            cursorsLedgerId=-1, markDeleteLedgerId=first, markDeleteEntryId=-1, lastActive=now_ms - MINUTE
        )
        nodes[ml_path + "/reader"] = (cur.SerializeToString(), None)
    expected = _bulk_orphans(
        c, lid, n_orphans, f"{ns}/persistent/topic-{0:05d}", f"{ns}/persistent/topic-{1:05d}"
    )
    counts = {
        "bk_ledgers": n_ledgers + len([k for k, _ in expected if k == "orphan_ledger"]),
        "ml_ledgers": n_ledgers + n_offloaded,
        "managed_ledgers": n_topics,
        "cursors": n_topics,
        "offloaded": n_offloaded,
        "offload_objects": len(c.objects),
    }
    return BulkCluster(nodes, c.objects, expected, counts)


def _bulk_orphans(c: _Cluster, lid: int, n: int, ml_name: str, object_ml: str) -> list[tuple[str, str]]:
    expected: list[tuple[str, str]] = []
    if n <= 0:
        return expected
    lid += 1000
    for _ in range(n):
        c.bk_ledger(lid, ctime_ms=c.now - 3 * DAY, entries=10, size=2560, custom=c.ml_custom(ml_name))
        expected.append(("orphan_ledger", str(lid)))
        lid += 1
    if c.bucket is not None:
        led = Ledger(lid, 10, 2560, c.now - 3 * DAY + HOUR, c.now - 3 * DAY)
        before = len(c.objects)
        data_key, _ = c.offload_objects(
            object_ml, led, c.closed_metadata(led, c.ml_custom(object_ml)), c.uuid(), data=True, index=False
        )
        assert len(c.objects) == before + 1
        expected.append(("orphan_offload_object", data_key))
    return expected


def write_objects_parallel(
    endpoint: str, bucket: str, objects: Sequence[tuple[str, bytes, dict[str, str]]], threads: int = 16
) -> None:
    """PUT ``objects`` with ``threads`` concurrent requests (an S3 server with a slow write path)."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", config=Config(max_pool_connections=threads)
    )

    def put(obj: tuple[str, bytes, dict[str, str]]) -> None:
        s3.put_object(Bucket=bucket, Key=obj[0], Body=obj[1], Metadata=obj[2])

    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(put, objects):
            pass


def write_bulk_znodes(zk_hosts: str, nodes: Mapping[str, tuple[bytes, list[Any] | None]]) -> int:
    """Every znode of ``nodes`` (a :class:`BulkCluster`'s) written through one connection; how many."""
    client = _connect(zk_hosts)
    try:
        return write_znodes(client, nodes)
    finally:
        client.stop()
        client.close()


def generate_bulk(
    zk_hosts: str,
    *,
    root: str,
    n_ledgers: int,
    n_topics: int,
    now_ms: int,
    n_offloaded: int = 0,
    bucket: str | None = None,
    s3_endpoint: str | None = None,
    n_orphans: int = 0,
    write_objects: bool = True,
) -> dict[str, Any]:
    """A large cluster fast: ``n_ledgers`` v3 ledgers spread over ``n_topics`` managed ledgers.

    Every topic has one cursor at its first ledger (nothing consumed), infinite retention, the last
    ledger OPEN and young. ``n_offloaded``, ``bucket``, ``s3_endpoint``, ``n_orphans``: see
    :func:`bulk_cluster`; the objects are written to the bucket (it must exist) unless
    ``write_objects`` is false. Returns counts and timings, ``expected`` (the (kind, ledger id or
    object key) of every finding an audit with ``as_of_ms = now_ms`` must report) and ``objects``.
    """
    t0 = time.perf_counter()
    bulk = bulk_cluster(
        root=root,
        n_ledgers=n_ledgers,
        n_topics=n_topics,
        now_ms=now_ms,
        n_offloaded=n_offloaded,
        bucket=bucket,
        s3_endpoint=s3_endpoint,
        n_orphans=n_orphans,
    )
    t1 = time.perf_counter()
    created = write_bulk_znodes(zk_hosts, bulk.nodes)
    t2 = time.perf_counter()
    if write_objects and bucket is not None and s3_endpoint is not None and bulk.objects:
        write_objects_parallel(s3_endpoint, bucket, bulk.objects)
    t3 = time.perf_counter()
    return {
        "root": root.rstrip("/"),
        "n_ledgers": n_ledgers,
        "n_topics": n_topics,
        "n_offloaded": n_offloaded,
        "first_ledger_id": BULK_FIRST_LEDGER,
        "znodes": created,
        "offload_objects": len(bulk.objects),
        "objects": bulk.objects,
        "expected": bulk.expected,
        "counts": bulk.counts,
        "build_s": round(t1 - t0, 3),
        "write_s": round(t2 - t1, 3),
        "objects_s": round(t3 - t2, 3),
        "total_s": round(t3 - t0, 3),
        "creates_per_s": round(created / max(t2 - t1, 1e-9)),
    }


def restrict(client: Any, root: str, acl: list[Any]) -> int:
    """Set ``acl`` on ``root`` and every node below it: a cluster only some credentials may read.

    ``client`` (a started kazoo client) must hold the credentials the ACL names (``add_auth`` or
    SASL) to walk on below nodes it has restricted. Returns the number of nodes.
    """
    frontier, n = [root], 0
    while frontier:
        path = frontier.pop()
        client.set_acls(path, acl)
        n += 1
        frontier.extend(f"{path.rstrip('/')}/{c}" for c in client.get_children(path))
    return n
