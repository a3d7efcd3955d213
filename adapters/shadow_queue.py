"""The shadow candidate's one worker thread and its bounded queue.

Why a module of its own: ``adapters.shadow`` decides what the candidate does; this is how it
runs without touching a request — one daemon thread, so the candidate's writes keep their
order and a comparison queued behind them sees them; a bounded queue, so a slow candidate
costs the primary nothing (a full queue refuses, the caller counts the drop); a bounded
shutdown that cancels what is still queued and says per thread how much. ``after`` runs on
the worker after each piece of work, before its result is handed over (the shadow writes its
evidence there: off the request path, and done by the time a ``drain`` returns).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["CandidateQueue"]

logger = logging.getLogger("memshift.shadow")

Item = tuple[Future, Callable[[], Any], str]  # the result, the work, the thread it is for


class CandidateQueue:
    """Work for the candidate, run in order on one daemon thread."""

    def __init__(self, max_queue: int = 1000, after: Callable[[], None] = lambda: None) -> None:
        self.queue: queue.Queue[Item | None] = queue.Queue(max_queue)
        self.after = after
        self.worker = threading.Thread(target=self._run, name="memshift-shadow", daemon=True)
        self.worker.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            future, fn, _thread = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:  # handed to whoever waits, or recorded
                    self._after()
                    future.set_exception(exc)
                else:
                    self._after()
                    future.set_result(result)

    def _after(self) -> None:
        try:
            self.after()
        except Exception:  # noqa: BLE001 - the worker outlives a broken hook
            logger.exception("shadow worker hook failed")

    def submit(self, thread_id: str, fn: Callable[[], Any]) -> Future | None:
        """Queue ``fn`` for ``thread_id``; its future, or ``None`` when the queue is full."""
        future: Future = Future()
        try:
            self.queue.put_nowait((future, fn, thread_id))
        except queue.Full:
            return None
        return future

    def drain(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far has run."""
        if self.worker.is_alive():
            future: Future = Future()
            self.queue.put((future, lambda: None, ""))
            future.result(timeout=timeout)

    def stop(self, drain: bool, timeout: float) -> dict[str, int]:
        """Stop the worker: ``drain=True`` first waits (up to ``timeout``) for what is queued.
        Whatever is still queued then is cancelled; gives how many per thread."""
        dropped: dict[str, int] = {}
        if not self.worker.is_alive():
            return dropped
        if drain:
            try:  # a hung candidate may keep the queue full: the wait is bounded too
                self.queue.put(None, timeout=timeout)
                self.worker.join(timeout)
            except queue.Full:
                logger.warning("shadow candidate did not drain within %.0f s", timeout)
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is not None and item[0].cancel() and item[2]:
                dropped[item[2]] = dropped.get(item[2], 0) + 1
        self.queue.put_nowait(None)  # the worker, if running, stops after its write
        return dropped
