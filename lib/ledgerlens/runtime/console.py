"""What people see while ledgerlens works: one progress display, no library noise, a summary line.

- ``Progress``: one display across a command's waits (checking the stores, starting Spark) and
  an audit's phases (collect, audit, re-verify, write) with counts and the wall time since the
  command started: a tqdm bar in a terminal or notebook, one line per step otherwise (logs, cron,
  CI, journald), and a "still running" line after 10 s without one.
- ``quiet`` / ``quiet_notebook``: Spark/JVM logging down to errors, library warnings off, plotly
  inline without a CDN; ``verbose()`` (``--verbose``, ``LEDGERLENS_VERBOSE=1``) keeps everything.
- ``summary_line``: the one line a run ends with (counts by severity, the worst finding, the report).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
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
    Spark loggers at ERROR. (The JVM side is quieted by ``ledgerlens.runtime.spark.configure``.)"""
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
    from ledgerlens.report.figures import use_offline_renderer  # plotly, pandas: only in a notebook

    use_offline_renderer()


# --- progress ---------------------------------------------------------------------------------------

STARTED_ENV = "LEDGERLENS_STARTED"
"""The epoch time (seconds) the ``ledgerlens`` command started, set for the runbook kernel it starts:
the kernel's progress lines count from the command's start, as the command's own lines do."""

INTERVAL_ENV = "LEDGERLENS_PROGRESS_INTERVAL"
"""Seconds of silence after which a line display says what is still running (default 10)."""

INTERVAL_S = 10.0

_LINE = re.compile(r"^\[\s*(\d+)%[^\]]*\] ")


def clock(seconds: float) -> str:
    """A progress clock: ``'3.9 s'``, ``'41 s'``, ``'2 min 05 s'``, ``'1 h 02 min'``."""
    if seconds < 60:
        return human_duration(seconds)
    s = int(seconds)
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def progress_interval() -> float:
    """Seconds between "still running" lines off a terminal (``$LEDGERLENS_PROGRESS_INTERVAL``)."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, "") or INTERVAL_S)
    except ValueError:
        return INTERVAL_S
    return value if value > 0 else INTERVAL_S


def process_started() -> float:
    """When this process started (epoch seconds), interpreter start-up and imports included; now
    where ``/proc`` does not say."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time since boot
    except (OSError, ValueError, IndexError):
        return time.time()
    return time.time() - max(0.0, age)


def command_started() -> float | None:
    """``$LEDGERLENS_STARTED``: when the command that started this process (a runbook kernel) began."""
    try:
        return float(os.environ[STARTED_ENV])
    except (KeyError, ValueError):
        return None


@contextmanager
def started_env(started: float) -> Iterator[None]:
    """``$LEDGERLENS_STARTED`` set to ``started`` for the processes started inside (the runbook kernel)."""
    saved = os.environ.get(STARTED_ENV)
    os.environ[STARTED_ENV] = f"{started:.3f}"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(STARTED_ENV, None)
        else:
            os.environ[STARTED_ENV] = saved


def say(text: str, file: IO[str] | None = None) -> None:
    """One progress line outside a ``Progress``, on the command's clock (a runbook kernel's work
    before its audit starts: starting Spark)."""
    started = command_started() or time.time()
    elapsed = clock(max(0.0, time.time() - started))
    print(f"[{0:3.0f}% {elapsed:>7}] {text}", file=file if file is not None else sys.stderr, flush=True)


def _bar_wanted(file: IO[str]) -> bool:
    """A bar in a notebook with a live front end or in a terminal; lines under papermill, in logs."""
    if _in_notebook():
        from ledgerlens.report.runbook import live_kernel  # papermill: only inside a notebook kernel

        return live_kernel()
    return file.isatty()


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # IPython: optional, only to tell a notebook
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


_OPEN: list[Progress] = []


@contextmanager
def closing_progress() -> Iterator[None]:
    """Every ``Progress`` started inside is closed on the way out, an error's included, so that no
    line follows the command's last one."""
    before = len(_OPEN)
    try:
        yield
    finally:
        for p in list(_OPEN[before:]):
            p.close()


class Progress:
    """One progress display across the phases of a run, on the command's clock.

    ``with progress.waiting("starting Spark"): ...`` says what the run waits for before its phases;
    ``with progress.phase("collect", steps=5): ...`` opens a phase; ``progress.step("bk_ledgers")``
    advances inside it; ``progress.note("1,234 ledgers")`` sets the counts shown beside the bar.
    Disabled (``enabled=False``) it does nothing. In a terminal or a notebook it is a tqdm bar
    whose elapsed time keeps ticking; elsewhere (logs, cron, journald) it prints one line per
    step, and, after ``interval`` seconds without a line, one saying what is still running.

    The time shown is the wall time since ``started`` (epoch seconds): the command's start for the
    CLI (``process_started``), ``$LEDGERLENS_STARTED`` in the runbook kernel of ``ledgerlens
    report``, else the moment the display was created. With a ``title`` (``'ledgerlens audit'``),
    the first line says when, in UTC.
    """

    def __init__(
        self,
        enabled: bool = True,
        *,
        phases: tuple[tuple[str, float], ...] = PHASES,
        file: IO[str] | None = None,
        bar: bool | None = None,
        tick_s: float = 1.0,
        title: str = "",
        started: float | None = None,
        interval: float | None = None,
    ) -> None:
        self.enabled = enabled
        self._weights = dict(phases)
        self._file = file if file is not None else sys.stderr
        self.started_at = started if started is not None else (command_started() or time.time())
        self._start = time.monotonic() - max(0.0, time.time() - self.started_at)
        self._title = title
        self._interval = interval if interval is not None else progress_interval()
        self._done = 0.0  # percent completed by finished phases
        self._floor = 0.0  # percent a relayed display (the runbook kernel's) has reached
        self._phase = ""
        self._phase_weight = 0.0
        self._phase_t0 = self._start
        self._steps = 1
        self._step = 0
        self._label = ""
        self._note = ""
        self._wait = ""  # what the run waits for outside a phase ("starting Spark")
        self._wait_said = True
        self._say_after = 0.0
        self._since = time.monotonic()  # when what is under way began (for "N s so far")
        self._last_out = time.monotonic()
        self._relaying = False
        self._relayed_desc = ""  # what the relayed display said it started last
        self._lock = threading.Lock()
        self._out_lock = threading.RLock()
        self._stop = threading.Event()
        self._tqdm: Any = None
        self._ticker: threading.Thread | None = None
        self.timings: dict[str, float] = {}
        if not enabled:
            return
        if bar if bar is not None else _bar_wanted(self._file):
            self._tqdm = self._new_bar()
        _OPEN.append(self)
        self._ticker = threading.Thread(target=self._tick, args=(tick_s,), daemon=True)
        self._ticker.start()

    def _new_bar(self) -> Any:
        from tqdm.auto import tqdm  # tqdm: only when a bar is drawn

        bar = tqdm(
            total=100,
            file=None if _in_notebook() else self._file,
            bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed} {postfix}",
            dynamic_ncols=True,
            leave=True,
        )
        bar.start_t -= time.monotonic() - self._start  # the elapsed time shown: the command's
        return bar

    # --- before the phases ------------------------------------------------------------------------

    @contextmanager
    def waiting(self, what: str, *, done: str = "", say_after: float = 0.0) -> Iterator[Progress]:
        """Work outside the phases (checking the stores, starting Spark): ``what`` is said at once,
        or once it has lasted ``say_after`` seconds (quiet when quick); ``done`` ('Spark started')
        is said with its duration when it ends well and ``what`` was said."""
        now = time.monotonic()
        with self._lock:
            self._wait, self._wait_said, self._say_after, self._since = what, False, say_after, now
        if say_after <= 0:
            self._say_wait()
        self._render()
        try:
            yield self
        except BaseException:
            with self._lock:
                self._wait, self._relayed_desc, self._relaying = "", "", False
            raise
        with self._lock:
            said, self._wait, self._wait_said = self._wait_said, "", True
            self._relayed_desc, self._relaying = "", False
        if said and done and self._tqdm is None:
            self._render(line=f"{done} in {human_duration(time.monotonic() - now)}", with_note=False)
        self._render()

    def _say_wait(self) -> None:
        with self._lock:
            if self._wait_said or not self._wait:
                return
            self._wait_said, what = True, self._wait
        self._render(line=what, with_note=False)

    # --- phases and steps --------------------------------------------------------------------------

    def begin(self, name: str, steps: int = 1, label: str = "") -> None:
        """Start phase ``name`` of ``steps`` steps (ending the previous one if still open)."""
        if self._phase and self._phase not in self.timings:
            self.end()
        with self._lock:
            self._phase, self._steps, self._step, self._label = name, max(1, steps), 0, label
            self._phase_weight = self._weights.get(name, 0.0)
            self._phase_t0 = self._since = time.monotonic()
        self.timings.pop(name, None)
        self._render()  # off a terminal, said once it is slow: the heartbeat

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
            self._since = time.monotonic()
        self._render()

    def step(self, label: str = "") -> None:
        """One step of the current phase finished."""
        with self._lock:
            self._step = min(self._steps, self._step + 1)
            done_label = label or self._label
            self._label = ""
            self._since = time.monotonic()
            count = f" {self._step}/{self._steps}" if self._steps > 1 else ""
        self._render(line=f"{self._phase}{count} {done_label}".strip())

    def note(self, text: str) -> None:
        """Counts shown beside the bar (``'12,345 ledgers scanned'``)."""
        with self._lock:
            self._note = text
        self._render()

    def close(self, final: str = "") -> None:
        """End the display (``final``: the last note); no line follows."""
        if not self.enabled:
            return
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=5)
        if self in _OPEN:
            _OPEN.remove(self)
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

    # --- another display's lines (the runbook kernel's, through papermill) ------------------------

    def relay(self) -> IO[str]:
        """A file whose lines (the runbook kernel's progress) are written to this display's file as
        they come; they count as this display's output, and their percent becomes its own."""
        self._relaying = True
        return _Relay(self)  # type: ignore[return-value]

    def _relayed(self, line: str) -> None:
        # a closed display prints nothing: the command's last line (an interrupted run's) stays
        # last while the kernel's messages still come in; a blank line says nothing
        if self._stop.is_set() or not line.strip():
            return
        m = _LINE.match(line)
        with self._out_lock:
            self._print(line.rstrip("\n"))
        if not m:
            return
        text = line[m.end() :].strip()
        with self._lock:
            self._floor = max(self._floor, float(m.group(1)))
            if " done in " in text:  # what was under way ended: back to our own words
                self._relayed_desc = ""
            elif not text.endswith(" so far"):  # 'starting Spark (local[*])': under way from now
                self._relayed_desc, self._since = text.removesuffix(" ..."), time.monotonic()

    # --- drawing ----------------------------------------------------------------------------------

    def percent(self) -> float:
        """How far the run is (0-100)."""
        with self._lock:
            if not self._phase or self._phase in self.timings:  # between phases
                return max(self._floor, self._done)
            return min(100.0, self._done + self._phase_weight * (self._step / self._steps))

    def _desc(self) -> str:
        if self._wait:
            return self._relayed_desc or self._wait
        label = f" {self._label}" if self._label else ""
        running = self._phase and self._phase not in self.timings and self._steps > 1
        count = f" {min(self._step + 1, self._steps)}/{self._steps}" if running and self._label else ""
        return f"{self._phase}{count}{label}"

    def _tick(self, every: float) -> None:
        while not self._stop.wait(every):
            if self._tqdm is not None:
                self._render()
            else:
                self._heartbeat()

    def _heartbeat(self) -> None:
        """Line mode: say a slow ``waiting`` once it is slow; after ``interval`` seconds without a
        line, say what is still running and for how long."""
        now = time.monotonic()
        with self._lock:
            pending = bool(self._wait) and not self._wait_said and now - self._since >= self._say_after
            quiet = bool(self._wait) and not self._wait_said
            busy = bool(self._wait) or bool(self._phase and self._phase not in self.timings)
            desc, since = self._desc(), self._since
        if pending:
            self._say_wait()
            return
        # a relayed display says its own heartbeats: ours only when it has been silent longer
        interval = self._interval * (1.5 if self._relaying else 1.0)
        with self._out_lock:
            if busy and not quiet and now - self._last_out >= interval and not self._stop.is_set():
                self._render(line=f"{desc}, {clock(round(now - since))} so far", with_note=False)

    def _print(self, text: str) -> None:
        """One line to the file (the title line first); caller holds ``_out_lock``."""
        if self._title:
            when = datetime.fromtimestamp(self.started_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            print(f"{self._title}: started {when}", file=self._file)
            self._title = ""
        print(text, file=self._file, flush=True)
        self._last_out = time.monotonic()

    def _render(self, line: str = "", *, with_note: bool = True) -> None:
        if not self.enabled:
            return
        if self._tqdm is not None:
            bar = self._tqdm
            bar.n = round(self.percent(), 1)
            bar.set_description_str(self._desc(), refresh=False)
            bar.set_postfix_str(self._note, refresh=False)
            bar.refresh()
        elif line:
            elapsed = clock(time.monotonic() - self._start)
            note = f" ({self._note})" if self._note and with_note else ""
            text = f"[{self.percent():3.0f}% {elapsed:>7}] {line}{note}"
            with self._out_lock:
                self._print(text)


class _Relay:
    """The file ``Progress.relay`` returns: whole lines go to the display as they complete."""

    def __init__(self, progress: Progress) -> None:
        self._p = progress
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self._p._relayed(line)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


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

    def done(self, label: str) -> None:
        """One step finished under its own label (a stage running beside the current one)."""
        self._p.step(label)

    def close(self) -> None:
        pass


def stage_bar(progress: bool | Progress, total: int, unit: str = "stage") -> Any:
    """A tqdm-like bar for the stages of one phase: inside ``progress`` when it is a ``Progress``,
    else a tqdm bar of its own (disabled when ``progress`` is false)."""
    if isinstance(progress, Progress):
        return _Stages(progress, total)
    from tqdm.auto import tqdm  # tqdm: only when a bar is drawn

    return tqdm(total=total, disable=not progress, unit=unit)


def as_progress(progress: bool | Progress) -> Progress:
    """A ``Progress`` from a flag (``True``: a new display; ``False``: none) or itself."""
    if isinstance(progress, Progress):
        return progress
    return Progress(enabled=bool(progress))


# --- the final summary line ---------------------------------------------------------------------------


def summary_line(
    summary: Mapping[str, Any],
    *,
    worst: str = "",
    report: str | Path | None = None,
    findings: str | Path | None = None,
) -> str:
    """The line a run ends with.

    ``ledgerlens: 3 critical, 20 warning, 6 info (29 findings, 1.2 MiB); worst: ...; 1 new, 1
    resolved since 2026-11-27 03:00 UTC; report: ...`` (the comparison with the previous run, or
    ``first run: nothing to compare``, when the summary has one: ``ledgerlens.audit.history``).
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
    previous = summary.get("previous")
    if isinstance(previous, Mapping) and previous.get("as_of_ms") is not None:
        since = datetime.fromtimestamp(int(previous["as_of_ms"]) / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
        new, gone = int(summary.get("new_total") or 0), int(summary.get("resolved_total") or 0)
        parts.append(f"{new} new, {gone} resolved since {since}")
    elif "new_total" in summary:
        parts.append(
            "previous run not compared (summary.json: previous_note)"
            if summary.get("previous_note")
            else "first run: nothing to compare"
        )
    if report:
        parts.append(f"report: {report}")
    elif findings:
        parts.append(f"findings: {findings}")
    return "; ".join(parts)


def disk_line(summary: Mapping[str, Any], *, most: int = 6) -> str | None:
    """``disk: 1.2 GiB in BookKeeper (one copy): 800.0 MiB live unconsumed, 300.0 MiB orphan, ...``:
    the summary's ``disk_usage`` (``ledgerlens.audit.disk``), states with bytes largest first (the
    ``most`` largest, then how many more); None when the run has none."""
    usage = summary.get("disk_usage")
    if not isinstance(usage, Mapping):
        return None
    by_state = {str(s): int(b or 0) for s, b in (usage.get("by_state") or {}).items()}
    ranked = sorted(((b, s) for s, b in by_state.items() if b > 0), key=lambda t: (-t[0], t[1]))
    copies = "x write quorum" if usage.get("replicated") else "one copy"
    head = f"disk: {human_bytes(int(usage.get('total_bytes') or 0))} in BookKeeper ({copies})"
    if not ranked:
        return head
    parts = [f"{human_bytes(b)} {s.replace('_', ' ')}" for b, s in ranked[:most]]
    if len(ranked) > most:
        parts.append(f"{len(ranked) - most} more states")
    return f"{head}: {', '.join(parts)}"
