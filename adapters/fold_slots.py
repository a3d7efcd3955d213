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

The lag bound (background folds): a save waits for the fold in flight only when its window is
past the policy's trigger plus ``max_lag_tokens`` (``lag_of``), and then at most until that
fold has been in flight ``lag_seconds(policy)``; past that it returns, and a fold record says
the bound was exceeded (once per fold in flight). A hung provider never holds a save for its
``summary_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["AgentFolds", "FoldSlots", "background_failed", "lag_of", "lag_seconds", "over_lag"]

logger = logging.getLogger("memshift")

# seconds: the longest a save past the lag bound waits for the fold in flight, counted from
# when that fold started (a policy's ``max_lag_seconds``, when it has one, instead); never
# more than one ``summary_timeout``
LAG_SECONDS = 5.0


class _Slot:
    __slots__ = ("dirty", "done", "fold", "job", "since", "lag", "late")

    def __init__(self) -> None:
        self.dirty = False
        self.done: Future[None] = Future()  # the thread's folds end (the slot is released)
        self.fold: Future[None] = Future()  # the fold being summarized now ends
        self.job: Any = None  # what it folds (``adapters.fold.FoldJob``)
        self.since = time.monotonic()  # when it started
        self.lag: dict[str, Any] | None = None  # what a save past the lag bound saw meanwhile
        self.late = False  # its lag record is written (the time bound passed)


class _Pending:
    """Waiting for what ``pending()`` lists, and holding the loop tasks that will settle it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()  # strong references to background tasks

    def pending(self) -> list[Future[Any]]:
        raise NotImplementedError

    def count(self) -> int:
        return len(self.pending())

    def keep(self, task: asyncio.Task[Any], on_error: Callable[[BaseException], None]) -> None:
        """Hold a background task until it ends (the loop keeps only weak references)."""
        self._tasks.add(task)

        def ended(done: asyncio.Task[Any]) -> None:
            self._tasks.discard(done)
            if not done.cancelled() and done.exception() is not None:
                on_error(done.exception())  # type: ignore[arg-type]
        task.add_done_callback(ended)

    def wait(self, timeout: float | None = None) -> None:
        """Until nothing is in flight (work started meanwhile included); ``TimeoutError``
        after ``timeout`` seconds in all."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while futures := self.pending():
            for future in futures:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    future.result(left)
                except TimeoutError:
                    raise
                except Exception:  # noqa: S110 - a failed fold was logged where it failed
                    pass

    async def await_all(self) -> None:
        while futures := self.pending():
            await asyncio.gather(*(asyncio.wrap_future(f) for f in futures),
                                 return_exceptions=True)


class FoldSlots(_Pending):
    """The threads of one engine with a fold in flight (``take`` / ``again`` / ``release``)."""

    def __init__(self) -> None:
        super().__init__()
        self._slots: dict[str, _Slot] = {}

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

    def begin(self, thread_id: str, job: Any) -> None:
        """The slot's holder starts summarizing ``job`` (saves past the lag bound wait for
        this fold, not for the ones it chains)."""
        with self._lock:
            slot = self._slots.get(thread_id)
            if slot is None:
                return
            if slot.fold.done():
                slot.fold = Future()
            slot.job, slot.since, slot.lag, slot.late = job, time.monotonic(), None, False

    def finish(self, thread_id: str) -> None:
        """The fold begun last has ended (committed, deferred or failed)."""
        with self._lock:
            slot = self._slots.get(thread_id)
        if slot is not None and not slot.fold.done():
            slot.fold.set_result(None)

    def waiting(self, thread_id: str, lag: dict[str, Any],
                seconds: float) -> tuple[Future[None], float] | None:
        """A save past the lag bound: the future of the fold in flight and how long it may
        still be waited for (``seconds`` after it started); ``None`` when none is in flight.
        The fold's record will say a save waited (``lagging``)."""
        with self._lock:
            slot = self._slots.get(thread_id)
            if slot is None:
                return None
            if slot.lag is None or lag["window"] > slot.lag["window"]:
                slot.lag = lag
            return slot.fold, slot.since + seconds - time.monotonic()

    def lagging(self, thread_id: str) -> dict[str, Any] | None:
        """What the saves that waited past the lag bound for the fold in flight saw, if any."""
        with self._lock:
            slot = self._slots.get(thread_id)
            return None if slot is None or slot.lag is None else dict(slot.lag)

    def late(self, thread_id: str, fold: Future[None]) -> tuple[Any, float] | None:
        """The first save to find ``fold`` past its time bound gets (its job, when it
        started), to record that; later ones ``None``."""
        with self._lock:
            slot = self._slots.get(thread_id)
            if slot is None or slot.fold is not fold or slot.late or slot.job is None:
                return None
            slot.late = True
            return slot.job, slot.since

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
            if not slot.fold.done():
                slot.fold.set_result(None)
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

    def pending(self) -> list[Future[Any]]:
        with self._lock:
            return [slot.done for slot in self._slots.values()]


class AgentFolds(_Pending):
    """Summaries computed in the background for agent threads, each waiting for its thread's
    next model call (``create_agent`` writes state only inside its own steps, so that is where
    a fold lands). One per thread; at most ``size`` kept (the oldest finished one is dropped
    first: it costs a summarizer call again, never a message)."""

    size = 10_000

    def __init__(self) -> None:
        super().__init__()
        self._jobs: OrderedDict[str, tuple[Any, Future[Any]]] = OrderedDict()

    def get(self, thread_id: str) -> tuple[Any, Future[Any]] | None:
        """The thread's (job, future of its (text, record)), in flight or finished."""
        with self._lock:
            return self._jobs.get(thread_id)

    def start(self, thread_id: str, job: Any) -> Future[Any] | None:
        """A future for ``job`` to settle, or ``None`` when one is in flight for the thread."""
        with self._lock:
            held = self._jobs.get(thread_id)
            if held is not None and not held[1].done():
                return None
            future: Future[Any] = Future()
            self._jobs[thread_id] = (job, future)
            self._jobs.move_to_end(thread_id)
            if len(self._jobs) > self.size:
                old = next((t for t, (_, f) in self._jobs.items() if f.done()), None)
                if old is not None:
                    del self._jobs[old]
            return future

    def drop(self, thread_id: str, future: Future[Any]) -> None:
        """Forget the thread's job if it is still this one (applied, stale or failed)."""
        with self._lock:
            held = self._jobs.get(thread_id)
            if held is not None and held[1] is future:
                del self._jobs[thread_id]

    def pending(self) -> list[Future[Any]]:
        with self._lock:
            return [future for _, future in self._jobs.values() if not future.done()]


def lag_of(policy: Any, window: Any) -> dict[str, Any] | None:
    """How far a background window is past the lag bound (``max_lag_tokens`` past the
    trigger, default one fold's worth; twice ``max_messages`` by count), or ``None`` when it
    is within: ``{"unit", "window", "bound", "messages"}``."""
    if policy.max_tokens is not None:
        lag = policy.max_lag_tokens if policy.max_lag_tokens is not None else policy.max_tokens
        bound, tokens = policy.max_tokens + lag, policy.count(list(window))
        if tokens > bound:
            return {"unit": "tokens", "window": tokens, "bound": bound, "messages": len(window)}
        return None
    if policy.max_messages is not None and len(window) > 2 * policy.max_messages:
        return {"unit": "messages", "window": len(window), "bound": 2 * policy.max_messages,
                "messages": len(window)}
    return None


def over_lag(policy: Any, window: Any) -> bool:
    """A background window more than the lag bound past the policy: the turn may wait (at
    most ``lag_seconds``) for its fold."""
    return lag_of(policy, window) is not None


def lag_seconds(policy: Any) -> float:
    """The longest a save past the lag bound waits for the fold in flight, from when that
    fold started: the policy's ``max_lag_seconds`` if it has one, else ``LAG_SECONDS``; never
    more than one ``summary_timeout``."""
    seconds = policy.max_lag_seconds
    return min(LAG_SECONDS if seconds is None else float(seconds), policy.summary_timeout)


def background_failed(exc: BaseException) -> None:
    logger.warning("background fold failed (the turn is stored; the next save plans the fold "
                   "again): %s", type(exc).__name__)
