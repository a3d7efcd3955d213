"""How a committed turn's fold is run: inline, or one fold in flight per thread in the
background, coalescing what lands meanwhile; a save waits for it only past the lag bound, and
then for at most ``fold_slots.lag_seconds``. Mixed into :class:`adapters.engine.MemoryEngine`
(kept apart so the engine's transactions read on their own)."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Future
from typing import Any

from adapters.agent_hooks import FoldHooks
from adapters.errors import StoreError
from adapters.fold import Folder, FoldJob
from adapters.fold_slots import AgentFolds, FoldSlots, background_failed, lag_of, lag_seconds
from adapters.io import IO, Steps, run_async, run_sync, wait_future
from adapters.policy import MemoryPolicy
from adapters.workers import WorkersBusy, run_in_background

__all__ = ["FoldScheduling"]

logger = logging.getLogger("memshift")


class FoldScheduling:
    """The engine's fold scheduling; it needs the engine's ``policy``, ``folder``, ``slots``,
    ``hooks`` and its ``_fold`` steps."""

    policy: MemoryPolicy
    folder: Folder
    slots: FoldSlots
    hooks: FoldHooks | None

    def _fold(self, thread_id: str, job: FoldJob | None, owned: bool = False) -> Steps[None]:
        raise NotImplementedError  # the engine's

    def _after_turn(self, thread_id: str, job: FoldJob) -> Steps[None]:
        """The fold a committed turn asked for: run it here (inline), hand it to the
        background, or, when a fold of the thread is already in flight in this process,
        leave it to that one (it plans again once committed: what landed meanwhile is folded
        once) — waiting for it (bounded) only when a background window is past the lag bound."""
        in_flight = self.slots.take(thread_id)
        if in_flight is not None:
            if self.policy.fold == "background" and (lag := lag_of(self.policy, job.window)):
                yield from self._wait_lagging(thread_id, lag)
            return
        if self.policy.fold == "background":
            yield IO(self._spawn, self._aspawn, thread_id, job)
            return
        yield from self._owned_fold(thread_id, job)

    def _wait_lagging(self, thread_id: str, lag: dict[str, Any]) -> Steps[None]:
        """Past the lag bound: wait for the fold in flight, but never longer than
        ``lag_seconds`` from its start; then return without it, the first save to do so
        writing a fold record that says the bound was exceeded."""
        start = time.monotonic()
        waiting = self.slots.waiting(thread_id, lag, lag_seconds(self.policy))
        if waiting is None:  # it ended meanwhile
            return
        fold, left = waiting
        if left > 0 and (yield from self._landed_within(fold, left)):
            return
        late = self.slots.late(thread_id, fold)
        if late is None or not self.folder.records:
            return
        job, since = late
        now = time.monotonic()
        record = self.folder.lag_record(thread_id, job, {
            **lag, "landed": False, "waited_ms": round((now - start) * 1000, 3),
            "in_flight_ms": round((now - since) * 1000, 3)})
        try:
            yield from self.folder.record_steps(thread_id, record)
        except StoreError:  # the turn is stored; the record is what could not be written
            logger.warning("could not record a lag bound exceeded")
        record.log()

    @staticmethod
    def _landed_within(fold: Future[None], seconds: float) -> Steps[bool]:
        """Whether the fold in flight ended within ``seconds`` (``False``: the time bound
        passed first; the save goes on without it)."""
        try:
            yield wait_future(fold, seconds)
        except TimeoutError:
            return False
        return True

    def _owned_fold(self, thread_id: str, job: FoldJob | None) -> Steps[None]:
        """Fold while holding the thread's slot, again while saves asked meanwhile; the slot
        is released however this ends."""
        slots = self.slots
        try:
            while job is not None:
                slots.begin(thread_id, job)
                try:
                    yield from self._fold(thread_id, job, owned=True)
                finally:
                    slots.finish(thread_id)
                if not slots.again(thread_id):
                    return
                job = yield from self._replan(thread_id)
        finally:
            slots.release(thread_id)  # a no-op once again() released it

    def _spawn(self, thread_id: str, job: FoldJob) -> None:
        def work() -> None:
            try:
                run_sync(self._owned_fold(thread_id, job))
            except BaseException as exc:  # a worker must not raise; the turn is committed
                background_failed(exc)
        try:
            run_in_background(work)
        except WorkersBusy:
            self.slots.release(thread_id)
            logger.warning("background fold deferred: every background worker is busy (the "
                           "next save of the thread plans it again)")

    async def _aspawn(self, thread_id: str, job: FoldJob) -> None:
        task = asyncio.get_running_loop().create_task(
            run_async(self._owned_fold(thread_id, job)))
        self.slots.keep(task, background_failed)

    def drain(self, timeout: float | None = None) -> None:
        """Wait for this process's folds in flight (``fold="background"``), the agent's
        background summaries included (they land at the thread's next model call)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for pending in self._pending():
            pending.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def settle(self, thread_id: str, timeout: float | None = None) -> bool:
        """Wait for the thread's fold in flight; whether there was one."""
        return self.slots.settle(thread_id, timeout)

    async def adrain(self) -> None:
        for pending in self._pending():
            await pending.await_all()

    def pending_folds(self) -> int:
        return sum(p.count() for p in self._pending())

    def _pending(self) -> list[FoldSlots | AgentFolds]:
        return [self.slots] if self.hooks is None else [self.slots, self.hooks.folds]
