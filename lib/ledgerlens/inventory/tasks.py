"""The body of the inventory's Spark tasks: a source's rows as Arrow batches, or as Parquet files.

Kept apart from ``ledgerlens.inventory.collect`` so that a Python worker unpickling a task imports
this module (pyarrow and the inventory schemas) and the source's own, not the driver's scheduling
code: the task functions are instances of module-level classes, pickled by reference.

``StageRows`` hands the rows to the JVM (``mapInArrow``), which writes the stage's tables;
``StageFiles`` writes them itself with pyarrow into a directory every executor sees and hands
the JVM only one short row per file written.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.inventory import schemas

BATCH_ROWS = 8192
COMPRESSION = "zstd"
FILE_SUFFIX = ".zstd.parquet"

WRITTEN = T.StructType(
    [
        T.StructField("table", T.StringType(), False),
        T.StructField("file", T.StringType(), False),
        T.StructField("rows", T.LongType(), False),
    ]
)
"""What a ``StageFiles`` task returns: one row per Parquet file it wrote (name only, no path)."""
_WRITTEN_ARROW = to_arrow_schema(WRITTEN)


def arrow_schema(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema)


def struct_array(rows: list[dict[str, Any]], arrow: pa.Schema) -> list[pa.Array]:
    """Column arrays of ``rows`` in schema order; absent keys are null (as :func:`schemas.to_row`).

    ``RecordBatch.from_pylist`` converts in C++, ten times faster than transposing tuples here.
    """
    return pa.RecordBatch.from_pylist(rows, schema=arrow).columns


def batches(
    rows: Iterable[dict[str, Any] | pa.RecordBatch], schema: T.StructType
) -> Iterator[pa.RecordBatch]:
    """Record batches of ``rows``: dicts are gathered ``BATCH_ROWS`` at a time, batches pass through."""
    arrow = arrow_schema(schema)
    buf: list[dict[str, Any]] = []
    for r in rows:
        if isinstance(r, pa.RecordBatch):
            if buf:
                yield pa.RecordBatch.from_arrays(struct_array(buf, arrow), schema=arrow)
                buf = []
            yield r
            continue
        buf.append(r)
        if len(buf) >= BATCH_ROWS:
            yield pa.RecordBatch.from_arrays(struct_array(buf, arrow), schema=arrow)
            buf = []
    if buf:
        yield pa.RecordBatch.from_arrays(struct_array(buf, arrow), schema=arrow)


# A stage that fills several tables through the JVM writes one tagged table: which table, and one
# struct per table.
# ``catalog``: the tables' schemas by name (the Pulsar inventory's, or ``schemas.KAFKA_INVENTORY``).
def tagged_schema(
    tables: Sequence[str], catalog: Mapping[str, T.StructType] = schemas.INVENTORY
) -> T.StructType:
    return T.StructType(
        [T.StructField("table", T.StringType(), False)] + [T.StructField(t, catalog[t], True) for t in tables]
    )


def tagged_batches(
    pairs: Iterable[tuple[str, dict[str, Any] | pa.RecordBatch]],
    tables: Sequence[str],
    catalog: Mapping[str, T.StructType] = schemas.INVENTORY,
) -> Iterator[pa.RecordBatch]:
    arrow = arrow_schema(tagged_schema(tables, catalog))
    subs = {t: arrow_schema(catalog[t]) for t in tables}
    bufs: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}

    def tagged(table: str, columns: list[pa.Array], n: int) -> pa.RecordBatch:
        struct = pa.StructArray.from_arrays(columns, fields=list(subs[table]))
        cols: list[pa.Array] = [pa.array([table] * n, type=pa.string())]
        for t in tables:
            cols.append(struct if t == table else pa.nulls(n, type=arrow.field(t).type))
        return pa.RecordBatch.from_arrays(cols, schema=arrow)

    def flush(table: str) -> pa.RecordBatch:
        rows = bufs[table]
        bufs[table] = []
        return tagged(table, struct_array(rows, subs[table]), len(rows))

    for table, row in pairs:
        if isinstance(row, pa.RecordBatch):
            if bufs[table]:
                yield flush(table)
            yield tagged(table, row.columns, row.num_rows)
            continue
        bufs[table].append(row)
        if len(bufs[table]) >= BATCH_ROWS:
            yield flush(table)
    for t in tables:
        if bufs[t]:
            yield flush(t)


def split(items: Sequence[tuple[int, str]], n: int) -> list[list[tuple[int, str]]]:
    """``items`` in ``n`` contiguous groups of (nearly) equal size, as ``parallelize`` slices them."""
    return [list(items[i * len(items) // n : (i + 1) * len(items) // n]) for i in range(n)]


def _my_parts(
    batches_in: Iterator[pa.RecordBatch], groups: Sequence[Sequence[tuple[int, str]]]
) -> dict[int, list[str]]:
    """The task's partitions by source: the groups whose index the task's input rows (``spark.range``
    ids: no Python worker builds the input, the task's share travels in the function) name."""
    mine: dict[int, list[str]] = {}
    for b in batches_in:
        for g in b.column(0).to_pylist():
            for i, part in groups[int(g)]:
                mine.setdefault(int(i), []).append(part)
    return mine


def _stage_counters(stage: str, stats: Counter[str]) -> dict[str, int]:
    return {k if "." in k else f"{stage}.{k}": v for k, v in stats.items()}


@dataclass(frozen=True)
class StageRows:
    """The ``mapInArrow`` function of one stage whose rows the JVM writes (runs on executors).

    Each source reads its partitions of the task through one connection, at the task's share of
    that source's rate limit (``rates``); a stage of several tables yields the tagged table.
    """

    sources: Sequence[Any]  # InventorySource
    stage: str
    groups: Sequence[Sequence[tuple[int, str]]]  # (source index, partition) of each task
    tables: tuple[str, ...]
    rates: Sequence[float | None]
    counters: Any  # Accumulator of dict[str, int]

    def __call__(self, batches_in: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for i, parts in sorted(_my_parts(batches_in, self.groups).items()):
            stats: Counter[str] = Counter()
            try:
                rows = self.sources[i].read(self.stage, parts, rate_limit=self.rates[i], stats=stats)
                if len(self.tables) == 1:
                    yield from batches((row for _, row in rows), schemas.INVENTORY[self.tables[0]])
                else:
                    yield from tagged_batches(rows, self.tables)
            finally:
                self.counters.add(_stage_counters(self.stage, stats))


class TableFile:
    """One Parquet file of an inventory table, written batch by batch under a hidden name (readers
    skip names starting with ``.``) and renamed to ``name`` when complete (:meth:`close`)."""

    def __init__(self, directory: str, name: str, table: str) -> None:
        self.name = name
        self.rows = 0
        self._schema = schemas.INVENTORY[table]
        self._final = os.path.join(directory, name)
        self._tmp = os.path.join(directory, f".{name}.tmp")
        self._buf: list[dict[str, Any] | pa.RecordBatch] = []
        self._writer = pq.ParquetWriter(self._tmp, arrow_schema(self._schema), compression=COMPRESSION)

    def put(self, row: dict[str, Any] | pa.RecordBatch) -> None:
        self._buf.append(row)
        if isinstance(row, pa.RecordBatch) or len(self._buf) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        for batch in batches(self._buf, self._schema):
            self._writer.write_batch(batch)
            self.rows += batch.num_rows
        self._buf = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self._final)

    def abort(self) -> None:
        self._writer.close()
        try:
            os.remove(self._tmp)
        except FileNotFoundError:
            pass


@dataclass(frozen=True)
class StageFiles:
    """The ``mapInArrow`` function of one stage whose tasks write their rows themselves (runs on
    executors): one Parquet file per table and task attempt in ``dirs[table]`` (a directory every
    executor sees), named ``part-<partition>-<uuid>.zstd.parquet`` so that the files sort in
    partition order as Spark's do and no attempt overwrites another's; yields ``WRITTEN`` rows.

    A task that fails removes its unfinished files; the driver keeps only the files of the
    attempts Spark reports as the successful ones.
    """

    sources: Sequence[Any]  # InventorySource
    stage: str
    groups: Sequence[Sequence[tuple[int, str]]]  # (source index, partition) of each task
    dirs: Mapping[str, str]  # table -> absolute directory
    rates: Sequence[float | None]
    counters: Any  # Accumulator of dict[str, int]

    def __call__(self, batches_in: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        name = f"part-{partition:05d}-{uuid.uuid4().hex}{FILE_SUFFIX}"
        files: dict[str, TableFile] = {}
        try:
            for i, parts in sorted(_my_parts(batches_in, self.groups).items()):
                stats: Counter[str] = Counter()
                try:
                    for table, row in self.sources[i].read(
                        self.stage, parts, rate_limit=self.rates[i], stats=stats
                    ):
                        f = files.get(table)
                        if f is None:
                            f = files[table] = TableFile(self.dirs[table], name, table)
                        f.put(row)
                finally:
                    self.counters.add(_stage_counters(self.stage, stats))
            for f in files.values():
                f.close()
        except BaseException:
            for f in files.values():
                f.abort()
            raise
        if files:
            yield pa.RecordBatch.from_pylist(
                [{"table": t, "file": f.name, "rows": f.rows} for t, f in files.items()],
                schema=_WRITTEN_ARROW,
            )
