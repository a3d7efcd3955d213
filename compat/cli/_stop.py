"""Clean shutdown: SIGTERM (what Kubernetes and systemd send) stops a long command between
two threads — the thread in hand finishes and commits, the run is recorded ``interrupted``,
and the process exits 143 (128 + 15). The next run resumes (each command skips what is done).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Stopped", "check", "on_sigterm"]

_requested = threading.Event()


class Stopped(KeyboardInterrupt):
    """SIGTERM arrived; raised at the next thread boundary (a ``KeyboardInterrupt``, so every
    command's interrupted path records the run)."""


def check() -> None:
    """Raise ``Stopped`` if SIGTERM arrived (called after each thread)."""
    if _requested.is_set():
        raise Stopped("stopped by SIGTERM")


@contextmanager
def on_sigterm() -> Iterator[None]:
    """While a command runs: SIGTERM asks for a stop instead of killing the process (main
    thread only; elsewhere, as inside a test runner's worker, nothing changes)."""
    _requested.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request(_signum: int, _frame: Any) -> None:
        _requested.set()

    previous = signal.signal(signal.SIGTERM, request)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _requested.clear()
