"""How the sources reach servers: bounded name lookups, TCP connects and calls (a dead resolver, a
silent port or a hung read never holds a command past its deadline), and the pace of requests
(``RateLimiter``). Shared by the preflight checks, the sources and the deleter.
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from typing import Any


def resolve(host: str, port: int, timeout: float) -> list[Any]:
    """getaddrinfo bounded by ``timeout`` (a dead resolver must not hang the check)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        future = pool.submit(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
        return future.result(timeout=timeout)
    finally:
        pool.shutdown(wait=False)


def tcp_problem(host: str, port: int, timeout: float) -> str | None:
    """None when ``host:port`` accepts a TCP connection within ``timeout``, else what went wrong."""
    deadline = time.monotonic() + timeout
    try:
        infos = resolve(host, port, timeout)
    except concurrent.futures.TimeoutError:
        return f"name lookup of {host!r} timed out"
    except socket.gaierror as e:
        return f"name {host!r} does not resolve ({e.strerror})"
    last = "no address"
    for family, kind, proto, _name, addr in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            return "connect timed out"
        s = socket.socket(family, kind, proto)
        s.settimeout(left)
        try:
            s.connect(addr)
            return None
        except ConnectionRefusedError:
            last = "connection refused"
        except TimeoutError:
            last = "connect timed out"
        except OSError as e:
            last = e.strerror or str(e)
        finally:
            s.close()
    return last


def within(fn: Any, timeout_s: float) -> Any:
    """``fn()`` in a daemon thread, at most ``timeout_s``: its result or its exception, else
    ``TimeoutError`` (the thread is left behind; a hung read never holds the command)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    thread = threading.Thread(target=run, name="ledgerlens-admin-probe", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_s))
    if thread.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box["result"]


class RateLimiter:
    """Token bucket: on average at most ``rate`` operations per second, bursts up to ``burst``.

    ``rate`` of ``None`` or ``<= 0`` disables the limit.
    """

    def __init__(self, rate: float | None, burst: float | None = None) -> None:
        self.rate = rate if rate and rate > 0 else None
        self.burst = burst if burst is not None else max(1.0, (self.rate or 0.0) / 20)  # 50 ms of work
        self._tokens = self.burst
        self._last = time.monotonic()

    def acquire(self, n: int = 1) -> None:
        """Block until ``n`` tokens are available, then take them."""
        if self.rate is None:
            return
        while True:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= n:
                self._tokens -= n
                return
            time.sleep((n - self._tokens) / self.rate)
