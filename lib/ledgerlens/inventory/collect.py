"""Collect the inventory: schedule the sources' partitions as Spark tasks, write one Parquet table each.

Every store is an ``InventorySource`` (``ledgerlens.sources``): on the driver it plans the
partitions of a stage (cheap listings only: ``/ledgers`` level-1 and level-2 nodes, tenants and
namespaces, S3 key prefixes, snapshot byte ranges); each Spark task hands its partitions back to
the source, which reads them through its own connection at the task's share of the scan-wide rate
limit and yields rows, turned here into Arrow record batches (``mapInArrow``: no per-row Python to
JVM conversion). Stage order, as the audit rules require: BookKeeper first, then the Pulsar
metadata (managed ledgers, schemas, policies and tenants); the bucket (its listing, then the objects'
verification) in a thread beside them.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import InheritableThread, TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ledgerlens.errors import ConfigError
from ledgerlens.formats.delayed_bucket import BUCKET_PROPERTY_PREFIX
from ledgerlens.inventory import schemas
from ledgerlens.inventory.tables import (
    Counters,
    Inventory,
    StageJob,
    TableFiles,
    delete,
    exists,
    footer_rows,
    local_dir,
    local_rows,
    parquet_files,
    row_count,
    table_path,
    task_source_error,
    write,
    write_small,
    write_stage,
)
from ledgerlens.inventory.tasks import arrow_schema as _arrow_schema
from ledgerlens.inventory.tasks import batches as _batches
from ledgerlens.inventory.tasks import split
from ledgerlens.runtime.console import Progress, stage_bar
from ledgerlens.runtime.spark import INTERPRETED_ROWS
from ledgerlens.settings.config import BookieSource, S3Source, ZooKeeperSource
from ledgerlens.sources.base import PULSAR_STAGES, STAGES, InventorySource

if TYPE_CHECKING:
    from ledgerlens.offload.verdicts import Incremental

__all__ = ["Inventory", "collect_inventory", "default_sources", "load_inventory", "table_path"]

# A stage of at most this many partitions is read on the driver (a partition of the live ledger scan
# holds at most 10,000 ledgers, of the snapshot source about 20,000 nodes).
_DRIVER_ITEMS = 2
_DRIVER_ITEMS_FEW_SLOTS = 20
"""On a Spark of at most two task slots (``local[2]``: a laptop, a 2-core VM), without ``tasks`` set
and into a local ``out_dir``, a stage of up to this many partitions (a live ledger scan of 200,000
ledgers at most) is read on the driver: a job's fixed cost is seconds when cold (the executors'
Python workers and Arrow path starting), about the time the driver takes to read them. The limit
stays at 20 until the stages decoded in Python (managed ledgers, schemas, S3) are measured on the
driver too (docs/performance.md, "Collection")."""
_DRIVER_OBJECTS = 1_000  # offload objects verified on the driver (a few ranged reads each)
_DRIVER_OBJECTS_FEW_SLOTS = 100_000
"""On a Spark of at most two task slots, this many objects are verified on the driver (16 GETs in
flight, beside the metadata stages): a task would wait for a slot the ZooKeeper scans hold."""
_TASK_MIN_REQUESTS = 100  # with --s3-max-requests, each verification task may spend at least this many
SMALL_CLUSTER_LEDGERS = 20_000
"""Up to this many BookKeeper ledgers, the Pulsar metadata and the offload objects' verification are
read on the driver: a small cluster's collection waits on Spark's fixed cost per job, not on its data."""


# -- tasks -------------------------------------------------------------------------------------
def _verify_task(
    source: S3Source, deep: bool, counters: Any, max_requests: int | None, n_tasks: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function verifying the offload objects of one partition (uuid-hashed).

    Its rows are OFFLOAD_OBJECTS rows with ``prev`` (the previous verdict of the object, or null);
    partition ``i`` of ``n_tasks`` may spend its even share of ``max_requests`` GETs."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ledgerlens.offload.verdicts import VERDICTS, verify_incrementally  # botocore: bucket only
        from ledgerlens.offload.verify import VerifyStats
        from ledgerlens.sources import s3  # boto3: only with a bucket

        objects = [r for b in batches for r in b.to_pylist()]
        if not objects:
            return
        share = None
        if max_requests is not None:
            ctx = TaskContext.get()
            i = ctx.partitionId() if ctx is not None else 0
            share = max_requests // n_tasks + int(i < max_requests % n_tasks)
        previous = {o["key"]: o["prev"] for o in objects if o.get("prev")}
        stats = VerifyStats()
        client = s3.make_client(source)
        try:
            rows = verify_incrementally(
                client,
                objects,
                previous=previous,
                deep=deep,
                max_requests=share,
                max_in_flight=source.max_in_flight,
                stats=stats,
            )
            yield from _batches(rows, VERDICTS)
        finally:
            counters.add({f"offload_segments.{k}": v for k, v in stats.as_dict().items()})

    return run


def _verify_offload(
    spark: SparkSession,
    source: S3Source,
    deep: bool,
    out_dir: str,
    inv: Inventory,
    counters: Any,
    driver_reads: bool = True,
    incremental: Incremental | None = None,
    driver_objects: int = _DRIVER_OBJECTS,
) -> None:
    """The ``offload_segments`` table: every listed object verified by ranged reads, the objects of
    one offload (data and index) in one task; with ``incremental``, the previous run's verdicts of
    unchanged objects reused, a request budget, and this run's verdicts kept."""
    from ledgerlens.offload.verdicts import (  # botocore: bucket only
        VERDICTS,
        Incremental,
        load_verdicts,
        read_verdicts,
    )

    inc = incremental or Incremental()
    path = table_path(out_dir, "offload_segments")
    local = local_dir(out_dir)
    if driver_reads and local is not None:
        objects = local_rows(os.path.join(local, "offload_objects"), "offload_objects", driver_objects)
        if objects is not None:
            previous = load_verdicts(inc.reuse_from, deep=deep)
            _verify_small(source, deep, objects, local, counters, previous, inc)
            inv.tables["offload_segments"] = path
            return
    listed = spark.read.schema(schemas.OFFLOAD_OBJECTS).parquet(inv.tables["offload_objects"])
    kept = read_verdicts(inc.reuse_from, deep=deep)
    if kept is not None and kept.num_rows:
        prev = spark.createDataFrame(kept).select(
            F.col("key").alias("_prev_key"), F.struct(*[F.col(f.name) for f in VERDICTS.fields]).alias("prev")
        )
        listed = listed.join(prev, listed["key"] == prev["_prev_key"], "left").drop("_prev_key")
    else:
        listed = listed.withColumn("prev", F.lit(None).cast(VERDICTS))
    n = max(1, 4 * spark.sparkContext.defaultParallelism)
    if inc.max_requests is not None:  # a task's share of the budget is worth scheduling it for
        n = max(1, min(n, inc.max_requests // _TASK_MIN_REQUESTS))
    fn = _verify_task(source, deep, counters, inc.max_requests, n)
    tmp = table_path(out_dir, "_offload_verified")
    write(listed.repartition(n, "uuid").mapInArrow(fn, VERDICTS), tmp)
    done = spark.read.schema(VERDICTS).parquet(tmp)
    write(done.select(*schemas.columns(schemas.OFFLOAD_SEGMENTS)), path)
    if inc.verdicts_out:
        write(done.filter(F.col("error").isNull()).coalesce(1), inc.verdicts_out)
    delete(spark, tmp)
    inv.tables["offload_segments"] = path


def _verify_small(
    source: S3Source,
    deep: bool,
    objects: list[dict[str, Any]],
    local: str,
    counters: Any,
    previous: dict[str, dict[str, Any]] | None = None,
    incremental: Incremental | None = None,
) -> None:
    """``offload_segments`` of a few listed objects, verified on the driver and written by pyarrow
    (and this run's verdicts, with ``incremental.verdicts_out``)."""
    from ledgerlens.offload.verdicts import (  # botocore: bucket only
        VERDICTS,
        Incremental,
        verify_incrementally,
    )
    from ledgerlens.offload.verify import VerifyStats
    from ledgerlens.sources import s3  # boto3: only with a bucket

    inc = incremental or Incremental()
    stats = VerifyStats()
    files = TableFiles(local, ["offload_segments"])
    kept: list[dict[str, Any]] = []
    try:
        if objects:
            client = s3.make_client(source)
            rows = verify_incrementally(
                client,
                objects,
                previous=previous,
                deep=deep,
                max_requests=inc.max_requests,
                max_in_flight=source.max_in_flight,
                stats=stats,
            )
            for row in rows:
                files.put("offload_segments", row)
                if row["error"] is None:
                    kept.append(row)
        files.close()
    except BaseException:
        files.abort()
        raise
    finally:
        counters.add({f"offload_segments.{k}": v for k, v in stats.as_dict().items()})
    if inc.verdicts_out:
        target = local_dir(inc.verdicts_out) or inc.verdicts_out
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        part = os.path.join(target, "part-00000.zstd.parquet")
        with pq.ParquetWriter(part, _arrow_schema(VERDICTS), compression="zstd") as w:
            for batch in _batches(kept, VERDICTS):
                w.write_batch(batch)


_TASKS_PER_SLOT = {"bk_ledgers": 1}
"""Tasks per task slot of a stage without ``tasks`` set (else 4). The ledger scan's partitions are
alike (at most 10,000 ledgers each) and read at one rate, so one task per slot balances them; each
task more is one connection, one Python task and one Parquet file more (a third of the stage's CPU
at 100,000 ledgers on 2 slots: docs/performance.md, "Collection through Spark tasks")."""


def _n_tasks(spark: SparkSession, zk_tasks: int | None, n_items: int, stage: str = "") -> int:
    want = zk_tasks or _TASKS_PER_SLOT.get(stage, 4) * spark.sparkContext.defaultParallelism
    return max(1, min(want, n_items))


def _task_rate(spark: SparkSession, total: float | None, n_tasks: int) -> float | None:
    """The rate limit of one task: the scan-wide limit over the tasks that can run at once."""
    if not total or total <= 0:
        return None
    return total / max(1, min(n_tasks, spark.sparkContext.defaultParallelism))


def default_sources(zk: ZooKeeperSource, s3: S3Source | None = None) -> list[InventorySource]:
    """One live ZooKeeper holding both BookKeeper's and Pulsar's metadata (and the bucket, if any)."""
    from ledgerlens.sources.s3 import S3Listing  # boto3: only with a bucket
    from ledgerlens.sources.zookeeper import LiveZooKeeper  # kazoo: only for a live ZooKeeper

    out: list[InventorySource] = [LiveZooKeeper(zk)]
    if s3 is not None:
        out.append(S3Listing(s3))
    return out


def _bookie_task(
    zk: ZooKeeperSource, bookie: BookieSource, kind: str, counters: Any
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a bookie-read stage: ledger metadata from ZooKeeper, entries
    from the bookies (pipelined per ledger, pooled connections per bookie)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ledgerlens.sources import bookie as b  # pulls in google.protobuf: only with --read-bookies
        from ledgerlens.sources import zk_client as z  # kazoo: only with --read-bookies

        items = [r for batch in batches for r in batch.to_pylist()]
        if not items:
            return
        client = z.connect(zk.hosts, timeout_s=zk.timeout_s, auth=zk.auth)
        stats = b.BookieStats()
        try:
            reader = z.PipelinedReader(client, max_in_flight=zk.max_in_flight)
            with b.BookieClient(bookie, zk=client, ledgers_root=zk.ledgers_root) as bc:
                stats = bc.stats
                if kind == "bucket_snapshots":
                    rows = b.scan_bucket_snapshots(bc, reader, items, zk.ledgers_root)
                    yield from _batches(rows, schemas.BUCKET_SNAPSHOTS)
                else:
                    rows = b.scan_cursor_positions(bc, reader, items, zk.ledgers_root)
                    yield from _batches(rows, schemas.CURSOR_POSITIONS)
        finally:
            client.stop()
            client.close()
            counters.add({f"{kind}.{k}": v for k, v in stats.as_dict().items()})

    return run


def _bookie_items(spark: SparkSession, cursors_path: str, kind: str) -> DataFrame:
    """What the bookie stages read: bucket properties (ledger ids) or cursor ledgers, from ``cursors``."""
    cur = spark.read.schema(schemas.CURSORS).parquet(cursors_path).filter(F.col("error").isNull())
    base = ["managed_ledger", "tenant", "namespace", "cursor", "path"]
    if kind == "cursor_positions":
        return cur.filter(F.col("cursors_ledger_id") >= 0).select(*base, "cursors_ledger_id")
    props = F.map_filter("cursor_properties", lambda k, v: k.startswith(BUCKET_PROPERTY_PREFIX + "_"))
    return (
        cur.select(*base, F.explode(props).alias("property_key", "value"))
        .select(*base, "property_key", F.trim("value").try_cast("bigint").alias("ledger_id"))
        .filter(F.col("ledger_id").isNotNull())
    )


def collect_inventory(
    spark: SparkSession,
    sources: ZooKeeperSource | Sequence[InventorySource],
    s3: S3Source | None,
    out_dir: str,
    *,
    progress: bool | Progress = True,
    verify_offload: bool = True,
    deep_offload_check: bool = False,
    bookie: BookieSource | None = None,
    driver_reads: bool = True,
    incremental: Incremental | None = None,
) -> Inventory:
    """Inventory every stage of every source into Parquet tables, one Spark job per stage.

    Parameters
    ----------
    spark : SparkSession
        The session whose executors run the scan tasks.
    sources : ZooKeeperSource or sequence of InventorySource
        The stores to inventory (``ledgerlens.sources``): exactly one must provide ``bk_ledgers``;
        the Pulsar stages may come from several stores (their rows are unioned). A
        ``ZooKeeperSource`` means one live ZooKeeper holding everything.
    s3 : S3Source or None
        The offload bucket, added as a source when given (no S3 scan when None and no source lists it).
    out_dir : str
        Directory (local or Hadoop URI) receiving one Parquet directory per table.
    progress : bool or Progress
        Show a tqdm bar over the stages, or advance this run-wide ``Progress``.
    verify_offload, deep_offload_check : bool
        After the bucket listing: read each index object and each data object's first block
        header into the ``offload_segments`` table (``ledgerlens.offload.verify``);
        ``deep_offload_check`` streams every data block instead.
    incremental : Incremental or None
        Reuse the previous run's verdicts of unchanged objects, spend at most a number of GETs,
        keep this run's verdicts (``ledgerlens.offload.verdicts``); None: verify every object.
    bookie : BookieSource or None
        Read entries from the bookies (read-only): PIP-195 bucket snapshots (``bucket_snapshots``)
        and the last entry of every cursor ledger (``cursor_positions``), with the ledger metadata
        of the live ZooKeeper that holds the BookKeeper ledgers. None: no bookie reads.
    driver_reads : bool
        Read a small cluster's stages on the driver, without Spark jobs (see ``SMALL_CLUSTER_LEDGERS``);
        False: every stage in Spark tasks.

    Raises
    ------
    SourceError
        A store cannot be reached (raised before any Spark job starts).
    ConfigError
        No source, or several sources, provide the BookKeeper ledgers.
    """

    from ledgerlens.sources.s3 import S3Listing  # boto3: only with a bucket

    if isinstance(sources, ZooKeeperSource):
        srcs = default_sources(sources, s3)
    else:
        srcs = list(sources)
        if s3 is not None and not any("offload_objects" in x.stages for x in srcs):
            srcs.append(S3Listing(s3))
    bk = [x for x in srcs if "bk_ledgers" in x.stages]
    if len(bk) != 1:
        raise ConfigError(f"exactly one source must hold the BookKeeper ledgers, got {len(bk)}")
    inv = Inventory(out_dir=out_dir)
    for x in srcs:
        x.check()
    stages = [st for st in STAGES if any(st in x.stages for x in srcs)]
    listing = next((x for x in srcs if isinstance(x, S3Listing)), None)
    verify = verify_offload and listing is not None and "offload_objects" in stages
    bk_zk = sources if isinstance(sources, ZooKeeperSource) else getattr(bk[0], "zk", None)
    read_bookies = bookie is not None and isinstance(bk_zk, ZooKeeperSource) and "managed_ledgers" in stages
    bar = stage_bar(progress, len(stages) + int(verify) + int(read_bookies))
    run = _Collection(spark, srcs, out_dir, inv, bar, driver_reads)
    beside = None
    if listing is not None and all(isinstance(x, S3Listing) for x in srcs if "offload_objects" in x.stages):
        # the bucket's listing and verification wait on the object store, not on this machine
        beside = _BucketBeside(run, listing.s3 if verify else None, deep_offload_check, incremental)
        stages.remove("offload_objects")
        beside.start()
    try:
        for stage in stages:
            run.stage(stage)
            if beside is not None:
                beside.raise_failure()
        if beside is not None:
            beside.join()
        if read_bookies and isinstance(bk_zk, ZooKeeperSource) and bookie is not None:
            run.bookies(bk_zk, bookie)
    except BaseException:
        if beside is not None:
            beside.cancel()
        raise
    finally:
        bar.close()
    run.finish()
    return inv


class _Collection:
    """One collection's stages: each read on the driver or as one Spark job (see ``collect_inventory``)."""

    def __init__(
        self,
        spark: SparkSession,
        srcs: Sequence[InventorySource],
        out_dir: str,
        inv: Inventory,
        bar: Any,
        driver_reads: bool,
    ) -> None:
        self.spark, self.srcs, self.out_dir, self.inv, self.bar = spark, srcs, out_dir, inv, bar
        self.driver_reads = driver_reads
        self.counters = spark.sparkContext.accumulator({}, Counters())
        self.local_out = local_dir(out_dir) is not None  # the driver writes tables with pyarrow there
        self.few_slots = self.local_out and spark.sparkContext.defaultParallelism <= 2
        self.small = False  # a small cluster (known after the BookKeeper stage)

    def finish(self) -> None:
        """No stale table of an earlier run; the sources described, every table's rows counted."""
        spark, inv = self.spark, self.inv
        if not inv.s3_scanned:
            delete(spark, table_path(self.out_dir, "offload_objects"))
        if "offload_segments" not in inv.tables:
            delete(spark, table_path(self.out_dir, "offload_segments"))
        if "cursor_positions" not in inv.tables:
            for kind in ("bucket_snapshots", "cursor_positions"):
                delete(spark, table_path(self.out_dir, kind))
        inv.sources = [x.describe() for x in self.srcs]
        for t, p in inv.tables.items():
            inv.counts[t] = row_count(spark, t, p)
        inv.counts.update(self.counters.value)

    def step(self, label: str) -> None:
        """One stage done: counted under its own label (stages may run beside one another)."""
        done = getattr(self.bar, "done", None)
        if done is not None:
            done(label)
        else:
            self.bar.update(1)

    def stage(self, stage: str) -> None:
        """Read one stage of every source that has it into its tables."""
        spark, srcs, out_dir, inv = self.spark, self.srcs, self.out_dir, self.inv
        self.bar.set_description(f"collect {stage}")
        t0 = time.perf_counter()
        mine = [(i, x) for i, x in enumerate(srcs) if stage in x.stages]
        items = [(i, p) for i, x in mine for p in x.plan(stage)]
        want = min((x.tasks for _, x in mine if x.tasks), default=None)
        n = _n_tasks(spark, want, len(items), stage)
        rates = [_task_rate(spark, x.rate_limit, n) if stage in x.stages else None for x in srcs]
        try:
            if self.driver_reads and (
                len(items) <= (_DRIVER_ITEMS_FEW_SLOTS if self.few_slots and want is None else _DRIVER_ITEMS)
                or (stage in PULSAR_STAGES and self.small)
                or all(x.small(stage) for _, x in mine)
            ):
                # a few partitions (policies), or a small cluster's metadata: no job to schedule
                write_small(spark, srcs, stage, items, out_dir, inv, self.counters)
            else:
                job = StageJob(srcs, stage, split(items, n), rates, self.counters)
                write_stage(spark, job, out_dir, inv)
        except Exception as e:
            raise (task_source_error(e) or e) from None
        if stage == "bk_ledgers":
            # every topic and schema has ledgers: few ledgers, little Pulsar metadata to read
            rows = row_count(spark, stage, inv.tables[stage])
            self.small = self.local_out and rows <= SMALL_CLUSTER_LEDGERS
        if stage == "offload_objects":
            inv.s3_scanned = True
        inv.timings[stage] = time.perf_counter() - t0
        self.step(stage)

    def verify(self, s3: S3Source, deep: bool, incremental: Incremental | None) -> None:
        """The ``offload_segments`` table from the listed objects (``_verify_offload``)."""
        t0 = time.perf_counter()
        _verify_offload(
            self.spark, s3, deep, self.out_dir, self.inv, self.counters, self.driver_reads, incremental,
            driver_objects=_DRIVER_OBJECTS_FEW_SLOTS if self.few_slots else _DRIVER_OBJECTS,
        )  # fmt: skip
        self.inv.timings["offload_segments"] = time.perf_counter() - t0
        self.step("offload_segments")

    def bookies(self, zk: ZooKeeperSource, bookie: BookieSource) -> None:
        """Bucket snapshots and cursor-ledger positions read from the bookies (ledger metadata from
        ZooKeeper)."""
        self.bar.set_description("collect bookies")
        t0 = time.perf_counter()
        if "cursors" in self.inv.tables:
            for kind in ("bucket_snapshots", "cursor_positions"):
                path = table_path(self.out_dir, kind)
                items_df = _bookie_items(self.spark, self.inv.tables["cursors"], kind)
                slots = self.spark.sparkContext.defaultParallelism
                n = max(1, min(bookie.tasks or 2 * slots, items_df.count()))
                fn = _bookie_task(zk, bookie, kind, self.counters)
                write(items_df.repartition(n).mapInArrow(fn, schemas.INVENTORY[kind]), path)
                self.inv.tables[kind] = path
        self.inv.timings["bookies"] = time.perf_counter() - t0
        self.step("bookies")


class _BucketBeside:
    """The bucket's stage (its listing) and the objects' verification in a thread of their own, beside
    the metadata stages: they wait on the object store while those read ZooKeeper, so the collection
    takes about the longer of the two instead of their sum. An object written or removed while the
    metadata is read can then look missing or orphaned, as a ledger can between the BookKeeper and
    Pulsar stages: the audit re-verifies every such candidate before it reports it
    (docs/audit-rules.md, "Collection order and re-verification")."""

    def __init__(self, run: _Collection, s3: S3Source | None, deep: bool, inc: Incremental | None) -> None:
        self.run, self.s3, self.deep, self.inc = run, s3, deep, inc
        self.group = f"ledgerlens-bucket-{uuid.uuid4().hex[:12]}"
        self.error: BaseException | None = None
        self.thread = InheritableThread(target=self._work, name="ledgerlens-bucket", daemon=True)

    def _work(self) -> None:
        sc = self.run.spark.sparkContext
        sc.setJobGroup(self.group, "ledgerlens: the bucket's listing and verification", True)
        try:
            self.run.stage("offload_objects")
            if self.s3 is not None:
                self.run.verify(self.s3, self.deep, self.inc)
        except BaseException as e:  # noqa: BLE001  (raised in the collecting thread)
            self.error = e

    def start(self) -> None:
        self.thread.start()

    def raise_failure(self) -> None:
        """Raise the bucket side's error as soon as it failed (no wait for the other stages)."""
        if self.error is not None:
            self.thread.join()
            raise self.error

    def join(self) -> None:
        while self.thread.is_alive():
            self.thread.join(timeout=0.5)  # a Ctrl-C still reaches the collecting thread
        self.raise_failure()

    def cancel(self) -> None:
        """Stop the bucket side's Spark jobs (its driver reads end with the process)."""
        self.run.spark.sparkContext.cancelJobGroup(self.group)
        self.thread.join(timeout=2)


def load_inventory(spark: SparkSession, out_dir: str) -> dict[str, DataFrame]:
    """The inventory tables found under ``out_dir``, read with their declared schemas.

    A small inventory on a local disk (up to ``spark.INTERPRETED_ROWS`` rows) is read by pyarrow
    and handed to the JVM as Arrow: the audit's plans then scan rows in memory, and a cold JVM
    never starts Spark's Parquet and Hadoop readers (seconds of a small audit).
    """
    local = local_dir(out_dir)
    small = _small_local_tables(local) if local is not None else None
    if small is not None:
        return {t: spark.createDataFrame(data) for t, data in small.items()}
    out: dict[str, DataFrame] = {}
    for table, schema in schemas.INVENTORY.items():
        path = table_path(out_dir, table)
        if exists(spark, path):
            out[table] = spark.read.schema(schema).parquet(path)
    return out


def _small_local_tables(local: str) -> dict[str, pa.Table] | None:
    """The inventory tables under the local directory ``local`` as Arrow tables with their declared
    schemas, when they hold at most ``spark.INTERPRETED_ROWS`` rows together; else None (also when
    pyarrow cannot read one as declared: Spark reads them then, and says why if it cannot either)."""
    dirs = {t: os.path.join(local, t) for t in schemas.INVENTORY if os.path.isdir(os.path.join(local, t))}
    if any(e.is_dir() for d in dirs.values() for e in os.scandir(d)):  # partitioned: Spark's to read
        return None
    files = {t: parquet_files(d) for t, d in dirs.items()}
    try:
        if footer_rows(f for fs in files.values() for f in fs) > INTERPRETED_ROWS:
            return None
        return {t: pq.read_table(fs, schema=_arrow_schema(schemas.INVENTORY[t])) for t, fs in files.items()}
    except (OSError, pa.ArrowException):
        return None
