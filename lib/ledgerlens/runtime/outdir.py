"""One run at a time per output directory, and results published whole.

``OutputDir(out)`` is a context manager around one run that writes into ``out``:

- a lock (``out/.ledgerlens.lock``, ``flock``: released by the kernel when the process dies) so a
  second run into the same directory fails at once, naming the holder's pid and start time;
- a staging directory private to the run (``out/.ledgerlens-staging-<id>``): every result and all
  scratch space (the inventory, the scan's temporary tables) go there;
- ``publish()`` moves the staged results into ``out`` only when the run completed: results of the
  previous run (the names it published, and any older ledgerlens result file such as a stale
  ``report.html``) are set aside first, then the staged ones renamed in, guided by a journal so
  that a crash in between is rolled forward by the next run. ``out`` holds either the previous
  complete run or the new one, never a mix. A run that ends without ``publish()`` (error, Ctrl-C)
  removes its staging directory and leaves ``out`` as it was.
- ``history/`` (``ledgerlens.audit.history``) is merged, not replaced: the run's new entry is
  renamed into ``out/history`` beside the older ones, which stay.

Files in ``out`` that ledgerlens never writes are left alone.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from ledgerlens.errors import ConfigError, LedgerLensError
from ledgerlens.runtime import signals

LOCK_NAME = ".ledgerlens.lock"
MANIFEST_NAME = ".ledgerlens-manifest.json"
JOURNAL_NAME = ".ledgerlens-publish.json"
STAGING_PREFIX = ".ledgerlens-staging-"
ASIDE_PREFIX = ".ledgerlens-previous-"

# Every result name a ledgerlens run may have written into ``--out`` (also by releases that kept no
# manifest): a new run sets these aside even when it does not write them itself.
RESULT_NAMES = (
    "findings.parquet",
    "resolved.parquet",
    "disk_usage.parquet",  # BookKeeper bytes by state (audit/disk.py)
    "summary.json",
    "inventory",
    "audit_ledgers.ipynb",
    "report.html",
)

# Directories a run adds entries to instead of replacing them (never set aside, never in a manifest).
MERGED_NAMES = ("history",)


def published_dir(out: str | Path) -> Path:
    """Where a run writing into ``out`` is published: ``out`` itself, or, for a run nested in another
    run's staging directory (the runbook inside ``ledgerlens report``), the outer run's ``out``."""
    p = Path(out).resolve()
    return p.parent if p.name.startswith(STAGING_PREFIX) else p


class OutputBusyError(LedgerLensError):
    """Another run holds the output directory's lock."""


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_writable(out: Path) -> None:
    """Raise ``ConfigError`` unless ``out`` is (or can be created as) a writable directory."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: is a file, not a directory")
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"--out {out}: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: {probe} is not writable")
    if probe == out:
        name = out / f".ledgerlens-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            name.mkdir()
            name.rmdir()
        except OSError as e:
            raise ConfigError(f"--out {out}: cannot write there ({e.strerror or e})") from e


class OutputDir:
    """The lock, staging directory and publication of one run into ``out`` (see the module docs)."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out).resolve()
        self.run_id = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.staging = self.out / f"{STAGING_PREFIX}{self.run_id}"
        self.published = False
        self.created = False
        self._lock_fd: int | None = None

    # -- lock ------------------------------------------------------------------------------------
    def acquire(self) -> OutputDir:
        """Create ``out`` if needed, take its lock (or raise ``OutputBusyError``), stage privately."""
        check_writable(self.out)
        self.created = not self.out.exists()
        self.out.mkdir(parents=True, exist_ok=True)
        lock = self.out / LOCK_NAME
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise ConfigError(f"--out {self.out}: cannot lock {lock} ({e.strerror})") from e
                holder = _holder(lock, fd)
                os.close(fd)
                if holder is None:
                    continue  # the holder finished (and removed the file) meanwhile: try again
                raise OutputBusyError(
                    f"--out {self.out} is in use by another ledgerlens run ({holder}); "
                    "wait for it to finish or choose another --out"
                ) from e
            try:
                same = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the previous holder removed the file as we opened it: lock the new one
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now_iso(), "run": self.run_id}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        self._lock_fd = fd
        self._recover()
        self.staging.mkdir()
        return self

    def release(self) -> None:
        """Remove the staging directory (if not published) and the lock file, drop the lock; a
        directory this run created and left empty is removed too."""
        shutil.rmtree(self.staging, ignore_errors=True)
        if self._lock_fd is None:
            return
        try:
            (self.out / LOCK_NAME).unlink(missing_ok=True)  # still ours: we hold the lock
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None
        if self.created and not self.published:
            try:
                self.out.rmdir()
            except OSError:
                pass  # not empty: someone else's files

    def __enter__(self) -> OutputDir:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    # -- publication -----------------------------------------------------------------------------
    def final_path(self, staged: str | Path) -> Path:
        """Where a path under the staging directory ends up once published."""
        return self.out / Path(staged).resolve().relative_to(self.staging)

    def publish(self) -> list[str]:
        """Move every staged entry into ``out``, setting the previous run's results aside first.

        SIGINT and SIGTERM wait until the renames are done (milliseconds). Returns the names.
        """
        if self._lock_fd is None:
            raise LedgerLensError(f"--out {self.out}: publish() without the lock")
        # A nested run (the runbook's pipeline inside ``ledgerlens report``) leaves its own lock and
        # manifest in the staging directory: never published.
        staged = [p.name for p in self.staging.iterdir() if not p.name.startswith(".ledgerlens")]
        names = sorted(n for n in staged if n not in MERGED_NAMES)
        merged = sorted(n for n in staged if n in MERGED_NAMES)
        aside = self.out / f"{ASIDE_PREFIX}{self.run_id}"
        # A run nested in another run's staging directory (the runbook inside ``ledgerlens report``)
        # leaves the outer run's files (the notebook papermill is writing) alone.
        nested = self.out.name.startswith(STAGING_PREFIX)
        previous = set(_manifest(self.out)) | (set() if nested else set(RESULT_NAMES))
        old = sorted(n for n in previous | set(names) if _present(self.out / n))
        journal = {
            "staging": self.staging.name,
            "aside": aside.name,
            "names": names,
            "old": old,
            "merged": merged,
        }
        signals.raise_if_stopped()  # a stopped run publishes nothing, even one a library kept going
        with _signals_deferred():
            write_atomic(self.out / JOURNAL_NAME, json.dumps(journal) + "\n")
            _roll_forward(self.out, journal)
        shutil.rmtree(aside, ignore_errors=True)
        self.published = True
        return names

    def _recover(self) -> None:
        """Finish a publication a crashed run left half done; remove stale staging directories."""
        journal_path = self.out / JOURNAL_NAME
        if journal_path.exists():
            try:
                journal = json.loads(journal_path.read_text())
            except ValueError:
                journal = None
            if journal is not None and (self.out / journal["staging"]).is_dir():
                _roll_forward(self.out, journal)
            else:
                journal_path.unlink()
        for p in self.out.iterdir():
            if p.name.startswith((STAGING_PREFIX, ASIDE_PREFIX)) and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)  # we hold the lock: no other run owns them


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _roll_forward(out: Path, journal: Mapping[str, Any]) -> None:
    staging = out / str(journal["staging"])
    aside = out / str(journal["aside"])
    aside.mkdir(exist_ok=True)
    for name in journal["old"]:
        src = out / name
        if _present(src) and not _present(aside / name):
            os.replace(src, aside / name)
    for name in journal["names"]:
        src = staging / name
        if src.exists():
            os.replace(src, out / name)
    for name in journal.get("merged", ()):
        _merge(staging / str(name), out / str(name))
    write_atomic(out / MANIFEST_NAME, json.dumps({"names": journal["names"], "published": _now_iso()}) + "\n")
    (out / JOURNAL_NAME).unlink(missing_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)


def _merge(src: Path, dst: Path) -> None:
    """Rename every entry of ``src`` into ``dst`` (created if needed); an entry already there stays."""
    if not src.is_dir():
        return
    dst.mkdir(exist_ok=True)
    for entry in sorted(src.iterdir()):
        if not _present(dst / entry.name):
            os.replace(entry, dst / entry.name)


def _manifest(out: Path) -> list[str]:
    try:
        return [str(n) for n in json.loads((out / MANIFEST_NAME).read_text())["names"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path`` whole or not at all: a temporary file beside it, renamed over it
    (readers never see half a file; the parent directory is made if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _holder(lock: Path, fd: int) -> str | None:
    """Who holds the lock of ``fd`` (read from the file), or None when that file is no longer the
    lock (its holder removed it on release). Waits briefly for a holder still writing its name."""
    info: dict[str, object] = {}
    for _ in range(50):
        try:
            if os.stat(lock).st_ino != os.fstat(fd).st_ino:
                return None
        except FileNotFoundError:
            return None
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        except ValueError:
            info = {}
        if info:
            break
        time.sleep(0.02)
    if not info:
        return "holder unknown"
    return f"pid {info.get('pid')} on {info.get('host')}, started {info.get('started')}"


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT/SIGTERM received inside the block are re-delivered when it ends (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in saved:
        signal.signal(s, lambda n, _f: got.append(n))
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        for n in got:
            os.kill(os.getpid(), n)
            time.sleep(0)
