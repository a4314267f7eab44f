"""Spark settings chosen from the inventory's size, applied for the audit phases and restored."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from ledgerlens.runtime.spark import (
    INTERPRETED_ROWS,
    SMALL_INVENTORY_ROWS,
    adapts,
    settings_for_rows,
    sized_for,
)

pytestmark = [pytest.mark.spark, pytest.mark.unit]


def test_small_inventories_use_few_partitions_without_adaptive_execution() -> None:
    assert settings_for_rows(250, parallelism=2) == {
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.leafNodeDefaultParallelism": "1",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    assert "spark.sql.codegen.factoryMode" not in settings_for_rows(INTERPRETED_ROWS + 1, parallelism=2)
    # one partition per 250,000 rows, at most one per core
    assert settings_for_rows(600_000, parallelism=8)["spark.sql.shuffle.partitions"] == "3"
    assert settings_for_rows(SMALL_INVENTORY_ROWS, parallelism=2)["spark.sql.shuffle.partitions"] == "2"


def test_large_inventories_compile_and_scale_partitions_with_rows() -> None:
    big = settings_for_rows(10_000_000, parallelism=2)
    # adaptive execution keeps at least 4 partitions per core (a shuffle in 3 tasks on 2 cores
    # leaves one core idle for the last)
    assert big == {
        "spark.sql.shuffle.partitions": "40",
        "spark.sql.adaptive.coalescePartitions.minPartitionNum": "8",
        "spark.sql.codegen.aggregate.map.twolevel.enabled": "false",
    }
    assert settings_for_rows(SMALL_INVENTORY_ROWS + 1, parallelism=8) == {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.coalescePartitions.minPartitionNum": "32",
        "spark.sql.codegen.aggregate.map.twolevel.enabled": "false",
    }


def test_sized_for_restores_the_session(spark) -> None:  # type: ignore[no-untyped-def]
    before = spark.conf.get("spark.sql.shuffle.partitions")
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    assert adapts(spark) == (adaptive == "true")
    with sized_for(spark, 100) as applied:
        assert spark.conf.get("spark.sql.shuffle.partitions") == applied["spark.sql.shuffle.partitions"]
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
        assert not adapts(spark)  # small audits: the rules' joins are sized by counting what they keep
        assert spark.range(5).groupBy((F.col("id") % 2).alias("k")).count().count() == 2
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert spark.conf.get("spark.sql.adaptive.enabled") == adaptive
    with sized_for(spark, 50_000_000):  # an explicit larger count is kept
        assert int(spark.conf.get("spark.sql.shuffle.partitions") or 0) >= 200
