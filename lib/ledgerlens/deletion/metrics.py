"""Prometheus counters for every outcome PIP-186 lists, per process, served over HTTP or a textfile.

Counters (all ``ledgerlens_deletion_*_total``): ``sent`` and ``received`` (label ``type``: ledger,
offload, topic, remote_segment), ``deleted_ledgers``, ``deleted_offload_copies``,
``deleted_remote_segments`` (Kafka), ``loaded_topics``,
``already_gone`` (``type``), ``failed`` (``type``), ``retried``, ``dead_lettered``,
``skipped_in_use`` (``type``), ``skipped_unprovable`` (``type``), ``skipped_mismatch``
(``type``, ``reason``: unapproved, forged, changed, foreign), ``acked``. Gauge
``ledgerlens_deletion_in_flight``: the subscription backlog of the deletion and retry topics
(PIP-186's estimate of in-flight deletions).

The deleter increments a counter only after the journal line recording the same outcome is
written, so a journal and the counters of a finished run agree line for line.
"""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server, write_to_textfile

PREFIX = "ledgerlens_deletion"


class DeletionMetrics:
    """The counters of one process (its own registry: tests and several deleters never collide)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry

        def c(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"{PREFIX}_{name}", doc, labels, registry=r)

        self.sent = c("sent", "PendingDeleteLedgerInfo messages sent to the deletion topic", ("type",))
        self.received = c("received", "messages the deleter received", ("type",))
        self.deleted_ledgers = c("deleted_ledgers", "BookKeeper ledgers deleted (ledger znode removed)")
        self.deleted_offload_copies = c("deleted_offload_copies", "offload copies deleted (data and index)")
        self.loaded_topics = c("loaded_topics", "topics loaded so that the broker trims them")
        self.deleted_remote_segments = c(
            "deleted_remote_segments", "Kafka remote log segments whose objects were deleted"
        )
        self.already_gone = c(
            "already_gone", "items already deleted when their message came (success)", ("type",)
        )
        self.failed = c("failed", "deletions that failed (then retried or dead-lettered)", ("type",))
        self.retried = c("retried", "messages sent to the retry topic")
        self.dead_lettered = c("dead_lettered", "messages sent to the dead-letter topic")
        self.skipped_in_use = c("skipped_in_use", "items still referenced: acked, not deleted", ("type",))
        self.skipped_unprovable = c(
            "skipped_unprovable",
            "items a node with unknown references could own (emptied, corrupt, unreadable), or the only "
            "copy of data whose managed ledger exists: acked, not deleted",
            ("type",),
        )
        self.skipped_mismatch = c(
            "skipped_mismatch",
            "messages that do not match the live state or an approved item",
            ("type", "reason"),
        )
        self.acked = c("acked", "messages acknowledged")
        self.in_flight = Gauge(
            f"{PREFIX}_in_flight", "subscription backlog: deletions not yet done", registry=r
        )

    def value(self, name: str, **labels: str) -> float:
        """The current value of a counter (summed over labels not given), for tests and reports."""
        total = 0.0
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name == f"{PREFIX}_{name}_total" and all(
                    s.labels.get(k) == v for k, v in labels.items()
                ):
                    total += s.value
        return total

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread."""
        start_http_server(port, addr=addr, registry=self.registry)

    def write_textfile(self, path: str | Path) -> None:
        """Write the node-exporter textfile (atomically: temporary file, then rename)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(os.fspath(target), self.registry)
