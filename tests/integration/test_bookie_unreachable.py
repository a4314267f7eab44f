"""Bookies that cannot be reached cost one connect each, not one per ledger and entry.

Real sockets on loopback: a closed port (connections refused) and a listener whose accept queue is
full (a connect is never answered and times out, as behind a firewall that drops packets).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from ledgerlens.errors import EntryReadError
from ledgerlens.formats.bookkeeper import LedgerMetadata
from ledgerlens.settings.config import BookieSource
from ledgerlens.sources.bookie import BookieClient, LedgerHandle

pytestmark = pytest.mark.integration


def _refused() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # closed again: connections are refused


@pytest.fixture
def unanswered() -> Iterator[str]:
    """An address whose connects time out: a listener with a full accept queue."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    address = server.getsockname()
    filler = socket.create_connection(address, timeout=2)  # takes the one slot, never accepted
    try:
        yield f"127.0.0.1:{address[1]}"
    finally:
        filler.close()
        server.close()


def _handle(ledger_id: int, members: list[str], entries: int = 3) -> LedgerHandle:
    md = LedgerMetadata(
        format_version=3, state="CLOSED", ensemble_size=len(members), write_quorum=len(members),
        ack_quorum=len(members), length=0, last_entry_id=entries - 1, ctime_ms=0, digest_type="CRC32C",
        ensembles=((0, tuple(members)),),
    )  # fmt: skip
    return LedgerHandle(ledger_id, md)


def _read_all(client: BookieClient, members: list[str], ledgers: int) -> list[EntryReadError]:
    errors = []
    for lid in range(1, ledgers + 1):
        with pytest.raises(EntryReadError) as info:
            list(client.read_entries(_handle(lid, members), 0, 2))
        errors.append(info.value)
    return errors


def test_refused_bookies_are_dialled_once_for_every_ledger() -> None:
    down = [_refused(), _refused()]
    with BookieClient(BookieSource(connect_timeout_s=1.0, read_timeout_s=1.0)) as client:
        errors = _read_all(client, down, 40)
        assert client.stats.connect_failures == 2  # not 40 ledgers x 2 bookies
    # every ledger still says which bookies failed and why, the same way
    for err in errors:
        assert all(f"{b}: connect failed: Connection refused" in str(err) for b in down), str(err)


def test_a_silent_bookie_costs_one_connect_timeout_not_one_per_ledger(unanswered: str) -> None:
    with BookieClient(BookieSource(connect_timeout_s=0.5, read_timeout_s=0.5)) as client:
        t0 = time.monotonic()
        errors = _read_all(client, [unanswered], 20)
        took = time.monotonic() - t0
        assert client.stats.connect_failures == 1
    assert took < 5, took  # 20 ledgers x 0.5 s each before
    assert all(f"{unanswered}: connect timed out after 0.5s" in str(e) for e in errors)
