"""The Kafka tiered-storage audit end to end: collect, audit, re-verify, write the results.

``ledgerlens kafka-audit`` and ``notebooks/kafka_remote_segments.ipynb`` call :func:`run`; both
write ``findings.parquet`` (the columns of ``schemas.FINDINGS_PUBLISHED``: ``first_seen`` and
``new`` against the previous run), ``resolved.parquet``, ``summary.json`` and a ``history/`` entry
under the output directory, like the Pulsar audit (``ledgerlens.audit.history``).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from ledgerlens.audit.findings import order_findings, summarize
from ledgerlens.audit.history import (
    HISTORY_DIR,
    Comparison,
    HistoryOptions,
    discover,
    prune,
    record,
    warn,
    write_resolved,
)
from ledgerlens.audit.pipeline import AuditRun, write_findings
from ledgerlens.inventory import schemas
from ledgerlens.kafka.audit import KafkaAuditConfig, run_kafka_audit
from ledgerlens.kafka.remote_inventory import collect_kafka_inventory, load_kafka_inventory
from ledgerlens.kafka.remote_reverify import KAFKA_REVERIFIED_KINDS, reverify_kafka
from ledgerlens.settings.redact import redact_obj
from ledgerlens.sources.kafka_metadata import KafkaSource
from ledgerlens.sources.remote_storage import RemoteStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["run"]


def run(
    spark: SparkSession,
    cfg: KafkaAuditConfig,
    out_dir: str | Path,
    *,
    source: KafkaSource | None,
    store: RemoteStore | None,
    dump: str | None = None,
    progress: bool = True,
    history: HistoryOptions | None = None,
) -> AuditRun:
    """Collect, audit, re-verify and write ``findings.parquet`` and ``summary.json`` under ``out_dir``.

    ``history``: where the previous run is (default: the one in ``out_dir``, else its newest
    ``history/`` entry) and how many runs ``out_dir/history`` keeps (default 14).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    inv_dir = str(out / "inventory")
    timings: dict[str, float] = {}

    t0 = time.monotonic()
    inventory = collect_kafka_inventory(
        spark, inv_dir, source=source, store=store, dump=dump, progress=progress
    )
    timings.update({f"collect.{k}": v for k, v in inventory.timings.items()})
    timings["collect"] = time.monotonic() - t0

    t1 = time.monotonic()
    cfg = replace(cfg, topics_known=inventory.topics_known)
    tables = load_kafka_inventory(spark, inv_dir)
    findings = run_kafka_audit(tables, cfg).persist()
    needs_check = F.col("kind").isin(*KAFKA_REVERIFIED_KINDS) & (
        (F.col("action") == "delete_object") | (F.col("kind") == "remote_segment_missing_object")
    )
    candidates = [r.asDict() for r in findings.filter(needs_check).collect()]
    rest = findings.filter(~needs_check)
    timings["audit"] = time.monotonic() - t1

    t2 = time.monotonic()
    verdicts = reverify_kafka(candidates, source, inventory.ranges, store)
    kept = schemas.local_frame(spark, schemas.FINDINGS, verdicts.keep)
    final = order_findings(rest.unionByName(kept))
    timings["reverify"] = time.monotonic() - t2

    t3 = time.monotonic()
    history = history or HistoryOptions()
    store_name = redact_obj(store.name) if store is not None else None
    lookup = discover(out, history, {"system": "kafka", "store": store_name})
    warn(lookup)
    comparison = Comparison(lookup.previous, cfg.as_of_ms)
    findings_path = out / "findings.parquet"
    write_findings(final, findings_path, comparison=comparison)
    write_resolved(out, comparison)
    written = spark.read.schema(schemas.FINDINGS).parquet(str(findings_path))
    timings["write"] = time.monotonic() - t3
    findings.unpersist()

    summary: dict[str, Any] = {
        "as_of_ms": cfg.as_of_ms,
        "system": "kafka",
        **summarize(written),
        "inventory_counts": inventory.counts,
        "metadata_offsets": {str(r.partition): [r.low, r.high] for r in inventory.ranges},
        "store": store.name if store is not None else None,
        "reverified": len(candidates),
        "dropped_on_reverify": dict(sorted(verdicts.dropped.items())),
        "timings": {k: round(v, 3) for k, v in timings.items()},
        **comparison.summary(),
        "previous_note": lookup.note,
    }
    summary = redact_obj(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    record(out, summary, comparison, history.keep)
    prune(out / HISTORY_DIR, history.keep)
    return AuditRun(out, findings_path, summary, dict(inventory.tables))
