"""One Kafka audit's request (``ledgerlens kafka-audit`` and ``notebooks/kafka_remote_segments.ipynb``).

The Kafka variant of ``ledgerlens.settings.request.AuditRequest``: the metadata (the bootstrap
servers' ``__remote_log_metadata``, or a dump of it), the remote storage, the thresholds
(``KafkaAuditConfig``), the output directory and the history options, built once by
:meth:`KafkaAuditRequest.from_flags` from the command's flags or the runbook's parameters (the same
names) and run by :func:`run_request`. No credential is part of it (S3 credentials come from
boto3's chain), and its repr is redacted.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerlens.audit.history import HistoryOptions
from ledgerlens.errors import ConfigError
from ledgerlens.kafka import remote_pipeline
from ledgerlens.kafka.audit import KafkaAuditConfig
from ledgerlens.settings.config import parse_duration, parse_time_ms
from ledgerlens.settings.redact import redact
from ledgerlens.sources.kafka_metadata import KafkaSource
from ledgerlens.sources.remote_storage import RemoteStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ledgerlens.audit.pipeline import AuditRun

__all__ = ["KafkaAuditRequest", "run_request"]

METADATA_TOPIC = "__remote_log_metadata"  # kafka-audit's hidden --metadata-topic default


@dataclass(frozen=True)
class KafkaAuditRequest:
    """Everything one Kafka tiered-storage audit needs, resolved.

    ``source``: the Kafka cluster whose metadata topic is read (None: ``dump`` is read instead);
    ``store``: the remote storage (a bucket or Kafka's local tiered-storage directory);
    ``history``: the run to compare with and the runs ``out_dir/history`` keeps; ``fail_on``: the
    severity that makes ``kafka-audit`` exit 3 (None: never).
    """

    out_dir: Path
    source: KafkaSource | None
    store: RemoteStore
    config: KafkaAuditConfig
    dump: str | None = None
    history: HistoryOptions = HistoryOptions()
    fail_on: str | None = None
    spark_master: str = "local[*]"

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any]) -> KafkaAuditRequest:
        """From ``kafka-audit``'s argparse destinations (``vars(args)``) or the runbook's parameters
        of the same names; an absent or empty one takes the command's default."""

        def get(name: str, default: Any = "") -> Any:
            value = flags.get(name)
            return default if value is None or value == "" else value

        if not get("bootstrap_servers") and not get("metadata_dump"):
            raise ConfigError("--bootstrap-servers HOST:PORT is required (or --metadata-dump FILE)")
        if bool(get("bucket")) == bool(get("remote_dir")):
            raise ConfigError("give the remote storage: --bucket NAME or --remote-dir DIR")
        layout = get("layout", None) or ("s3-plugin" if get("bucket") else "local")
        topic = get("metadata_topic", METADATA_TOPIC)
        store = RemoteStore(
            layout=layout,
            bucket=get("bucket") or None,
            prefix=get("prefix"),
            endpoint_url=get("s3_endpoint") or None,
            directory=get("remote_dir") or None,
        )
        source = (
            KafkaSource(get("bootstrap_servers"), metadata_topic=topic) if get("bootstrap_servers") else None
        )
        stuck = parse_duration(get("stuck_after", "24h"))
        as_of = get("as_of")
        config = KafkaAuditConfig(
            as_of_ms=parse_time_ms(as_of) if as_of else int(time.time() * 1000),
            layout=layout,
            prefix=get("prefix"),
            metadata_topic=topic,
            min_orphan_age_s=parse_duration(get("min_orphan_age", "24h")),
            stuck_copy_s=stuck,
            stuck_delete_s=stuck,
            retention_grace_s=parse_duration(get("retention_grace", "6h")),
        )
        return cls(
            out_dir=Path(get("out", None) or get("out_dir", None) or "kafka-audit-out"),
            source=source,
            store=store,
            config=config,
            dump=get("metadata_dump") or None,
            history=HistoryOptions.of(get("previous", None), get("history_keep", None)),
            fail_on=get("fail_on", None),
            spark_master=get("spark_master", "local[*]"),
        )

    def __repr__(self) -> str:
        """The request as it may be printed, redacted."""
        shown = {
            "out_dir": str(self.out_dir),
            "bootstrap_servers": self.source.bootstrap_servers if self.source is not None else "",
            "dump": self.dump or "",
            "store": self.store,
            "config": replace(self.config, extra={}),
            "history": self.history,
            "fail_on": self.fail_on,
            "spark_master": self.spark_master,
        }
        return redact("KafkaAuditRequest(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")")

    __str__ = __repr__


def run_request(spark: SparkSession, request: KafkaAuditRequest, *, progress: bool = True) -> AuditRun:
    """Collect, audit, re-verify and write the request's findings (``kafka.remote_pipeline.run``)."""
    return remote_pipeline.run(
        spark,
        request.config,
        request.out_dir,
        source=request.source,
        store=request.store,
        dump=request.dump,
        progress=progress,
        history=request.history,
    )
