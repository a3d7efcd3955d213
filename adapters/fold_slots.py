"""At most one fold in flight per thread in a process, and folds off the request path.

A save whose turn asks for a fold while another fold of the same thread is being summarized
in this process does not summarize the same messages again: it marks the thread *dirty* and
returns; the fold in flight, once committed, plans again from the stored state and folds
what is still due (one summarizer call where N concurrent saves made N). With
``MemoryPolicy(fold="background")`` the first fold too runs after ``save`` returns: on
memshift's bounded background workers (a blocking save) or as a task of the caller's event
loop (an async save). ``drain()``/``adrain()`` wait for them.

Nothing here holds a lock across I/O: the slot table's lock guards a dict for microseconds.
A fold that never runs (the process died, the workers were busy) loses nothing: the turn is
committed, and the next save of the thread plans the fold again from the stored state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["FoldSlots", "background_failed"]

logger = logging.getLogger("memshift")


class _Slot:
    __slots__ = ("dirty", "done")

    def __init__(self) -> None:
        self.dirty = False
        self.done: Future[None] = Future()


class FoldSlots:
    """The threads of one engine with a fold in flight (``take`` / ``again`` / ``release``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}
        self._tasks: set[asyncio.Task[Any]] = set()  # strong references to background tasks

    def take(self, thread_id: str) -> Future[None] | None:
        """The thread's slot for the caller (``None``), or, when a fold of it is in flight,
        the future of that fold (and the thread is marked dirty for it to pick up)."""
        with self._lock:
            slot = self._slots.get(thread_id)
            if slot is not None:
                slot.dirty = True
                return slot.done
            self._slots[thread_id] = _Slot()
            return None

    def again(self, thread_id: str) -> bool:
        """After a fold: ``True`` if saves asked for one meanwhile (plan again, slot kept);
        else the slot is released."""
        with self._lock:
            slot = self._slots.get(thread_id)
            if slot is not None and slot.dirty:
                slot.dirty = False
                return True
        self.release(thread_id)
        return False

    def release(self, thread_id: str) -> None:
        with self._lock:
            slot = self._slots.pop(thread_id, None)
        if slot is not None:
            slot.done.set_result(None)

    def settle(self, thread_id: str, timeout: float | None = None) -> bool:
        """Wait for the thread's fold in flight, if any (and those it chains); did it wait?"""
        waited = False
        while True:
            with self._lock:
                slot = self._slots.get(thread_id)
            if slot is None:
                return waited
            slot.done.result(timeout)
            waited = True

    def pending(self) -> list[Future[None]]:
        with self._lock:
            return [slot.done for slot in self._slots.values()]

    def count(self) -> int:
        with self._lock:
            return len(self._slots)

    def keep(self, task: asyncio.Task[Any], on_error: Callable[[BaseException], None]) -> None:
        """Hold a background task until it ends (the loop keeps only weak references)."""
        self._tasks.add(task)

        def ended(done: asyncio.Task[Any]) -> None:
            self._tasks.discard(done)
            if not done.cancelled() and done.exception() is not None:
                on_error(done.exception())  # type: ignore[arg-type]
        task.add_done_callback(ended)

    def wait(self, timeout: float | None = None) -> None:
        """Until no fold is in flight (folds started meanwhile included); ``TimeoutError``
        after ``timeout`` seconds in all."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while futures := self.pending():
            for future in futures:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                future.result(left)

    async def await_all(self) -> None:
        while futures := self.pending():
            await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))


def background_failed(exc: BaseException) -> None:
    logger.warning("background fold failed (the turn is stored; the next save plans the fold "
                   "again): %s", type(exc).__name__)
