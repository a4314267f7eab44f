"""Which class archive a Spark JVM maps: only a complete one, of this Java and this Spark, unless off."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ledgerlens.runtime import class_archive
from ledgerlens.runtime.spark import configure
from ledgerlens.settings.config import CACHE_ENV

MAGIC = (0xF00BABA8).to_bytes(4, sys.byteorder)


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Java and a Spark of their own (the key reads only their files), and a cache directory."""
    java = tmp_path / "jdk"
    (java / "bin").mkdir(parents=True)
    (java / "bin" / "java").write_text("#!/bin/sh\n")
    (java / "lib" / "server").mkdir(parents=True)
    (java / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    spark = tmp_path / "spark"
    (spark / "jars").mkdir(parents=True)
    (spark / "jars" / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setenv("JAVA_HOME", str(java))
    monkeypatch.setenv("SPARK_HOME", str(spark))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.DISABLE_ENV, raising=False)
    return tmp_path


def _archive(body: bytes, size: int, named: int | None = None) -> Path:
    """A file of ``size`` bytes starting with ``body``, named as an archive of ``named`` bytes."""
    base = class_archive.stem()
    assert base is not None
    path = class_archive.archive_named(base, size if named is None else named)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body + b"\0" * (size - len(body)))
    return path


def test_a_complete_archive_is_mapped_verified_and_silenced(install: Path) -> None:
    path = _archive(MAGIC, 2 << 20)
    assert path.parent == install / "cache" and path.name.endswith(f"-{2 << 20}.jsa")
    assert class_archive.archive() == path
    options = [
        f"-XX:SharedArchiveFile={path}",
        "-XX:+VerifySharedSpaces",
        "-Xlog:cds=off",
        "-Xlog:cds+dynamic=off",
        f"-XX:ErrorFile={install / 'cache' / 'spark-jvm-crash-%p.log'}",
    ]
    assert class_archive.read_options() == options
    builder = configure(SparkSession.builder, master="local[1]")
    assert " ".join(options) in builder._options["spark.driver.extraJavaOptions"]  # type: ignore[attr-defined]
    cluster = configure(SparkSession.builder, master="spark://elsewhere:7077")
    assert "SharedArchive" not in cluster._options.get("spark.driver.extraJavaOptions", "")  # type: ignore[attr-defined]


def test_only_a_whole_archive_is_read(install: Path) -> None:
    assert class_archive.read_options() == []  # none written yet
    wrong = _archive(b"\x00\x00\x00\x00", 2 << 20)
    assert class_archive.read_options() == []  # not an archive
    wrong.unlink()
    _archive(MAGIC, 4096)
    assert class_archive.read_options() == []  # a failed write's stub
    truncated = _archive(MAGIC, 2 << 20, named=3 << 20)
    assert class_archive.read_options() == []  # shorter than written: the JVM would crash on it
    truncated.unlink()
    _archive(MAGIC, 2 << 20)
    assert class_archive.read_options() != []


@pytest.mark.parametrize("value", ["off", "OFF", "0", "false"])
def test_turned_off_by_environment(install: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    _archive(MAGIC, 2 << 20)
    monkeypatch.setenv(class_archive.DISABLE_ENV, value)
    assert class_archive.read_options() == []


def test_a_cache_path_with_white_space_is_not_given_to_spark(
    install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(install / "my cache"))
    _archive(MAGIC, 2 << 20)
    assert class_archive.read_options() == []  # Spark splits its Java options at spaces


def test_another_java_or_spark_reads_no_archive_of_this_one(install: Path) -> None:
    first = class_archive.stem()
    (install / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"jvm, updated")
    second = class_archive.stem()
    (install / "spark" / "jars" / "spark-sql.jar").write_bytes(b"sql")
    third = class_archive.stem()
    assert len({first, second, third}) == 3
    _archive(MAGIC, 2 << 20)
    assert class_archive.read_options() != []
    (install / "spark" / "jars" / "spark-sql.jar").unlink()
    assert class_archive.read_options() == []


def test_no_java_no_archive(install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(install / "nowhere"))
    assert class_archive.stem() is None and class_archive.read_options() == []
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(install / "empty"))
    assert class_archive.stem() is None


def test_forget_removes_the_archive_the_options_map(install: Path) -> None:
    path = _archive(MAGIC, 2 << 20)
    assert class_archive.forget("-Dx=1 " + " ".join(class_archive.read_options())) == path
    assert not path.exists()
    assert class_archive.forget("-Dx=1") is None
