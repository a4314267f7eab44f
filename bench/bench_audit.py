"""Benchmark ``ledgerlens.audit.run_audit`` on a generated inventory (10M ledgers, 1M topics).

Generates the inventory with Spark (``spark.range`` + column expressions) as Parquet under
``--dir``, then in one run measures:

(a) reading every inventory table: ``count()`` (Parquet metadata only) and a full read
    (``sum(hash(*columns))`` over every column of every table, the honest baseline);
(b) ``run_audit(...)`` written to Parquet;

the ratio (b)/(a, full read), peak memory (driver Python RSS and the JVM's RSS, sampled), and on
Linux where the JVM's CPU went during (a) and (b): its JIT compiler threads, its garbage collector's,
and the rest (Spark's tasks, query planning, Janino compiling the generated classes).

The JVM compiles as the CLI's would for the generated cluster (``--quick-compile auto``: C1 only up
to ``spark.QUICK_COMPILE_ZNODES`` znodes, so for 1M ledgers, not for 10M; (f) below too); the full
read (a) runs in that JVM too.

With ``--audit-scale N`` (N > 1) it times instead (f): after the same full read (a), ``run_audit`` of
the same layout N times smaller (generated beside it), in this fresh JVM. That is the audit's fixed
cost, which no speed-up proportional to the data removes: its planning, Spark's generated classes
and the JIT compiling both (``make bench`` runs it at 64 beside each size).

    .venv/bin/python bench/bench_audit.py --ledgers 1000000 --topics 100000
    .venv/bin/python bench/bench_audit.py                      # 10M ledgers, 1M topics
    .venv/bin/python bench/bench_audit.py --ledgers 1000000 --topics 100000 --audit-scale 64

The layout: data ledger ``i`` belongs to topic ``i % topics`` at position ``i // topics`` (ids grow
with position, no window needed); then cursor, schema, compacted and bucket ledgers; a sprinkling
of anomalies (missing, orphan, unattributed, retention, open, inactive cursor, offload, corrupt).
``bk_ledgers`` is written in ledger-id order (the collector lists the ledger znodes so);
``ml_ledgers`` and ``cursors`` one managed ledger's rows together, as the collector writes them
(one managed-ledger znode at a time: ``inventory.rows.ManagedLedgerColumns``), in two files.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

import psutil
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledgerlens.audit import run_audit, summarize
from ledgerlens.inventory import schemas
from ledgerlens.runtime.spark import QUICK_COMPILE, configure, quick_compile_for, settings_for_rows
from ledgerlens.settings.config import AuditConfig

NOW = 1_800_000_000_000
H = 3_600_000
D = 24 * H
BUCKET = "tier"
BUCKET_KEY = "#pulsar.internal.delayed.bucket_1_2"


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """The columns of ``schema`` in order and type; absent ones null."""
    have = set(df.columns)
    return df.select(
        *[
            (F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
    )


def by_managed_ledger(df: DataFrame, topic: str, order: str) -> DataFrame:
    """``df`` in two files, each topic's rows together in ``order`` (as the collector writes them)."""
    return df.repartitionByRange(2, topic).sortWithinPartitions(topic, order)


class Layout:
    """Id ranges and name expressions of the generated cluster."""

    def __init__(self, ledgers: int, topics: int) -> None:
        self.topics = topics
        self.cursors = topics + topics // 2  # 1 per topic, 2 for half of them
        self.cursor_ledgers = (self.cursors + 2) // 3  # cursors with c % 3 == 0
        self.schema_ledgers = (topics + 9) // 10
        self.compacted = (topics + 49) // 50
        self.buckets = (topics + 49) // 50
        self.orphans = max(ledgers // 1000, 1)
        self.unattributed = max(ledgers // 2000, 1)
        extra = self.cursor_ledgers + self.schema_ledgers + self.compacted + self.buckets
        self.data = ledgers - extra - self.orphans - self.unattributed
        if self.data < 2 * topics:
            raise SystemExit(f"--ledgers {ledgers} too small for --topics {topics}")
        self.cl0 = self.data
        self.sl0 = self.cl0 + self.cursor_ledgers
        self.cp0 = self.sl0 + self.schema_ledgers
        self.bl0 = self.cp0 + self.compacted
        self.or0 = self.bl0 + self.buckets
        self.un0 = self.or0 + self.orphans

    def last_of(self, topic: Column) -> Column:
        """Ledger id of a topic's last data ledger."""
        return topic + F.lit(self.topics) * F.floor((F.lit(self.data - 1) - topic) / self.topics)

    @staticmethod
    def local(topic: Column) -> Column:
        """A topic's local name: distinct and as incompressible as real names (a hash in it)."""
        return F.format_string("topic-%d-%s", topic, F.substring(F.sha2(topic.cast("string"), 256), 1, 16))

    @staticmethod
    def ml(topic: Column) -> Column:
        return F.format_string("tenant-%d/ns-%d/persistent/%s", topic % 20, topic % 1000, Layout.local(topic))

    @staticmethod
    def topic_name(topic: Column) -> Column:
        return F.concat(F.lit("persistent://"), Layout.ns(topic), F.lit("/"), Layout.local(topic))

    def cursor(self, c: Column) -> Column:
        """Name of cursor ``c`` (of topic ``c % topics``): distinct per cursor, hashed like real names."""
        return F.format_string(
            "sub-%d-%s", F.floor(c / self.topics), F.substring(F.sha2(c.cast("string"), 224), 1, 12)
        )

    @staticmethod
    def ns(topic: Column) -> Column:
        return F.format_string("tenant-%d/ns-%d", topic % 20, topic % 1000)

    @staticmethod
    def tenant(topic: Column) -> Column:
        return F.format_string("tenant-%d", topic % 20)


def generate(spark: SparkSession, ledgers: int, topics: int, out: Path) -> dict[str, int]:
    """Write the inventory tables as Parquet under ``out``; return the expected row counts."""
    g = Layout(ledgers, topics)
    idc = F.col("id")

    # ---- data ledgers, as listed by the managed ledgers
    topic = idc % topics
    pos = F.floor(idc / topics)
    is_last = idc + topics >= g.data
    npos = F.floor((F.lit(g.data - 1) - topic) / topics) + 1
    ctime = F.when(is_last, F.lit(NOW - 30 * 60_000)).otherwise(F.lit(NOW) - (npos - pos) * 2 * H)
    offloaded = (topic % 20 == 3) & (pos <= 1) & ~is_last
    missing = (idc % 10007 == 5) & ~is_last & ~offloaded
    kept_in_bk = offloaded & (topic % 2000 == 3)  # offloaded_not_deleted
    uuid = F.format_string("%08x-0000-4000-8000-%012x", topic, idc)
    data = spark.range(g.data).select(
        idc.alias("ledger_id"),
        topic.alias("topic"),
        pos.cast("int").alias("position"),
        is_last.alias("is_last"),
        ctime.alias("ctime_ms"),
        offloaded.alias("offloaded"),
        missing.alias("missing"),
        kept_in_bk.alias("kept_in_bk"),
        uuid.alias("uuid"),
    )
    ml_ledgers = by_managed_ledger(data, "topic", "position").select(
        Layout.ml(F.col("topic")).alias("managed_ledger"),
        Layout.tenant(F.col("topic")).alias("tenant"),
        Layout.ns(F.col("topic")).alias("namespace"),
        "ledger_id",
        "position",
        "is_last",
        F.when(F.col("is_last"), 0).otherwise(50_000).cast("long").alias("entries"),
        F.when(F.col("is_last"), 0).otherwise(64 * 1024 * 1024 + F.col("ledger_id") % 1024).alias("size"),
        F.when(F.col("is_last"), 0).otherwise(F.col("ctime_ms") + H).alias("timestamp_ms"),
        F.when(F.col("offloaded"), F.col("uuid")).alias("offload_uuid"),
        F.when(F.col("offloaded"), True).alias("offload_complete"),
        F.when(F.col("offloaded"), ~F.col("kept_in_bk")).alias("offload_bookkeeper_deleted"),
        F.when(F.col("offloaded"), F.lit(NOW - 12 * H)).alias("offload_timestamp_ms"),
        F.when(F.col("offloaded"), F.lit("aws-s3")).alias("offload_driver"),
        F.when(F.col("offloaded"), F.lit(BUCKET)).alias("offload_bucket"),
    )

    meta = F.create_map(
        F.lit("application"),
        F.lit("pulsar"),
        F.lit("component"),
        F.lit("managed-ledger"),
        F.lit("pulsar/managed-ledger"),
        Layout.ml(F.col("topic")),
    )

    def bk_rows(df: DataFrame, **cols: Column) -> DataFrame:
        base = {
            "path": F.format_string(
                "/ledgers/%02d/%04d/L%04d",
                F.floor(F.col("ledger_id") / 100_000_000) % 100,
                F.floor(F.col("ledger_id") / 10_000) % 10_000,
                F.col("ledger_id") % 10_000,
            ),
            "format_version": F.lit(3),
            "state": F.lit("CLOSED"),
            "ensemble_size": F.lit(3),
            "write_quorum": F.lit(2),
            "ack_quorum": F.lit(2),
            "length": F.lit(64 * 1024 * 1024) + F.col("ledger_id") % 1024,
            "last_entry_id": F.lit(49_999),
            "ctime_ms": F.col("ctime_ms"),
            "znode_ctime_ms": F.col("ctime_ms"),
            "znode_mtime_ms": F.col("ctime_ms") + H,
            "znode_version": F.lit(2),
            "digest_type": F.lit("CRC32C"),
            "bookies": F.array(
                *[
                    F.format_string(
                        "bookie-%03d.bookkeeper.prod-eu-west-1.svc.cluster.local:3181",
                        (F.col("ledger_id") * 7 + i * 101) % 300,
                    )
                    for i in range(3)
                ]
            ),
            "custom_metadata": meta,
            "application": F.lit("pulsar"),
            "component": F.lit("managed-ledger"),
            "managed_ledger": Layout.ml(F.col("topic")),
        }
        base.update(cols)
        return df.select("ledger_id", "topic", *[c.alias(n) for n, c in base.items()])

    bk_data = bk_rows(
        data.filter(~F.col("missing") & (~F.col("offloaded") | F.col("kept_in_bk"))),
        state=F.when(F.col("is_last"), "OPEN").otherwise("CLOSED"),
        ctime_ms=F.when(F.col("is_last") & (F.col("topic") % 10_000 == 7), F.lit(NOW - 30 * D)).otherwise(
            F.col("ctime_ms")
        ),
    )
    # ---- cursors
    c = F.col("id")
    ctopic = c % topics
    slow = c % 97 == 0
    cursors = by_managed_ledger(spark.range(g.cursors).withColumn("t", ctopic), "t", "id").select(
        Layout.ml(ctopic).alias("managed_ledger"),
        Layout.tenant(ctopic).alias("tenant"),
        Layout.ns(ctopic).alias("namespace"),
        g.cursor(c).alias("cursor"),
        g.cursor(c).alias("cursor_node"),
        F.format_string("/managed-ledgers/%s/%s", Layout.ml(ctopic), g.cursor(c)).alias("path"),
        F.lit("NONE").alias("compression"),
        F.when(c % 3 == 0, F.lit(g.cl0) + F.floor(c / 3)).otherwise(-1).alias("cursors_ledger_id"),
        F.when(slow, ctopic).otherwise(g.last_of(ctopic)).alias("mark_delete_ledger_id"),
        F.lit(10).cast("long").alias("mark_delete_entry_id"),
        F.when(slow, F.lit(NOW - 30 * D)).otherwise(F.lit(NOW - 60_000)).alias("last_active_ms"),
        F.when(
            (c < topics) & (ctopic % 50 == 0),
            F.create_map(F.lit("CompactedTopicLedger"), (F.lit(g.cp0) + F.floor(ctopic / 50)).cast("long")),
        ).alias("properties"),
        F.when(
            (c < topics) & (ctopic % 50 == 1),
            F.create_map(F.lit(BUCKET_KEY), (F.lit(g.bl0) + F.floor(ctopic / 50)).cast("string")),
        ).alias("cursor_properties"),
        F.lit(0).alias("individual_deleted_ranges"),
        F.lit(NOW - 30 * D).alias("znode_ctime_ms"),
        F.lit(NOW - 60_000).alias("znode_mtime_ms"),
        F.lit(5).alias("znode_version"),
    )
    cl = spark.range(g.cursor_ledgers).select(
        (F.lit(g.cl0) + F.col("id")).alias("ledger_id"),
        ((F.col("id") * 3) % topics).alias("topic"),
        g.cursor(F.col("id") * 3).alias("cursor"),
        F.lit(NOW - 2 * D).alias("ctime_ms"),
    )
    bk_cursor = bk_rows(cl, cursor=F.col("cursor"))
    sl = spark.range(g.schema_ledgers).select(
        (F.lit(g.sl0) + F.col("id")).alias("ledger_id"),
        (F.col("id") * 10).alias("topic"),
        F.lit(NOW - 9 * D).alias("ctime_ms"),
    )
    sid = F.format_string(
        "tenant-%d/ns-%d/%s", F.col("topic") % 20, F.col("topic") % 1000, Layout.local(F.col("topic"))
    )
    bk_schema = bk_rows(
        sl, component=F.lit("schema"), managed_ledger=F.lit(None).cast("string"), schema_id=sid
    )
    schema_ledgers = sl.select(
        sid.alias("schema_id"),
        F.concat(F.lit("/schemas/"), sid).alias("path"),
        Layout.tenant(F.col("topic")).alias("tenant"),
        Layout.ns(F.col("topic")).alias("namespace"),
        F.lit(0).cast("long").alias("version"),
        "ledger_id",
        F.lit(0).cast("long").alias("entry_id"),
        F.lit(True).alias("is_latest"),
        F.lit(NOW - 9 * D).alias("znode_mtime_ms"),
    )
    topic_name = Layout.topic_name(F.col("topic"))
    cp = spark.range(g.compacted).select(
        (F.lit(g.cp0) + F.col("id")).alias("ledger_id"),
        (F.col("id") * 50).alias("topic"),
        F.lit(NOW - D).alias("ctime_ms"),
    )
    bk_compacted = bk_rows(
        cp,
        component=F.lit("compacted-ledger"),
        managed_ledger=F.lit(None).cast("string"),
        compacted_topic=topic_name,
    )
    bl = spark.range(g.buckets).select(
        (F.lit(g.bl0) + F.col("id")).alias("ledger_id"),
        (F.col("id") * 50 + 1).alias("topic"),
        F.lit(NOW - D).alias("ctime_ms"),
    )
    bk_bucket = bk_rows(
        bl,
        component=F.lit("delayed-index-bucket"),
        managed_ledger=F.lit(None).cast("string"),
        delayed_topic=topic_name,
        bucket_key=F.lit(BUCKET_KEY),
        delayed_cursor=g.cursor(F.col("topic")),
    )
    orph = spark.range(g.orphans).select(
        (F.lit(g.or0) + F.col("id")).alias("ledger_id"),
        (F.col("id") * 7 % topics).alias("topic"),
        F.lit(NOW - 40 * D).alias("ctime_ms"),
    )
    bk_orphan = bk_rows(orph)
    un = spark.range(g.unattributed).select(
        (F.lit(g.un0) + F.col("id")).alias("ledger_id"),
        F.lit(0).cast("long").alias("topic"),
        F.lit(NOW - 400 * D).alias("ctime_ms"),
    )
    bk_unattr = bk_rows(
        un,
        application=F.lit(None).cast("string"),
        component=F.lit(None).cast("string"),
        managed_ledger=F.lit(None).cast("string"),
        custom_metadata=F.lit(None).cast("map<string,string>"),
    )
    bk = bk_data
    for part in (bk_cursor, bk_schema, bk_compacted, bk_bucket, bk_orphan, bk_unattr):
        bk = bk.unionByName(part, allowMissingColumns=True)
    # a few undecodable ledger znodes
    bk = bk.withColumn(
        "error", F.when(F.col("ledger_id") % 1_000_003 == 11, F.lit("truncated LedgerMetadataFormat"))
    )
    for c_ in (
        "state",
        "length",
        "ctime_ms",
        "custom_metadata",
        "application",
        "component",
        "managed_ledger",
    ):
        bk = bk.withColumn(c_, F.when(F.col("error").isNull(), F.col(c_)))

    # ---- managed ledgers, policies, offload objects
    t = F.col("id")
    managed_ledgers = spark.range(topics).select(
        Layout.ml(t).alias("managed_ledger"),
        F.concat(F.lit("/managed-ledgers/"), Layout.ml(t)).alias("path"),
        Layout.tenant(t).alias("tenant"),
        Layout.ns(t).alias("namespace"),
        Layout.topic_name(t).alias("topic"),
        F.lit("NONE").alias("compression"),
        (F.floor((F.lit(g.data - 1) - t) / topics) + 1).cast("int").alias("ledger_count"),
        F.lit(NOW - 30 * D).alias("znode_ctime_ms"),
        F.lit(NOW - H).alias("znode_mtime_ms"),
        F.lit(7).alias("znode_version"),
        g.last_of(t).alias("last_ledger_id"),
        F.lit(False).alias("terminated"),
    )
    n = F.col("id")
    policies = spark.range(1000).select(
        F.format_string("tenant-%d", n % 20).alias("tenant"),
        F.format_string("tenant-%d/ns-%d", n % 20, n).alias("namespace"),
        F.format_string("/admin/policies/tenant-%d/ns-%d", n % 20, n).alias("path"),
        F.when(n % 100 == 7, 60).otherwise(7 * 24 * 60).cast("long").alias("retention_minutes"),
        F.lit(-1).cast("long").alias("retention_mb"),
        F.lit(False).alias("deleted"),
    )
    off = data.filter(F.col("offloaded"))
    obj_rows = off.select(
        "uuid", "ledger_id", F.explode(F.array(F.lit("data"), F.lit("index"))).alias("role")
    ).filter(~((F.col("ledger_id") % 997 == 3) & (F.col("role") == "index")))  # some index objects lost
    orphan_objs = spark.range(max(ledgers // 10_000, 1)).select(
        F.format_string("dead0000-0000-4000-8000-%012x", F.col("id")).alias("uuid"),
        (F.col("id") + 10**12).alias("ledger_id"),
        F.explode(F.array(F.lit("data"), F.lit("index"))).alias("role"),
    )
    objs = obj_rows.unionByName(orphan_objs).select(
        F.lit(BUCKET).alias("bucket"),
        F.concat(
            F.col("uuid"),
            F.lit("-ledger-"),
            F.col("ledger_id").cast("string"),
            F.when(F.col("role") == "index", F.lit("-index")).otherwise(F.lit("")),
        ).alias("key"),
        F.when(F.col("role") == "index", 4096).otherwise(64 * 1024 * 1024).cast("long").alias("size"),
        F.when(F.col("ledger_id") >= 10**12, F.lit(NOW - 30 * D))
        .otherwise(NOW - 12 * H)
        .alias("last_modified_ms"),
        "uuid",
        "ledger_id",
        "role",
        F.lit("ledger").alias("layout"),
    )
    tables = {
        "bk_ledgers": bk,
        "managed_ledgers": managed_ledgers,
        "ml_ledgers": ml_ledgers,
        "cursors": cursors,
        "schema_ledgers": schema_ledgers,
        "namespace_policies": policies,
        "offload_objects": objs,
        "pulsar_tenants": spark.range(20).select(
            F.format_string("tenant-%d", n).alias("tenant"),
            F.format_string("/admin/policies/tenant-%d", n).alias("path"),
            F.lit("zk:bench").alias("store"),
        ),
    }
    counts = {}
    for name, df in tables.items():
        t0 = time.monotonic()
        conform(df, schemas.INVENTORY[name]).write.mode("overwrite").parquet(str(out / name))
        counts[name] = spark.read.parquet(str(out / name)).count()
        print(f"  wrote {name:<20} {counts[name]:>12,} rows in {time.monotonic() - t0:6.1f} s", flush=True)
    return counts


def ensure_inventory(spark: SparkSession, inv: Path, ledgers: int, topics: int, reuse: bool) -> None:
    """Generate the inventory of ``ledgers`` / ``topics`` under ``inv`` unless ``reuse`` finds it."""
    if reuse and (inv / "_counts").exists():
        return
    t0 = time.monotonic()
    shutil.rmtree(inv, ignore_errors=True)
    inv.mkdir(parents=True)
    print(f"generating {ledgers:,} ledgers / {topics:,} topics under {inv}", flush=True)
    counts = generate(spark, ledgers, topics, inv)
    (inv / "_counts").write_text(repr(counts))
    print(f"generated in {time.monotonic() - t0:.1f} s", flush=True)


class Sampler:
    """Calls ``sample`` in a thread of its own every 0.25 s, from the start of a ``with`` to its end."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(0.25):
                return

    def __enter__(self) -> Self:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


class PeakMemory(Sampler):
    """The peak RSS of this process and of its children (the JVM)."""

    def __init__(self) -> None:
        super().__init__()
        self.me = psutil.Process(os.getpid())
        self.driver = 0
        self.jvm = 0

    def sample(self) -> None:
        try:
            self.driver = max(self.driver, self.me.memory_info().rss)
            kids = self.me.children(recursive=True)
            self.jvm = max(self.jvm, sum(k.memory_info().rss for k in kids if "java" in k.name()))
        except psutil.Error:
            pass


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(stat: str) -> float:
    """User + system CPU seconds of a ``/proc/.../stat`` line (the command may hold spaces)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class JvmCpu(Sampler):
    """The CPU seconds a JVM has used, read from ``/proc`` (Linux): ``all`` (exited threads included),
    ``jit`` (its C1 and C2 compiler threads) and ``gc`` (its collector's threads).

    HotSpot names those threads "C1 CompilerThre…", "C2 CompilerThre…", "GC Thread#N", "G1 …", and
    may stop a compiler thread it no longer needs, taking its time out of ``/proc``: each thread's
    time is kept as last seen, read every 0.25 s (within ``with``) and at each ``reading``."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self._base = Path(f"/proc/{pid}")
        self._seen: dict[str, tuple[str, float]] = {}  # thread id: (role, CPU seconds)
        self._lock = threading.Lock()

    def sample(self) -> None:
        self.reading()

    def reading(self) -> dict[str, float] | None:
        """CPU seconds used so far, by role; None where ``/proc`` does not say."""
        with self._lock:
            try:
                total = _cpu_seconds((self._base / "stat").read_text())
                for task in (self._base / "task").iterdir():
                    try:
                        stat = (task / "stat").read_text()
                    except OSError:  # exited meanwhile
                        continue
                    name = stat[stat.index("(") + 1 : stat.rindex(")")]
                    if name.startswith(("C1 Compiler", "C2 Compiler")):
                        self._seen[task.name] = ("jit", _cpu_seconds(stat))
                    elif name.startswith(("GC Thread", "G1 ")):
                        self._seen[task.name] = ("gc", _cpu_seconds(stat))
            except (OSError, ValueError, IndexError):
                return None
            out = {"all": total, "jit": 0.0, "gc": 0.0}
            for role, secs in self._seen.values():
                out[role] += secs
            return out


def cpu_used(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """CPU seconds used between two ``JvmCpu.reading``s."""
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in after}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=10_000_000)
    ap.add_argument("--topics", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/ledgerlens-bench-audit")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="8g", help="JVM heap of the local driver (24 GiB machine)")
    ap.add_argument("--shuffle-partitions", type=int, default=None, help="default: 1 per ~250k ledgers, >= 8")
    ap.add_argument("--reuse", action="store_true", help="keep an inventory already generated in --dir")
    ap.add_argument("--explain", action="store_true", help="print the physical plan of run_audit")
    ap.add_argument(
        "--audit-scale",
        type=int,
        default=1,
        help="time (f) instead of (b): run_audit of the layout N times smaller, after the same full read",
    )
    ap.add_argument(
        "--quick-compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="the JVM compiles with C1 only (spark.QUICK_COMPILE); auto: as the CLI would for the generated "
        "cluster (its znodes estimated as ledgers + 3 x topics)",
    )
    args = ap.parse_args(argv)

    root = Path(args.dir)
    inv = root / f"inventory-{args.ledgers}-{args.topics}"
    scale = max(1, args.audit_scale)
    audited = root / f"inventory-{args.ledgers // scale}-{args.topics // scale}"
    partitions = args.shuffle_partitions or max(8, args.ledgers // 250_000)
    # the full-size cluster's, also for (f): the fixed cost of that audit, in its JVM
    znodes = args.ledgers + 3 * args.topics  # ledgers, then managed ledgers, cursors and more
    quick = args.quick_compile == "on" or (args.quick_compile == "auto" and quick_compile_for(znodes))
    builder = configure(
        SparkSession.builder,
        master=args.master,
        app_name="bench-audit",
        shuffle_partitions=partitions,
        quick_compile=quick,
    )
    builder = builder.config("spark.driver.memory", args.driver_memory).config(
        "spark.sql.adaptive.enabled", "true"
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm_cpu = JvmCpu(int(spark._jvm.java.lang.ProcessHandle.current().pid()))  # type: ignore[union-attr]

    t0 = time.monotonic()
    ensure_inventory(spark, inv, args.ledgers, args.topics, args.reuse)
    if scale > 1:  # kept with --reuse too; generated here, it warms this JVM (an underestimate)
        ensure_inventory(spark, audited, args.ledgers // scale, args.topics // scale, args.reuse)
    gen_s = time.monotonic() - t0
    disk = sum(f.stat().st_size for f in inv.rglob("*.parquet"))

    def load(at: Path = inv) -> dict[str, DataFrame]:
        # the tables the generator writes (no bookie reads, no offload verification)
        return {
            n: spark.read.schema(s).parquet(str(at / n))
            for n, s in schemas.INVENTORY.items()
            if (at / n).exists()
        }

    cfg = AuditConfig(as_of_ms=NOW)
    out = root / "findings"
    figures: dict[str, Any] = {}
    with PeakMemory() as mem, jvm_cpu:
        t = time.monotonic()
        rows = {n: df.count() for n, df in load().items()}
        figures["a_count"] = time.monotonic() - t
        cpu0, t = jvm_cpu.reading(), time.monotonic()
        for _name, df in load().items():
            cols = [
                F.map_entries(f.name) if isinstance(f.dataType, T.MapType) else F.col(f.name)
                for f in df.schema
            ]
            df.select(F.sum(F.hash(*cols).cast("long"))).collect()  # every column decoded
        figures["a_full"] = time.monotonic() - t
        cpu1 = jvm_cpu.reading()
        # the settings an audit of the audited rows runs with (``spark.sized_for``); of the full-size
        # audit but the partition count, which is this benchmark's own option
        cores = spark.sparkContext.defaultParallelism
        counts = rows if scale == 1 else ast.literal_eval((audited / "_counts").read_text())
        audited_rows = sum(counts.values())
        for key, value in settings_for_rows(audited_rows, cores).items():
            if scale > 1 or key != "spark.sql.shuffle.partitions":
                spark.conf.set(key, value)
        tables = load(audited)
        t = time.monotonic()  # run_audit materializes its one big join eagerly: time it too
        findings = run_audit(tables, cfg, offload_bucket=BUCKET)
        if args.explain:
            findings.explain(mode="formatted")
        findings.write.mode("overwrite").parquet(str(out))
        figures["b_audit"] = time.monotonic() - t
        cpu2 = jvm_cpu.reading()
    summary = summarize(spark.read.parquet(str(out)))
    spark.stop()

    gib = 1024**3
    print()
    print(f"inventory: {sum(rows.values()):,} rows, {disk / gib:.2f} GiB Parquet; generated in {gen_s:.0f} s")
    for n, v in rows.items():
        print(f"  {n:<20} {v:>12,}")
    print(f"master {args.master}, shuffle partitions {partitions}, driver memory {args.driver_memory}")
    jit = f"C1 only ({QUICK_COMPILE}), as the CLI for about {znodes:,} znodes" if quick else "C1 and C2"
    print(f"JIT compilers (reads and audit alike): {jit}")
    print()
    print("| measure | seconds |")
    print("|---|---:|")
    print(f"| (a) read + count every table (Parquet metadata) | {figures['a_count']:.1f} |")
    print(f"| (a) full read of every column, sum(hash(*)) | {figures['a_full']:.1f} |")
    audit_s, ratio = figures["b_audit"], figures["b_audit"] / figures["a_full"]
    if scale > 1:
        small = f"{args.ledgers // scale:,} ledgers / {args.topics // scale:,} topics"
        print(f"| (f) run_audit of the layout {scale}x smaller ({small}) to Parquet | {audit_s:.1f} |")
        print(f"| ratio (f) / (a full read) | {ratio:.2f}x |")
    else:
        print(f"| (b) run_audit written to Parquet | {audit_s:.1f} |")
        print(f"| ratio (b) / (a full read) | {ratio:.2f}x |")
        print(f"| ratio (b) / (a count) | {audit_s / max(figures['a_count'], 1e-9):.2f}x |")
    read_cpu, audit_cpu = cpu_used(cpu0, cpu1), cpu_used(cpu1, cpu2)
    step = "(f)" if scale > 1 else "(b)"
    if read_cpu and audit_cpu:
        for what, c in (("(a) full read", read_cpu), (step, audit_cpu)):
            split = f"{c['all']:.1f} / {c['jit']:.1f} / {c['gc']:.1f}"
            print(f"| JVM CPU seconds during {what}: all / JIT compilers / GC | {split} |")
        rest = (audit_cpu["all"] - audit_cpu["jit"] - audit_cpu["gc"]) / max(
            read_cpu["all"] - read_cpu["jit"] - read_cpu["gc"], 1e-9
        )
        print(f"| ratio of JVM CPU but JIT and GC, {step} / (a full read) | {rest:.2f}x |")
    print(f"| peak RSS driver (Python) | {mem.driver / gib:.2f} GiB |")
    print(f"| peak RSS JVM | {mem.jvm / gib:.2f} GiB |")
    print()
    print(f"findings{' of the smaller inventory' if scale > 1 else ''}: {summary['total_findings']:,}")
    for k, v in summary["counts_by_kind"].items():
        print(f"  {k:<24} {v:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
