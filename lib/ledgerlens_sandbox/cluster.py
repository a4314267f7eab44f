"""Write a small, realistic Pulsar cluster's storage metadata (ZooKeeper) and offload objects (S3).

:func:`generate` writes the ``healthy`` cluster, or the ``planted`` one (healthy plus every anomaly
of docs/audit-rules.md plus negative controls), and returns a :class:`GroundTruth` listing exactly the
findings an audit with default ``AuditConfig`` and ``as_of_ms = now_ms`` must report.
:func:`generate_bulk` (:mod:`ledgerlens_sandbox.bulk`, re-exported here) writes a large healthy cluster
fast, for benchmarks. The cluster model and its builder are in :mod:`ledgerlens_sandbox.model`, the
scenarios in :mod:`ledgerlens_sandbox.healthy` and :mod:`ledgerlens_sandbox.planted`, the writing to
ZooKeeper and S3 in :mod:`ledgerlens_sandbox.writer`.

Conventions of ``GroundTruth.expected`` where docs/audit-rules.md leaves a column open (checked
against the pipeline's output, ``ledgerlens.audit.pipeline.run``):

- ``path``: the ledger znode for ``orphan_ledger``, ``unattributed_ledger`` and BookKeeper
  ``corrupt_metadata``; the referencing cursor znode / schema locator for ``missing_ledger`` from a
  cursor / schema; the node itself for ``corrupt_metadata`` and ``inactive_cursor``; the owner
  managed-ledger znode for every other finding about a managed ledger's ledgers (``missing_ledger``,
  ``retention_overdue``, ``open_ledger_overdue``, ``offloaded_not_deleted``, ``missing_offload_object``,
  ``incomplete_offload``); null for ``orphan_offload_object``. Paths include ``root``.
- ``cursor``: the cursor name (all planted names need no URL encoding, so encoded and decoded forms
  agree) for cursor findings and cursor ledgers; the ``pulsar/delayedIndexCursor`` of an orphan
  delayed-index-bucket ledger; null otherwise.
- ``managed_ledger``: the owner managed ledger (custom metadata; the compacted / delayed topic's
  managed ledger for those components; ``ManagedLedgerName`` of an orphan offload object); null for
  schema ledgers, unattributed ledgers and BookKeeper ``corrupt_metadata``.
- ``ledger_id``: set whenever one ledger is concerned (also BookKeeper ``corrupt_metadata``, parsed
  from the path); null for cursor / managed-ledger ``corrupt_metadata`` and ``inactive_cursor``.

S3 ``LastModified`` cannot be set: objects are as old as ``now_ms`` minus the time they were written.
Object-age findings (``orphan_offload_object``, ``incomplete_offload``) are expected only when that
age is clearly over a day (``GroundTruth.s3_objects_aged``); use :func:`default_now_ms` (two days
ahead of the clock) to get them. Near the threshold :func:`generate` refuses.
"""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from ledgerlens.inventory.schemas import FINDING_KEYS
from ledgerlens_sandbox.bulk import (
    BULK_FIRST_LEDGER,
    BULK_NS,
    BulkCluster,
    bulk_cluster,
    generate_bulk,
    write_bulk_znodes,
)
from ledgerlens_sandbox.healthy import _healthy
from ledgerlens_sandbox.model import (
    BOOKIES,
    CLUSTER,
    DAY,
    HOUR,
    LONG_ID_BASE,
    MINUTE,
    Cursor,
    Ledger,
    Offload,
    _Cluster,
    _policies,
)
from ledgerlens_sandbox.planted import FOREIGN_TENANT, PLANTED_AGE, _foreign_cluster, _planted
from ledgerlens_sandbox.writer import _connect, _write_objects, restrict, write_objects_parallel, write_znodes

# This module is the sandbox generator's entry point: besides ``generate`` and ``GroundTruth`` it
# re-exports what callers (tests, benchmarks, notebooks) import from ``ledgerlens_sandbox.cluster``.
__all__ = [
    "BOOKIES",
    "BULK_FIRST_LEDGER",
    "BULK_NS",
    "CLUSTER",
    "DAY",
    "FINDING_KEYS",
    "FOREIGN_TENANT",
    "HOUR",
    "LONG_ID_BASE",
    "MINUTE",
    "PLANTED_AGE",
    "S3_AGED_MS",
    "S3_YOUNG_MS",
    "SCENARIOS",
    "BulkCluster",
    "Cursor",
    "GroundTruth",
    "Ledger",
    "Offload",
    "_policies",  # bench/zk_snapshot_writer.py writes the same namespace policies
    "bulk_cluster",
    "default_now_ms",
    "generate",
    "generate_bulk",
    "restrict",
    "write_bulk_znodes",
    "write_objects_parallel",
    "write_znodes",
]

S3_AGED_MS = 25 * HOUR  # object age counted as clearly over min_orphan_age / incomplete_offload_age
S3_YOUNG_MS = 23 * HOUR  # object age counted as clearly under them
SCENARIOS = ("healthy", "planted")


def default_now_ms() -> int:
    """Two days ahead of the clock, so that S3 objects written now count as old."""
    return int(time.time() * 1000) + 2 * DAY


@dataclass(frozen=True)
class GroundTruth:
    """What :func:`generate` wrote and what the audit must find (one dict per finding)."""

    scenario: str
    now_ms: int
    root: str
    bucket: str | None
    s3_endpoint: str | None
    zk_hosts: str
    written_at_ms: int
    s3_objects_aged: bool
    expected: list[dict[str, Any]]
    controls: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    # Another Pulsar cluster sharing this BookKeeper cluster and bucket (planted scenario): its
    # Pulsar metadata lives under ``foreign_root``; ``foreign`` lists the findings of ``expected``
    # (all info) that disappear when that store is audited too (``--pulsar-metadata``).
    foreign_root: str | None = None
    foreign: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        """JSON text (sorted keys, indented)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GroundTruth:
        """Inverse of :meth:`to_json`."""
        return cls(**json.loads(text))

    def expected_of(self, kind: str) -> list[dict[str, Any]]:
        """The expected findings of one kind."""
        return [f for f in self.expected if f["kind"] == kind]


def generate(
    zk_hosts: str,
    *,
    root: str = "",
    s3_endpoint: str | None = None,
    bucket: str | None = None,
    scenario: str = "planted",
    now_ms: int,
    seed: int | None = None,
) -> GroundTruth:
    """Write the ``healthy`` or ``planted`` cluster under ``root`` and return its ground truth.

    Parameters
    ----------
    zk_hosts
        ZooKeeper connection string.
    root
        Prefix of ``/ledgers``, ``/managed-ledgers``, ``/schemas``, ``/admin``; ``""`` = the real paths.
    s3_endpoint, bucket
        Where offload objects go (the bucket must exist). Without them no object is written and no
        offload finding is expected (the audit then skips offload rules).
    now_ms
        The audit's ``as_of_ms``; ledger and managed-ledger times are set relative to it.
    seed
        Ledger ids and offload uuids are drawn from it; by default from scenario, hosts, root and now.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: expected one of {SCENARIOS}")
    if (s3_endpoint is None) != (bucket is None):
        raise ValueError("give both s3_endpoint and bucket, or neither")
    if root and (not root.startswith("/") or root.endswith("/")):
        raise ValueError(f"root {root!r}: expected '' or '/name'")
    written = int(time.time() * 1000)
    age = now_ms - written
    if bucket is not None and S3_YOUNG_MS <= age <= S3_AGED_MS:
        raise ValueError(
            f"now_ms is {age / HOUR:.1f} h after the clock: S3 objects written now would be neither clearly "
            "young nor clearly old; use now_ms near the clock or default_now_ms()"
        )
    s3_aged = bucket is not None and age > S3_AGED_MS
    c = _Cluster(
        root,
        now_ms,
        bucket,
        s3_endpoint,
        s3_aged,
        seed if seed is not None else zlib.crc32(f"{scenario}|{zk_hosts}|{root}|{now_ms}".encode()),
    )
    ctx = _healthy(c)
    foreign: list[dict[str, Any]] = []
    foreign_root = None
    if scenario == "planted":
        _planted(c, ctx)
        foreign_root = f"{root}/other-cluster"
        foreign = _foreign_cluster(c, foreign_root)
    client = _connect(zk_hosts)
    try:
        created = write_znodes(client, c.nodes)
        for path, data in c.rewrites.items():
            client.set(path, data)
    finally:
        client.stop()
        client.close()
    if bucket is not None and s3_endpoint is not None:
        _write_objects(s3_endpoint, bucket, c.objects)
    counts = dict(c.counts, znodes=created, offload_objects=len(c.objects) if bucket else 0)
    expected = sorted(
        c.expected,
        key=lambda f: (
            f["kind"],
            f["managed_ledger"] or "",
            f["ledger_id"] or -1,
            f["object_key"] or "",
            f["path"] or "",
        ),
    )
    return GroundTruth(
        scenario=scenario,
        now_ms=now_ms,
        root=root,
        bucket=bucket,
        s3_endpoint=s3_endpoint,
        zk_hosts=zk_hosts,
        written_at_ms=written,
        s3_objects_aged=s3_aged,
        expected=expected,
        controls=c.controls,
        counts=counts,
        foreign_root=foreign_root,
        foreign=foreign,
    )
