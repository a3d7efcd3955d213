"""Daemon threads for blocking calls that must not hold their caller past a timeout.

A blocking summarizer runs on a thread of its own so that a hung provider fails the fold
after ``summary_timeout`` instead of holding the save. Starting a thread costs ~100 µs,
more than a whole fold with an offline summarizer, so the threads are reused: a worker that
finishes waits for the next call, and one that finds ``IDLE`` others waiting exits. A call
that hangs keeps its worker, as a thread of its own would; the next call takes another one.
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["call_with_timeout"]

IDLE = 4  # workers kept waiting between calls


class _Workers:
    def __init__(self, idle: int = IDLE) -> None:
        self.idle = idle
        self._reset()

    def _reset(self) -> None:  # also in a forked child: the parent's threads are not there
        self._lock = threading.Lock()
        self._waiting: list[queue.SimpleQueue[Callable[[], None]]] = []

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` (which must not raise) on a waiting worker, or on a new one."""
        with self._lock:
            inbox = self._waiting.pop() if self._waiting else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="memshift-summarizer",
                             daemon=True).start()
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            job = inbox.get()
            job()
            del job  # a waiting worker holds nothing of the last call (messages, results)
            with self._lock:
                if len(self._waiting) >= self.idle:
                    return
                self._waiting.append(inbox)

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)


_WORKERS = _Workers()
os.register_at_fork(after_in_child=_WORKERS._reset)


def call_with_timeout(fn: Callable[..., Any], *args: Any, timeout: float,
                      what: str = "summarizer") -> Any:
    """``fn(*args)`` on a worker thread, in a copy of the caller's context (LangChain's
    callbacks and tracing parent follow the call); ``TimeoutError`` after ``timeout`` seconds
    (the call goes on, abandoned, on its daemon thread). Its own errors are raised here."""
    box: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()  # the caller's callbacks and tracing parent go along

    def job() -> None:
        try:
            box["value"] = context.run(fn, *args)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            done.set()

    _WORKERS.submit(job)
    if not done.wait(timeout):
        raise TimeoutError(f"{what} gave no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
