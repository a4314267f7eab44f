"""The read-only bookie client against small TCP bookies on loopback that misbehave on purpose.

The real bookie of the Pulsar sandbox is read in tests/e2e; these servers cover what a standalone
cluster cannot: a second copy whose entries have bad digests, an address that refuses connections,
a bookie that accepts and never answers, and a bookie that only speaks the pre-v3 protocol.
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledgerlens.errors import BookieUnavailableError, EntryReadError
from ledgerlens.formats import bookie_wire as w
from ledgerlens.formats.bookkeeper import LedgerMetadata
from ledgerlens.proto import bookie_protocol_pb2 as pb
from ledgerlens.settings.config import BookieSource
from ledgerlens.sources.bookie import BookieClient, LedgerHandle

pytestmark = pytest.mark.integration

LEDGER = 41


def _entries(n: int, digest: str = "CRC32C") -> dict[int, bytes]:
    out, length = {}, 0
    for e in range(n):
        payload = f"entry-{e}".encode() * 20
        length += len(payload)
        out[e] = w.encode_entry(digest, LEDGER, e, e - 1, length, payload)
    return out


class FakeBookie(socketserver.ThreadingTCPServer):
    """Serves ``entries`` of ledger 41; ``corrupt`` entries come back with one payload byte flipped."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, entries: dict[int, bytes], *, corrupt: set[int] = frozenset(), silent: bool = False,
                 v2_only: bool = False, tls: ssl.SSLContext | None = None) -> None:  # fmt: skip
        self.entries, self.corrupt, self.silent, self.v2_only = entries, set(corrupt), silent, v2_only
        self.tls = tls  # answers START_TLS, then speaks TLS on the same connection
        self.tls_sessions = 0
        self.requests = 0
        self.connections = 0
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"

    def body(self, entry_id: int) -> bytes | None:
        if entry_id == -1:
            entry_id = max(self.entries)
        body = self.entries.get(entry_id)
        if body is not None and entry_id in self.corrupt:
            body = body[:-1] + bytes([body[-1] ^ 0xFF])
        return body


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        srv: FakeBookie = self.server  # type: ignore[assignment]
        srv.connections += 1
        sock: socket.socket = self.request
        f = sock.makefile("rb")
        while True:
            head = f.read(4)
            if len(head) < 4:
                return
            data = f.read(struct.unpack(">i", head)[0])
            srv.requests += 1
            if srv.silent:
                continue
            is_v2 = data[0] == 2  # v2 header word: protocol version 2 in the top byte
            if srv.v2_only and not is_v2:
                return  # a pre-v3 bookie drops what it cannot parse
            if is_v2:
                _, lid, eid = struct.unpack(">iqq", data[:20])
                body = srv.body(eid) if lid == LEDGER else None
                rc = 0 if body is not None else 2
                real = eid if eid >= 0 else max(srv.entries)
                out = struct.pack(">iiqq", (2 << 24) | (2 << 16), rc, lid, real) + (body or b"")
            else:
                req = pb.Request()
                req.ParseFromString(data)
                resp = pb.Response(status=pb.EOK)
                resp.header.CopyFrom(req.header)
                if req.header.operation == pb.START_TLS:
                    if srv.tls is None:
                        return
                    out = resp.SerializeToString()
                    sock.sendall(struct.pack(">i", len(out)) + out)
                    try:
                        sock = srv.tls.wrap_socket(sock, server_side=True)
                    except (ssl.SSLError, OSError):
                        return  # the client refused our certificate
                    f = sock.makefile("rb")
                    srv.tls_sessions += 1
                    continue
                r = req.readRequest
                assert not r.HasField("flag"), "a reader must never fence"
                body = srv.body(r.entryId) if r.ledgerId == LEDGER else None
                resp.readResponse.ledgerId = r.ledgerId
                resp.readResponse.entryId = r.entryId
                resp.readResponse.status = pb.EOK if body is not None else pb.ENOENTRY
                if body is not None:
                    resp.readResponse.body = body
                out = resp.SerializeToString()
            sock.sendall(struct.pack(">i", len(out)) + out)


@contextmanager
def bookies(*servers: FakeBookie) -> Iterator[list[FakeBookie]]:
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    try:
        yield list(servers)
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def refused_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # closed again: connections are refused


def handle(members: list[str], n: int, *, state: str = "CLOSED", wq: int | None = None) -> LedgerHandle:
    md = LedgerMetadata(
        format_version=3, state=state, ensemble_size=len(members), write_quorum=wq or len(members),
        ack_quorum=wq or len(members), length=0, last_entry_id=n - 1 if state == "CLOSED" else -1,
        ctime_ms=0, digest_type="CRC32C", ensembles=((0, tuple(members)),),
    )  # fmt: skip
    return LedgerHandle(LEDGER, md)


FAST = BookieSource(connect_timeout_s=1.0, read_timeout_s=1.0, max_in_flight=16)


def test_pipelined_read_on_one_pooled_connection():
    entries = _entries(200)
    with bookies(FakeBookie(entries)) as (b,), BookieClient(FAST) as client:
        got = list(client.read_entries(handle([b.address], 200), 0, 199))
        again = client.read_entry(handle([b.address], 200), 5)
    assert [e.entry_id for e in got] == list(range(200))
    assert got[7].payload == b"entry-7" * 20 and again.payload == b"entry-5" * 20
    assert b.connections == 1 and b.requests == 201
    assert client.stats.entries == 201 and client.stats.failovers == 0


def test_bad_digest_moves_to_the_next_bookie_of_the_write_set():
    entries = _entries(10)
    bad, good = FakeBookie(entries, corrupt={0, 2, 4}), FakeBookie(entries)
    with bookies(bad, good), BookieClient(FAST) as client:
        # ensemble [bad, good], write quorum 2: even entries go to `bad` first, odd ones to `good`
        got = list(client.read_entries(handle([bad.address, good.address], 10), 0, 9))
    assert [e.payload for e in got] == [f"entry-{i}".encode() * 20 for i in range(10)]
    assert client.stats.failovers == 3 and client.stats.errors == {"EntryDigestError": 3}


def test_every_copy_corrupt_is_an_error_naming_ledger_entry_and_bookies():
    entries = _entries(4)
    one, two = FakeBookie(entries, corrupt={2}), FakeBookie(entries, corrupt={2})
    with bookies(one, two), BookieClient(FAST) as client:
        with pytest.raises(EntryReadError) as info:
            list(client.read_entries(handle([one.address, two.address], 4), 0, 3))
    err = info.value
    assert err.ledger_id == LEDGER and err.entry_id == 2 and err.corrupt
    text = str(err)
    assert "ledger 41 entry 2" in text and one.address in text and two.address in text
    assert "digest mismatch" in text and "\n" not in text


def test_refused_bookie_fails_over_and_names_its_address():
    entries = _entries(6)
    dead = refused_address()
    with bookies(FakeBookie(entries)) as (good,), BookieClient(FAST) as client:
        t0 = time.monotonic()
        got = list(client.read_entries(handle([dead, good.address], 6), 0, 5))
        assert len(got) == 6 and client.stats.errors == {"BookieUnavailableError": 3}
        with pytest.raises(EntryReadError) as info:
            client.read_entry(handle([dead], 6, wq=1), 0)
        assert time.monotonic() - t0 < 5
    assert f"bookie {dead}" in str(info.value) and "connect failed" in str(info.value)
    assert isinstance(info.value.attempts[0], BookieUnavailableError) and not info.value.corrupt


def test_silent_bookie_times_out_with_its_address():
    silent = FakeBookie(_entries(3), silent=True)
    with bookies(silent), BookieClient(BookieSource(connect_timeout_s=1, read_timeout_s=1.5)) as client:
        t0 = time.monotonic()
        with pytest.raises(EntryReadError) as info:
            client.read_entry(handle([silent.address], 3), 1)
        took = time.monotonic() - t0
    assert 1.4 <= took < 4, took
    assert f"bookie {silent.address}" in str(info.value) and "no answer within 1.5s" in str(info.value)


def test_v2_fallback_when_v3_is_refused():
    entries = _entries(5)
    with bookies(FakeBookie(entries, v2_only=True)) as (old,), BookieClient(FAST) as client:
        got = list(client.read_entries(handle([old.address], 5), 0, 4))
        assert [e.entry_id for e in got] == [0, 1, 2, 3, 4] and client.stats.v2_fallbacks == 1
        assert client.read_entry(handle([old.address], 5), 3).payload == b"entry-3" * 20
        assert client.stats.v2_fallbacks == 1  # remembered per bookie


def test_open_ledger_last_entry_without_fencing():
    entries = _entries(7)
    with bookies(FakeBookie(entries)) as (b,), BookieClient(FAST) as client:
        last = client.last_entry(handle([b.address], 7, state="OPEN"))
        with pytest.raises(Exception, match="only closed ledgers"):
            list(client.read_entries(handle([b.address], 7, state="OPEN"), 0, 1))
    # one bookie holds entry 6 and the ack quorum is 1: the add succeeded, recovery would keep it
    assert last is not None and last.entry_id == 6 and last.payload == b"entry-6" * 20


def _self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), made with the system's openssl."""
    cert, key = tmp / f"{name}.pem", tmp / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_reads_over_start_tls_and_refuses_an_unknown_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "bookie")
    other, _ = _self_signed(tmp_path, "other-ca")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    entries = _entries(5)
    with bookies(FakeBookie(entries, tls=server)) as (b,):
        with BookieClient(
            BookieSource(connect_timeout_s=2, read_timeout_s=2, tls_ca_file=str(cert))
        ) as client:
            got = list(client.read_entries(handle([b.address], 5), 0, 4))
        assert [e.payload for e in got] == [f"entry-{i}".encode() * 20 for i in range(5)]
        assert b.tls_sessions == 1
        untrusted = BookieSource(connect_timeout_s=2, read_timeout_s=2, tls_ca_file=str(other))
        with BookieClient(untrusted) as client, pytest.raises(EntryReadError) as info:
            client.read_entry(handle([b.address], 5), 0)
    text = str(info.value)
    assert f"bookie {b.address}" in text and "TLS handshake failed" in text and "\n" not in text
    assert b.tls_sessions == 1  # nothing was served without a verified certificate
