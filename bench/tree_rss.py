"""Peak memory of a benchmark's subject: a process and all its descendants (the CLI, its JVM)."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass

import psutil


class TreeRss:
    """Peak RSS of a process and its descendants, and of the JVMs among them (sampled every 0.2 s)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.peak_jvm = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                rss = [(p.name(), p.memory_info().rss) for p in procs]
            except psutil.Error:
                rss = []
            if rss:
                self.peak = max(self.peak, sum(r for _, r in rss))
                self.peak_jvm = max(self.peak_jvm, sum(r for n, r in rss if "java" in n))
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


@dataclass(frozen=True)
class Measured:
    """A finished process: exit status, its output (stdout and stderr), wall seconds, peak RSS."""

    returncode: int
    output: str
    secs: float
    peak: int
    peak_jvm: int


def measured_run(cmd: list[str], env: dict[str, str]) -> Measured:
    """Run ``cmd`` to its end, timing it and sampling its process tree's memory."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rss = TreeRss(proc.pid)
    text, _ = proc.communicate()
    secs = time.perf_counter() - t0
    rss.stop()
    return Measured(proc.returncode, text, secs, rss.peak, rss.peak_jvm)
