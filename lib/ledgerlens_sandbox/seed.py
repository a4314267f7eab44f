"""Real traffic for a :class:`~ledgerlens_sandbox.pulsar.PulsarSandbox`: what a healthy cluster looks like.

Everything goes through ``pulsar-client`` and the admin REST API, so every byte in ZooKeeper and S3 is
the broker's own: tenants and namespaces with retention policies, partitioned and non-partitioned
topics whose names need URL encoding (space, ``%``, unicode), several subscriptions (one never
consumes), schema evolution (AVRO versions over REST, a JSON schema from the client), compaction,
manual offload and threshold offload to S3, and delayed messages sealed into PIP-195 buckets.

Healthy namespaces keep their data (retention 60 min / 100 MB, or infinite where offloaded), so an
audit of a freshly seeded sandbox must report nothing.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from ledgerlens.errors import SandboxError
from ledgerlens.formats.managed_ledger import ManagedLedgerRecord, decode_cursor, decode_managed_ledger
from ledgerlens.formats.names import encode_component, topic_to_managed_ledger
from ledgerlens_sandbox.pulsar import CLUSTER, admin, make_client, topic_path

ML_ROOT = "/managed-ledgers"
BUCKET_PREFIX = "#pulsar.internal.delayed.bucket_"

# names that need encoding in managed-ledger and cursor znodes and in REST paths
TOPIC_ODD = "persistent://ll-app/orders/order events 100% ünïcode"
TOPIC_PARTITIONED = "persistent://ll-app/orders/partitioned topic é"
TOPIC_LIVE = "persistent://ll-app/orders/live"
TOPIC_JSON = "persistent://ll-app/orders/json schema"
TOPIC_AVRO = "persistent://ll-app/orders/avro-evolution"
TOPIC_COMPACTED = "persistent://ll-app/orders/compacted"
TOPIC_OFFLOAD = "persistent://ll-app/offload/offload manual"
TOPIC_TIERED = "persistent://ll-app/tiered/auto offload"
TOPIC_DELAYED = "persistent://ll-app/delayed/delayed"
PARTITIONS = 3
DELAYED_MESSAGES = 300

NAMESPACES: dict[str, dict[str, int]] = {
    "ll-app/orders": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100},
    "ll-app/offload": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
    "ll-app/tiered": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
    "ll-app/delayed": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100},
}


# --- helpers shared with failures.py ---------------------------------------------------------------


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; SandboxError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise SandboxError(f"timed out after {timeout:.0f}s waiting for {what} (last: {str(last)[:300]})")


def zk_client(state: dict[str, Any]) -> Any:
    """A started KazooClient on the sandbox's ZooKeeper."""
    from kazoo.client import KazooClient  # kazoo: only where ZooKeeper is read

    client = KazooClient(hosts=state["zookeeper_hosts"], timeout=30)
    client.start(timeout=30)
    return client


def ml_path(topic: str) -> str:
    """The managed-ledger znode of a (non-partitioned or single-partition) topic."""
    return f"{ML_ROOT}/{topic_to_managed_ledger(topic)}"


def read_ml(zk: Any, topic: str) -> ManagedLedgerRecord:
    """Decode a topic's managed-ledger znode with ledgerlens' decoder."""
    path = ml_path(topic)
    data, _ = zk.get(path)
    return decode_managed_ledger(data, path=path)


def ensure_tenant(web: str, tenant: str) -> None:
    """Create ``tenant`` for the standalone cluster (idempotent)."""
    body = {"adminRoles": [], "allowedClusters": [CLUSTER]}
    admin(web, "PUT", f"/admin/v2/tenants/{tenant}", body, ok=(200, 204, 409))


def ensure_namespace(web: str, namespace: str, retention: dict[str, int] | None) -> None:
    """Create ``tenant/ns`` (idempotent) and set its retention policy."""
    ensure_tenant(web, namespace.split("/")[0])
    admin(web, "PUT", f"/admin/v2/namespaces/{namespace}", ok=(200, 204, 409))
    if retention is not None:
        admin(web, "POST", f"/admin/v2/namespaces/{namespace}/retention", retention)


def produce(
    client: Any,
    topic: str,
    count: int,
    *,
    prefix: str = "m",
    keys: int = 0,
    deliver_after: timedelta | None = None,
    schema: Any = None,
    make: Callable[[int], Any] | None = None,
) -> list[Any]:
    """Send ``count`` messages without batching (one entry each) and return their message ids."""
    kwargs: dict[str, Any] = {"batching_enabled": False, "send_timeout_millis": 60_000}
    if schema is not None:
        kwargs["schema"] = schema
    producer = client.create_producer(topic, **kwargs)
    ids: list[Any] = []
    try:
        for i in range(count):
            send: dict[str, Any] = {}
            if keys:
                send["partition_key"] = f"key-{i % keys}"
            if deliver_after is not None:
                send["deliver_after"] = deliver_after
            payload = make(i) if make else f"{prefix}-{i}".encode()
            ids.append(producer.send(payload, **send))
    finally:
        producer.close()
    return ids


def delayed_schedule(count: int, start_ms: int) -> list[int | None]:
    """Deliver-at times (epoch ms) of a known schedule; None for a plain (not delayed) message.

    Every 10th message is plain; every 37th is due in 30 days (a far-future index that holds its
    bucket alive); the rest are due in groups of three, one minute apart, from ``start_ms`` on.
    """
    out: list[int | None] = []
    for i in range(count):
        if i % 10 == 9:
            out.append(None)
        elif i % 37 == 36:
            out.append(start_ms + 30 * 24 * 3600 * 1000 + i)
        else:
            out.append(start_ms + (i // 3) * 60_000)
    return out


def produce_schedule(
    client: Any, topic: str, count: int, start_in: timedelta = timedelta(hours=2)
) -> list[Any]:
    """Send :func:`delayed_schedule` (one entry per message); returns ``[ledger, entry, deliver_at]``
    for every delayed message, as the broker stored it."""
    start_ms = int((time.time() + start_in.total_seconds()) * 1000)
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    out: list[Any] = []
    try:
        for i, at in enumerate(delayed_schedule(count, start_ms)):
            kwargs = {"deliver_at": at} if at is not None else {}
            mid = producer.send(f"delayed-{i}".encode(), **kwargs)
            if at is not None:
                out.append([mid.ledger_id(), mid.entry_id(), at])
    finally:
        producer.close()
    return out


def consume(client: Any, topic: str, subscription: str, count: int, **kwargs: Any) -> int:
    """Subscribe (from the earliest message), receive and acknowledge up to ``count`` messages."""
    import pulsar  # the Pulsar client: only where messages flow

    kwargs.setdefault("initial_position", pulsar.InitialPosition.Earliest)
    consumer = client.subscribe(topic, subscription, **kwargs)
    got = 0
    try:
        while got < count:
            try:
                msg = consumer.receive(timeout_millis=10_000)
            except pulsar.Timeout:
                break
            consumer.acknowledge(msg)
            got += 1
    finally:
        consumer.close()
    return got


def last_message_id(web: str, topic: str) -> dict[str, Any]:
    """``GET .../lastMessageId`` of a topic."""
    return dict(admin(web, "GET", topic_path(topic) + "/lastMessageId"))


def compact_and_wait(web: str, topic: str, timeout: float = 120) -> dict[str, Any]:
    """Compact ``topic`` (``PUT .../compaction``) and wait for SUCCESS (an ERROR status raises)."""
    admin(web, "PUT", topic_path(topic) + "/compaction", ok=(200, 204))

    def done() -> dict[str, Any] | None:
        st = admin(web, "GET", topic_path(topic) + "/compaction")
        if st.get("status") == "ERROR":
            raise SandboxError(f"compaction of {topic} failed: {st}")
        return st if st.get("status") == "SUCCESS" else None

    return dict(wait_for(done, timeout, f"compaction of {topic}"))


def offload_and_wait(web: str, topic: str, timeout: float = 180, attempts: int = 3) -> dict[str, Any]:
    """Offload everything before the last message (``PUT .../offload``) and wait for SUCCESS.

    A failed offload is triggered again, as an operator would (the local S3 server, moto, now and
    then answers a multipart completion with HTTP 500 under concurrent requests); the broker aborts
    the failed upload itself. Each attempt is recorded in ``attempts``.
    """
    errors: list[str] = []
    for _ in range(attempts):
        mid = last_message_id(web, topic)
        body = {"ledgerId": mid["ledgerId"], "entryId": mid["entryId"], "partitionIndex": -1}
        admin(web, "PUT", topic_path(topic) + "/offload", body, ok=(200, 202, 204))

        def done() -> dict[str, Any] | None:
            status = admin(web, "GET", topic_path(topic) + "/offload")
            return status if status.get("status") in ("SUCCESS", "ERROR") else None

        status = dict(wait_for(done, timeout, f"offload of {topic}"))
        if status.get("status") == "SUCCESS":
            return {**status, "attempts": len(errors) + 1, "errors": errors}
        errors.append(str(status.get("lastError")))
    raise SandboxError(f"offload of {topic} failed {attempts} times: {errors}")


def wait_bookkeeper_deleted(zk: Any, topic: str, ledger_ids: list[int], timeout: float = 120) -> None:
    """Wait until the broker deleted the BookKeeper copies of offloaded ledgers (deletion lag passed)."""

    def check() -> bool:
        rec = read_ml(zk, topic)
        by_id = {li.ledger_id: li for li in rec.ledgers}
        infos = [by_id[i].offload for i in ledger_ids if i in by_id]
        return all(o is not None and o.bookkeeper_deleted for o in infos)

    wait_for(check, timeout, f"bookkeeperDeleted on ledgers {ledger_ids} of {topic}")


def offloaded_ledgers(rec: ManagedLedgerRecord) -> list[int]:
    """Ids of the ledgers whose offload is complete."""
    return [li.ledger_id for li in rec.ledgers if li.offload is not None and li.offload.complete]


def cursor_properties(zk: Any, topic: str, subscription: str) -> dict[str, str]:
    """The string cursor properties (``cursorProperties``) of a subscription's cursor znode."""
    path = f"{ml_path(topic)}/{encode_component(subscription)}"
    data, _ = zk.get(path)
    return dict(decode_cursor(data, path=path).cursor_properties)


# --- the seeding ----------------------------------------------------------------------------------


def _schema_path(topic: str) -> str:
    _, rest = topic.split("://", 1)
    tenant, ns, local = rest.split("/", 2)
    return f"/admin/v2/schemas/{tenant}/{ns}/{urllib.parse.quote(local, safe='')}/schema"


def _avro(version: int) -> str:
    fields: list[dict[str, Any]] = [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]
    if version >= 2:
        fields.append({"name": "quantity", "type": "int", "default": 1})
    if version >= 3:
        fields.append({"name": "note", "type": ["null", "string"], "default": None})
    return json.dumps(
        {"type": "record", "name": "Order", "namespace": "ledgerlens.sandbox", "fields": fields}
    )


def _order_records() -> tuple[type, type]:
    """Two versions of one JSON record ``Order`` (same name, a field added)."""
    from pulsar.schema import Integer, Record, String  # the Pulsar client: only where messages flow

    def v1() -> type:
        class Order(Record):
            id = Integer()
            item = String()

        return Order

    def v2() -> type:
        class Order(Record):
            id = Integer()
            item = String()
            note = String()

        return Order

    return v1(), v2()


def _seed_topics(web: str, client: Any, zk: Any, made: dict[str, Any]) -> None:
    """A non-partitioned topic with an odd name and three subscriptions; a partitioned topic; a live one."""
    import pulsar  # the Pulsar client: only where messages flow

    consume(client, TOPIC_ODD, "sub inactive 100%", 0)  # created, never consumes
    produce(client, TOPIC_ODD, 180)
    n_all = consume(client, TOPIC_ODD, "sub active é", 180)
    n_half = consume(client, TOPIC_ODD, "sub-partial", 90)
    made["subscriptions"][TOPIC_ODD] = {"sub active é": n_all, "sub-partial": n_half, "sub inactive 100%": 0}

    admin(web, "PUT", topic_path(TOPIC_PARTITIONED) + "/partitions", PARTITIONS, ok=(200, 204, 409))
    consume(client, TOPIC_PARTITIONED, "shared sub", 0, consumer_type=pulsar.ConsumerType.Shared)
    produce(client, TOPIC_PARTITIONED, 240)
    made["subscriptions"][TOPIC_PARTITIONED] = {
        "shared sub": consume(
            client, TOPIC_PARTITIONED, "shared sub", 240, consumer_type=pulsar.ConsumerType.Shared
        )
    }
    produce(client, TOPIC_LIVE, 60)


def _seed_schemas(web: str, client: Any, zk: Any, made: dict[str, Any]) -> None:
    """Schema evolution: three AVRO versions over REST, a JSON schema through the client."""
    from pulsar.schema import JsonSchema  # the Pulsar client: only where messages flow

    for v in (1, 2, 3):
        body = {"type": "AVRO", "schema": _avro(v), "properties": {"ledgerlens": f"v{v}"}}
        admin(web, "POST", _schema_path(TOPIC_AVRO), body)
    order_v1, order_v2 = _order_records()
    produce(client, TOPIC_JSON, 5, schema=JsonSchema(order_v1), make=lambda i: order_v1(id=i, item="a"))
    produce(
        client, TOPIC_JSON, 5, schema=JsonSchema(order_v2), make=lambda i: order_v2(id=i, item="b", note="n")
    )
    made["schemas"] = {
        topic: admin(web, "GET", _schema_path(topic).rsplit("/", 1)[0] + "/schemas")
        for topic in (TOPIC_AVRO, TOPIC_JSON)
    }


def _seed_compaction(web: str, client: Any, zk: Any, made: dict[str, Any]) -> None:
    """A compacted topic whose ``__compaction`` cursor znode names its compacted ledger."""
    produce(client, TOPIC_COMPACTED, 150, keys=10)
    compact_and_wait(web, TOPIC_COMPACTED)
    # The compacted ledger id reaches the cursor znode only when the cursor's metadata is persisted
    # there (cursor-ledger rollover or close); until then it lives in the cursor ledger alone. The
    # unload closes the cursor (the topic loads again on the next use).
    admin(web, "PUT", topic_path(TOPIC_COMPACTED) + "/unload", ok=(200, 204))
    path = f"{ml_path(TOPIC_COMPACTED)}/__compaction"

    def compacted_ledger() -> int | None:
        return decode_cursor(zk.get(path)[0], path=path).compacted_ledger_id

    made["compacted_ledger"] = wait_for(compacted_ledger, 120, f"CompactedTopicLedger in {path}")


def _seed_manual_offload(web: str, client: Any, zk: Any, made: dict[str, Any]) -> None:
    """Manual offload, then the BookKeeper copies go after the deletion lag."""
    produce(client, TOPIC_OFFLOAD, 200)
    made["offload_status"] = offload_and_wait(web, TOPIC_OFFLOAD)
    offloaded = offloaded_ledgers(read_ml(zk, TOPIC_OFFLOAD))
    if not offloaded:
        raise SandboxError(f"offload of {TOPIC_OFFLOAD} reported SUCCESS but no ledger is offloaded")
    wait_bookkeeper_deleted(zk, TOPIC_OFFLOAD, offloaded)
    made["offloaded_ledgers"] = {TOPIC_OFFLOAD: offloaded}


def _seed_threshold_offload(web: str, client: Any, zk: Any, made: dict[str, Any]) -> None:
    """Threshold offload (namespace offloadThreshold = 0): two ledgers offloaded on their own."""
    produce(client, TOPIC_TIERED, 200)
    auto = wait_for(
        lambda: (lambda ids: ids if len(ids) >= 2 else None)(offloaded_ledgers(read_ml(zk, TOPIC_TIERED))),
        180,
        f"threshold offload of {TOPIC_TIERED}",
    )
    made["offloaded_ledgers"][TOPIC_TIERED] = list(auto)


def _seed_delayed(web: str, client: Any, zk: Any, made: dict[str, Any]) -> None:
    """Delayed messages spread over several ledgers: buckets are sealed on ledger changes.

    The schedule is known exactly (seed.json "delayed_schedule": ledger, entry, deliver-at), with
    plain messages between them (delivered at once, never indexed) and a few far-future ones.
    """
    import pulsar  # the Pulsar client: only where messages flow

    delayed_consumer = client.subscribe(
        TOPIC_DELAYED, "delayed-sub", consumer_type=pulsar.ConsumerType.Shared
    )
    try:
        schedule = produce_schedule(client, TOPIC_DELAYED, DELAYED_MESSAGES)
        buckets = wait_for(
            lambda: (lambda p: p if len(p) >= 2 else None)(
                {k: v for k, v in cursor_properties(zk, TOPIC_DELAYED, "delayed-sub").items()
                 if k.startswith(BUCKET_PREFIX)}
            ),
            120,
            f"delayed-index buckets on {TOPIC_DELAYED}",
        )  # fmt: skip
    finally:
        delayed_consumer.close()
    made["buckets"] = {TOPIC_DELAYED: buckets}
    made["delayed_schedule"] = {TOPIC_DELAYED: schedule}


# the seeding's steps in order, each timed as made["timings"][key]
_STEPS: tuple[tuple[str, Callable[[str, Any, Any, dict[str, Any]], None]], ...] = (
    ("topics_s", _seed_topics),
    ("schemas_s", _seed_schemas),
    ("compaction_s", _seed_compaction),
    ("manual_offload_s", _seed_manual_offload),
    ("threshold_offload_s", _seed_threshold_offload),
    ("delayed_s", _seed_delayed),
)
_SEEDED_TOPICS = (
    TOPIC_ODD,
    TOPIC_LIVE,
    TOPIC_JSON,
    TOPIC_COMPACTED,
    TOPIC_OFFLOAD,
    TOPIC_TIERED,
    TOPIC_DELAYED,
)


def seed(sandbox_state: dict[str, Any]) -> dict[str, Any]:
    """Write real traffic into a running sandbox; returns (and records in the state dir) what was made."""
    state = sandbox_state
    web = state["web_url"]
    t_start = time.monotonic()
    made: dict[str, Any] = {"namespaces": NAMESPACES, "topics": {}, "subscriptions": {}, "timings": {}}
    for ns, retention in NAMESPACES.items():
        ensure_namespace(web, ns, retention)
    # the client's JSON records have no field defaults: adding a field is FORWARD compatible only
    admin(web, "PUT", "/admin/v2/namespaces/ll-app/orders/schemaCompatibilityStrategy", "FORWARD")
    # threshold offload: every closed ledger of the namespace goes to S3
    admin(web, "PUT", "/admin/v2/namespaces/ll-app/tiered/offloadThreshold", 0)

    client = make_client(state)
    zk = zk_client(state)
    try:
        for key, step in _STEPS:
            t0 = time.monotonic()
            step(web, client, zk, made)
            made["timings"][key] = round(time.monotonic() - t0, 2)
        topics = [*_SEEDED_TOPICS, *(f"{TOPIC_PARTITIONED}-partition-{i}" for i in range(PARTITIONS))]
        for t in topics:
            with_ml = zk.exists(ml_path(t)) is not None
            made["topics"][t] = {"managed_ledger": topic_to_managed_ledger(t), "exists": with_ml}
    finally:
        client.close()
        zk.stop()
        zk.close()
    made["timings"]["seed_s"] = round(time.monotonic() - t_start, 2)
    made["seeded_at_ms"] = int(time.time() * 1000)
    if state.get("workdir"):
        out = Path(state["workdir"]) / "seed.json"
        out.write_text(json.dumps(made, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n")
    return made
