"""The Spark JVM's class archive: its classes mapped from one file at start-up, not loaded one by one.

A Spark session's JVM loads and verifies about twelve thousand classes before its first job: about
half of the time a session and one trivial job take. ``ledgerlens warm-up``
(``ledgerlens.runtime.warm_up``) writes them once to an archive (HotSpot's dynamic class data sharing,
``-XX:ArchiveClassesAtExit``): it starts Spark the way the CLI does, runs a few small queries and
an audit of an empty inventory, and the JVM writes every class it loaded as it exits. Sessions that
``spark.configure`` sets up on a local master afterwards map that archive
(``-XX:SharedArchiveFile``), which starts them sooner (docs/performance.md, "The class archive").

Opt-in: it weighs about 180 MiB, and writing it takes about a minute. It is keyed by this Java and
this Spark (their files' sizes and times), so after an upgrade of either none is read until the
next warm-up. Only a complete archive is read (its size is in its name), with checksums: the JVM
crashed on a truncated or damaged one, and starts without one whose checksums fail. Its messages
about the archive are turned off (they go to stdout). Should a JVM still not start with the archive,
``spark.get_session`` removes it and starts without.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from ledgerlens.settings.config import cache_dir

__all__ = [
    "DISABLE_ENV",
    "VERIFY",
    "archive",
    "archive_named",
    "forget",
    "read_options",
    "stem",
    "write_options",
    "written",
]

DISABLE_ENV = "LEDGERLENS_CLASS_ARCHIVE"
"""``off``: sessions never read the archive (the benchmarks measure a fresh install so)."""

_MAGIC = (0xF00BABA8).to_bytes(4, sys.byteorder)  # a dynamic archive's header starts so
_MIN_BYTES = 1 << 20  # a real one is about 180 MiB; a stub of a failed write is smaller
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # the JVM's archive messages go to stdout


def _java_home() -> Path | None:
    """The Java that Spark's launcher starts: ``$JAVA_HOME``, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    exe = Path(home, "bin", "java") if home else shutil.which("java")
    if not exe or not Path(exe).exists():
        return None
    return Path(exe).resolve().parent.parent


def _spark_jars() -> Path | None:
    from pyspark.find_spark_home import _find_spark_home  # pyspark: only when the jars are listed

    jars = Path(_find_spark_home(), "jars")
    return jars if jars.is_dir() else None


def _key() -> str | None:
    """What the archive's classes came from: this Java's JVM library and Spark's jars (their files'
    sizes and times: a Java update changes the library where the launcher's path stays)."""
    java, jars = _java_home(), _spark_jars()
    if java is None or jars is None:
        return None
    key = hashlib.sha256()
    for f in (
        *sorted(java.glob("lib/server/*.so")),
        *sorted(java.glob("lib/server/*.jsa")),
        *sorted(jars.iterdir()),
    ):
        st = f.stat()
        key.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return key.hexdigest()[:16]


def stem() -> Path | None:
    """The archive's path without its size (``archive_named``): this Java's and this Spark's."""
    key = _key()
    return None if key is None else cache_dir() / f"spark-classes-{key}"


def archive_named(stem: Path, size: int) -> Path:
    """The archive's file: its size in its name, so a truncated file (which the JVM would map and
    crash on, SIGBUS) is never read. The name is given when the archive is complete."""
    return stem.with_name(f"{stem.name}-{size}.jsa")


def archive() -> Path | None:
    """The complete archive of this Java and this Spark, if any: its size is its name's and it
    starts as an archive does (the JVM checks each region's checksum, ``VERIFY``)."""
    base = stem()
    if base is None or not base.parent.is_dir():
        return None
    for path in base.parent.glob(f"{base.name}-*.jsa"):
        size = path.stem.rsplit("-", 1)[1]
        if size.isdigit() and path == archive_named(base, int(size)) and _whole(path, int(size)):
            return path
    return None


def _whole(path: Path, size: int) -> bool:
    try:
        with path.open("rb") as f:
            return size >= _MIN_BYTES and os.fstat(f.fileno()).st_size == size and f.read(4) == _MAGIC
    except OSError:
        return False


def written(path: Path) -> bool:
    """Whether a JVM wrote an archive to ``path`` (before it is named by ``archive_named``)."""
    try:
        return _whole(path, path.stat().st_size)
    except OSError:
        return False


VERIFY = "-XX:+VerifySharedSpaces"
"""Checksums written with the archive and checked when it is mapped: a file damaged in place is
then skipped (without, the JVM crashed on one). It costs no measurable start-up time."""


def read_options() -> list[str]:
    """The JVM options that map the archive, or none: no complete archive,
    ``$LEDGERLENS_CLASS_ARCHIVE=off``, or a path with white space (Spark splits Java options at
    spaces)."""
    if os.environ.get(DISABLE_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return []
    path = archive()
    if path is None or any(c.isspace() for c in str(path)):
        return []
    # were the JVM to crash on it all the same, its crash report goes beside it, not into the cwd
    crash = f"-XX:ErrorFile={path.parent / 'spark-jvm-crash-%p.log'}"
    return [f"-XX:SharedArchiveFile={path}", VERIFY, *_QUIET, crash]


def write_options(path: Path) -> list[str]:
    """The JVM options that write an archive to ``path`` when the JVM exits."""
    return [f"-XX:ArchiveClassesAtExit={path}", VERIFY, *_QUIET]


def forget(options: str) -> Path | None:
    """Remove the archive that Java ``options`` map (one the JVM could not start with); its path."""
    for word in options.split():
        if word.startswith("-XX:SharedArchiveFile="):
            path = Path(word.split("=", 1)[1])
            path.unlink(missing_ok=True)
            return path
    return None
