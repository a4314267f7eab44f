"""The sandbox cluster's model: time units, the ``_Cluster`` builder and its building blocks.

``_Cluster`` collects znodes, S3 objects, expected findings and controls in memory (the scenarios of
:mod:`ledgerlens_sandbox.healthy` and :mod:`ledgerlens_sandbox.planted`, and
:mod:`ledgerlens_sandbox.bulk`, build on it); :mod:`ledgerlens_sandbox.writer` writes them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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


def _object_findings(
    kind: str, severity: str, ledger_id: int, ml_name: str, keys: Iterable[str], path: str | None = None
) -> list[dict[str, Any]]:
    """One finding per offload object of ``keys`` (ledger ``ledger_id`` of managed ledger ``ml_name``)."""
    return [
        _finding(
            kind,
            severity,
            component="offload",
            ledger_id=ledger_id,
            managed_ledger=ml_name,
            path=path,
            object_key=key,
        )
        for key in keys
    ]


def _message_id_data(ledger_id: int, entry_id: int) -> bytes:
    """MessageIdData {ledgerId=1, entryId=2} (``MessageId.toByteArray``)."""
    return b"\x08" + wire.varint(ledger_id) + b"\x10" + wire.varint(entry_id)


def _compacted_custom(topic: str, ledger_id: int, entry_id: int) -> dict[str, str | bytes]:
    """Custom metadata of a compacted ledger of ``topic``, compacted up to ``ledger_id:entry_id``."""
    return {
        "application": "pulsar",
        "component": "compacted-ledger",
        "pulsar/compactedTopic": topic,
        "pulsar/compactedTo": _message_id_data(ledger_id, entry_id),
    }


def _bucket_custom(key: str, topic: str, cursor: str) -> dict[str, str | bytes]:
    """Custom metadata of the delayed-index bucket ``key`` of ``topic``'s cursor ``cursor`` (PIP-195)."""
    return {
        "application": "pulsar",
        "component": "delayed-index-bucket",
        "pulsar/delayedIndexBucketKey": key,
        "pulsar/delayedIndexTopic": topic,
        "pulsar/delayedIndexCursor": cursor,
    }


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

    def offload_context(self, li: Any, off: Offload) -> None:
        """Fill the ``offloadContext`` of ``li`` (a ``ManagedLedgerInfo.LedgerInfo``) from ``off``."""
        msb, lsb = wire.uuid_bits(off.uuid)
        oc = li.offloadContext
        oc.uidMsb, oc.uidLsb, oc.complete = msb, lsb, off.complete
        if off.complete:
            oc.bookkeeperDeleted = off.bookkeeper_deleted
        if off.timestamp_ms is not None:
            oc.timestamp = off.timestamp_ms
        oc.driverMetadata.CopyFrom(self.driver_metadata())

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
                self.offload_context(li, off)
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

    def expect_ml(
        self,
        kind: str,
        severity: str,
        ml_name: str,
        ledger_id: int,
        component: str = "managed-ledger",
        **cols: Any,
    ) -> None:
        """A finding about a ledger that managed ledger ``ml_name`` lists (path: its znode)."""
        self.expect(
            kind,
            severity,
            component=component,
            ledger_id=ledger_id,
            managed_ledger=ml_name,
            path=self.ml_path(ml_name),
            **cols,
        )

    def expect_ledger(self, kind: str, severity: str, ledger_id: int, **cols: Any) -> None:
        """A finding about a BookKeeper ledger itself (path: its ledger znode)."""
        self.expect(kind, severity, ledger_id=ledger_id, path=self.ledger_path(ledger_id), **cols)

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
