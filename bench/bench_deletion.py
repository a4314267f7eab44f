"""Benchmark: deletions per second through the whole PIP-186 flow, with full re-verification.

Against a real Pulsar sandbox (ZooKeeper metadata, moto S3): 10,000 approved orphan ledgers and
2,000 approved orphan offload copies (4,000 objects, data + index) are fabricated in real wire
formats (``ledgerlens.sandbox.orphans``), planned, approved, published to the deletion topic, and
deleted by ``ledgerlens deleter --execute``, which re-verifies every item against the live stores
(ledger znode version and custom metadata, owner tenant, managed-ledger list, cursors, schema
locator; object size, ETag, user metadata, owner offload contexts) before deleting it.

Baseline, measured in the same run on a separate fabricated set: the operator's way today, one
unverified delete at a time (``zk.delete`` per ledger znode, ``delete_object`` per object).

Run under the Pulsar lock (it starts its own sandbox unless ``--sandbox DIR`` names a running one)::

    flock /tmp/ll-pulsar.lock .venv/bin/python bench/bench_deletion.py [--ledgers 10000 --copies 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ledgerlens.config import S3Source
from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.deleter import Deleter, DeleterConfig
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.metrics import DeletionMetrics
from ledgerlens.deletion.plan import build_plan, write_plan
from ledgerlens.deletion.publish import publish, pulsar_client
from ledgerlens.formats.paths import ledger_path
from ledgerlens.sandbox.orphans import audit_output, fabricate
from ledgerlens.sandbox.pulsar import AWS_DUMMY, PulsarSandbox

TENANT_NS = "ll-bench/ns"
ML = "ll-bench/ns/persistent/bench"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sandbox", type=Path, default=None, help="a running sandbox's workdir (default: start one)"
    )
    ap.add_argument("--ledgers", type=int, default=10_000)
    ap.add_argument("--copies", type=int, default=2_000)
    ap.add_argument("--baseline-ledgers", type=int, default=1_000)
    ap.add_argument("--baseline-copies", type=int, default=200)
    ap.add_argument("--parallelism", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=200)
    args = ap.parse_args(argv)
    os.environ.update(AWS_DUMMY)
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens.sandbox.seed import ensure_namespace

    work = Path(tempfile.mkdtemp(prefix="bench-deletion-"))
    box = PulsarSandbox(args.sandbox or work / "sandbox")
    own = args.sandbox is None
    figures: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        state = box.up(timeout=300) if own else box.state()
        figures["sandbox_up_s"] = round(time.monotonic() - t0, 1)
        ensure_namespace(state["web_url"], TENANT_NS, None)
        zk = KazooClient(hosts=state["zookeeper_hosts"], timeout=30)
        zk.start(timeout=30)
        s3 = boto3.client("s3", endpoint_url=state["s3_endpoint"], region_name="us-east-1")
        bucket = state["bucket"]

        # baseline: unverified deletes, one at a time
        t0 = time.monotonic()
        base = fabricate(
            zk,
            s3,
            bucket,
            managed_ledger=ML,
            ledgers=args.baseline_ledgers,
            copies=args.baseline_copies,
            first_id=90_000_000,
            seed=7,
        )
        figures["baseline_fabricate_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        for lid in base.ledger_ids:
            zk.delete(ledger_path(lid))
        for key in base.object_keys:
            s3.delete_object(Bucket=bucket, Key=key)
        dt = time.monotonic() - t0
        base_items = len(base.ledger_ids) + args.baseline_copies
        figures["baseline_items_per_s"] = round(base_items / dt, 1)
        print(f"baseline: {base_items} items deleted unverified one at a time in {dt:.1f} s", file=sys.stderr)

        t0 = time.monotonic()
        orphans = fabricate(
            zk,
            s3,
            bucket,
            managed_ledger=ML,
            ledgers=args.ledgers,
            copies=args.copies,
            first_id=80_000_000,
            seed=11,
        )
        figures["fabricate_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        out = audit_output(
            work / "audit",
            zk,
            s3,
            bucket,
            ledger_ids=orphans.ledger_ids,
            object_keys=orphans.object_keys,
            tenants=["ll-bench"],
        )
        plan = build_plan(out)
        plan_path = write_plan(plan, work / "plan.json")
        figures["plan_s"] = round(time.monotonic() - t0, 1)
        journal = Journal(work / "journal.jsonl")
        approve(
            plan_path,
            journal,
            plan_hash_given=plan["plan_hash"],
            approver="bench",
            reason="benchmark",
            out=work / "approval.json",
        )
        items = len(plan["items"])
        client = pulsar_client(state["service_url"])
        t0 = time.monotonic()
        sent = publish(work / "approval.json", journal, client, batch_size=1000).sent
        client.close()
        dt = time.monotonic() - t0
        figures["publish_per_s"] = round(sent / dt, 1)
        print(f"published {sent} messages in {dt:.1f} s", file=sys.stderr)

        idle = 5.0
        cfg = DeleterConfig(
            zookeeper=state["zookeeper_hosts"],
            service_url=state["service_url"],
            web_url=state["web_url"],
            s3=S3Source(bucket, endpoint_url=state["s3_endpoint"], max_in_flight=32),
            execute=True,
            until_idle_s=idle,
            parallelism=args.parallelism,
            batch_size=args.batch_size,
        )
        metrics = DeletionMetrics()
        t0 = time.monotonic()
        report = Deleter(cfg, journal, metrics).run()
        dt = report.seconds - idle
        deleted = report.outcomes.get("deleted", 0)
        figures.update(
            items=items,
            deleted=deleted,
            deleter_s=round(dt, 1),
            deletions_per_s=round(deleted / dt, 1),
            ledgers_per_s=round(metrics.value("deleted_ledgers") / dt, 1),
            ratio_vs_baseline=round((deleted / dt) / figures["baseline_items_per_s"], 2),
            outcomes=dict(report.outcomes),
        )
        left = sum(
            zk.exists(ledger_path(i)) is not None for i in orphans.ledger_ids[:: max(1, args.ledgers // 500)]
        )
        figures["sampled_ledgers_left"] = left
        zk.stop()
        zk.close()
    finally:
        if own:
            box.down()
    print(json.dumps(figures, indent=2))
    print(
        f"{figures['deleted']}/{figures['items']} approved items deleted with full re-verification in "
        f"{figures['deleter_s']} s: {figures['deletions_per_s']} deletions/s "
        f"({figures['ratio_vs_baseline']}x the unverified one-at-a-time baseline of "
        f"{figures['baseline_items_per_s']}/s; target >= 200/s)"
    )
    return 0 if figures["deleted"] == figures["items"] else 1


if __name__ == "__main__":
    sys.exit(main())
