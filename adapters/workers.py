"""Daemon threads for blocking calls that must not hold their caller past a timeout.

A blocking summarizer runs on a thread of its own so that a hung provider fails the fold
after ``summary_timeout`` instead of holding the save. Starting a thread costs ~100 µs,
more than a whole fold with an offline summarizer, so the threads are reused: a worker that
finishes waits for the next call, and one that finds ``IDLE`` others waiting exits. A call
that hangs keeps its worker, as a thread of its own would; the next call takes another one.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from adapters.errors import ConfigError, SummarizerError

__all__ = ["WorkersBusy", "call_with_timeout", "run_in_background", "run_on_worker",
           "set_summarizer_workers"]

IDLE = 4  # workers kept waiting between calls
DEFAULT_WORKERS = 16


class WorkersBusy(SummarizerError):
    """Every summarizer worker of this process is busy (hung providers hold them): the fold
    is deferred, not queued behind them."""


def _limit_from_env() -> int:
    raw = os.environ.get("MEMSHIFT_SUMMARIZER_WORKERS", str(DEFAULT_WORKERS))
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"MEMSHIFT_SUMMARIZER_WORKERS must be a positive integer, got {raw!r}")
    return int(raw)


class _Workers:
    def __init__(self, idle: int = IDLE, limit: int | None = None) -> None:
        self.idle = idle
        self.limit = limit
        self._reset()

    def _reset(self) -> None:  # also in a forked child: the parent's threads are not there
        self._lock = threading.Lock()
        self._waiting: list[queue.SimpleQueue[Callable[[], None]]] = []
        self._alive = 0  # threads started and not exited (waiting or running a call)

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` (which must not raise) on a waiting worker, or on a new one if the
        bound allows; ``WorkersBusy`` when every worker is running a call."""
        limit = self.limit or _limit_from_env()
        with self._lock:
            inbox = self._waiting.pop() if self._waiting else None
            if inbox is None:
                if self._alive >= limit:
                    raise WorkersBusy(f"all {limit} summarizer workers of this process are busy "
                                      "(a slow or hung provider); the fold is deferred",
                                      attempts=0)
                self._alive += 1
        if inbox is None:
            inbox = queue.SimpleQueue()
            try:
                threading.Thread(target=self._serve, args=(inbox,), name="memshift-summarizer",
                                 daemon=True).start()
            except BaseException:
                with self._lock:
                    self._alive -= 1
                raise
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            job = inbox.get()
            job()
            del job  # a waiting worker holds nothing of the last call (messages, results)
            with self._lock:
                if len(self._waiting) >= self.idle:
                    self._alive -= 1
                    return
                self._waiting.append(inbox)

    def busy(self) -> int:
        """Workers running a call now."""
        with self._lock:
            return self._alive - len(self._waiting)

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)


_WORKERS = _Workers()
os.register_at_fork(after_in_child=_WORKERS._reset)
# background folds (``MemoryPolicy(fold="background")``) of blocking saves: their own bound,
# so folds waiting on a slow provider never take the workers their summarizer calls need
_BACKGROUND = _Workers(limit=DEFAULT_WORKERS)
os.register_at_fork(after_in_child=_BACKGROUND._reset)


def run_in_background(job: Callable[[], None]) -> None:
    """``job`` (which must not raise) on a background fold worker; ``WorkersBusy`` when all
    of them are running one."""
    _BACKGROUND.submit(job)


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


def set_summarizer_workers(limit: int | None) -> None:
    """The most summarizer threads this process runs at once (``None``: the environment's
    ``MEMSHIFT_SUMMARIZER_WORKERS``, default 16)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"the summarizer worker limit must be a positive integer, got {limit!r}")
    _WORKERS.limit = limit


async def run_on_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on memshift's bounded workers, awaited without blocking the loop, in a copy
    of the caller's context; not on the loop's default executor."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def job() -> None:
        try:
            value, error = context.run(fn, *args), None
        except BaseException as exc:  # handed to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    _WORKERS.submit(job)
    return await future

