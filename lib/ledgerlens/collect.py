"""Collect the inventory: scan ZooKeeper and S3 in Spark tasks, write one Parquet table each.

The driver lists only the cheap top levels of the key space (``/ledgers`` level-1 and level-2
nodes, tenants and namespaces of ``/managed-ledgers``, tenants of ``/schemas``, S3 key prefixes)
and hands them to Spark tasks. Each task opens its own kazoo (or boto3) client, reads its part with
pipelined, rate-limited reads (the scan-wide rate limit divided across the concurrent tasks),
decodes every node and returns Arrow record batches (``mapInArrow``: no per-row Python to JVM
conversion). Order, as the audit rules require: BookKeeper first, then the Pulsar metadata
(managed ledgers, schemas, policies), then S3.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens import schemas
from ledgerlens.config import S3Source, ZooKeeperSource

__all__ = ["Inventory", "collect_inventory", "load_inventory", "table_path"]

_BATCH_ROWS = 8192
_MULTI_READ_MAX = 100  # reads per ZooKeeper multiRead request (3.6+; single reads on older servers)
_ML_TABLES = ("managed_ledgers", "ml_ledgers", "cursors")
_STAGES = ("bk_ledgers", "managed_ledgers", "schema_ledgers", "namespace_policies", "offload_objects")


@dataclass
class Inventory:
    """Where the inventory tables were written and what the collection saw.

    ``tables`` maps table name to Parquet path; ``counts`` holds rows per table plus scan
    counters (``<stage>.reads``, ``.errors``, ``.vanished``, ``.skipped``, ``s3.not_offload``...);
    ``timings`` seconds per stage.
    """

    out_dir: str
    tables: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    s3_scanned: bool = False


def table_path(out_dir: str, table: str) -> str:
    """The Parquet path of ``table`` under ``out_dir`` (local path or URI)."""
    return f"{out_dir.rstrip('/')}/{table}"


# -- Arrow -------------------------------------------------------------------------------------
class _Counters(AccumulatorParam):  # type: ignore[type-arg]
    """Spark accumulator of ``dict[str, int]`` counters summed over tasks."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return {}

    def addInPlace(self, v1: dict[str, int], v2: dict[str, int]) -> dict[str, int]:  # noqa: N802
        for k, v in v2.items():
            v1[k] = v1.get(k, 0) + v
        return v1


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema)


def _struct_array(rows: list[dict[str, Any]], schema: T.StructType, arrow: pa.Schema) -> list[pa.Array]:
    """Column arrays of ``rows`` in schema order; absent keys are null (as :func:`schemas.to_row`).

    ``RecordBatch.from_pylist`` converts in C++, ten times faster than transposing tuples here.
    """
    return pa.RecordBatch.from_pylist(rows, schema=arrow).columns


def _batches(rows: Iterable[dict[str, Any]], schema: T.StructType) -> Iterator[pa.RecordBatch]:
    arrow = _arrow_schema(schema)
    buf: list[dict[str, Any]] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= _BATCH_ROWS:
            yield pa.RecordBatch.from_arrays(_struct_array(buf, schema, arrow), schema=arrow)
            buf = []
    if buf:
        yield pa.RecordBatch.from_arrays(_struct_array(buf, schema, arrow), schema=arrow)


# The one pass over /managed-ledgers writes a tagged table: which table, and one struct per table.
_ML_TAGGED = T.StructType(
    [T.StructField("table", T.StringType(), False)]
    + [T.StructField(t, schemas.INVENTORY[t], True) for t in _ML_TABLES]
)


def _tagged_batches(pairs: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[pa.RecordBatch]:
    arrow = _arrow_schema(_ML_TAGGED)
    subs = {t: _arrow_schema(schemas.INVENTORY[t]) for t in _ML_TABLES}
    bufs: dict[str, list[dict[str, Any]]] = {t: [] for t in _ML_TABLES}

    def flush(table: str) -> pa.RecordBatch:
        rows = bufs[table]
        bufs[table] = []
        struct = pa.StructArray.from_arrays(
            _struct_array(rows, schemas.INVENTORY[table], subs[table]), fields=list(subs[table])
        )
        cols: list[pa.Array] = [pa.array([table] * len(rows), type=pa.string())]
        for t in _ML_TABLES:
            cols.append(struct if t == table else pa.nulls(len(rows), type=arrow.field(t).type))
        return pa.RecordBatch.from_arrays(cols, schema=arrow)

    for table, row in pairs:
        bufs[table].append(row)
        if len(bufs[table]) >= _BATCH_ROWS:
            yield flush(table)
    for t in _ML_TABLES:
        if bufs[t]:
            yield flush(t)


def _multi(zk: ZooKeeperSource) -> int:
    """Reads per multiRead request: at most 100, and at least 4 requests fit the in-flight window."""
    return max(1, min(_MULTI_READ_MAX, zk.max_in_flight // 4))


# -- tasks -------------------------------------------------------------------------------------
def _zk_task(
    zk: ZooKeeperSource, rate: float | None, kind: str, counters: Any
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of one ZooKeeper stage (runs on executors)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ledgerlens.sources import zookeeper as z

        items = [s for b in batches for s in b.column(0).to_pylist()]
        if not items:
            return
        stats = z.ScanStats()
        client = z.connect(zk.hosts, timeout_s=zk.timeout_s, auth=zk.auth)
        try:
            reader = z.PipelinedReader(
                client, max_in_flight=zk.max_in_flight, rate_limit=rate, stats=stats, multi_read=_multi(zk)
            )
            if kind == "bk_ledgers":
                yield from _batches(z.scan_ledgers(reader, zk.ledgers_root, items), schemas.BK_LEDGERS)
            elif kind == "managed_ledgers":
                yield from _tagged_batches(z.scan_managed_ledgers(reader, zk.managed_ledgers_root, items))
            elif kind == "schema_ledgers":
                yield from _batches(z.scan_schemas(reader, zk.schemas_root, items), schemas.SCHEMA_LEDGERS)
            else:
                raise ValueError(kind)
        finally:
            client.stop()
            client.close()
            counters.add({f"{kind}.{k}": v for k, v in stats.as_dict().items()})

    return run


def _s3_task(
    source: S3Source, items: list[Any], counters: Any
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ledgerlens.sources import s3

        mine = [items[int(i)] for b in batches for i in b.column(0).to_pylist()]
        if not mine:
            return
        stats = s3.ListStats()
        client = s3.make_client(source)
        try:
            yield from _batches(
                s3.list_offload_objects(client, source.bucket, mine, stats=stats), schemas.OFFLOAD_OBJECTS
            )
        finally:
            counters.add({"s3.keys": stats.keys, "s3.not_offload": stats.not_offload})

    return run


# -- driver ------------------------------------------------------------------------------------
def _n_tasks(spark: SparkSession, zk_tasks: int | None, n_items: int) -> int:
    want = zk_tasks or 4 * spark.sparkContext.defaultParallelism
    return max(1, min(want, n_items))


def _task_rate(spark: SparkSession, total: float, n_tasks: int) -> float | None:
    """The rate limit of one task: the scan-wide limit over the tasks that can run at once."""
    if not total or total <= 0:
        return None
    return total / max(1, min(n_tasks, spark.sparkContext.defaultParallelism))


def _items_frame(spark: SparkSession, items: list[str], n: int) -> DataFrame:
    rdd = spark.sparkContext.parallelize([(i,) for i in items], n)
    return spark.createDataFrame(rdd, "item string")


def _children(client: Any, path: str) -> list[str] | None:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return None


def _ledger_items(zk: ZooKeeperSource, client: Any) -> list[str]:
    """Level-1 + level-2 prefixes of /ledgers (level 3 too for the 3-digit long layout)."""
    from ledgerlens.formats.paths import is_ledger_level1, is_special_znode
    from ledgerlens.sources.zookeeper import PipelinedReader

    root = zk.ledgers_root.rstrip("/")
    level1 = [
        n for n in _children(client, zk.ledgers_root) or () if not is_special_znode(n) and is_ledger_level1(n)
    ]
    reader = PipelinedReader(client, max_in_flight=zk.max_in_flight)
    items: list[str] = []
    frontier = level1
    for depth in (2, 3):
        deeper: list[str] = []
        for r in reader.children([f"{root}/{p}" for p in frontier]):
            rel = r.path[len(root) + 1 :]
            if r.error is not None or not r.children:
                items.append(rel)  # the task lists it again and rows the error (or finds nothing)
                continue
            kids = [f"{rel}/{c}" for c in sorted(r.children) if c.isdigit()]
            long_layout = len(rel.split("/", 1)[0]) == 3
            if depth == 2 and long_layout:
                deeper.extend(kids)
            else:
                items.extend(kids)
        frontier = deeper
        if not frontier:
            break
    return sorted(items)


def _two_levels(zk_root: str, client: Any, max_in_flight: int) -> list[str]:
    """``tenant/ns`` prefixes under a root; a tenant that cannot be listed stays a prefix itself."""
    from ledgerlens.sources.zookeeper import PipelinedReader

    root = zk_root.rstrip("/")
    tenants = _children(client, zk_root) or []
    items: list[str] = []
    for r in PipelinedReader(client, max_in_flight=max_in_flight).children([f"{root}/{t}" for t in tenants]):
        rel = r.path[len(root) + 1 :]
        if r.error is not None:
            items.append(rel)
        else:
            items.extend(f"{rel}/{n}" for n in sorted(r.children or ()))
    return items


def _write(df: DataFrame, path: str) -> None:
    df.write.mode("overwrite").parquet(path)


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(FileSystem, Path) of ``path`` through the JVM: works for local, HDFS and s3a paths alike."""
    sc: Any = spark.sparkContext
    p = sc._jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(sc._jsc.hadoopConfiguration()), p


def _delete(spark: SparkSession, path: str) -> None:
    fs, p = _hadoop_path(spark, path)
    fs.delete(p, True)


def _exists(spark: SparkSession, path: str) -> bool:
    fs, p = _hadoop_path(spark, path)
    return bool(fs.exists(p))


def collect_inventory(
    spark: SparkSession,
    zk: ZooKeeperSource,
    s3: S3Source | None,
    out_dir: str,
    *,
    progress: bool = True,
) -> Inventory:
    """Scan ZooKeeper (and the offload bucket when ``s3`` is given) into Parquet tables.

    Parameters
    ----------
    spark : SparkSession
        The session whose executors run the scan tasks.
    zk, s3 : ZooKeeperSource, S3Source or None
        Where the metadata and the offloaded objects live; no S3 scan when ``s3`` is None.
    out_dir : str
        Directory (local or Hadoop URI) receiving one Parquet directory per table.
    progress : bool
        Show a tqdm bar over the stages.

    Raises
    ------
    SourceError
        ZooKeeper or the bucket cannot be reached (raised before any Spark job starts).
    """
    from tqdm.auto import tqdm

    from ledgerlens.sources import s3 as s3src
    from ledgerlens.sources import zookeeper as z

    inv = Inventory(out_dir=out_dir)
    client = z.connect(zk.hosts, timeout_s=zk.timeout_s, auth=zk.auth)
    try:
        if s3 is not None:
            s3src.check_bucket(s3src.make_client(s3), s3)
        counters = spark.sparkContext.accumulator({}, _Counters())
        bar = tqdm(
            total=len(_STAGES) if s3 is not None else len(_STAGES) - 1, disable=not progress, unit="stage"
        )
        try:

            def stage(name: str) -> None:
                bar.set_description(f"collect {name}")

            def done(name: str, started: float) -> None:
                inv.timings[name] = time.perf_counter() - started
                bar.update(1)

            def zk_stage(kind: str, items: list[str], schema: T.StructType) -> DataFrame:
                n = _n_tasks(spark, zk.tasks, len(items))
                if not items:
                    return spark.createDataFrame([], schema)
                fn = _zk_task(zk, _task_rate(spark, zk.rate_limit, n), kind, counters)
                return _items_frame(spark, items, n).mapInArrow(fn, schema)

            # 1. BookKeeper ledgers
            stage("bk_ledgers")
            t0 = time.perf_counter()
            path = table_path(out_dir, "bk_ledgers")
            _write(zk_stage("bk_ledgers", _ledger_items(zk, client), schemas.BK_LEDGERS), path)
            inv.tables["bk_ledgers"] = path
            done("bk_ledgers", t0)

            # 2. managed ledgers, their ledgers and cursors: one pass, a tagged temp table, split
            stage("managed_ledgers")
            t0 = time.perf_counter()
            tmp = table_path(out_dir, "_managed_ledgers_scan")
            items = _two_levels(zk.managed_ledgers_root, client, zk.max_in_flight)
            _write(zk_stage("managed_ledgers", items, _ML_TAGGED), tmp)
            tagged = spark.read.schema(_ML_TAGGED).parquet(tmp)
            for t in _ML_TABLES:
                path = table_path(out_dir, t)
                _write(tagged.where(F.col("table") == t).select(f"{t}.*"), path)
                inv.tables[t] = path
            _delete(spark, tmp)
            done("managed_ledgers", t0)

            # 3. schema locators
            stage("schema_ledgers")
            t0 = time.perf_counter()
            path = table_path(out_dir, "schema_ledgers")
            tenants = _children(client, zk.schemas_root) or []
            _write(zk_stage("schema_ledgers", tenants, schemas.SCHEMA_LEDGERS), path)
            inv.tables["schema_ledgers"] = path
            done("schema_ledgers", t0)

            # 4. namespace policies: a few thousand nodes at most, read by the driver
            stage("namespace_policies")
            t0 = time.perf_counter()
            path = table_path(out_dir, "namespace_policies")
            stats = z.ScanStats()
            reader = z.PipelinedReader(
                client, max_in_flight=zk.max_in_flight, rate_limit=zk.rate_limit, stats=stats
            )
            rows = [
                schemas.to_row(schemas.NAMESPACE_POLICIES, r)
                for r in z.scan_policies(reader, zk.policies_root)
            ]
            counters.add({f"namespace_policies.{k}": v for k, v in stats.as_dict().items()})
            _write(spark.createDataFrame(rows, schemas.NAMESPACE_POLICIES).coalesce(1), path)
            inv.tables["namespace_policies"] = path
            done("namespace_policies", t0)

            # 5. offload bucket
            if s3 is not None:
                stage("offload_objects")
                t0 = time.perf_counter()
                path = table_path(out_dir, "offload_objects")
                s3_items = s3src.work_items()
                fn = _s3_task(s3, s3_items, counters)
                frame = _items_frame(spark, [str(i) for i in range(len(s3_items))], len(s3_items))
                _write(frame.mapInArrow(fn, schemas.OFFLOAD_OBJECTS), path)
                inv.tables["offload_objects"] = path
                inv.s3_scanned = True
                done("offload_objects", t0)
            else:
                _delete(spark, table_path(out_dir, "offload_objects"))  # no stale table from an earlier run
        finally:
            bar.close()
    finally:
        client.stop()
        client.close()

    for t, p in inv.tables.items():
        inv.counts[t] = spark.read.schema(schemas.INVENTORY[t]).parquet(p).count()
    inv.counts.update(counters.value)
    return inv


def load_inventory(spark: SparkSession, out_dir: str) -> dict[str, DataFrame]:
    """The inventory tables found under ``out_dir``, read with their declared schemas."""
    out: dict[str, DataFrame] = {}
    for table, schema in schemas.INVENTORY.items():
        path = table_path(out_dir, table)
        if _exists(spark, path):
            out[table] = spark.read.schema(schema).parquet(path)
    return out
