"""``ledgerlens publish`` as an operator runs it (a subprocess) when there is no broker to publish to.

Issue 41: an unreachable broker took 33.6 s and printed ``internal error: Timeout`` under a page of
the C++ client's log. Each case must now fail in seconds with exit status 2 and one line naming the
service URL (or the sandbox), nothing else on either stream:

- a port nothing listens on (connection refused), given by ``--service-url`` or by a Pulsar
  sandbox's ``state.json`` whose broker is down;
- a port that accepts connections and never answers (a listening socket that holds them);
- ``--sandbox`` on a ``sandbox-local`` directory (ZooKeeper + S3 server, no broker at all).

And the check itself lets a broker through: a port that answers the probe's CONNECT with a Pulsar
frame (``CONNECTED``, or the error of a broker that wants credentials) passes.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.plan import build_plan, write_plan
from ledgerlens.deletion.publish import probe_service_url
from ledgerlens_sandbox.orphans import audit_output, fabricate

pytestmark = pytest.mark.integration

LEDGERLENS = str(Path(sys.executable).with_name("ledgerlens"))
ML = "ll-app/ns/persistent/topic"
LIMIT_S = 10.0


@pytest.fixture
def approval(chroot_zk: Any, s3_server: Any, bucket: str, tmp_path: Path) -> list[str]:
    """``--approval FILE --journal FILE`` of a real approval of two orphan ledgers and one offload copy."""
    zk = chroot_zk
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    orphans = fabricate(zk, s3, bucket, managed_ledger=ML, ledgers=2, copies=1, cluster="ours")
    out = audit_output(
        tmp_path / "audit",
        zk,
        s3,
        bucket,
        ledger_ids=orphans.ledger_ids,
        object_keys=orphans.object_keys,
        tenants=["ll-app"],
    )
    plan = build_plan(out)
    assert plan["items"], "the fabricated orphans must be planned"
    plan_path = write_plan(plan, tmp_path / "plan.json")
    journal = tmp_path / "journal.jsonl"
    approval_path = tmp_path / "approval.json"
    approve(
        plan_path,
        journal,
        plan_hash_given=plan["plan_hash"],
        approver="kim",
        reason="INC-41 publish errors",
        forbid_self_approval=False,
        out=approval_path,
    )
    return ["--approval", str(approval_path), "--journal", str(journal)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts every connection and never sends a byte (held open until the test ends)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed at teardown
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(timeout=5)
    for conn in held:
        conn.close()


def _publish(argv: list[str]) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [LEDGERLENS, "publish", *argv], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    elapsed = time.monotonic() - t0
    print(f"ledgerlens publish {' '.join(argv)}: exit {proc.returncode} in {elapsed:.2f} s: {proc.stderr!r}")
    return proc.returncode, proc.stdout, proc.stderr, elapsed


def _one_line(rc: int, out: str, err: str, elapsed: float) -> str:
    assert rc == 2, (rc, out, err)
    assert elapsed < LIMIT_S, f"took {elapsed:.1f} s: {err!r}"
    assert out == "", out  # no client log on stdout either
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ledgerlens publish: error: "), lines[0]
    assert "internal error" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("given_by", ["flag", "sandbox"])
def test_refused_port_fails_fast_in_one_line(approval: list[str], tmp_path: Path, given_by: str) -> None:
    url = f"pulsar://127.0.0.1:{_free_port()}"
    if given_by == "flag":
        argv = [*approval, "--service-url", url]
    else:  # a 'ledgerlens sandbox' (Pulsar standalone) whose broker is down
        sandbox = tmp_path / "pulsar-sandbox"
        sandbox.mkdir()
        (sandbox / "state.json").write_text(json.dumps({"workdir": str(sandbox), "service_url": url}))
        argv = [*approval, "--sandbox", str(sandbox)]
    line = _one_line(*_publish(argv))
    assert url in line and "connection refused" in line, line


def test_silent_port_fails_fast_in_one_line(approval: list[str], silent_port: int) -> None:
    url = f"pulsar://127.0.0.1:{silent_port}"
    line = _one_line(*_publish([*approval, "--service-url", url]))
    assert url in line and "did not answer the Pulsar handshake within" in line, line


def test_sandbox_local_has_no_broker(
    approval: list[str], zookeeper: Any, s3_server: Any, tmp_path: Path
) -> None:
    # what 'ledgerlens sandbox-local up --workdir DIR' records (ledgerlens_sandbox.local.LocalSandbox.up),
    # here for the session's servers: no service_url, no broker
    sandbox = tmp_path / "sandbox-local"
    sandbox.mkdir()
    state = {
        "workdir": str(sandbox),
        "zk_hosts": zookeeper.hosts,
        "zk_port": zookeeper.port,
        "zk_pid": zookeeper.pid,
        "s3_endpoint": s3_server.endpoint_url,
        "s3_port": s3_server.port,
        "s3_pid": s3_server.pid,
        "bucket": "ledgerlens-offload",
        "started_at_ms": int(time.time() * 1000),
    }
    (sandbox / "state.json").write_text(json.dumps(state, indent=2))
    line = _one_line(*_publish([*approval, "--sandbox", str(sandbox)]))
    assert f"sandbox {sandbox} has no Pulsar broker" in line and "sandbox-local" in line, line


def _frame(command: bytes) -> bytes:
    return struct.pack(">II", len(command) + 4, len(command)) + command


def _field(number: int, payload: bytes) -> bytes:  # a length-delimited protobuf field (payload < 128 bytes)
    return bytes([number << 3 | 2, len(payload)]) + payload


# BaseCommand{type: CONNECTED, connected: {server_version, protocol_version: 20}}
CONNECTED = _frame(b"\x08\x03" + _field(3, _field(1, b"Pulsar Server4.0.8") + b"\x10\x14"))
# BaseCommand{type: ERROR, error: {request_id: -1, error: AuthenticationError, message}} (uint64 -1)
AUTH_ERROR = _frame(
    b"\x08\x0e"
    + _field(14, b"\x08" + b"\xff" * 9 + b"\x01" + b"\x10\x03" + _field(3, b"Unable to authenticate"))
)


@pytest.mark.parametrize("answer", [CONNECTED, AUTH_ERROR], ids=["connected", "auth-error"])
def test_probe_passes_a_pulsar_speaking_port(answer: bytes) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    received: list[bytes] = []

    def broker() -> None:
        conn, _ = server.accept()
        with conn:
            total, size = struct.unpack(">II", conn.recv(8))
            received.append(conn.recv(size))
            conn.sendall(answer)

    thread = threading.Thread(target=broker, daemon=True)
    thread.start()
    try:
        probe_service_url(f"pulsar://127.0.0.1:{server.getsockname()[1]}")
    finally:
        thread.join(timeout=5)
        server.close()
    assert received and received[0].startswith(b"\x08\x02\x12")  # BaseCommand{type: CONNECT, connect: ...}
