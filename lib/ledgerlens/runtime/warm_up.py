"""``ledgerlens warm-up``: the JVM's class archive (``class_archive``) written once, for faster starts."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ledgerlens.runtime.class_archive import archive_named, stem, written
from ledgerlens.settings.config import AuditConfig

__all__ = ["WRITE_TIMEOUT_S", "warm_up"]

WRITE_TIMEOUT_S = 600


def warm_up() -> tuple[Path, int]:
    """Write the archive (``class_archive``); return its path and size in bytes.

    The classes are recorded in a JVM of their own (a child process: this one may run Spark
    already), written next to the archive under a temporary name, and named as the archive
    (``archive_named``) only when that JVM exited cleanly: an interrupted warm-up leaves no archive to
    read. Older archives (another Java or Spark) are removed. Raises ``RuntimeError`` with one line
    when it fails."""
    base = stem()
    if base is None:
        raise RuntimeError("warm-up: no Java (JAVA_HOME or java on the PATH) or no Spark jars found")
    if any(c.isspace() for c in str(base)):
        raise RuntimeError(f"warm-up: the cache directory {base.parent} has white space in its path")
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = base.with_name(f"{base.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "ledgerlens.runtime.warm_up", str(tmp)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=WRITE_TIMEOUT_S, check=False)
        if p.returncode != 0 or not written(tmp):
            last = (p.stderr.strip().splitlines() or ["no error output"])[-1]
            raise RuntimeError(f"warm-up: the JVM wrote no archive to {tmp} (exit {p.returncode}): {last}")
        path = archive_named(base, tmp.stat().st_size)
        os.replace(tmp, path)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"warm-up: no archive after {WRITE_TIMEOUT_S} s") from e
    finally:
        tmp.unlink(missing_ok=True)
    for old in base.parent.glob("spark-classes-*"):
        try:  # another Java's or Spark's, or a temporary file an interrupted warm-up left
            if old != path and (old.suffix == ".jsa" or time.time() - old.stat().st_mtime > 3600):
                old.unlink()
        except OSError:
            pass  # removed meanwhile, or not ours to remove: it is never read either way
    return path, path.stat().st_size


def _record(tmp: Path) -> None:
    """The child of ``warm_up``: Spark started the CLI's way with ``write_options(tmp)``, a few
    small queries and an audit of an empty inventory, then the JVM stopped and waited for (it
    writes the archive as it exits, after this process's last Python line otherwise)."""
    from pyspark import SparkContext  # pyspark: only when warm-up runs
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from ledgerlens.audit import run_audit  # pyspark, via the audit and Spark modules
    from ledgerlens.inventory import schemas
    from ledgerlens.runtime.spark import configure, sized_for

    # local: the archive is of the JVM on this machine (a cluster master's driver maps none)
    builder = configure(
        SparkSession.builder, master="local[*]", app_name="ledgerlens-warm-up", archive_to=tmp
    )
    spark = builder.getOrCreate()
    with tempfile.TemporaryDirectory(prefix="ledgerlens-warm-up-") as work:
        df = spark.range(5000).select(
            "id", (F.col("id") % 7).alias("k"), F.col("id").cast("string").alias("s")
        )
        df.write.parquet(f"{work}/t")
        back = spark.read.parquet(f"{work}/t")
        back.join(back.groupBy("k").agg(F.count("*").alias("n")), "k").orderBy("id").limit(3).collect()
        tables = {n: schemas.local_frame(spark, s, []) for n, s in schemas.INVENTORY.items()}
        with sized_for(spark, 0):
            run_audit(tables, AuditConfig(as_of_ms=int(time.time() * 1000))).write.parquet(f"{work}/f")
    gateway = SparkContext._gateway
    spark.stop()
    if gateway is not None and getattr(gateway, "proc", None) is not None:
        gateway.proc.stdin.close()  # the JVM exits at the end of its input, writing the archive
        gateway.proc.wait(WRITE_TIMEOUT_S)


if __name__ == "__main__":
    _record(Path(sys.argv[1]))
