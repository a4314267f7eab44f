"""The ``planted`` scenario: every anomaly of docs/audit-rules.md and negative controls, on top of the
healthy cluster; and the foreign cluster sharing its BookKeeper cluster and bucket.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.model import (
    BOOKIES,
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
    _finding,
    _object_findings,
    _policies,
)

PLANTED_AGE = 5 * DAY  # how old the planted orphan and corrupt ledgers are


def _planted(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """The anomalies and controls planted on top of the healthy cluster, one group at a time.

    ``ctx`` is what :func:`ledgerlens_sandbox.healthy._healthy` returned.

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


def _plant_orphans(c: _Cluster, ctx: Mapping[str, Any]) -> None:
    """orphan_ledger, one per component, old and unreferenced; unattributed_ledger."""
    live, stale_cursor_ml = ctx["order_events"][0], ctx["order_events"][1]
    gone = "acme/orders/persistent/deleted-topic"
    dtopic, ctopic = ctx["delayed_topic"], ctx["compacted_topic"]
    schema = {"application": "pulsar", "component": "schema", "pulsar/schemaId": "acme/orders/user+signups"}
    bucket = _bucket_custom("#pulsar.internal.delayed.bucket_1_2", dtopic, "scheduler")
    # (long id, component, custom metadata, owner managed ledger, cursor), in the order ids are drawn
    for long, component, custom, ml, cursor in (
        (False, "managed-ledger", c.ml_custom(live), live, None),
        (False, "managed-ledger", c.ml_custom(gone), gone, None),
        (True, "managed-ledger", c.ml_custom(gone), gone, None),
        (
            False,
            "cursor",
            c.ml_custom(stale_cursor_ml, "order-processor"),
            stale_cursor_ml,
            "order-processor",
        ),
        (False, "cursor", c.ml_custom(gone, "orphaned-sub"), gone, "orphaned-sub"),
        (False, "schema", schema, None, None),
        (False, "delayed-index-bucket", bucket, wire.managed_ledger_name(dtopic), "scheduler"),
        (False, "compacted-ledger", _compacted_custom(ctopic, 1, 2), wire.managed_ledger_name(ctopic), None),
    ):
        lid = c.new_id(long)
        c.bk_ledger(lid, ctime_ms=c.now - PLANTED_AGE, entries=100, size=100 * 300, custom=custom)
        c.expect_ledger(
            "orphan_ledger", "warning", lid, component=component, managed_ledger=ml, cursor=cursor
        )

    # unattributed_ledger: no custom metadata (pre-2019) and another application's ledger.
    for custom in ({}, {"application": "distributedlog", "component": "log-segment"}):
        lid = c.new_id()
        c.bk_ledger(lid, ctime_ms=c.now - 400 * DAY, entries=10, size=4096, custom=custom)
        c.expect_ledger("unattributed_ledger", "info", lid)


def _plant_missing(c: _Cluster) -> None:
    """missing_ledger: data ledger, cursor ledger and schema ledger referenced but absent."""
    now = c.now
    topic = "persistent://acme/orders/lost-data"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 3, first_ts=now - 3 * DAY, step=DAY, last_open_ctime=now - 2 * HOUR)
    lost = leds[1]
    leds[1] = replace(lost, in_bk=False)
    ghost = c.new_id()
    c.topic(
        topic,
        leds,
        [
            Cursor("reader", (leds[0].ledger_id, 0), now - 5 * MINUTE),
            Cursor("ghost-cursor", (leds[0].ledger_id, 0), now - 5 * MINUTE, cursor_ledger=ghost),
        ],
    )
    c.expect_ml("missing_ledger", "critical", name, lost.ledger_id)
    # the referencing cursor znode / schema locator is the path of these two
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


def _plant_offload_trouble(c: _Cluster) -> None:
    """Offload anomalies on one topic (acme/payments: offload deletion lag 1 h)."""
    now = c.now
    topic = "persistent://acme/payments/offload-trouble"
    name = wire.managed_ledger_name(topic)
    base = _closed_series(c, 6, first_ts=now - 8 * DAY, step=DAY, last_open_ctime=now - 2 * HOUR)
    m_crit, m_warn, ond, inc, young, last = base[0], base[1], base[2], base[3], base[4], base[6]
    u_crit, u_warn, u_ond, u_inc, u_young = (c.uuid() for _ in range(5))
    leds = [
        replace(m_crit, in_bk=False, offload=Offload(u_crit, True, True, now - 6 * DAY, write_data=False)),
        replace(m_warn, offload=Offload(u_warn, True, False, now - 2 * DAY, write_index=False)),
        replace(ond, offload=Offload(u_ond, True, False, now - 2 * DAY)),
        replace(inc, offload=Offload(u_inc, False, write_index=False)),
        replace(young, offload=Offload(u_young, False, write_data=not c.s3_aged, write_index=not c.s3_aged)),
        base[5],
        last,
    ]
    c.topic(topic, leds, [Cursor("archiver", (leds[0].ledger_id, -1), now - 10 * MINUTE)], codec="LZ4")
    if c.bucket is None:
        return
    for kind, severity, component, led, key in (
        (
            "missing_offload_object",
            "critical",
            "offload",
            m_crit,
            wire.offload_data_key(u_crit, m_crit.ledger_id),
        ),
        (
            "missing_offload_object",
            "warning",
            "offload",
            m_warn,
            wire.offload_index_key(u_warn, m_warn.ledger_id),
        ),
        ("offloaded_not_deleted", "warning", "managed-ledger", ond, None),
    ):
        c.expect_ml(kind, severity, name, led.ledger_id, component, object_key=key)
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
        c.expect_ml(
            "incomplete_offload",
            "warning",
            name,
            inc.ledger_id,
            "offload",
            object_key=wire.offload_data_key(u_inc, inc.ledger_id),
        )
        # Objects of an earlier, abandoned offload attempt of ledger `ond`: the offload context
        # names another uuid, so the uuid check fails (the broker reads only the context's uuid).
        u_orphan = c.uuid()
        md = c.closed_metadata(ond, c.ml_custom(name))
        keys = c.offload_objects(name, ond, md, u_orphan, data=True, index=True)
        c.expected += _object_findings(
            "corrupt_offload_object", "warning", ond.ledger_id, name, keys, path=c.ml_path(name)
        )
        c.control("in_progress_offload_without_objects", ledger_id=young.ledger_id, managed_ledger=name)
    else:
        for led, uuid, more in (
            (young, u_young, {}),
            (inc, u_inc, {"note": "objects written now are younger than incomplete_offload_age"}),
        ):
            key = wire.offload_data_key(uuid, led.ledger_id)
            c.control(
                "young_incomplete_offload",
                ledger_id=led.ledger_id,
                managed_ledger=name,
                object_key=key,
                **more,
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
        c.expect_ml("retention_overdue", "warning", name, led.ledger_id)

    # open_ledger_overdue: the current ledger OPEN for 10 days.
    topic = "persistent://acme/payments/stuck-producer"
    name = wire.managed_ledger_name(topic)
    leds = _closed_series(c, 1, first_ts=now - 12 * DAY, step=DAY, last_open_ctime=now - 10 * DAY)
    c.topic(topic, leds)
    c.expect_ml("open_ledger_overdue", "warning", name, leds[1].ledger_id)

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
        c.expect_ledger(kind, "critical", lid)

    bk_corrupt(c.new_id(), wire.bk_header(2) + b"quorumSize: 2\nensembleSize: banana\nsegment {{{\n")
    bk_corrupt(c.new_id(long=True), wire.bk_header(7) + b"\x00\x01future-format")
    from kazoo.security import make_acl  # kazoo: only where ZooKeeper ACLs are built

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
        c.expect_ledger(
            "orphan_ledger", "warning", led.ledger_id, component="managed-ledger", managed_ledger=name
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
        keys = c.offload_objects(name, trimmed, md, c.uuid(), data=True, index=True)
        c.expected += _object_findings("orphan_offload_object", "warning", trimmed.ledger_id, name, keys)


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
    leds[0] = replace(first, in_bk=False, offload=off)
    sub = o.cursor_ledger(name, "billing-sub", now - 2 * DAY)
    o.topic(
        topic, leds, [Cursor("billing-sub", (leds[-1].ledger_id, 0), now - 5 * MINUTE, cursor_ledger=sub)]
    )
    schema_ledger = o.new_id()
    sid = o.schema(topic, [schema_ledger])
    c.counts["bk_ledgers"] += o.counts["bk_ledgers"]
    found = [
        _finding(
            "foreign_ledger", "info", component=component, ledger_id=lid, path=c.ledger_path(lid), **cols
        )
        for component, lid, cols in (
            ("managed-ledger", leds[1].ledger_id, {"managed_ledger": name}),
            ("cursor", sub, {"managed_ledger": name, "cursor": "billing-sub"}),
            ("schema", schema_ledger, {}),
        )
    ]
    assert sid.startswith(FOREIGN_TENANT + "/")
    if c.bucket is not None and c.s3_aged:
        keys = (
            wire.offload_data_key(off.uuid, first.ledger_id),
            wire.offload_index_key(off.uuid, first.ledger_id),
        )
        found += _object_findings("foreign_offload_object", "info", first.ledger_id, name, keys)
    c.expected.extend(found)
    return found


def _assert_undecodable(data: bytes, cls: Any) -> None:
    try:
        cls.FromString(data)
    except Exception:  # noqa: BLE001 - any decode error is what we want
        return
    raise AssertionError(f"sandbox corrupt {cls.__name__} decodes")
