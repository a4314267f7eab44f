"""Peak memory of a benchmark's subject: a process and all its descendants (the CLI, its JVM)."""

from __future__ import annotations

import threading

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
