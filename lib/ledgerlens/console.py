"""What people see while ledgerlens works: one progress display, no library noise, a summary line.

- ``Progress``: one display across an audit's phases (collect, audit, re-verify, write) with
  counts and elapsed time: a tqdm bar in a terminal or notebook, one line per step otherwise
  (logs, cron, CI). Long steps keep ticking.
- ``quiet`` / ``quiet_notebook``: Spark/JVM logging down to errors, library warnings off, plotly
  inline without a CDN; ``verbose()`` (``--verbose``, ``LEDGERLENS_VERBOSE=1``) keeps everything.
- ``summary_line``: the one line a run ends with (counts by severity, the worst finding, the report).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ledgerlens.report.text import SEVERITY_ORDER, human_bytes, human_duration

VERBOSE_ENV = "LEDGERLENS_VERBOSE"

PHASES: tuple[tuple[str, float], ...] = (
    ("collect", 45.0),
    ("audit", 35.0),
    ("re-verify", 10.0),
    ("write", 10.0),
)
"""The audit's phases and their share of the bar (percent); collection splits its share by stage."""


def verbose() -> bool:
    """True when library output is wanted (``--verbose`` or ``LEDGERLENS_VERBOSE=1``)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def set_verbose(on: bool) -> None:
    """Switch verbose mode for this process and its children (Spark JVM, notebook kernels)."""
    if on:
        os.environ[VERBOSE_ENV] = "1"
    else:
        os.environ.pop(VERBOSE_ENV, None)


def log4j2_quiet_config() -> Path:
    """A log4j2 configuration that lets only errors of Spark and its libraries through."""
    return Path(__file__).with_name("log4j2-quiet.properties")


def quiet() -> None:
    """No library noise in this process unless verbose: Python warnings of libraries, py4j and
    Spark loggers at ERROR. (The JVM side is quieted by ``ledgerlens.spark.configure``.)"""
    if verbose():
        return
    for name in ("py4j", "py4j.clientserver", "py4j.java_gateway", "pyspark", "kazoo", "botocore", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)
    for category in (DeprecationWarning, FutureWarning, UserWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("ignore", module="pyspark")
    # py4j reports an interrupted call with logging.exception() on the root logger: a traceback on
    # the console (or in a runbook kernel's stderr) where one line says the run was interrupted
    root = logging.getLogger()
    if not any(isinstance(f, _Py4jRootRecords) for f in root.filters):
        root.addFilter(_Py4jRootRecords())


class _Py4jRootRecords(logging.Filter):
    """Drops records py4j logs on the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def quiet_notebook() -> None:
    """``quiet()`` for a notebook kernel, and plotly figures inlined (no CDN, no MathJax)."""
    quiet()
    from ledgerlens.report.figures import use_offline_renderer

    use_offline_renderer()


# --- progress ---------------------------------------------------------------------------------------


def _bar_wanted(file: IO[str]) -> bool:
    """A bar in a notebook with a live front end or in a terminal; lines under papermill, in logs."""
    if _in_notebook():
        from ledgerlens.report.runbook import live_kernel

        return live_kernel()
    return file.isatty()


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class Progress:
    """One progress display across the phases of a run.

    ``with progress.phase("collect", steps=5): ...`` opens a phase; ``progress.step("bk_ledgers")``
    advances inside it; ``progress.note("1,234 ledgers")`` sets the counts shown beside the bar.
    Disabled (``enabled=False``) it does nothing. In a terminal or a notebook it is a tqdm bar
    whose elapsed time keeps ticking through long steps; elsewhere it prints one line per step.
    """

    def __init__(
        self,
        enabled: bool = True,
        *,
        phases: tuple[tuple[str, float], ...] = PHASES,
        file: IO[str] | None = None,
        bar: bool | None = None,
        tick_s: float = 1.0,
    ) -> None:
        self.enabled = enabled
        self._weights = dict(phases)
        self._file = file if file is not None else sys.stderr
        self._start = time.monotonic()
        self._done = 0.0  # percent completed by finished phases
        self._phase = ""
        self._phase_weight = 0.0
        self._phase_t0 = self._start
        self._steps = 1
        self._step = 0
        self._label = ""
        self._note = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._tqdm: Any = None
        self._ticker: threading.Thread | None = None
        self.timings: dict[str, float] = {}
        if not enabled:
            return
        use_bar = bar if bar is not None else _bar_wanted(self._file)
        if use_bar:
            from tqdm.auto import tqdm

            self._tqdm = tqdm(
                total=100,
                file=None if _in_notebook() else self._file,
                bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed} {postfix}",
                dynamic_ncols=True,
                leave=True,
            )
            self._ticker = threading.Thread(target=self._tick, args=(tick_s,), daemon=True)
            self._ticker.start()

    # --- phases and steps --------------------------------------------------------------------------

    def begin(self, name: str, steps: int = 1, label: str = "") -> None:
        """Start phase ``name`` of ``steps`` steps (ending the previous one if still open)."""
        if self._phase and self._phase not in self.timings:
            self.end()
        with self._lock:
            self._phase, self._steps, self._step, self._label = name, max(1, steps), 0, label
            self._phase_weight = self._weights.get(name, 0.0)
            self._phase_t0 = time.monotonic()
        self.timings.pop(name, None)
        self._render()

    def end(self, note: str = "") -> None:
        """The current phase is complete; ``note``: its counts (``'12,345 rows scanned'``)."""
        if not self._phase or self._phase in self.timings:
            return
        name = self._phase
        self.timings[name] = time.monotonic() - self._phase_t0
        with self._lock:
            self._done = min(100.0, self._done + self._phase_weight)
            self._step, self._label = self._steps, ""
            if note:
                self._note = note
        self._render(line=f"{name} done in {human_duration(self.timings[name])}")

    @contextmanager
    def phase(self, name: str, steps: int = 1, label: str = "") -> Iterator[Progress]:
        """``begin`` ... ``end`` as a context manager."""
        self.begin(name, steps, label)
        try:
            yield self
        finally:
            self.end()

    def set_steps(self, steps: int) -> None:
        """The current phase has ``steps`` steps after all (known once its work is planned)."""
        with self._lock:
            self._steps = max(1, steps)
            self._step = min(self._step, self._steps)
        self._render()

    def start_step(self, label: str) -> None:
        """Say what the current step is doing (``bk_ledgers``, ``rules``)."""
        with self._lock:
            self._label = label
        self._render()

    def step(self, label: str = "") -> None:
        """One step of the current phase finished."""
        with self._lock:
            self._step = min(self._steps, self._step + 1)
            done_label = label or self._label
            self._label = ""
            count = f" {self._step}/{self._steps}" if self._steps > 1 else ""
        self._render(line=f"{self._phase}{count} {done_label}".strip())

    def note(self, text: str) -> None:
        """Counts shown beside the bar (``'12,345 ledgers scanned'``)."""
        with self._lock:
            self._note = text
        self._render()

    def close(self, final: str = "") -> None:
        """End the display (``final``: the last note)."""
        if not self.enabled:
            return
        self._stop.set()
        if final:
            self._note = final
        if self._tqdm is not None:
            self._tqdm.n = 100 if self._done >= 99.9 else self._tqdm.n
            self._render()
            self._tqdm.close()
            self._tqdm = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- drawing ----------------------------------------------------------------------------------

    def percent(self) -> float:
        """How far the run is (0-100)."""
        with self._lock:
            if not self._phase or self._phase in self.timings:  # between phases
                return self._done
            return min(100.0, self._done + self._phase_weight * (self._step / self._steps))

    def _desc(self) -> str:
        label = f" {self._label}" if self._label else ""
        running = self._phase and self._phase not in self.timings and self._steps > 1
        count = f" {min(self._step + 1, self._steps)}/{self._steps}" if running and self._label else ""
        return f"{self._phase}{count}{label}"

    def _tick(self, every: float) -> None:
        while not self._stop.wait(every):
            self._render()

    def _render(self, line: str = "") -> None:
        if not self.enabled:
            return
        if self._tqdm is not None:
            bar = self._tqdm
            bar.n = round(self.percent(), 1)
            bar.set_description_str(self._desc(), refresh=False)
            bar.set_postfix_str(self._note, refresh=False)
            bar.refresh()
        elif line:
            elapsed = human_duration(time.monotonic() - self._start)
            note = f" ({self._note})" if self._note else ""
            print(f"[{self.percent():3.0f}% {elapsed:>7}] {line}{note}", file=self._file, flush=True)


class _Stages:
    """tqdm's ``set_description`` / ``update`` / ``close`` over a ``Progress`` phase (collection stages):
    the phase gets exactly ``total`` steps."""

    def __init__(self, progress: Progress, total: int) -> None:
        self._p = progress
        self._label = ""
        progress.set_steps(total)

    def set_description(self, desc: str, refresh: bool = True) -> None:
        self._label = desc.split(" ", 1)[-1]
        self._p.start_step(self._label)

    def update(self, n: int = 1) -> None:
        for _ in range(n):
            self._p.step(self._label)

    def close(self) -> None:
        pass


def stage_bar(progress: bool | Progress, total: int, unit: str = "stage") -> Any:
    """A tqdm-like bar for the stages of one phase: inside ``progress`` when it is a ``Progress``,
    else a tqdm bar of its own (disabled when ``progress`` is false)."""
    if isinstance(progress, Progress):
        return _Stages(progress, total)
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not progress, unit=unit)


def as_progress(progress: bool | Progress) -> Progress:
    """A ``Progress`` from a flag (``True``: a new display; ``False``: none) or itself."""
    if isinstance(progress, Progress):
        return progress
    return Progress(enabled=bool(progress))


# --- the final summary line ---------------------------------------------------------------------------


def worst_finding(findings: Any) -> str:
    """``'missing_ledger ledger 42 of persistent://t/ns/x'``: the most severe, largest finding."""
    import pandas as pd

    from ledgerlens.report.html import top_findings

    if findings is None or len(findings) == 0:
        return ""
    row = top_findings(pd.DataFrame(findings), 1).iloc[0].to_dict()
    from ledgerlens.report.explanations import Finding

    f = Finding(row)
    what = [f.kind]
    if f.ledger_id is not None:
        what.append(f"ledger {f.ledger_id}")
    elif f.object_key:
        what.append(f"object {f.object_key}")
    elif f.path:
        what.append(f.path)
    if f.topic or f.managed_ledger:
        what.append(f"of {f.owner}")
    return " ".join(what)


def summary_line(
    summary: Mapping[str, Any],
    *,
    worst: str = "",
    report: str | Path | None = None,
    findings: str | Path | None = None,
) -> str:
    """The line a run ends with.

    ``ledgerlens: 3 critical, 20 warning, 6 info (29 findings, 1.2 MiB); worst: ...; report: ...``
    """
    sev = summary.get("counts_by_severity") or {}
    total = int(summary.get("total_findings") or 0)
    size = sum(int(v or 0) for v in (summary.get("bytes_by_severity") or {}).values())
    counts = ", ".join(f"{int(sev.get(s, 0) or 0)} {s}" for s in SEVERITY_ORDER)
    parts = [f"ledgerlens: {counts} ({total} findings, {human_bytes(size)})"]
    if total == 0:
        parts[0] = f"ledgerlens: healthy, 0 findings ({counts})"
    if worst:
        parts.append(f"worst: {worst}")
    if report:
        parts.append(f"report: {report}")
    elif findings:
        parts.append(f"findings: {findings}")
    return "; ".join(parts)
