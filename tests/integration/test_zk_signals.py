"""A Ctrl-C that lands while kazoo queues a request (``ledgerlens.sources.zk_client``).

kazoo wakes its connection thread under a bare ``except`` and turns whatever was raised there into
``ConnectionClosedError`` on the request; a scan retries that as a hiccup, so the command's
KeyboardInterrupt was lost and the run went on to publish (once in CI). The signal lands at that
exact point here: the socket kazoo wakes its thread with raises it, as a signal handler would.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError

from ledgerlens.runtime import signals
from ledgerlens.sources.zk_client import connect

pytestmark = pytest.mark.integration


class _SignalledSocket:
    """The connection's wake-up socket, with a Ctrl-C arriving during its ``send``."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock

    def send(self, data: bytes) -> int:
        self.sock.send(data)  # the request goes out
        signals.on_signal(signal.SIGINT, None)  # and the signal lands before send() returns
        return len(data)


def _signal_during_a_request(client: Any) -> Any:
    conn = client._connection
    real = conn._write_sock
    conn._write_sock = _SignalledSocket(real)
    try:
        return client.get_children_async("/")
    finally:
        conn._write_sock = real


@pytest.fixture
def fresh_signals() -> Any:
    signals.forget()
    yield
    signals.forget()


def test_kazoo_alone_turns_the_interrupt_into_a_closed_connection(zookeeper: Any, fresh_signals: Any) -> None:
    client = KazooClient(hosts=zookeeper.hosts, timeout=10)
    client.start(timeout=10)
    try:
        result = _signal_during_a_request(client)  # no KeyboardInterrupt comes out
        with pytest.raises(ConnectionClosedError):
            result.get(timeout=10)
    finally:
        client.stop()
        client.close()


def test_a_scan_client_raises_the_interrupt_again(zookeeper: Any, fresh_signals: Any) -> None:
    client = connect(zookeeper.hosts, timeout_s=10)
    try:
        with pytest.raises(KeyboardInterrupt):
            _signal_during_a_request(client)
        assert signals.received() == signal.SIGINT
        signals.forget()
        assert client.get_children("/") is not None  # no signal: requests as before
    finally:
        client.stop()
        client.close()
