"""The sandbox's port picks: every server of one sandbox (ZooKeeper, bookie, broker, web, S3) gets a
port of its own. A broker once failed to start because its port was the bookie's (CI, 2026-11-29)."""

from __future__ import annotations

from ledgerlens_sandbox.servers import free_port


def test_ports_handed_out_are_never_the_same_twice() -> None:
    # the kernel picks an ephemeral port at random: some 3,000 picks of some 28,000 ports would
    # repeat one about 150 times if nothing prevented it
    ports = [free_port() for _ in range(3000)]
    assert len(set(ports)) == len(ports)
    assert all(1024 < p < 65536 for p in ports)
