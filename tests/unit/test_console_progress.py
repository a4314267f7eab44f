"""What a person sees on stderr while a command works, off a terminal (cron mail, a log file,
journald): a line as each wait or phase starts, a "still running" line after a silence, a clock that
is the command's wall time, and nothing after the command's last line."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime

import pytest

from ledgerlens.runtime import console


class Lines:
    """A stderr that remembers when each line arrived."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self._buf = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._buf += text
            *done, self._buf = self._buf.split("\n")
            self.lines += [(time.monotonic(), line) for line in done]
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def said(self) -> list[str]:
        """The lines without their ``[ 45%   12 s]`` prefix."""
        return [re.sub(r"^\[[^\]]*\] ", "", line) for _, line in self.lines]


def progress(out: Lines, **kw: object) -> console.Progress:
    return console.Progress(file=out, bar=False, tick_s=0.02, **kw)  # type: ignore[arg-type]


def test_a_quick_check_says_nothing_a_slow_one_says_what_it_waits_for() -> None:
    out = Lines()
    p = progress(out, interval=60)
    with p.waiting("checking the metadata store", done="stores checked", say_after=0.3):
        pass
    assert out.lines == []
    t0 = time.monotonic()
    with p.waiting("checking the metadata store", done="stores checked", say_after=0.3):
        time.sleep(0.6)
    p.close()
    assert out.said()[0] == "checking the metadata store"
    assert re.fullmatch(r"stores checked in 0\.\d s", out.said()[1])
    assert 0.25 <= out.lines[0][0] - t0 < 0.5  # said once it had lasted say_after


def test_spark_start_is_said_at_once_and_ticks_until_it_is_up() -> None:
    out = Lines()
    p = progress(out, interval=0.25)
    t0 = time.monotonic()
    with p.waiting("starting Spark (local[*])", done="Spark started"):
        time.sleep(0.9)
    lasted = time.monotonic() - t0
    p.close()
    said = out.said()
    assert said[0] == "starting Spark (local[*])" and out.lines[0][0] - t0 < 0.1
    ticks = [s for s in said if s.startswith("starting Spark (local[*]), ") and s.endswith(" so far")]
    assert 2 <= len(ticks) <= lasted / 0.25, said
    assert said[-1].startswith("Spark started in ")


def test_a_long_phase_ticks_at_most_once_per_interval() -> None:
    out = Lines()
    p = progress(out, interval=0.2)
    t0 = time.monotonic()
    p.begin("audit", label="rules")
    time.sleep(1.1)
    lasted = time.monotonic() - t0
    p.end("12 candidates to re-verify")
    p.close()
    said = out.said()
    assert said[-1].startswith("audit done in ") and said[-1].endswith("(12 candidates to re-verify)")
    beats = [(t, s) for t, s in zip([t for t, _ in out.lines], said, strict=True) if s.endswith(" so far")]
    assert 3 <= len(beats) <= lasted / 0.2, said
    assert all(s.startswith("audit rules, ") for _, s in beats)
    assert beats[0][0] - t0 >= 0.19  # the first once the phase has lasted the interval
    times = [t for t, _ in beats]
    assert all(b - a >= 0.19 for a, b in zip(times, times[1:], strict=False))  # never more often


def test_the_clock_is_the_commands_and_the_first_line_says_when_it_started() -> None:
    out = Lines()
    started = time.time() - 100.0  # the command started 100 s ago (imports, preflight, ...)
    p = progress(out, title="ledgerlens audit", started=started)
    p.begin("collect", steps=2)
    p.step("bk_ledgers")
    p.close()
    when = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert out.lines[0][1] == f"ledgerlens audit: started {when}"
    assert out.lines[1][1] == "[ 22% 1 min 40 s] collect 1/2 bk_ledgers"


def test_a_runbook_kernel_counts_from_the_commands_start() -> None:
    out = Lines()
    started = time.time() - 42.0
    with console.started_env(started):
        p = progress(out)  # created in the kernel: $LEDGERLENS_STARTED, set by 'ledgerlens report'
        console.say("starting Spark (local[*])", file=out)  # type: ignore[arg-type]
    assert console.command_started() is None  # restored
    p.begin("collect")
    p.end()
    p.close()
    assert out.lines[0][1] == "[  0%    42 s] starting Spark (local[*])"
    assert out.lines[1][1] == "[ 45%    42 s] collect done in 0.0 s"


def test_relayed_kernel_lines_pass_through_and_drive_the_heartbeat() -> None:
    out = Lines()
    p = progress(out, title="ledgerlens report", interval=0.2)
    relay = p.relay()
    with p.waiting("running the runbook in a Jupyter kernel"):
        relay.write("[  0%   12 s] starting Spark (local[*])\n[  8%   ")  # papermill's chunks
        relay.write("20 s] collect 1/6 bk_ledgers\n")
        time.sleep(0.5)  # silent kernel: our heartbeat, in the kernel's last words
        relay.write("[100%   31 s] write done in 1.0 s (74 findings)\n")
        time.sleep(0.5)
    p.close()
    lines = [line for _, line in out.lines]
    assert lines[0].startswith("ledgerlens report: started ")
    assert lines[2] == "[  0%   12 s] starting Spark (local[*])"
    assert lines[3] == "[  8%   20 s] collect 1/6 bk_ledgers"
    said = out.said()
    assert any(s.startswith("collect 1/6 bk_ledgers, ") and s.endswith(" so far") for s in said)
    after = said[said.index("write done in 1.0 s (74 findings)") + 1 :]
    assert after and all(s.startswith("running the runbook in a Jupyter kernel, ") for s in after)
    # our lines show how far the kernel's display is
    assert lines[4].startswith("[  8%") and lines[4].endswith(" so far")
    done = next(i for i, line in enumerate(lines) if "write done in" in line)
    assert all(line.startswith("[100%") for line in lines[done + 1 :])


def test_a_closed_display_relays_nothing_more() -> None:
    """The kernel's messages still come in after an interrupted ``ledgerlens report`` closed its
    display: none of them, and no blank line, follows the command's last line."""
    out = Lines()
    p = progress(out, interval=60)
    relay = p.relay()
    relay.write("[  8%   20 s] collect 1/6 bk_ledgers\n\n   \n")
    p.close()
    relay.write("[  9%   21 s] collect 2/6 managed_ledgers\n\nKeyboardInterrupt\n")
    assert [line for _, line in out.lines] == ["[  8%   20 s] collect 1/6 bk_ledgers"]


def test_closed_displays_say_nothing_more_even_after_an_error() -> None:
    out = Lines()
    with pytest.raises(RuntimeError), console.closing_progress():
        p = progress(out, interval=0.1)
        p.begin("audit", label="rules")
        raise RuntimeError("store lost")
    n = len(out.lines)
    time.sleep(0.4)
    assert len(out.lines) == n  # no heartbeat after the command's error line


def test_disabled_progress_prints_nothing() -> None:
    out = Lines()
    p = console.Progress(enabled=False, file=out, title="ledgerlens audit")  # type: ignore[arg-type]
    with p.waiting("starting Spark"):
        p.begin("audit")
        p.end()
    p.close()
    assert out.lines == []


def test_process_started_is_this_process_start() -> None:
    started = console.process_started()
    assert started <= time.time()
    assert time.time() - started < 24 * 3600
    assert started <= console.Progress(enabled=False).started_at


def test_clock() -> None:
    assert [console.clock(s) for s in (0.4, 41, 60, 125.7, 3725)] == [
        "0.4 s",
        "41 s",
        "1 min 00 s",
        "2 min 05 s",
        "1 h 02 min",
    ]


def test_a_terminal_bar_shows_the_commands_clock_too() -> None:
    import io

    out = io.StringIO()
    p = console.Progress(file=out, bar=True, tick_s=0.01, started=time.time() - 100.0)
    with p.waiting("starting Spark (local[*])"):
        time.sleep(0.05)
    p.begin("collect")
    p.close()
    shown = out.getvalue()
    assert "starting Spark (local[*])" in shown
    assert re.search(r"\| 01:4\d ", shown), shown  # tqdm's elapsed: since the command started
