"""Real failure paths in a running :class:`~ledgerlens_sandbox.pulsar.PulsarSandbox`, with ground truth.

Each anomaly is made the way it happens in production, by the broker itself or by an operator's
metadata edit, never by writing fake bytes:

- ``orphan_offload_object``: a topic with offloaded ledgers is deleted (``DELETE ...?force=true``)
  while S3 is unreachable *from the broker*. The broker reaches S3 only through the sandbox's TCP
  relay; stopping the relay is, for the broker, an S3 outage (connection refused), while moto keeps
  its objects in memory (restarting moto would lose them all). The broker deletes the managed ledger
  and schedules the offload cleanup, whose retries fail; the objects stay behind. The outage lasts
  until :func:`restore_s3` (the audit runs during it, reading moto directly, as an auditor outside
  the broker's network partition would).
- ``orphan_ledger``: a ledger dropped from a managed ledger's ledger list by a version-checked edit
  of the znode (read + stat, decode with the project's protos, drop one, write with the version),
  after unloading the topic so that the broker does not overwrite the edit.
- ``missing_ledger``: the BookKeeper metadata znode of a referenced ledger is deleted (topic unloaded).
- ``missing_offload_object``: the data object of an offloaded ledger whose BookKeeper copy is
  already deleted is removed from S3 (critical: the data is gone).
- ``retention_overdue``: consumed ledgers of a topic that is unloaded and never loaded again, in a
  namespace whose retention is then lowered to zero: the broker never trims them.
- offload objects damaged in the bucket (:func:`plant_offload_damage`; bit rot, a bad copy, an
  operator's mistake, another cluster sharing the bucket), on the objects of one topic whose
  BookKeeper copies are deleted: a truncated index (``corrupt_offload_object``), a data object with
  a wrong magic, an index object copied over another ledger's index key, a data object shortened,
  a copy of an object under another uuid, a stale partial upload of an offload that never
  completed (``incomplete_offload``: the managed ledger names the uuid, not complete, as the broker
  leaves it when it dies mid-offload), and a copy tagged with another cluster's name
  (``foreign_offload_object``).
- ``orphan_ledger`` of a PIP-195 bucket snapshot (the upstream leak "property removed first"): the
  bucket's cursor property is dropped by a version-checked edit of the cursor znode (topic unloaded),
  the snapshot ledger stays. ``missing_ledger`` of a dangling bucket property (the upstream loss "a
  failed merge deletes the only durable copy"): another bucket's snapshot ledger znode is deleted.
- ``orphan_ledger`` of a stale compacted ledger (the upstream leak "the previous compacted ledger is
  deleted best effort"): a topic is compacted twice while ZooKeeper refuses to delete the first
  compacted ledger's znode (a child node hangs under it for that moment, as a metadata store error
  would); the broker records the new compacted ledger and never retries the delete. The
  ``__compaction`` cursor records the successor in its cursor *ledger* only, so just an audit that
  reads that ledger's last entry from the bookies can tell the stale ledger from the live one.
- ``orphan_ledger`` leaked by the broker itself (found with this sandbox): a topic unloaded while the
  ledger of a rollover is being created; the broker closes that ledger and never deletes it
  (:func:`plant_unload_race`; its own log line is the ground truth, and :func:`plant` adds any
  other such leak the broker logged while planting).

The ground truth lists the findings an audit must report with ``min_orphan_age_s`` and
``retention_grace_s`` at most :data:`MAX_AGE_S` (the planted objects are made older than that).
"""

from __future__ import annotations

import json
import re
import time
import uuid as uuid_mod
from datetime import timedelta
from pathlib import Path
from typing import Any

from ledgerlens.errors import SandboxError
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.managed_ledger import decode_cursor, decode_managed_ledger
from ledgerlens.formats.names import encode_component
from ledgerlens.formats.offload import ledger_object_keys
from ledgerlens.formats.paths import ledger_id_from_path, ledger_path
from ledgerlens.formats.uuids import uuid_to_bits
from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.settings.config import AuditConfig
from ledgerlens_sandbox.pulsar import AWS_DUMMY, PulsarSandbox, admin, make_client, topic_path
from ledgerlens_sandbox.seed import (
    BUCKET_PREFIX,
    ML_ROOT,
    compact_and_wait,
    consume,
    cursor_properties,
    ensure_namespace,
    ml_path,
    offload_and_wait,
    offloaded_ledgers,
    produce,
    read_ml,
    wait_bookkeeper_deleted,
    wait_for,
    zk_client,
)

MAX_AGE_S = 30  # planted anomalies are older than this when plant() returns

NS_FAIL = "ll-fail/ns"
NS_FAIL_OFFLOAD = "ll-fail/offload"
NS_OVERDUE = "ll-overdue/ns"
TOPIC_OVERDUE = f"persistent://{NS_OVERDUE}/overdue topic"
TOPIC_ORPHAN_EDIT = f"persistent://{NS_FAIL}/orphan edit"
TOPIC_MISSING_LEDGER = f"persistent://{NS_FAIL}/missing ledger"
TOPIC_UNLOAD_RACE = f"persistent://{NS_FAIL}/unload during rollover"
ENTRIES_PER_LEDGER = 50  # managedLedgerMaxEntriesPerLedger of the sandbox
TOPIC_DELETED_OUTAGE = f"persistent://{NS_FAIL_OFFLOAD}/deleted during outage"
TOPIC_MISSING_OBJECT = f"persistent://{NS_FAIL_OFFLOAD}/missing object"
TOPIC_DAMAGED = f"persistent://{NS_FAIL_OFFLOAD}/damaged objects"
OTHER_CLUSTER = "other-cluster"
TOPIC_BUCKETS = f"persistent://{NS_FAIL}/delayed buckets"
TOPIC_COMPACTED_LEAK = f"persistent://{NS_FAIL}/compacted twice"
BUCKET_SUBSCRIPTION = "bucket-sub"
KEEP = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}


def _finding(kind: str, severity: str, component: str, **cols: Any) -> dict[str, Any]:
    row: dict[str, Any] = {k: None for k in FINDING_KEYS}
    row.update(kind=kind, severity=severity, component=component, **cols)
    return row


NEEDS_BOOKIE_READS = "needs_bookie_reads"  # a ground-truth finding only an audit reading bookies sees


def finding_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """A finding (an audit's row or a ground-truth entry) as the tuple findings are compared by:
    ``FINDING_KEYS`` in order, NaN (pandas' null) as None, ``ledger_id`` as an int."""
    out = []
    for k in FINDING_KEYS:
        v = row.get(k)
        if isinstance(v, float) and v != v:
            v = None
        if v is not None and k == "ledger_id":
            v = int(v)
        out.append(v)
    return tuple(out)


def audit_config(as_of_ms: int | None = None) -> AuditConfig:
    """The audit settings the planted truth is judged with: every planted anomaly is older than
    ``MAX_AGE_S`` (the stale partial upload included), and no retention is assumed by default."""
    return AuditConfig(
        as_of_ms=as_of_ms if as_of_ms is not None else int(time.time() * 1000),
        min_orphan_age_s=MAX_AGE_S,
        retention_grace_s=MAX_AGE_S,
        incomplete_offload_age_s=MAX_AGE_S,
        default_retention_minutes=0,
        default_retention_mb=0,
    )


def expected_findings(truth: dict[str, Any], *, bookie_reads: bool) -> list[dict[str, Any]]:
    """The ground truth's findings that an audit with (or without) bookie reads must report.

    Without ``--read-bookies`` the audit cannot see the live compacted ledger, which only the
    ``__compaction`` cursor ledger names, so it does not report the stale one (``docs/audit-rules.md``,
    compacted ledgers). The flag itself is not a finding column.
    """
    return [
        {k: v for k, v in f.items() if k != NEEDS_BOOKIE_READS}
        for f in truth["expected"]
        if bookie_reads or not f.get(NEEDS_BOOKIE_READS)
    ]


def _s3(state: dict[str, Any]) -> Any:
    import boto3  # boto3: only where the bucket is touched

    return boto3.client(
        "s3",
        endpoint_url=state["s3_endpoint"],
        region_name=state["region"],
        aws_access_key_id=AWS_DUMMY["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_DUMMY["AWS_SECRET_ACCESS_KEY"],
    )


def _unload(web: str, topic: str, zk: Any = None, attempts: int = 3) -> None:
    """Unload ``topic``; with ``zk``, also wait until every cursor znode holds the cursor's position.

    The unload call can return before the broker has written the closing cursors' positions to
    their znodes; and when the close races a cursor-ledger rollover, Pulsar 4.0.8 fails the closing
    write (BadVersion, "persistent position failure when closing") and the znode keeps the rollover's
    write instead, for good. A planting that reads or edits a cursor znode, or the ground truth
    derived from it, waits until each znode's mark-delete position is the one the broker reported
    before the unload; when it never comes, the topic is loaded again (the broker recovers the
    position from the cursor ledger) and unloaded again, up to ``attempts`` times.
    """
    path = ml_path(topic)
    for attempt in range(1, attempts + 1):
        want: dict[str, tuple[int, int]] = {}
        if zk is not None:
            stats = admin(web, "GET", topic_path(topic) + "/internalStats")  # loads it if unloaded
            for name, cur in (stats.get("cursors") or {}).items():
                ledger, _, entry = str(cur.get("markDeletePosition", "")).partition(":")
                if ledger.lstrip("-").isdigit() and entry.lstrip("-").isdigit():
                    want[encode_component(name)] = (int(ledger), int(entry))
        admin(web, "PUT", topic_path(topic) + "/unload", ok=(200, 204))
        if not want:
            return

        def written(want: dict[str, tuple[int, int]] = want) -> bool | None:
            for c, pos in want.items():
                rec = decode_cursor(zk.get(f"{path}/{c}")[0], path=f"{path}/{c}")
                got = (rec.mark_delete_ledger_id, rec.mark_delete_entry_id)
                if got[0] is None or got[1] is None or (got[0], got[1]) < pos:
                    return None
            return True

        try:
            wait_for(written, 30, f"the cursor positions of {topic} in ZooKeeper after its unload")
            return
        except SandboxError:
            if attempt == attempts:
                raise


def _ml_name(topic: str) -> str:
    return ml_path(topic).removeprefix("/managed-ledgers/")


def _offloaded_topic(state: dict[str, Any], zk: Any, client: Any, topic: str) -> list[int]:
    produce(client, topic, 200)
    offload_and_wait(state["web_url"], topic)
    ids = offloaded_ledgers(read_ml(zk, topic))
    if len(ids) < 2:
        raise SandboxError(f"{topic}: expected at least two offloaded ledgers, got {ids}")
    wait_bookkeeper_deleted(zk, topic, ids)
    return ids


def plant_retention_overdue(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Consumed ledgers kept by a topic that is unloaded, then retention lowered to 0."""
    web = state["web_url"]
    ensure_namespace(web, NS_OVERDUE, {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100})
    produce(client, TOPIC_OVERDUE, 180)
    got = consume(client, TOPIC_OVERDUE, "reader", 180)
    if got != 180:
        raise SandboxError(f"{TOPIC_OVERDUE}: consumed {got} of 180")

    def caught_up() -> bool:
        st = admin(web, "GET", topic_path(TOPIC_OVERDUE) + "/internalStats")
        return bool(st["cursors"]["reader"]["markDeletePosition"] == st["lastConfirmedEntry"])

    wait_for(caught_up, 60, f"the mark-delete position of 'reader' on {TOPIC_OVERDUE}")
    # Once in a while a cursor znode goes back to an older position a moment after the unload (a
    # late write of the broker's close): seen once as every ledger behind the slowest cursor. The
    # topic is loaded and unloaded again (retention still 60 minutes: nothing is trimmed) until the
    # znodes show the consumed ledgers for a second after the unload.
    for attempt in range(1, 4):
        _unload(web, TOPIC_OVERDUE, zk)
        time.sleep(1)
        if len(_overdue_ledgers(zk)[2]) >= 2 or attempt == 3:
            break
    # from now on nothing may load the topic again: no admin call names it, no client opens it
    ensure_namespace(web, NS_OVERDUE, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    ledgers, slowest, overdue = _overdue_ledgers(zk)
    if len(overdue) < 2:
        raise SandboxError(
            f"{TOPIC_OVERDUE}: expected consumed ledgers, got ledgers {ledgers} slowest {slowest}"
        )
    path = ml_path(TOPIC_OVERDUE)
    return [
        _finding(
            "retention_overdue",
            "warning",
            "managed-ledger",
            ledger_id=lid,
            managed_ledger=_ml_name(TOPIC_OVERDUE),
            path=path,
        )
        for lid in overdue
    ]


def _overdue_ledgers(zk: Any) -> tuple[list[Any], int, list[int]]:
    """From the znodes of the overdue topic: its ledgers, its slowest cursor's mark-delete ledger,
    and the ids of the ledgers behind that cursor (the last ledger never)."""
    path = ml_path(TOPIC_OVERDUE)
    ledgers = list(read_ml(zk, TOPIC_OVERDUE).ledgers)
    slowest = min(
        decode_cursor(zk.get(f"{path}/{c}")[0], path=f"{path}/{c}").mark_delete_ledger_id or -1
        for c in zk.get_children(path)
    )
    overdue = []
    for li in ledgers[:-1]:  # the last ledger is never trimmed
        if li.ledger_id >= slowest or not li.timestamp_ms:
            break
        overdue.append(li.ledger_id)
    return ledgers, slowest, overdue


def plant_orphan_by_edit(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Drop a ledger from the managed ledger's list with a version-checked write (topic unloaded)."""
    produce(client, TOPIC_ORPHAN_EDIT, 180)  # not a multiple of the ledger size: no rollover in flight
    _unload(state["web_url"], TOPIC_ORPHAN_EDIT, zk)
    path = ml_path(TOPIC_ORPHAN_EDIT)
    data, stat = zk.get(path)
    if data[:2] == b"\x47\x78":
        raise SandboxError(f"{path}: compressed managed-ledger info; the sandbox writes uncompressed only")
    info = mlpb.ManagedLedgerInfo()
    info.ParseFromString(data)
    if len(info.ledgerInfo) < 3:
        raise SandboxError(f"{path}: expected at least 3 ledgers, got {len(info.ledgerInfo)}")
    dropped = info.ledgerInfo[1].ledgerId
    del info.ledgerInfo[1]
    zk.set(path, info.SerializeToString(), version=stat.version)
    if zk.exists(ledger_path(dropped)) is None:
        raise SandboxError(f"ledger {dropped} has no BookKeeper metadata")
    return [
        _finding(
            "orphan_ledger", "warning", "managed-ledger",
            ledger_id=dropped, managed_ledger=_ml_name(TOPIC_ORPHAN_EDIT), path=ledger_path(dropped),
        )
    ]  # fmt: skip


def plant_bucket_failures(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """An orphan bucket snapshot (its property dropped) and a dangling property (its ledger deleted)."""
    import pulsar  # the Pulsar client: only where messages are sent

    consumer = client.subscribe(TOPIC_BUCKETS, BUCKET_SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared)
    try:
        # 199, not a multiple of the ledger size: no rollover in flight at the unload below (a race
        # that leaks a ledger); the fourth ledger still seals the third bucket
        produce(client, TOPIC_BUCKETS, 4 * ENTRIES_PER_LEDGER - 1, deliver_after=timedelta(hours=3))

        def sealed() -> dict[str, str] | None:
            props = cursor_properties(zk, TOPIC_BUCKETS, BUCKET_SUBSCRIPTION)
            found = {k: v for k, v in props.items() if k.startswith(BUCKET_PREFIX)}
            return found if len(found) >= 3 else None

        buckets = wait_for(sealed, 120, f"three delayed-index buckets on {TOPIC_BUCKETS}")
    finally:
        consumer.close()
    _unload(state["web_url"], TOPIC_BUCKETS, zk)
    path = f"{ml_path(TOPIC_BUCKETS)}/{encode_component(BUCKET_SUBSCRIPTION)}"
    data, stat = zk.get(path)
    if data[:2] == b"\x47\x78":
        raise SandboxError(f"{path}: compressed cursor info; the sandbox writes uncompressed only")
    info = mlpb.ManagedCursorInfo()
    info.ParseFromString(data)
    keys = sorted(buckets, key=lambda k: int(k.split("_")[1]))
    orphan_key, dangling_key = keys[0], keys[1]
    orphan_id, dangling_id = int(buckets[orphan_key]), int(buckets[dangling_key])
    kept = [p for p in info.cursorProperties if p.name != orphan_key]
    if len(kept) != len(info.cursorProperties) - 1:
        raise SandboxError(f"{path}: bucket property {orphan_key} not in the znode")
    del info.cursorProperties[:]
    info.cursorProperties.extend(kept)
    zk.set(path, info.SerializeToString(), version=stat.version)
    lpath = ledger_path(dangling_id)
    _, lstat = zk.get(lpath)
    zk.delete(lpath, version=lstat.version)
    ml = _ml_name(TOPIC_BUCKETS)
    return [
        _finding(
            "orphan_ledger", "warning", "delayed-index-bucket",
            ledger_id=orphan_id, managed_ledger=ml, cursor=BUCKET_SUBSCRIPTION, path=ledger_path(orphan_id),
        ),
        _finding(
            "missing_ledger", "critical", "delayed-index-bucket",
            ledger_id=dangling_id, managed_ledger=ml, cursor=BUCKET_SUBSCRIPTION, path=path,
        ),
    ]  # fmt: skip


def _compacted_ledgers(zk: Any, topic: str) -> set[int]:
    """Ids of the BookKeeper ledgers whose metadata says they are compacted ledgers of ``topic``."""
    from kazoo.exceptions import NoNodeError  # kazoo: only where ZooKeeper is read

    out: set[int] = set()
    for level1 in zk.get_children("/ledgers"):
        if not level1.isdigit():
            continue
        for level2 in zk.get_children(f"/ledgers/{level1}"):
            for leaf in zk.get_children(f"/ledgers/{level1}/{level2}"):
                path = f"/ledgers/{level1}/{level2}/{leaf}"
                try:
                    data = zk.get(path)[0] if leaf.startswith("L") else b""
                except NoNodeError:  # deleted since the listing (trimmed, rolled over)
                    continue
                if not data:
                    continue
                md = decode_ledger_metadata(data, path=path).custom_text()
                if md.get("component") == "compacted-ledger" and md.get("pulsar/compactedTopic") == topic:
                    out.add(ledger_id_from_path(path))
    return out


def plant_stale_compacted_ledger(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """A compacted ledger the broker failed to delete after the next compaction.

    The broker deletes the compacted ledger a compaction replaces best effort (one try, a warning
    ``Error deleting compacted topic ledger N`` on failure). Here the delete fails because a child
    znode hangs under the ledger's znode while the second compaction runs (ZooKeeper refuses to delete
    a node with children); nothing else is touched. The topic stays loaded: the ``__compaction``
    cursor keeps the successor in its cursor ledger, and the znode lags (it names what it named at
    the last cursor-ledger rollover). The ground truth says whether an audit reading the znode alone
    can see the stale ledger (``NEEDS_BOOKIE_READS``).
    """
    web, topic = state["web_url"], TOPIC_COMPACTED_LEAK
    cursor_path = f"{ml_path(topic)}/__compaction"
    produce(client, topic, 60, keys=6)
    compact_and_wait(web, topic)
    first = _compacted_ledgers(zk, topic)
    if len(first) != 1:
        raise SandboxError(f"{topic}: expected one compacted ledger after the first compaction, got {first}")
    (stale,) = first
    hold = f"{ledger_path(stale)}/ledgerlens-hold"
    warning = re.compile(rf"Error deleting compacted topic ledger {stale}\b")
    log = Path(state["logs"]["pulsar"])
    zk.create(hold, b"")
    try:
        produce(client, topic, 60, prefix="n", keys=6)
        compact_and_wait(web, topic)
        wait_for(
            lambda: warning.search(log.read_text(errors="replace")) is not None or None,
            60,
            f"the broker's failed delete of compacted ledger {stale}",
        )
    finally:
        zk.delete(hold)
    fresh = _compacted_ledgers(zk, topic) - first
    if zk.exists(ledger_path(stale)) is None or len(fresh) != 1:
        raise SandboxError(f"{topic}: expected compacted ledger {stale} left and one successor, got {fresh}")
    named = decode_cursor(zk.get(cursor_path)[0], path=cursor_path).compacted_ledger_id
    return [
        _finding(
            "orphan_ledger", "warning", "compacted-ledger",
            ledger_id=stale, managed_ledger=_ml_name(topic), path=ledger_path(stale),
            # the znode names nothing or the stale ledger itself: reading it alone, the stale ledger
            # is the live one or a compaction in flight (docs/audit-rules.md, compacted ledgers)
            **{NEEDS_BOOKIE_READS: named is None or named == stale},
        )
    ]  # fmt: skip


LEAK_LINE = re.compile(
    r"\[([^\]\s]+)\] ledger create completed after the managed ledger is closed rc=0 ledger=(\d+)"
)


def broker_leaks(state: dict[str, Any], zk: Any) -> list[dict[str, Any]]:
    """The ledgers the broker's own log says it leaked, still in BookKeeper and listed by no one.

    Pulsar 4.0.8 logs ``[ml] ledger create completed after the managed ledger is closed rc=0
    ledger=N, so just close this ledger handle`` when an unload (or a topic close) races a rollover:
    ledger N is never deleted and no managed ledger lists it. Any step that unloads a topic right
    after a rollover can hit this, so :func:`plant` sweeps the whole log at the end; the findings are
    real and belong in the ground truth.
    """
    text = Path(state["logs"]["pulsar"]).read_text(errors="replace")
    out: list[dict[str, Any]] = []
    for ml, raw_id in sorted(set(LEAK_LINE.findall(text))):
        ledger_id = int(raw_id)
        if zk.exists(ledger_path(ledger_id)) is None:
            continue  # deleted since (a topic deletion takes the ledgers its metadata names)
        if zk.exists(f"{ML_ROOT}/{ml}") is not None:
            data, _ = zk.get(f"{ML_ROOT}/{ml}")
            listed = {li.ledger_id for li in decode_managed_ledger(data, path=f"{ML_ROOT}/{ml}").ledgers}
            if ledger_id in listed:
                continue
        out.append(
            _finding(
                "orphan_ledger", "warning", "managed-ledger",
                ledger_id=ledger_id, managed_ledger=ml, path=ledger_path(ledger_id),
            )
        )  # fmt: skip
    return out


def plant_unload_race(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Unload a topic while the broker creates the next ledger after a full one: Pulsar leaks it.

    Found with this sandbox (Pulsar 4.0.8): when ``unload`` closes the managed ledger while the ledger
    for the rollover is being created, the broker never deletes that ledger, which no metadata
    references (:func:`broker_leaks`). The race is tried a few times (each try fills exactly one
    ledger, then unloads at once).
    """
    ml = _ml_name(TOPIC_UNLOAD_RACE)
    for _ in range(5):
        produce(client, TOPIC_UNLOAD_RACE, ENTRIES_PER_LEDGER)
        _unload(state["web_url"], TOPIC_UNLOAD_RACE)
        time.sleep(1)
        leaked = [f for f in broker_leaks(state, zk) if f["managed_ledger"] == ml]
        if leaked:
            return leaked
    return []  # the race was not hit: nothing leaked, nothing expected


def plant_missing_ledger(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Delete the BookKeeper metadata znode of a ledger the managed ledger still lists."""
    produce(client, TOPIC_MISSING_LEDGER, 130)
    _unload(state["web_url"], TOPIC_MISSING_LEDGER, zk)
    rec = read_ml(zk, TOPIC_MISSING_LEDGER)
    victim = rec.ledgers[0].ledger_id
    lpath = ledger_path(victim)
    _, stat = zk.get(lpath)
    zk.delete(lpath, version=stat.version)
    return [
        _finding(
            "missing_ledger", "critical", "managed-ledger",
            ledger_id=victim, managed_ledger=_ml_name(TOPIC_MISSING_LEDGER),
            path=ml_path(TOPIC_MISSING_LEDGER),
        )
    ]  # fmt: skip


def plant_missing_offload_object(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Remove the data object of an offloaded ledger whose BookKeeper copy is already deleted."""
    ids = _offloaded_topic(state, zk, client, TOPIC_MISSING_OBJECT)
    rec = read_ml(zk, TOPIC_MISSING_OBJECT)
    li = next(x for x in rec.ledgers if x.ledger_id == ids[0])
    assert li.offload is not None and li.offload.uuid is not None
    data_key, _ = ledger_object_keys(li.offload.uuid, li.ledger_id)
    s3 = _s3(state)
    s3.head_object(Bucket=state["bucket"], Key=data_key)
    s3.delete_object(Bucket=state["bucket"], Key=data_key)
    return [
        _finding(
            "missing_offload_object", "critical", "offload",
            ledger_id=li.ledger_id, managed_ledger=_ml_name(TOPIC_MISSING_OBJECT),
            path=ml_path(TOPIC_MISSING_OBJECT), object_key=data_key,
        )
    ]  # fmt: skip


def _put_like(s3: Any, bucket: str, key: str, body: bytes, *, like: str, **meta: str) -> None:
    """Write ``body`` at ``key`` with the user metadata of object ``like`` (plus ``meta``)."""
    head = s3.head_object(Bucket=bucket, Key=like)
    metadata = {**head.get("Metadata", {}), **meta}
    s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata)


def plant_offload_damage(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Damage the offloaded objects of one topic (BookKeeper copies deleted) in seven ways."""
    web = state["web_url"]
    bucket = state["bucket"]
    produce(client, TOPIC_DAMAGED, 6 * ENTRIES_PER_LEDGER + 10)
    offload_and_wait(web, TOPIC_DAMAGED)
    ids = offloaded_ledgers(read_ml(zk, TOPIC_DAMAGED))
    if len(ids) < 6:
        raise SandboxError(f"{TOPIC_DAMAGED}: expected at least six offloaded ledgers, got {ids}")
    wait_bookkeeper_deleted(zk, TOPIC_DAMAGED, ids)
    produce(client, TOPIC_DAMAGED, ENTRIES_PER_LEDGER)  # one more closed ledger, never offloaded
    _unload(web, TOPIC_DAMAGED, zk)
    path = ml_path(TOPIC_DAMAGED)
    ml = _ml_name(TOPIC_DAMAGED)
    rec = read_ml(zk, TOPIC_DAMAGED)
    by_id = {li.ledger_id: li for li in rec.ledgers}
    keys = {}
    for lid in ids[:6]:
        off = by_id[lid].offload
        assert off is not None and off.uuid is not None
        keys[lid] = ledger_object_keys(off.uuid, lid)
    s3 = _s3(state)
    l0, l1, l2, l3, l4, l5 = ids[:6]

    def get(key: str) -> bytes:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def corrupt(lid: int, key: str, severity: str = "critical") -> dict[str, Any]:
        return _finding(
            "corrupt_offload_object", severity, "offload",
            ledger_id=lid, managed_ledger=ml, path=path, object_key=key,
        )  # fmt: skip

    expected = []
    # 1. truncated index
    idx = get(keys[l0][1])
    _put_like(s3, bucket, keys[l0][1], idx[: len(idx) // 2], like=keys[l0][1])
    expected.append(corrupt(l0, keys[l0][1]))
    # 2. wrong magic on a data object
    data = get(keys[l1][0])
    _put_like(s3, bucket, keys[l1][0], b"\xca\xfe\xba\xbe" + data[4:], like=keys[l1][0])
    expected.append(corrupt(l1, keys[l1][0]))
    # 3. another topic's index object copied over this ledger's index key
    other = read_ml(zk, TOPIC_MISSING_OBJECT)
    donor = next(li for li in reversed(other.ledgers) if li.offload is not None and li.offload.complete)
    assert donor.offload is not None and donor.offload.uuid is not None
    donor_index = ledger_object_keys(donor.offload.uuid, donor.ledger_id)[1]
    s3.copy_object(Bucket=bucket, Key=keys[l2][1], CopySource={"Bucket": bucket, "Key": donor_index})
    expected.append(corrupt(l2, keys[l2][1]))
    # 4. a data object shortened
    data = get(keys[l3][0])
    _put_like(s3, bucket, keys[l3][0], data[: len(data) - 100], like=keys[l3][0])
    expected.append(corrupt(l3, keys[l3][0]))
    # 5. a copy of a data object under another uuid
    stray = ledger_object_keys(str(uuid_mod.uuid4()), l4)[0]
    s3.copy_object(Bucket=bucket, Key=stray, CopySource={"Bucket": bucket, "Key": keys[l4][0]})
    expected.append(corrupt(l4, stray, "warning"))
    # 6. a stale partial upload: the broker set the offload context (uuid, not complete) of the
    #    never-offloaded ledger and died after the first block; the topic was never loaded again
    partial_uuid = str(uuid_mod.uuid4())
    data, stat = zk.get(path)
    if data[:2] == b"\x47\x78":
        raise SandboxError(f"{path}: compressed managed-ledger info; the sandbox writes uncompressed only")
    info = mlpb.ManagedLedgerInfo()
    info.ParseFromString(data)
    never = [li for li in info.ledgerInfo[:-1] if not li.offloadContext.HasField("uidMsb")]
    if not never:
        raise SandboxError(f"{path}: no closed ledger left that was never offloaded")
    victim = never[-1]
    msb, lsb = uuid_to_bits(partial_uuid)
    ctx = victim.offloadContext
    ctx.uidMsb, ctx.uidLsb, ctx.complete = msb, lsb, False
    ctx.driverMetadata.name = "S3"
    for k, v in (("bucket", bucket), ("managedLedgerOffloadDriver", "S3")):
        kv = ctx.driverMetadata.properties.add()
        kv.key, kv.value = k, v
    zk.set(path, info.SerializeToString(), version=stat.version)
    first_block = get(keys[l5][0])[: 4 * 1024]
    partial_key = ledger_object_keys(partial_uuid, victim.ledgerId)[0]
    _put_like(s3, bucket, partial_key, first_block, like=keys[l5][0])
    expected.append(
        _finding(
            "incomplete_offload", "warning", "offload",
            ledger_id=victim.ledgerId, managed_ledger=ml, path=path, object_key=partial_key,
        )
    )  # fmt: skip
    # 7. a copy tagged with another Pulsar cluster's name (a shared bucket)
    foreign = ledger_object_keys(str(uuid_mod.uuid4()), l5)[0]
    _put_like(s3, bucket, foreign, get(keys[l5][0]), like=keys[l5][0], pulsarclustername=OTHER_CLUSTER)
    expected.append(
        _finding(
            "foreign_offload_object", "info", "offload", ledger_id=l5, managed_ledger=ml, object_key=foreign
        )
    )
    return expected


def damaged_object_keys(expected: list[dict[str, Any]]) -> list[str]:
    """Keys of the damaged offloads (data and index of each) in a ground truth's findings."""
    out: set[str] = set()
    for f in expected:
        if f["kind"] in ("corrupt_offload_object", "foreign_offload_object", "incomplete_offload"):
            data = str(f["object_key"]).removesuffix("-index")
            out.update((data, data + "-index"))
    return sorted(out)


def plant_orphan_objects_by_outage(state: dict[str, Any], zk: Any, client: Any) -> list[dict[str, Any]]:
    """Delete a topic with offloaded ledgers while the broker cannot reach S3; objects stay behind."""
    web = state["web_url"]
    ids = _offloaded_topic(state, zk, client, TOPIC_DELETED_OUTAGE)
    rec = read_ml(zk, TOPIC_DELETED_OUTAGE)
    keys: list[tuple[int, str]] = []
    for li in rec.ledgers:
        if li.ledger_id in ids and li.offload is not None and li.offload.uuid:
            keys.extend((li.ledger_id, k) for k in ledger_object_keys(li.offload.uuid, li.ledger_id))
    s3 = _s3(state)
    for _, key in keys:
        s3.head_object(Bucket=state["bucket"], Key=key)
    box = PulsarSandbox(Path(state["workdir"]))
    box.stop_s3_relay(state)  # S3 outage as the broker sees it
    admin(web, "DELETE", topic_path(TOPIC_DELETED_OUTAGE), params={"force": "true"}, timeout=300)
    if zk.exists(ml_path(TOPIC_DELETED_OUTAGE)) is not None:
        raise SandboxError(f"{TOPIC_DELETED_OUTAGE}: managed ledger still present after deletion")
    ml = _ml_name(TOPIC_DELETED_OUTAGE)
    return [
        _finding(
            "orphan_offload_object", "warning", "offload", ledger_id=lid, managed_ledger=ml, object_key=key
        )
        for lid, key in keys
    ]


def restore_s3(sandbox_state: dict[str, Any]) -> None:
    """End the broker's S3 outage: restart the relay on the same port (no-op when it runs)."""
    box = PulsarSandbox(Path(sandbox_state["workdir"]))
    state = box.state()
    if not state.get("pids", {}).get("s3_relay"):
        box.start_s3_relay(state)


def plant(sandbox_state: dict[str, Any]) -> dict[str, Any]:
    """Plant every failure; returns the ground truth (also ``workdir/ground_truth.json``).

    Keys: ``expected`` (finding dicts with :data:`FINDING_KEYS`), ``topics`` (the failure topics, never
    to be loaded again by tests), ``s3_outage`` (True until :func:`restore_s3`), ``planted_at_ms``,
    ``max_age_s`` and ``timings``.
    """
    state = sandbox_state
    web = state["web_url"]
    t_start = time.monotonic()
    ensure_namespace(web, NS_FAIL, KEEP)
    ensure_namespace(web, NS_FAIL_OFFLOAD, KEEP)
    timings: dict[str, float] = {}
    expected: list[dict[str, Any]] = []
    client = make_client(state)
    zk = zk_client(state)
    try:
        # order: offloads need the relay, so the outage comes after them; ages count from the outage
        for name, step in (
            ("retention_overdue", plant_retention_overdue),
            ("orphan_ledger", plant_orphan_by_edit),
            ("delayed_index_buckets", plant_bucket_failures),
            ("stale_compacted_ledger", plant_stale_compacted_ledger),
            ("orphan_ledger_unload_race", plant_unload_race),
            ("missing_offload_object", plant_missing_offload_object),
            ("offload_damage", plant_offload_damage),
            ("orphan_offload_object", plant_orphan_objects_by_outage),
            ("missing_ledger", plant_missing_ledger),
        ):
            t0 = time.monotonic()
            expected.extend(step(state, zk, client))
            timings[name] = round(time.monotonic() - t0, 2)
            if name == "orphan_offload_object":
                t_aged = time.monotonic()
        # a rollover racing any unload above leaks a ledger too (the broker logs it): real findings
        planted = {(f["kind"], f["ledger_id"]) for f in expected}
        expected.extend(f for f in broker_leaks(state, zk) if (f["kind"], f["ledger_id"]) not in planted)
    finally:
        client.close()
        zk.stop()
        zk.close()
    # every planted anomaly (ledger ctime, object last-modified, ledger close time) must be older than
    # MAX_AGE_S before an audit with min_orphan_age_s / retention_grace_s up to that
    rest = MAX_AGE_S + 1 - (time.monotonic() - t_aged)
    if rest > 0:
        time.sleep(rest)
    truth = {
        "expected": sorted(expected, key=lambda f: json.dumps(f, sort_keys=True)),
        "topics": [
            TOPIC_OVERDUE,
            TOPIC_ORPHAN_EDIT,
            TOPIC_BUCKETS,
            TOPIC_COMPACTED_LEAK,
            TOPIC_MISSING_LEDGER,
            TOPIC_DELETED_OUTAGE,
            TOPIC_MISSING_OBJECT,
            TOPIC_DAMAGED,
        ],
        "damaged_objects": damaged_object_keys(expected),
        "s3_outage": True,
        "planted_at_ms": int(time.time() * 1000),
        "max_age_s": MAX_AGE_S,
        "timings": {**timings, "plant_s": round(time.monotonic() - t_start, 2)},
    }
    (Path(state["workdir"]) / "ground_truth.json").write_text(
        json.dumps(truth, indent=2, sort_keys=True) + "\n"
    )
    return truth
