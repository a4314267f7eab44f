"""The ``healthy`` cluster every scenario starts from, built namespace by namespace on a ``_Cluster``."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from typing import Any

from ledgerlens.proto import bookkeeper_pb2 as bk
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.model import (
    BOOKIES,
    CLUSTER,
    DAY,
    HOUR,
    MINUTE,
    Cursor,
    Ledger,
    Offload,
    _bucket_custom,
    _closed_series,
    _Cluster,
    _compacted_custom,
    _policies,
)


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
    """The healthy cluster, namespace by namespace.

    Returns the names :func:`ledgerlens_sandbox.planted._planted` builds on.
    """
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
            leds.append(replace(led, in_bk=False, offload=off))
        elif i == 3:  # offloaded 30 min ago, within the 1 h lag: BookKeeper copy still there
            leds.append(replace(led, offload=Offload(c.uuid(), True, False, now - 30 * MINUTE)))
        else:
            leds.append(led)
    compacted = c.new_id()
    c.bk_ledger(
        compacted,
        ctime_ms=now - 2 * HOUR,
        entries=50,
        size=50 * 200,
        custom=_compacted_custom(topic, leds[4].ledger_id, 120),
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
            custom=_bucket_custom(key, topic, "scheduler"),
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
    for led, note in (
        (leds[0], "v1 metadata, no custom metadata, no ctime; referenced by the managed ledger"),
        (leds[1], "v2 metadata without custom metadata, ctime 899 days ago; referenced"),
    ):
        c.control("old_unattributed_referenced", ledger_id=led.ledger_id, managed_ledger=name, note=note)
