"""Ctrl-C and SIGTERM as a command receives them.

The command line installs ``on_signal``: the first signal is recorded, then raised in the main thread
(``KeyboardInterrupt``, or ``Terminated`` for SIGTERM) so that ``finally`` blocks stop Spark and
remove staging. The record outlives the exception: a library that swallowed it on its way up (or a
signal that reached the process while a library's own handler was installed) still stops the run,
because what must never follow a stop asks here first (``OutputDir.publish`` through
``raise_if_stopped``, and the command's exit status).
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class Terminated(BaseException):
    """SIGTERM arrived: unwind (finally blocks stop Spark and remove staging), then exit 143."""


_RECEIVED: list[int] = []


def received() -> int | None:
    """The first SIGINT/SIGTERM this command received, if any."""
    return _RECEIVED[0] if _RECEIVED else None


def forget() -> None:
    """A new command starts (``main`` called again in one process)."""
    _RECEIVED.clear()


def on_signal(signum: int, _frame: Any) -> None:
    if _RECEIVED:  # a second Ctrl-C while unwinding: keep unwinding, no second traceback
        return
    _RECEIVED.append(signum)
    _raise(signum)


def _raise(signum: int) -> None:
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt()


def install() -> None:
    """``on_signal`` for SIGINT and SIGTERM (main thread only; elsewhere Python cannot)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)


def uninstall() -> None:
    """The command is over: Python's default handlers again, and no signal on record (a later
    command or publication in the same process starts clean)."""
    forget()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def raise_if_stopped() -> None:
    """Raise again a signal received earlier whose exception never reached the command."""
    if (signum := received()) is not None:
        _raise(signum)
