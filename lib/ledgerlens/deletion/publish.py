"""Phase 1: one ``PendingDeleteLedgerInfo`` per approved item to the deletion topic.

``publish`` reads ``approval.json``, checks it against its journal record (the journal must verify,
the record must be there with the same items), creates the deleter's durable subscription on the
deletion and retry topics if it does not exist yet (a topic without a subscription keeps nothing),
then sends the items not yet published for this approval, in batches. Each batch's successful
sends are journaled (``type: published``) before the next batch, so a re-run sends only what is
missing. A send that succeeded but was not journaled (the process died in between) is sent again:
the deleter treats the duplicate as ``already_gone``, so a re-run never has a second effect.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledgerlens.deletion import messages as m
from ledgerlens.deletion.approval import ApprovalRefused, approvals_in, read_approval
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.plan import canonical
from ledgerlens.errors import ConfigError, SourceError

PROBE_TIMEOUT_S = 3.0  # per broker address: the TCP connection, then the answer to a CONNECT
PROTOCOL_VERSION = 20  # what pulsar-client 3.x announces in its CONNECT
CLIENT_LOGGER = "ledgerlens.pulsar-client"  # the C++ client's log (the CLI keeps it quiet unless --debug)
_DEFAULT_PORTS = {"pulsar": 6650, "pulsar+ssl": 6651, "http": 8080, "https": 8443}
_MAX_FRAME = 64 * 1024 * 1024  # far above a broker's maxMessageSize (5 MiB by default)
_CONNECT = 2  # BaseCommand.Type


def service_addresses(service_url: str) -> list[tuple[str, int]]:
    """(host, port) of each broker a service URL names (``pulsar://h1:6650,h2:6650``, ``pulsar+ssl://``,
    ``http(s)://``; the scheme's default port when none is given)."""
    scheme, sep, rest = service_url.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        raise ConfigError(
            f"--service-url {service_url!r}: expected pulsar://host:6650 (or pulsar+ssl://, http://, https://)"
        )
    out: list[tuple[str, int]] = []
    for hostport in rest.split("/", 1)[0].split(","):
        try:
            parts = urlsplit(f"{scheme}://{hostport.strip()}")
            host, port = parts.hostname, parts.port
        except ValueError as e:
            raise ConfigError(f"--service-url {service_url!r}: {hostport!r} is not host:port ({e})") from e
        if not host:
            raise ConfigError(f"--service-url {service_url!r}: no host in {hostport!r}")
        out.append((host, port or _DEFAULT_PORTS[scheme]))
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def connect_frame(client_version: str = "ledgerlens-probe") -> bytes:
    """A framed Pulsar ``BaseCommand{type: CONNECT, connect: {client_version, protocol_version}}`` (no
    credentials: a broker that requires them still answers, with an error)."""
    version = client_version.encode()
    connect = b"\x0a" + _varint(len(version)) + version + b"\x20" + _varint(PROTOCOL_VERSION)
    command = b"\x08" + _varint(_CONNECT) + b"\x12" + _varint(len(connect)) + connect
    return struct.pack(">II", len(command) + 4, len(command)) + command


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _not_pulsar(sock: socket.socket) -> str | None:
    """None when the peer answers a CONNECT with a Pulsar frame (``CONNECTED``, or an error or auth
    challenge from a broker that wants credentials), else what it did instead."""
    sock.sendall(connect_frame())
    head = _read(sock, 8)
    if not head:
        return "closed the connection without answering the Pulsar handshake"
    if head.startswith(b"HTTP"):
        return "answers HTTP, not the Pulsar protocol"
    total, size = struct.unpack(">II", head) if len(head) == 8 else (0, 0)
    if not 0 < size <= total - 4 < _MAX_FRAME:
        return "answers in another protocol than Pulsar's"
    command = _read(sock, min(size, 2))
    if len(command) < 2 or command[0] != 0x08:  # BaseCommand.type, field 1, varint
        return "answers in another protocol than Pulsar's"
    return None


def _socket_problem(e: OSError, timeout: float) -> str:
    if isinstance(e, socket.gaierror):
        return f"unknown host: {e.strerror or e}"
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    return (e.strerror or str(e) or type(e).__name__).lower()


def probe_service_url(service_url: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise SourceError, one line naming the URL, unless a broker of ``service_url`` answers within
    seconds: a TCP connection, then (``pulsar://``) a Pulsar CONNECT answered by a Pulsar frame.

    The client would retry a refused connection until its operation timeout (30 s, then a bare
    ``Timeout``), and a port that accepts connections but never answers (or drops them) for longer
    still. TLS URLs (``pulsar+ssl://``, ``https://``) and HTTP lookup URLs get the TCP check only: their
    handshake needs the client's own TLS settings."""
    addresses = service_addresses(service_url)
    handshake = service_url.strip().lower().startswith("pulsar://")
    problems: list[tuple[str, str]] = []
    for host, port in addresses:
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            problems.append((f"{host}:{port}", f"cannot connect ({_socket_problem(e, timeout)})"))
            continue
        try:
            problem = _not_pulsar(sock) if handshake else None
        except TimeoutError:
            problem = f"did not answer the Pulsar handshake within {timeout:g} s"
        except OSError as e:
            problem = f"dropped the Pulsar handshake ({_socket_problem(e, timeout)})"
        finally:
            sock.close()
        if problem is None:
            return
        problems.append((f"{host}:{port}", f"connected, but it {problem}"))
    if len(problems) == 1:
        problem = problems[0][1]
    else:
        problem = "no broker answers (" + "; ".join(f"{a}: {p}" for a, p in problems) + ")"
    hint = (
        "is the broker up and is this its service URL?"
        if all(p.startswith("cannot connect") for _, p in problems)
        else "is this a broker's service port (pulsar://host:6650)?"
    )
    raise SourceError(f"pulsar {service_url}", f"{problem}; {hint}")


def _new_client(service_url: str, **kwargs: Any) -> Any:
    import pulsar  # pulsar-client: only when a broker is contacted

    # a Python logger gets every C++ line; one that is not UTF-8 (the multi-topic consumer's DEBUG
    # line carries the binary payload) bypasses its level through the client's fallback logger
    # (so the Python logger only when someone set its own level to see the client's chatter)
    py_logger = logging.getLogger(CLIENT_LOGGER)
    wanted = py_logger.level != logging.NOTSET and py_logger.level <= logging.INFO
    logger: Any = py_logger if wanted else pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    try:
        return pulsar.Client(service_url, logger=logger, **kwargs)
    except Exception as e:  # noqa: BLE001 - the client raises several unrelated types
        raise SourceError(f"pulsar {service_url}", f"cannot create a client ({e})") from e


def pulsar_client(service_url: str, *, probe: bool = True, **kwargs: Any) -> Any:
    """A ``pulsar.Client``; auth from the environment only (``$LEDGERLENS_PULSAR_TOKEN``), quiet logs
    (the Python logger ``ledgerlens.pulsar-client``, which the CLI silences unless ``--debug``).

    With ``probe`` (the default), the service URL must answer first (:func:`probe_service_url`):
    an unreachable broker is one line naming it within seconds. The client keeps its usual
    timeouts (30 s per operation)."""
    import pulsar  # pulsar-client: only when a broker is contacted

    if not service_url:
        raise ConfigError("--service-url pulsar://host:6650 is required (or --sandbox DIR)")
    token = os.environ.get("LEDGERLENS_PULSAR_TOKEN")
    if token:
        kwargs.setdefault("authentication", pulsar.AuthenticationToken(token))
    if probe:
        probe_service_url(service_url)
    kwargs.setdefault("operation_timeout_seconds", 30)
    return _new_client(service_url, **kwargs)


def ensure_subscription(client: Any, topic: str, subscription: str = m.SUBSCRIPTION) -> None:
    """Create the deleter's durable Shared subscription on the deletion and retry topics (idempotent)."""
    import pulsar  # pulsar-client: only when a broker is contacted

    consumer = client.subscribe(
        [topic, m.retry_topic(topic)],
        subscription,
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    consumer.close()


def checked_approval(approval_path: str | Path, journal: Journal) -> dict[str, Any]:
    """The approval of ``approval.json``, as recorded in the (verified) journal."""
    approval = read_approval(approval_path)
    recorded = approvals_in(journal.records()).get(str(approval.get("approval_id")))
    if recorded is None:
        raise ApprovalRefused(
            f"{approval_path}: approval {approval.get('approval_id')} is not in journal {journal.path}"
        )
    for k in ("plan_hash", "items", "approver", "reason"):
        if canonical(recorded.get(k)) != canonical(approval.get(k)):
            raise ApprovalRefused(f"{approval_path}: {k} differs from the journal's record of this approval")
    return recorded


def published_items(journal: Journal, approval_id: str) -> set[str]:
    """Item ids already published for an approval (journal ``published`` lines)."""
    return {
        str(r["item_id"])
        for r in journal.records()
        if r.get("type") == "published" and r.get("approval_id") == approval_id
    }


@dataclass
class PublishResult:
    """What one ``publish`` run did."""

    approval_id: str
    plan_hash: str
    total: int
    already: int = 0
    sent: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (item id, error)


def publish(
    approval_path: str | Path,
    journal: Journal,
    client: Any,
    *,
    topic: str = m.DELETION_TOPIC,
    batch_size: int = 500,
    metrics: DeletionMetrics | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PublishResult:
    """Send the approved items not yet published; see the module docstring."""
    approval = checked_approval(approval_path, journal)
    aid, phash = str(approval["approval_id"]), str(approval["plan_hash"])
    done = published_items(journal, aid)
    items = list(approval["items"])
    todo = [i for i in items if i["item_id"] not in done]
    result = PublishResult(aid, phash, len(items), already=len(items) - len(todo))
    if not todo:
        return result
    import pulsar  # pulsar-client: only when a broker is contacted

    try:
        ensure_subscription(client, topic)
    except pulsar.PulsarException as e:
        raise SourceError(
            f"pulsar topic {topic}", f"cannot subscribe {m.SUBSCRIPTION} ({_pulsar_problem(e)})"
        ) from e
    try:
        producer = client.create_producer(
            topic,
            producer_name=None,
            block_if_queue_full=True,
            batching_enabled=False,  # one entry per message: the subscription backlog counts deletions
            max_pending_messages=max(batch_size * 2, 1000),
        )
    except pulsar.PulsarException as e:
        raise SourceError(f"pulsar topic {topic}", f"cannot create a producer ({_pulsar_problem(e)})") from e
    try:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            outcomes = _send_batch(producer, batch, phash, aid, topic)
            ok = [i for i in batch if outcomes[str(i["item_id"])] is None]
            journal.append(
                [
                    {
                        "type": "published",
                        "approval_id": aid,
                        "plan_hash": phash,
                        "item_id": i["item_id"],
                        "action": i["action"],
                        "topic": topic,
                    }
                    for i in ok
                ]
            )
            for i in ok:
                if metrics is not None:
                    metrics.sent.labels(type=_type(i)).inc()
            result.sent += len(ok)
            result.failed += [
                (str(i["item_id"]), str(outcomes[str(i["item_id"])])) for i in batch if i not in ok
            ]
            if progress is not None:
                progress(result.already + result.sent, result.total)
    finally:
        producer.close()
    return result


def _send_batch(
    producer: Any, batch: list[dict[str, Any]], phash: str, aid: str, topic: str
) -> dict[str, str | None]:
    """Send one batch asynchronously; item id -> None (sent) or the error, once every send completed."""
    import pulsar  # pulsar-client: only when a broker is contacted

    outcomes: dict[str, str | None] = {}
    cond = threading.Condition()

    def callback(res: Any, item_id: str) -> None:
        with cond:
            outcomes[item_id] = None if res == pulsar.Result.Ok else str(res)
            cond.notify_all()

    for item in batch:
        msg = m.item_to_message(item, phash)
        iid = str(item["item_id"])
        producer.send_async(
            msg.SerializeToString(),
            lambda res, _mid, iid=iid: callback(res, iid),
            properties=m.properties(item, phash, aid),
        )
    producer.flush()
    with cond:
        if not cond.wait_for(lambda: len(outcomes) == len(batch), timeout=120):
            raise SourceError(f"pulsar topic {topic}", f"{len(batch) - len(outcomes)} sends never completed")
    return outcomes


def _pulsar_problem(e: Exception) -> str:
    """``Timeout``, ``AuthorizationError: <broker's text>``: the client's messages are mostly its class."""
    text = str(e).removeprefix("Pulsar error: ").strip()
    name = type(e).__name__
    return name if not text or text.lower() == name.lower() else f"{name}: {text}"


def _type(item: Mapping[str, Any]) -> str:
    return m.TYPE_NAMES[m.LEDGER_TYPES[item["action"]]]
