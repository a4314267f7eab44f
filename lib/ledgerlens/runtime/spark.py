"""Spark session settings: a builder goes in, a configured builder comes out.

Library calls take a ``SparkSession``; they never create one behind the caller's back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from ledgerlens.runtime import class_archive
from ledgerlens.runtime.console import command_started, log4j2_quiet_config, say, verbose
from ledgerlens.settings.config import cache_dir

QUIET_ENV = "LEDGERLENS_QUIET_SPARK"
"""When set (the CLI sets it unless ``--debug`` or ``--verbose``), the JVM's stderr (its error log
lines, tracebacks of failed tasks, crash dumps) goes to ``~/.cache/ledgerlens/spark-driver.log``:
the command prints one line per error itself."""


def configure(
    builder: SparkSession.Builder,
    *,
    master: str | None = None,
    app_name: str = "ledgerlens",
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
    quick_compile: bool = False,
    archive_to: Path | None = None,
) -> SparkSession.Builder:
    """Apply ledgerlens' settings to ``builder``.

    ``master`` defaults to ``$LEDGERLENS_SPARK_MASTER`` or ``local[*]``. The UI is off and
    shuffle partitions are few on local masters (small machines, many small jobs). PySpark's
    DataFrame debugging (Python call sites in error contexts) is off. ``quick_compile``: on a local
    master the JVM compiles with its quick compiler only (``QUICK_COMPILE``), for a run known to be
    small; else its slow compiler inlines less (``LEAN_INLINING``) and leaves Janino, ASM and ANTLR
    to the quick one (``quick_compiled_tools``). A local JVM collects garbage with the throughput collector
    (``THROUGHPUT_GC``), and maps the class archive of ``ledgerlens warm-up`` when there is one
    (``class_archive``), or with ``archive_to`` writes one there as it exits. ``conf`` (a context's
    ``spark.conf``) is applied last.
    """
    master = master or os.environ.get("LEDGERLENS_SPARK_MASTER") or "local[*]"
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers must be this interpreter (the one with ledgerlens), not the system python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = builder.master(master).appName(app_name)
    b = b.config("spark.sql.session.timeZone", "UTC")
    b = b.config("spark.sql.parquet.compression.codec", "zstd")
    b = b.config("spark.sql.execution.arrow.pyspark.enabled", "true")
    # PySpark's DataFrame debugging records the Python call site of every column expression in the
    # JVM (five gateway round trips and a stack walk each): most of an audit's gateway calls. Errors
    # still name the failing expression.
    b = b.config("spark.python.sql.dataFrameDebugging.enabled", "false")
    java: list[str] = []
    if not verbose():  # Spark and JVM logging: errors only, unless --verbose / LEDGERLENS_VERBOSE=1
        java.append(f"-Dlog4j2.configurationFile={log4j2_quiet_config().as_uri()}")
        if local:
            b = b.config("spark.executor.extraJavaOptions", java[0])
    if local:
        java += [QUICK_COMPILE] if quick_compile else [*LEAN_INLINING, *quick_compiled_tools()]
        java.append(THROUGHPUT_GC)
        java += class_archive.write_options(archive_to) if archive_to else class_archive.read_options()
    if java:
        b = b.config("spark.driver.extraJavaOptions", " ".join(java))
    if local:
        b = b.config("spark.ui.enabled", "false")
        b = b.config("spark.ui.showConsoleProgress", "false")  # stage bars flood logs and notebooks
        b = b.config("spark.driver.host", "127.0.0.1")
        b = b.config("spark.sql.shuffle.partitions", str(shuffle_partitions or 8))
    elif shuffle_partitions:
        b = b.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (conf or {}).items():
        b = b.config(key, value)
    return b


QUICK_COMPILE = "-XX:TieredStopAtLevel=1"
"""HotSpot compiles with C1 only, never C2. Most of a short Spark run's CPU goes to the JIT
compiling Spark's planner, Janino and the classes Spark generates for each stage, mostly run a few
times, which C2 compiles slowly and to little gain; long scans repay C2, so large clusters keep it
(``QUICK_COMPILE_ZNODES``; measured in docs/performance.md, "The quick compiler for small clusters")."""

LEAN_INLINING = ("-XX:MaxInlineLevel=6", "-XX:InlineSmallCode=1000", "-XX:FreqInlineSize=100")
"""Where both compilers run (a local JVM without ``QUICK_COMPILE``), C2 inlines less: calls nested 6
deep at most (HotSpot's default is 15), and only callees whose compiled code is under 1,000 bytes
(2,500) or whose bytecode is under 100 bytes when called often (325). C2's time grows with the
inlined graph, and a third of an audit's CPU went to C2 (docs/performance.md, "The optimizing
compiler inlining less")."""


def quick_compiled_tools() -> list[str]:
    """JVM options under which only C1 compiles the tools Spark runs once per plan or closure:
    Janino (the compiler of Spark's generated classes), ASM (its closure cleaner) and ANTLR (its SQL
    parser), by HotSpot compiler directives (``jit-directives.json``). Nothing where the file's path
    would not survive Spark's splitting of the options at spaces. HotSpot announces the directives
    on its standard output ("1 compiler directives added"), the console's: its own diagnostic output
    is off (``-XX:-DisplayVMOutput``; warnings, errors and crash reports are not that output).

    Janino runs once per generated class, about two hundred an audit: C2's work on its large methods
    takes CPU from the tasks and repays little (docs/performance.md, "Janino left to the quick
    compiler")."""
    path = str(Path(__file__).with_name("jit-directives.json"))
    if any(c.isspace() for c in path):
        return []
    return ["-XX:+UnlockDiagnosticVMOptions", "-XX:-DisplayVMOutput", f"-XX:CompilerDirectivesFile={path}"]


THROUGHPUT_GC = "-XX:+UseParallelGC"
"""A local JVM's garbage collector: the throughput collector instead of G1, Java 17's default. G1
keeps pauses short by doing part of its work beside the application (write barriers, concurrent
refinement and marking threads); on few cores that work takes CPU from the tasks, and an audit is a
batch job that can wait for a pause (docs/performance.md, "The throughput collector")."""

QUICK_COMPILE_ZNODES = 3_000_000
"""Up to this many znodes in the metadata stores (ZooKeeper's ``srvr``, read before Spark starts),
a run whose JVM ends with it (the CLI's, the runbook's run headless) compiles quickly
(``QUICK_COMPILE``). Every ledger, managed ledger and cursor is a
znode: the 1M-ledger benchmark is about 1.3M of them, the 10M one 11M. The threshold between the
measured sizes is a choice, not a measurement."""


def quick_compile_for(znodes: int | None) -> bool:
    """Whether a run over metadata stores holding ``znodes`` znodes (None: a store did not say)
    starts its JVM with ``QUICK_COMPILE``."""
    return znodes is not None and znodes <= QUICK_COMPILE_ZNODES


SMALL_INVENTORY_ROWS = 1_000_000
"""Up to this many inventory rows an audit is small: its cost is Spark's fixed costs per query
stage (task scheduling, Java code generation and compilation of every stage), not the data."""

ROWS_PER_SHUFFLE_PARTITION = 250_000

INTERPRETED_ROWS = 100_000
"""Up to this many inventory rows the audit's expressions are interpreted, not compiled."""

_INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def interprets(spark: SparkSession) -> bool:
    """Whether ``spark`` interprets expressions now (``settings_for_rows`` of a small inventory)."""
    return all(spark.conf.get(k, None) == v for k, v in _INTERPRETED.items())


def adapts(spark: SparkSession) -> bool:
    """Whether ``spark`` re-plans queries between stages from the rows shuffled (adaptive execution)."""
    return (spark.conf.get("spark.sql.adaptive.enabled", None) or "true").lower() == "true"


def settings_for_rows(rows: int, parallelism: int) -> dict[str, str]:
    """SQL settings for an audit of ``rows`` inventory rows on ``parallelism`` cores.

    Small inventories: one shuffle partition per ``ROWS_PER_SHUFFLE_PARTITION`` rows, at most one per
    core (a tiny table in one task: every exchange of a small audit's plan is one task to schedule,
    not two), as many tasks per scan of in-memory rows (a small inventory is loaded as such,
    ``collect.load_inventory``), and no adaptive execution (its re-planning between query stages
    costs more than it saves on tiny tables). Larger ones: at least one shuffle partition per
    ``ROWS_PER_SHUFFLE_PARTITION`` rows (adaptive execution coalesces them further, to no fewer
    than 4 per core).
    Up to ``INTERPRETED_ROWS`` rows nothing is compiled (no whole-stage code generation, expressions
    interpreted): a cold JVM spends longer compiling the few hundred generated classes of an audit's
    plans than running them on that few rows. Interpreting every small audit (up to 1M rows) ran
    out of aggregation memory late in a long test session. Measured: docs/performance.md, "Small
    inventories" and "The fixed cost".
    """
    if rows <= SMALL_INVENTORY_ROWS:
        partitions = max(1, min(parallelism, -(-rows // ROWS_PER_SHUFFLE_PARTITION)))
        out = {
            "spark.sql.shuffle.partitions": str(partitions),
            "spark.sql.leafNodeDefaultParallelism": str(partitions),
            "spark.sql.adaptive.enabled": "false",
        }
        if rows <= INTERPRETED_ROWS:
            out |= _INTERPRETED
        return out
    return {
        "spark.sql.shuffle.partitions": str(max(parallelism, rows // ROWS_PER_SHUFFLE_PARTITION)),
        # adaptive execution coalesces a shuffle to about one partition per core otherwise (the
        # last task of a large join then runs alone); 4 per core balance
        "spark.sql.adaptive.coalescePartitions.minPartitionNum": str(4 * parallelism),
        # no first-level "fast" hash map in hash aggregation: it helps few keys and thrashes on the
        # per-managed-ledger aggregate's million names (docs/performance.md)
        "spark.sql.codegen.aggregate.map.twolevel.enabled": "false",
    }


@contextmanager
def sized_for(spark: SparkSession, rows: int) -> Iterator[dict[str, str]]:
    """Apply ``settings_for_rows`` to ``spark`` for the block, then restore what was set before.

    A shuffle-partition count the user set explicitly to more than the rule's (a context's
    ``spark.conf``) is kept for large inventories.
    """
    conf = spark.conf
    want = settings_for_rows(rows, spark.sparkContext.defaultParallelism)
    if rows > SMALL_INVENTORY_ROWS:
        have = int(conf.get("spark.sql.shuffle.partitions") or 0)
        want["spark.sql.shuffle.partitions"] = str(max(have, int(want["spark.sql.shuffle.partitions"])))
    before: dict[str, str | None] = {k: conf.get(k, None) for k in want}
    for k, v in want.items():
        conf.set(k, v)
    try:
        yield want
    finally:
        for k, old in before.items():
            if old is None:
                conf.unset(k)
            else:
                conf.set(k, old)


_JVM_NOISE = (
    "WARNING: Using incubator modules",  # the JVM itself, for Spark's --add-modules
    "Setting default log level to",  # Spark's shell banner, printed whatever log4j says
    "To adjust logging level use sc.setLogLevel",
)


def _relay_stderr(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours, without the start-up banners (errors still come through)."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        if not line.startswith(_JVM_NOISE):
            sys.stderr.write(line)
            sys.stderr.flush()


def _quiet_gateway(builder: SparkSession.Builder) -> None:
    """Start the JVM with its stderr filtered (``_relay_stderr``), unless a context already runs."""
    if SparkContext._active_spark_context is not None or SparkContext._gateway is not None:
        return
    conf = SparkConf()
    for k, v in builder._options.items():  # type: ignore[attr-defined]
        conf.set(k, str(v))
    if os.environ.get(QUIET_ENV):  # the CLI: the JVM's stderr to a file, one line per error on ours
        log = cache_dir() / "spark-driver.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as stderr:  # the last run's JVM output
            gateway = launch_gateway(conf, popen_kwargs={"stderr": stderr})
    else:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(target=_relay_stderr, args=(gateway.proc.stderr,), daemon=True).start()
    SparkContext(conf=conf, gateway=gateway)


def get_session(master: str | None = None, **kwargs: object) -> SparkSession:
    """A configured session (for the CLI and notebooks; tests use their own fixture).

    Unless verbose (``--verbose``, ``LEDGERLENS_VERBOSE=1``), the JVM logs errors only and its
    start-up banners are dropped; with ``$LEDGERLENS_QUIET_SPARK`` its stderr goes to
    ``~/.cache/ledgerlens/spark-driver.log`` instead of the console. A JVM that exits before it
    starts with the class archive of ``ledgerlens warm-up`` starts again without it (removed).
    In the runbook kernel of ``ledgerlens report`` (``$LEDGERLENS_STARTED``), one progress line
    says Spark is starting.
    """
    builder = configure(SparkSession.builder, master=master, **kwargs)  # type: ignore[arg-type]
    if command_started() is not None:  # the runbook kernel of 'ledgerlens report': say the slow start
        say(f"starting Spark ({builder._options.get('spark.master')})")  # type: ignore[attr-defined]
    java = builder._options.get("spark.driver.extraJavaOptions", "")  # type: ignore[attr-defined]
    try:
        return _started(builder)
    except Exception as e:
        # a JVM that exits before it starts, given the class archive, starts again without it (the
        # archive is removed: ``ledgerlens warm-up`` writes another); any other failure is raised
        gone = class_archive.forget(java) if "JAVA_GATEWAY_EXITED" in str(e) else None
        if gone is None:
            raise
        print(
            f"ledgerlens: Spark did not start with the class archive {gone}; removed it, starting "
            "without it (ledgerlens warm-up writes another)",
            file=sys.stderr,
        )
        kept = " ".join(w for w in java.split() if not w.startswith("-XX:SharedArchiveFile="))
        return _started(builder.config("spark.driver.extraJavaOptions", kept))


def _started(builder: SparkSession.Builder) -> SparkSession:
    if not verbose():
        _quiet_gateway(builder)
    return builder.getOrCreate()
