"""A read-only BookKeeper client: entries of a ledger read from its bookies (FORMATS.md section 9).

:class:`BookieClient` reads entries the way a BookKeeper reader does without ever becoming a writer:
the bookies of an entry come from the ledger's ensembles (the segment that covers it) and its write
set (``(entry + i) % ensembleSize`` for ``i < writeQuorum``); requests are pipelined on one pooled
connection per bookie (protocol v3, the pre-v3 binary read as fallback where v3 is refused); every
entry's digest (CRC32C, CRC32, HMAC-SHA1 with the ledger password, DUMMY) and ids are verified; a
bookie that is unreachable, silent past the read timeout, lacks the entry or returns a bad digest
is skipped for the next bookie of the write set. Nothing here sets the fence flag, sends a master
key, recovers or writes: open ledgers are read only up to what is durable (see :meth:`last_entry`).

Bookie ids are ``host:port`` on most clusters; others are resolved through the bookie's
registration ``/ledgers/available/<id>`` (``BookieServiceInfoFormat``, the ``bookie-rpc``
endpoint) when a ZooKeeper client is given.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgerlens.errors import (
    BookieError,
    BookieUnavailableError,
    DecodeError,
    EntryDigestError,
    EntryNotFoundError,
    EntryReadError,
)
from ledgerlens.formats import bookie_wire as w
from ledgerlens.formats import delayed_bucket as db
from ledgerlens.formats._proto import parse_binary
from ledgerlens.formats.bookkeeper import LedgerMetadata, decode_ledger_metadata
from ledgerlens.formats.managed_ledger import (
    COMPACTED_LEDGER_PROPERTY,
    decode_cursor,
    decode_position_info,
)
from ledgerlens.formats.paths import ledger_path
from ledgerlens.proto import bookkeeper_pb2 as bkpb
from ledgerlens.settings.config import BookieSource

__all__ = ["BookieClient", "BookieStats", "LedgerHandle", "resolve_bookie"]

_CHUNK = 4096  # entries planned at once by read_entries (bounds memory, keeps the pipeline full)
# A bookie whose connect failed (refused, timed out, no address) is not dialled again for this long:
# every ledger on it fails at once instead of paying the connect timeout again per ledger and entry.
DOWN_FOR_S = 30.0


@dataclass(frozen=True)
class LedgerHandle:
    """What a reader needs to know about a ledger: its id and decoded metadata."""

    ledger_id: int
    metadata: LedgerMetadata

    @property
    def digest_type(self) -> str:
        # BookKeeper's default when the metadata predates digest types (v1/v2 without the field)
        return self.metadata.digest_type or "CRC32"


@dataclass
class BookieStats:
    """Counters of one client: requests, entries, bytes, failovers, connections and failed connects."""

    requests: int = 0
    entries: int = 0
    bytes: int = 0
    failovers: int = 0
    connections: int = 0
    connect_failures: int = 0  # connects tried and failed (a bookie down is not dialled again at once)
    v2_fallbacks: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        out = {k: v for k, v in vars(self).items() if isinstance(v, int)}
        out.update({f"errors.{k}": v for k, v in self.errors.items()})
        return out


def _split_address(text: str) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def resolve_bookie(bookie_id: str, zk: Any = None, ledgers_root: str = "/ledgers") -> tuple[str, int]:
    """The ``(host, port)`` to connect to for a bookie id.

    With ``zk`` (a started kazoo client), the bookie's registration under ``<root>/available`` (or
    ``available/readonly``) is read and its ``bookie-rpc`` endpoint used when it has one; otherwise
    the id itself must be ``host:port``.

    Raises
    ------
    BookieUnavailableError
        The id is not ``host:port`` and no registration names an address.
    """
    if zk is not None:
        for sub in ("available", "available/readonly"):
            path = f"{ledgers_root.rstrip('/')}/{sub}/{bookie_id}"
            try:
                data, _ = zk.get(path)
            except Exception:  # noqa: BLE001 - absent or unreadable registration: try the id itself
                continue
            if not data:
                continue
            try:
                info = parse_binary(bkpb.BookieServiceInfoFormat, data, where=path)
            except DecodeError:
                continue
            rpc = [e for e in info.endpoints if e.protocol == "bookie-rpc" or e.id == "bookie"]
            if rpc:
                return rpc[0].host, int(rpc[0].port)
    parsed = _split_address(bookie_id)
    if parsed is None:
        raise BookieUnavailableError(
            bookie_id, None, None, "not host:port and no /ledgers/available registration names an address"
        )
    return parsed


class _Connection:
    """One TCP (optionally TLS) connection to a bookie, pipelining READ_ENTRY requests."""

    def __init__(
        self, bookie: str, address: tuple[str, int], source: BookieSource, protocol: str, stats: BookieStats
    ) -> None:
        self.bookie = bookie
        self.address = address
        self.source = source
        self.protocol = protocol  # "v3" or "v2"
        self.stats = stats
        self._txn = itertools.count(1)
        self._buf = bytearray()
        label = f"{address[0]}:{address[1]}"
        self.label = label if label == bookie else f"{bookie} ({label})"
        try:
            self.sock = socket.create_connection(address, timeout=source.connect_timeout_s)
        except TimeoutError as e:
            raise BookieUnavailableError(
                self.label, None, None, f"connect timed out after {source.connect_timeout_s:g}s"
            ) from e
        except OSError as e:
            raise BookieUnavailableError(self.label, None, None, f"connect failed: {e.strerror or e}") from e
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(source.read_timeout_s)
        stats.connections += 1
        if source.tls_ca_file:
            self._start_tls()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    # framing
    def _recv_exact(self, n: int, ledger_id: int | None, entry_id: int | None) -> bytes:
        while len(self._buf) < n:
            try:
                chunk = self.sock.recv(max(65536, n - len(self._buf)))
            except OSError as e:
                raise self._lost(e, ledger_id, entry_id, "no answer within", "read failed") from e
            if not chunk:
                raise BookieUnavailableError(
                    self.label, ledger_id, entry_id, "connection closed by the bookie"
                )
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _recv_frame(self, ledger_id: int | None, entry_id: int | None) -> bytes:
        (size,) = w.FRAME_HEADER.unpack(self._recv_exact(4, ledger_id, entry_id))
        if size < 0 or size > w.MAX_FRAME_BYTES:
            raise BookieUnavailableError(self.label, ledger_id, entry_id, f"implausible frame length {size}")
        data = self._recv_exact(size, ledger_id, entry_id)
        self.stats.bytes += size + 4
        return data

    def _send(self, data: bytes, ledger_id: int | None, entry_id: int | None) -> None:
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise self._lost(e, ledger_id, entry_id, "send blocked for", "send failed") from e

    def _lost(
        self, e: OSError, ledger_id: int | None, entry_id: int | None, timed_out: str, failed: str
    ) -> BookieUnavailableError:
        """The error of a read or send that failed: ``timed_out`` the read timeout on a timeout, else
        ``failed``: what the socket said."""
        if isinstance(e, TimeoutError):
            return BookieUnavailableError(
                self.label, ledger_id, entry_id, f"{timed_out} {self.source.read_timeout_s:g}s"
            )
        return BookieUnavailableError(self.label, ledger_id, entry_id, f"{failed}: {e.strerror or e}")

    def _start_tls(self) -> None:
        self._send(w.start_tls_request_v3(next(self._txn)), None, None)
        resp = w.parse_response_v3(self._recv_frame(None, None), where=f"bookie {self.label}")
        if resp.status != 0:
            raise BookieUnavailableError(self.label, None, None, f"START_TLS refused ({resp.status})")
        ctx = ssl.create_default_context(cafile=self.source.tls_ca_file)
        try:
            self.sock = ctx.wrap_socket(self.sock, server_hostname=self.address[0])
        except (ssl.SSLError, OSError) as e:
            raise BookieUnavailableError(self.label, None, None, f"TLS handshake failed: {e}") from e

    # reads
    def read(self, ledger_id: int, entry_ids: Sequence[int]) -> Iterator[tuple[int, w.ReadReply]]:
        """Pipelined READ_ENTRY of ``entry_ids``: (requested id, reply) in arrival order.

        At most ``max_in_flight`` requests are outstanding. Raises BookieUnavailableError (connection,
        timeout) or DecodeError (an answer in another protocol).
        """
        window = max(1, self.source.max_in_flight)
        todo = iter(entry_ids)
        pending: dict[Any, int] = {}
        where = f"bookie {self.label}: ledger {ledger_id}"
        while True:
            batch: list[bytes] = []
            for entry_id in itertools.islice(todo, window - len(pending)):
                if self.protocol == "v3":
                    txn = next(self._txn)
                    pending[txn] = entry_id
                    batch.append(w.read_request_v3(txn, ledger_id, entry_id))
                else:
                    pending[(ledger_id, entry_id)] = entry_id
                    batch.append(w.read_request_v2(ledger_id, entry_id))
            if batch:
                self.stats.requests += len(batch)
                self._send(b"".join(batch), ledger_id, next(iter(pending.values())))
            if not pending:
                return
            data = self._recv_frame(ledger_id, next(iter(pending.values())))
            if self.protocol == "v3":
                reply = w.read_reply_v3(w.parse_response_v3(data, where=where))
                key: Any = reply.txn_id
            else:
                reply = w.read_reply_v2(data, where=where)
                key = (reply.ledger_id, reply.entry_id)
                if key not in pending and (ledger_id, w.LAST_ADD_CONFIRMED) in pending:
                    key = (ledger_id, w.LAST_ADD_CONFIRMED)
            if key not in pending:
                raise DecodeError(where, f"answer to a request never sent ({key})")
            yield pending.pop(key), reply


class BookieClient:
    """Read entries of closed ledgers (and the durable end of open ones) from their bookies.

    Parameters
    ----------
    source : BookieSource
        Timeouts, pipelining depth, protocol, TLS.
    zk : kazoo client, optional
        Resolves bookie ids that are not ``host:port`` through ``/ledgers/available``.
    addresses : dict, optional
        Bookie id -> ``host:port`` overrides (tests, NAT).
    """

    def __init__(
        self,
        source: BookieSource | None = None,
        *,
        zk: Any = None,
        ledgers_root: str = "/ledgers",
        addresses: dict[str, str] | None = None,
    ) -> None:
        self.source = source or BookieSource()
        if self.source.protocol not in ("auto", "v3", "v2"):
            raise ValueError(f"protocol {self.source.protocol!r}: expected auto, v3 or v2")
        self.zk = zk
        self.ledgers_root = ledgers_root
        self.addresses = dict(addresses or {})
        self.stats = BookieStats()
        self._pool: dict[str, _Connection] = {}
        self._protocol: dict[str, str] = {}
        self._resolved: dict[str, tuple[str, int]] = {}
        self._down: dict[str, tuple[float, BookieUnavailableError]] = {}  # bookie -> (when, why)

    def __enter__(self) -> BookieClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every pooled connection."""
        for conn in self._pool.values():
            conn.close()
        self._pool.clear()

    # connections
    def _address(self, bookie: str) -> tuple[str, int]:
        if bookie not in self._resolved:
            override = self.addresses.get(bookie)
            parsed = _split_address(override) if override else None
            self._resolved[bookie] = parsed or resolve_bookie(bookie, self.zk, self.ledgers_root)
        return self._resolved[bookie]

    def _connection(self, bookie: str) -> _Connection:
        """The pooled connection to ``bookie``; a bookie whose connect failed less than
        :data:`DOWN_FOR_S` ago fails again at once, with the same problem, without being dialled."""
        conn = self._pool.get(bookie)
        if conn is not None:
            return conn
        down = self._down.get(bookie)
        if down is not None and time.monotonic() - down[0] < DOWN_FOR_S:
            raise BookieUnavailableError(down[1].bookie, None, None, down[1].problem)
        protocol = self._protocol.get(bookie, "v2" if self.source.protocol == "v2" else "v3")
        try:
            conn = _Connection(bookie, self._address(bookie), self.source, protocol, self.stats)
        except BookieUnavailableError as e:
            self.stats.connect_failures += 1
            self._down[bookie] = (time.monotonic(), e)
            raise
        self._down.pop(bookie, None)
        self._pool[bookie] = conn
        return conn

    def _drop(self, bookie: str) -> None:
        conn = self._pool.pop(bookie, None)
        if conn is not None:
            conn.close()

    def _count(self, err: BookieError) -> None:
        name = type(err).__name__
        self.stats.errors[name] = self.stats.errors.get(name, 0) + 1

    def _replies(
        self, bookie: str, ledger_id: int, entry_ids: Sequence[int]
    ) -> Iterator[tuple[int, w.ReadReply]]:
        """Replies of one bookie, falling back to the v2 read once when ``auto`` and v3 is refused."""
        conn = self._connection(bookie)
        got = 0
        try:
            for pair in conn.read(ledger_id, entry_ids):
                got += 1
                yield pair
        except (BookieUnavailableError, DecodeError) as e:
            self._drop(bookie)
            refused = got == 0 and conn.protocol == "v3" and self.source.protocol == "auto"
            if not refused or (isinstance(e, BookieUnavailableError) and "no answer" in e.problem):
                raise
            # the bookie closed the connection or answered in another protocol: try the v2 read
            self._protocol[bookie] = "v2"
            self.stats.v2_fallbacks += 1
            yield from self._replies(bookie, ledger_id, entry_ids)

    def _read_group(
        self, ledger: LedgerHandle, bookie: str, entry_ids: Sequence[int]
    ) -> Iterator[tuple[int, w.Entry | BookieError]]:
        """(requested entry id, verified entry or the error) for each id, from one bookie."""
        lid = ledger.ledger_id
        label = bookie
        answered: set[int] = set()
        try:
            label = self._connection(bookie).label
            for eid, reply in self._replies(bookie, lid, entry_ids):
                answered.add(eid)
                if reply.status != "EOK":
                    err_cls = EntryNotFoundError if reply.status in ("ENOENTRY", "ENOLEDGER") else BookieError
                    yield eid, err_cls(label, lid, eid, f"bookie answered {reply.status}")
                    continue
                if reply.body is None:
                    yield eid, BookieError(label, lid, eid, "EOK without an entry body")
                    continue
                try:
                    entry = w.verify_entry(
                        reply.body,
                        ledger_id=lid,
                        entry_id=eid,
                        digest_type=ledger.digest_type,
                        password=ledger.metadata.password,
                        bookie=label,
                    )
                except EntryDigestError as e:
                    yield eid, e
                    continue
                self.stats.entries += 1
                yield eid, entry
        except BookieError as e:
            for eid in entry_ids:
                if eid not in answered:
                    yield eid, type(e)(e.bookie, lid, eid, e.problem)
        except DecodeError as e:
            self._drop(bookie)
            for eid in entry_ids:
                if eid not in answered:
                    yield eid, BookieError(label, lid, eid, f"undecodable answer: {e.problem}")

    def read_entries(
        self, ledger: LedgerHandle, first: int, last: int, *, allow_open: bool = False
    ) -> Iterator[w.Entry]:
        """Entries ``first..last`` of a ledger, in order, verified.

        Closed ledgers only, unless ``allow_open`` (then the caller bounds ``last`` by what is
        durable, e.g. :meth:`last_entry`): a reader never fences or recovers a ledger.

        Raises
        ------
        EntryReadError
            No bookie of an entry's write set gave a good copy (``attempts`` says why, per bookie).
        BookieError
            The ledger is not closed, or ``first..last`` lies beyond its last entry.
        """
        md = ledger.metadata
        lid = ledger.ledger_id
        if md.state != "CLOSED" and not allow_open:
            raise BookieError("-", lid, None, f"ledger is {md.state}; only closed ledgers are read")
        if md.state == "CLOSED" and last > md.last_entry_id:
            raise BookieError(
                "-", lid, last, f"beyond the last entry {md.last_entry_id} of the closed ledger"
            )
        if first > last:
            return
        for start in range(first, last + 1, _CHUNK):
            ids = list(range(start, min(last, start + _CHUNK - 1) + 1))
            yield from self._read_chunk(ledger, ids)

    def _read_chunk(self, ledger: LedgerHandle, ids: list[int]) -> Iterator[w.Entry]:
        md = ledger.metadata
        sets = {e: w.write_set(md.ensembles, md.write_quorum, e) for e in ids}
        done: dict[int, w.Entry] = {}
        attempts: dict[int, list[BookieError]] = defaultdict(list)
        todo = list(ids)
        round_ = 0
        while todo:
            groups: dict[str, list[int]] = defaultdict(list)
            for e in todo:
                ws = sets[e]
                if round_ >= len(ws):
                    raise EntryReadError(ledger.ledger_id, e, attempts[e])
                groups[ws[round_]].append(e)
            failed: list[int] = []
            for bookie, group in groups.items():
                for eid, outcome in self._read_group_ordered(ledger, bookie, group):
                    if isinstance(outcome, BookieError):
                        self._count(outcome)
                        attempts[eid].append(outcome)
                        failed.append(eid)
                    else:
                        done[eid] = outcome
            if failed:
                self.stats.failovers += len(failed)
            todo = sorted(failed)
            round_ += 1
        for e in ids:
            yield done[e]

    def _read_group_ordered(
        self, ledger: LedgerHandle, bookie: str, group: list[int]
    ) -> Iterator[tuple[int, w.Entry | BookieError]]:
        try:
            conn = self._connection(bookie)
        except BookieError as e:
            for eid in group:
                yield eid, type(e)(e.bookie, ledger.ledger_id, eid, e.problem)
            return
        del conn
        yield from self._read_group(ledger, bookie, group)

    def read_entry(self, ledger: LedgerHandle, entry_id: int, *, allow_open: bool = False) -> w.Entry:
        """One verified entry (see :meth:`read_entries`)."""
        return next(iter(self.read_entries(ledger, entry_id, entry_id, allow_open=allow_open)))

    def last_entry(self, ledger: LedgerHandle) -> w.Entry | None:
        """The last durable entry of a ledger, or None when it has none.

        Closed: ``lastEntryId`` of the metadata. Open or in recovery: every bookie of the last
        ensemble is asked for the last entry it stores (READ_ENTRY of entry -1, no fencing); the
        newest one is used when it is confirmed (its id is at most the highest last-add-confirmed
        any bookie holds) or stored on at least ack-quorum bookies of its write set (the writer's
        add succeeded: recovery would keep it); otherwise the newest confirmed entry is read.
        """
        md = ledger.metadata
        if md.state == "CLOSED":
            if md.last_entry_id < 0:
                return None
            return self.read_entry(ledger, md.last_entry_id)
        _, members = max(md.ensembles)
        seen: dict[str, w.Entry] = {}
        errors: list[BookieError] = []
        for bookie in dict.fromkeys(members):
            for _, outcome in self._read_group_ordered(ledger, bookie, [w.LAST_ADD_CONFIRMED]):
                if isinstance(outcome, BookieError):
                    errors.append(outcome)
                else:
                    seen[bookie] = outcome
        if not seen:
            if errors and all(isinstance(e, EntryNotFoundError) for e in errors):
                return None
            raise EntryReadError(ledger.ledger_id, w.LAST_ADD_CONFIRMED, errors)
        lac = max(e.last_add_confirmed for e in seen.values())
        newest = max(seen.values(), key=lambda e: e.entry_id)
        holders = [b for b in w.write_set(md.ensembles, md.write_quorum, newest.entry_id) if b in seen]
        holding = sum(1 for b in holders if seen[b].entry_id >= newest.entry_id)
        if newest.entry_id <= lac or holding >= md.ack_quorum:
            return newest
        if lac < 0:
            return None
        return self.read_entry(ledger, lac, allow_open=True)


def read_ledgers(
    client: BookieClient, ledgers: Iterable[tuple[LedgerHandle, int, int]]
) -> Iterator[tuple[LedgerHandle, list[w.Entry] | BookieError]]:
    """Entries ``first..last`` of each ledger, or the error that stopped its read (never raises)."""
    for handle, first, last in ledgers:
        try:
            yield handle, list(client.read_entries(handle, first, last))
        except BookieError as e:
            yield handle, e


# --- inventory rows ---------------------------------------------------------------------------------


def _error_kind(err: BookieError) -> str:
    if isinstance(err, EntryReadError):
        if err.corrupt:
            return "corrupt"
        if err.attempts and all(isinstance(a, EntryNotFoundError) for a in err.attempts):
            return "missing"
        return "unavailable"
    if isinstance(err, EntryDigestError):
        return "corrupt"
    if isinstance(err, EntryNotFoundError):
        return "missing"
    return "unavailable"


def _ledger_handles(reader: Any, ledgers_root: str, ledger_ids: Iterable[int]) -> dict[int, Any]:
    """Ledger id -> LedgerHandle, or the problem text when its metadata is absent or undecodable."""
    paths = {ledger_path(i, ledgers_root): i for i in dict.fromkeys(ledger_ids)}
    out: dict[int, Any] = {}
    for r in reader.get(list(paths)):
        lid = paths[r.path]
        if r.error is not None:
            out[lid] = f"ledger metadata {r.path}: {r.error}"
        elif r.data is None:
            out[lid] = f"no ledger metadata at {r.path}"
        else:
            try:
                out[lid] = LedgerHandle(lid, decode_ledger_metadata(r.data, path=r.path))
            except DecodeError as e:
                out[lid] = str(e)
    for path, lid in paths.items():
        out.setdefault(lid, f"no ledger metadata at {path}")
    return out


def scan_bucket_snapshots(
    client: BookieClient, reader: Any, items: Iterable[dict[str, Any]], ledgers_root: str = "/ledgers"
) -> Iterator[dict[str, Any]]:
    """``bucket_snapshots`` rows (``schemas.BUCKET_SNAPSHOTS``) for cursor bucket properties.

    ``items`` carry ``managed_ledger, tenant, namespace, cursor, path, property_key, ledger_id``.
    ``reader`` is a :class:`~ledgerlens.sources.zk_client.PipelinedReader` for the ledger metadata.
    A snapshot ledger that is absent from BookKeeper gives ``error_kind = missing`` (the audit's
    ``missing_ledger`` reports it); entries that do not decode or fail their digest on every
    bookie give ``corrupt`` with the entry id; unreachable bookies ``unavailable``.
    """
    items = list(items)
    handles = _ledger_handles(reader, ledgers_root, (int(i["ledger_id"]) for i in items))
    for item in items:
        lid = int(item["ledger_id"])
        key = db.parse_bucket_key(item["property_key"] or "")
        row: dict[str, Any] = {
            **{k: item.get(k) for k in ("managed_ledger", "tenant", "namespace", "cursor", "path")},
            "property_key": item["property_key"],
            "start_ledger_id": key.start_ledger_id if key else None,
            "end_ledger_id": key.end_ledger_id if key else None,
            "ledger_id": lid,
            "ledger_path": ledger_path(lid, ledgers_root),
        }
        h = handles.get(lid)
        if not isinstance(h, LedgerHandle):
            missing = isinstance(h, str) and h.startswith("no ledger metadata")
            yield {**row, "error_kind": "missing" if missing else "unavailable", "error": h}
            continue
        md = h.metadata
        row.update(ledger_state=md.state, digest_type=h.digest_type, bookies=md.bookies)
        if md.state != "CLOSED":  # being written (or recovered): the broker closes it when done
            yield {**row, "error_kind": "open", "error": f"snapshot ledger is {md.state}; not read"}
            continue
        if md.last_entry_id < 0:
            problem = "closed snapshot ledger without entries (entry 0 must hold SnapshotMetadata)"
            yield {**row, "error_kind": "corrupt", "error_entry_id": 0, "error": problem}
            continue
        try:
            entries = list(client.read_entries(h, 0, md.last_entry_id))
        except BookieError as e:
            yield {**row, "error_kind": _error_kind(e), "error_entry_id": e.entry_id, "error": str(e)}
            continue
        where = f"ledger {lid}"
        try:
            metas = db.decode_snapshot_metadata(entries[0].payload, where=f"{where} entry 0")
            if len(metas) != len(entries) - 1:
                raise DecodeError(
                    f"{where} entry 0",
                    f"metadata lists {len(metas)} segments, the ledger has {len(entries) - 1}",
                )
            segments: list[dict[str, Any]] = []
            for meta, entry in zip(metas, entries[1:], strict=True):
                indexes = db.decode_snapshot_segment(entry.payload, where=f"{where} entry {entry.entry_id}")
                segments.append(
                    {
                        "segment": meta.segment,
                        "min_schedule_ms": meta.min_schedule_ms,
                        "max_schedule_ms": meta.max_schedule_ms,
                        "index_count": len(indexes),
                        "bitmap_count": meta.index_count,
                        "bitmap_bytes": meta.bitmap_bytes,
                        "segment_bytes": len(entry.payload),
                        "data_ledgers": sorted(meta.entries_by_ledger),
                    }
                )
        except DecodeError as e:
            m = e.where.rsplit(" entry ", 1)
            eid = int(m[1].split()[0]) if len(m) == 2 and m[1].split()[0].isdigit() else None
            yield {**row, "error_kind": "corrupt", "error_entry_id": eid, "error": str(e)}
            continue
        row.update(
            segment_count=len(segments),
            index_count=sum(s["index_count"] for s in segments),
            min_schedule_ms=min((s["min_schedule_ms"] for s in segments), default=None),
            max_schedule_ms=max((s["max_schedule_ms"] for s in segments), default=None),
            snapshot_bytes=sum(len(e.payload) for e in entries),
            metadata_bytes=len(entries[0].payload),
            segments=segments,
        )
        yield row


def scan_cursor_positions(
    client: BookieClient, reader: Any, items: Iterable[dict[str, Any]], ledgers_root: str = "/ledgers"
) -> Iterator[dict[str, Any]]:
    """``cursor_positions`` rows: the last durable entry of each cursor ledger, decoded.

    ``items`` carry ``managed_ledger, tenant, namespace, cursor, path, cursors_ledger_id``.
    """
    items = list(items)
    handles = _ledger_handles(reader, ledgers_root, (int(i["cursors_ledger_id"]) for i in items))
    # a cursor ledger rolls over (the old one is deleted) as the cursor moves: follow the cursor
    # znode once to its current ledger
    gone = [i for i in items if not isinstance(handles.get(int(i["cursors_ledger_id"])), LedgerHandle)]
    moved: dict[str, int] = {}
    for r in reader.get([i["path"] for i in gone if i.get("path")]):
        try:
            now = decode_cursor(r.data or b"", path=r.path).cursors_ledger_id if r.error is None else -1
        except DecodeError:
            continue
        if now >= 0:
            moved[r.path] = now
    if moved:
        handles.update(_ledger_handles(reader, ledgers_root, moved.values()))
    for item in items:
        lid = int(item["cursors_ledger_id"])
        if not isinstance(handles.get(lid), LedgerHandle) and item.get("path") in moved:
            lid = moved[item["path"]]
        row: dict[str, Any] = {
            **{k: item.get(k) for k in ("managed_ledger", "tenant", "namespace", "cursor", "path")},
            "cursors_ledger_id": lid,
        }
        h = handles.get(lid)
        if not isinstance(h, LedgerHandle):
            missing = isinstance(h, str) and h.startswith("no ledger metadata")
            yield {**row, "error_kind": "missing" if missing else "unavailable", "error": h}
            continue
        row["ledger_state"] = h.metadata.state
        try:
            entry = client.last_entry(h)
        except BookieError as e:
            yield {**row, "error_kind": _error_kind(e), "error_entry_id": e.entry_id, "error": str(e)}
            continue
        if entry is None:
            yield row  # an empty cursor ledger: nothing persisted there yet
            continue
        try:
            pos = decode_position_info(entry.payload, where=f"ledger {lid} entry {entry.entry_id}")
        except DecodeError as e:
            yield {**row, "error_kind": "corrupt", "error_entry_id": entry.entry_id, "error": str(e)}
            continue
        yield {
            **row,
            "entry_id": entry.entry_id,
            "mark_delete_ledger_id": pos.ledger_id,
            "mark_delete_entry_id": pos.entry_id,
            "properties": pos.properties,
            "compacted_ledger_id": pos.properties.get(COMPACTED_LEDGER_PROPERTY),
        }
