"""ZooKeeper, read fast and gently: pipelined kazoo reads, bounded and rate limited.

A :class:`PipelinedReader` keeps up to ``max_in_flight`` asynchronous reads outstanding on one
kazoo session and never issues more than ``rate_limit`` reads per second (a token bucket), because
sequential reads are client-bound (NOTES.md) and unthrottled bulk reads expire sessions. On
ZooKeeper 3.6+ it batches reads into multiRead requests. Shared by the inventory scan
(``sources.zookeeper``), the audit's re-verification and the deleter.
"""

from __future__ import annotations

import struct
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionClosedError,
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from ledgerlens.errors import SourceError
from ledgerlens.runtime import signals
from ledgerlens.settings.config import ZooKeeperAuth
from ledgerlens.sources.reach import RateLimiter

__all__ = ["MultiReadReply", "NodeRead", "PipelinedReader", "ScanStats", "connect"]

# Errors worth retrying on the same path: the session or connection hiccupped, the node is fine.
_TRANSIENT = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, ConnectionClosedError)
_RETRIES = 5


class _Client(KazooClient):  # type: ignore[misc]
    """kazoo's client, with Ctrl-C kept: kazoo wakes its connection thread for each request under a
    bare ``except`` that turns anything raised there (the KeyboardInterrupt of a signal arriving at
    that moment included) into ConnectionClosedError on the request, which a scan retries as a
    hiccup. A signal the command received is raised again once the request is queued."""

    def _call(self, request: Any, async_object: Any) -> Any:
        try:
            return super()._call(request, async_object)
        finally:
            signals.raise_if_stopped()


def connect(hosts: str, *, timeout_s: float = 30.0, auth: ZooKeeperAuth | None = None) -> KazooClient:
    """A started read-only kazoo client, or :class:`SourceError` naming the server.

    ``auth`` (credentials by reference) is applied to the session: digest ``auth_data`` or SASL.
    """
    options = auth.kazoo_options() if auth is not None else {}
    client = _Client(hosts=hosts, timeout=timeout_s, read_only=True, **options)
    try:
        client.start(timeout=timeout_s)
    except NoAuthError as e:  # kazoo checks the chroot on start
        client.stop()
        client.close()
        raise SourceError(
            f"zookeeper {hosts}", "not authorized (NoAuthError): check the ZooKeeper credentials (auth)"
        ) from e
    except Exception as e:  # KazooTimeoutError, socket errors, bad host strings
        client.close()
        raise SourceError(f"zookeeper {hosts}", f"cannot connect: {type(e).__name__}: {e}") from e
    return client


@dataclass(slots=True)
class NodeRead:
    """The outcome of reading one znode: data and stat and/or children, or the error."""

    path: str
    data: bytes | None = None
    stat: ZnodeStat | None = None
    children: list[str] | None = None
    error: Exception | None = None


@dataclass
class ScanStats:
    """Counters a scan keeps beside its rows (reads, vanished nodes, skipped znodes, errors)."""

    reads: int = 0
    vanished: int = 0
    skipped: int = 0
    errors: int = 0
    retries: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "reads": self.reads,
            "vanished": self.vanished,
            "skipped": self.skipped,
            "errors": self.errors,
            "retries": self.retries,
        }


@dataclass
class _Pending:
    path: str
    ops: list[Any]  # IAsyncResult, one per requested operation (data, children)
    want_data: bool
    want_children: bool


class PipelinedReader:
    """Pipelined ``get_async`` / ``get_children_async`` over one kazoo client.

    At most ``max_in_flight`` operations are outstanding and at most ``rate_limit`` are issued per
    second. Results come back in input order (ZooKeeper answers a session in order, so this costs
    nothing). A node that no longer exists is skipped
    (counted in ``stats.vanished``); connection hiccups are retried; any other error (``NoAuth``
    included) is returned in :attr:`NodeRead.error`.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        max_in_flight: int = 200,
        rate_limit: float | None = None,
        stats: ScanStats | None = None,
        multi_read: int = 0,
    ) -> None:
        self.client = client
        self.max_in_flight = max(1, int(max_in_flight))
        self.limiter = RateLimiter(rate_limit)
        self.stats = stats if stats is not None else ScanStats()
        self.multi_read = max(0, int(multi_read))

    # -- public API ----------------------------------------------------------------------------
    def get(self, paths: Iterable[str]) -> Iterator[NodeRead]:
        """Data and stat of every path."""
        return self.read(paths, data=True, children=False)

    def get_replies(self, paths: Iterable[str]) -> Iterator[NodeRead | MultiReadReply]:
        """Data and stat of every path, as :meth:`get`, but each answered multiRead request comes
        whole and undecoded (a :class:`MultiReadReply`, for a compiled decoder); single reads (no
        multiRead, or a request that failed) still come as :class:`NodeRead`."""
        if self.multi_read > 1:
            return self._batched(paths, True, replies=True)
        return self._ordered(paths, True, False)

    def children(self, paths: Iterable[str]) -> Iterator[NodeRead]:
        """Children of every path."""
        return self.read(paths, data=False, children=True)

    def read(self, paths: Iterable[str], *, data: bool = True, children: bool = False) -> Iterator[NodeRead]:
        """Data and/or children of every path, pipelined."""
        if self.multi_read > 1 and data != children:
            return cast(Iterator[NodeRead], self._batched(paths, data))  # no replies: only NodeRead
        return self._ordered(paths, data, children)

    # -- engine --------------------------------------------------------------------------------
    def _submit(self, path: str, want_data: bool, want_children: bool) -> _Pending:
        k = int(want_data) + int(want_children)
        self.limiter.acquire(k)
        ops = []
        if want_data:
            ops.append(self.client.get_async(path))
        if want_children:
            ops.append(self.client.get_children_async(path))
        self.stats.reads += k
        return _Pending(path, ops, want_data, want_children)

    def _finish(self, p: _Pending) -> NodeRead | None:
        out = NodeRead(p.path)
        i = 0
        for kind, wanted in (("data", p.want_data), ("children", p.want_children)):
            if not wanted:
                continue
            op = p.ops[i]
            i += 1
            try:
                value = op.get()
            except NoNodeError:
                self.stats.vanished += 1
                return None
            except _TRANSIENT:
                try:
                    value = self._retry(p.path, kind)
                except NoNodeError:
                    self.stats.vanished += 1
                    return None
                except Exception as e:  # noqa: BLE001 - captured per path
                    out.error = e
                    continue
            except Exception as e:  # noqa: BLE001 - NoAuthError and friends, captured per path
                out.error = e
                continue
            if kind == "data":
                out.data, out.stat = value
            else:
                out.children = list(value)
        return out

    def _retry(self, path: str, kind: str) -> Any:
        """Re-read one path synchronously after a connection hiccup; SourceError when it persists."""
        delay = 0.1
        for attempt in range(_RETRIES):
            self.stats.retries += 1
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            try:
                self.limiter.acquire(1)
                return self.client.get(path) if kind == "data" else self.client.get_children(path)
            except _TRANSIENT as e:
                if attempt == _RETRIES - 1:
                    raise SourceError(
                        f"zookeeper {self.client.hosts}",
                        f"{path}: {type(e).__name__} after {_RETRIES} retries",
                    ) from e
        raise AssertionError("unreachable")

    def _ordered(self, paths: Iterable[str], want_data: bool, want_children: bool) -> Iterator[NodeRead]:
        window = deque[_Pending]()
        in_flight = 0
        k = int(want_data) + int(want_children)
        for path in paths:
            while window and in_flight + k > self.max_in_flight:
                p = window.popleft()
                in_flight -= len(p.ops)
                r = self._finish(p)
                if r is not None:
                    yield r
            window.append(self._submit(path, want_data, want_children))
            in_flight += k
        while window:
            r = self._finish(window.popleft())
            if r is not None:
                yield r

    def _batched(
        self, paths: Iterable[str], want_data: bool, *, replies: bool = False
    ) -> Iterator[NodeRead | MultiReadReply]:
        """Ordered reads grouped ``multi_read`` at a time into ZooKeeper 3.6+ ``multiRead`` requests.

        One request (and one kazoo round of Python overhead) serves a whole group; per-path errors
        come back per path. A server without multiRead makes the reader fall back to single reads.
        """
        window: deque[tuple[list[str], Any]] = deque()
        in_flight = 0
        op = _GET_DATA if want_data else _GET_CHILDREN
        chroot = self.client.chroot or ""  # multiRead bypasses kazoo's own chroot handling

        def submit(group: list[str]) -> None:
            nonlocal in_flight
            self.limiter.acquire(len(group))
            result = self.client.handler.async_result()
            full = [chroot + p for p in group] if chroot else group
            self.client._call((_UndecodedMultiRead if replies else _MultiRead)(op, full), result)
            self.stats.reads += len(group)
            window.append((group, result))
            in_flight += len(group)

        def finish() -> Iterator[NodeRead | MultiReadReply]:
            nonlocal in_flight
            group, result = window.popleft()
            in_flight -= len(group)
            try:
                values = result.get()
            except Exception:  # noqa: BLE001 - whole request refused (old server) or connection hiccup
                if not isinstance(result.exception, _TRANSIENT):
                    self.multi_read = 0  # no multiRead here: single reads from now on
                yield from self._ordered(group, want_data, not want_data)
                return
            if replies:
                yield MultiReadReply(group, *values)
                return
            for path, value in zip(group, values, strict=True):
                if isinstance(value, NoNodeError):
                    self.stats.vanished += 1
                elif isinstance(value, Exception):
                    yield NodeRead(path, error=value)
                elif want_data:
                    yield NodeRead(path, data=value[0], stat=value[1])
                else:
                    yield NodeRead(path, children=value)

        group: list[str] = []
        for path in paths:
            group.append(path)
            if len(group) >= self.multi_read:
                while window and in_flight + len(group) > self.max_in_flight:
                    yield from finish()
                if self.multi_read:
                    submit(group)
                else:
                    yield from self._ordered(group, want_data, not want_data)
                group = []
        if group:
            if self.multi_read:
                submit(group)
            else:
                yield from self._ordered(group, want_data, not want_data)
        while window:
            yield from finish()


# -- ZooKeeper 3.6+ multiRead (opcode 22) over kazoo's connection ---------------------------------
_GET_DATA, _GET_CHILDREN = 4, 8
_MULTI_HEADER = struct.Struct("!iBi")
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")


class _MultiRead:
    """A ``multiRead`` request of getData or getChildren ops, in kazoo's request protocol."""

    type = 22

    def __init__(self, op: int, paths: list[str]) -> None:
        self.op = op
        self.paths = paths

    def serialize(self) -> bytes:
        out = bytearray()
        head = _MULTI_HEADER.pack(self.op, False, -1)
        for p in self.paths:
            raw = p.encode("utf-8")
            out += head
            out += _INT.pack(len(raw))
            out += raw
            out += b"\x00"  # no watch
        out += _MULTI_HEADER.pack(-1, True, -1)
        return bytes(out)

    def deserialize(self, buf: bytes, offset: int) -> Any:
        results: list[Any] = []
        while (item := _multi_read_result(buf, offset)) is not None:
            value, offset = item
            results.append(value)
        return results


class _UndecodedMultiRead(_MultiRead):
    """A ``multiRead`` whose reply is handed on undecoded: ``(reply, offset of the first result)``."""

    def deserialize(self, buf: bytes, offset: int) -> tuple[bytes, int]:
        return bytes(buf), offset


def _multi_read_result(buf: bytes, offset: int) -> tuple[Any, int] | None:
    """The result at ``offset`` of a multiRead reply and the offset after it; None at the end.

    A result is ``(data, stat)`` (getData), a list of names (getChildren) or the error's exception.
    """
    kind, done, _ = _MULTI_HEADER.unpack_from(buf, offset)
    offset += 9
    if done:
        return None
    if kind == _GET_DATA:
        (n,) = _INT.unpack_from(buf, offset)
        offset += 4
        data = buf[offset : offset + n] if n >= 0 else b""
        offset += max(n, 0)
        return (data, ZnodeStat._make(_STAT.unpack_from(buf, offset))), offset + _STAT.size
    if kind == _GET_CHILDREN:
        (count,) = _INT.unpack_from(buf, offset)
        offset += 4
        names = []
        for _ in range(max(count, 0)):
            (n,) = _INT.unpack_from(buf, offset)
            offset += 4
            names.append(buf[offset : offset + n].decode("utf-8"))
            offset += n
        return names, offset
    (code,) = _INT.unpack_from(buf, offset)  # -1: ErrorResult
    return EXCEPTIONS[code](), offset + 4


@dataclass(slots=True)
class MultiReadReply:
    """A multiRead reply of getData results, undecoded: ``paths`` in order, their results in
    ``reply`` from byte ``offset`` (``PipelinedReader.get_replies``)."""

    paths: list[str]
    reply: bytes
    offset: int
