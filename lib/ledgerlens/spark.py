"""Spark session settings: a builder goes in, a configured builder comes out.

Library calls take a ``SparkSession``; they never create one behind the caller's back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession


def configure(
    builder: SparkSession.Builder,
    *,
    master: str | None = None,
    app_name: str = "ledgerlens",
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession.Builder:
    """Apply ledgerlens' settings to ``builder``.

    ``master`` defaults to ``$LEDGERLENS_SPARK_MASTER`` or ``local[*]``. The UI is off and
    shuffle partitions are few on local masters (small machines, many small jobs). ``conf``
    (a context's ``spark.conf``) is applied last.
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


def get_session(master: str | None = None, **kwargs: object) -> SparkSession:
    """A configured session (for the CLI and notebooks; tests use their own fixture)."""
    return configure(SparkSession.builder, master=master, **kwargs).getOrCreate()  # type: ignore[arg-type]
