"""What ``memory.middleware`` does inside ``create_agent`` runs: ``FoldHooks``.

The middleware declares what it needs (``adapters.backends.middleware.AgentHooks``); this is
the one implementation, built by the engine from the fold routine it shares
(``adapters.fold.Folder``) and its store — it knows nothing of the engine. Inside an agent
step the agent's own checkpointer writes the state, so a fold summarizes at once (no memshift
lock or transaction is open) and records itself; after the agent's turn the messages reach the
transcript.

With ``MemoryPolicy(fold="background")`` a due fold is handed to the background instead and the
model answers at once; the summary waits in this process (``adapters.fold_slots.AgentFolds``)
for the thread's next model call, where it lands only if the state still holds exactly the
messages it summarized (the same compare-and-set as an inline fold), and is recorded then. A
process that dies with a summary pending loses nothing: the next call plans the fold again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.backends.base import FoldFn
from adapters.errors import SummarizerError
from adapters.fold import FoldJob, FoldRecord, Folder
from adapters.fold_slots import AgentFolds, background_failed, lag_seconds, over_lag
from adapters.io import IO, Steps, run_async, run_sync, wait_future
from adapters.policy import FoldPlan
from adapters.stores.base import Store, Tx, in_transaction, store_io
from adapters.thread_keys import storage_id
from adapters.workers import WorkersBusy, run_in_background

__all__ = ["FoldHooks", "TurnSink"]

TurnSink = Callable[[str, list[BaseMessage]], None]  # (thread, the agent's window after a turn)


class FoldHooks:
    """The middleware's hooks inside ``create_agent`` runs, over a fold routine and a store."""

    def __init__(self, folder: Folder, store: Store) -> None:
        self.folder, self.store = folder, store
        self.folds = AgentFolds()  # background summaries waiting for their thread's next call
        self.through: TurnSink | None = None

    def write_through(self, sink: TurnSink | None) -> None:
        """Where an agent's turn goes before the transcript: a stock history the memory writes
        through (``compat._adopt``), so the stock import swapped back sees agent turns too."""
        self.through = sink

    @property
    def background(self) -> bool:
        return self.folder.policy.fold == "background"

    def _fold(self, summary: str, folds: int, window: Sequence[BaseMessage],
              p: FoldPlan, thread_id: str | None) -> Steps[str | None]:
        """Inside an agent step the agent's checkpointer writes the state: summarize now (no
        memshift lock or transaction is open) and record the fold."""
        folder = self.folder
        try:
            text, record = yield from folder.summarize_steps(
                thread_id or "", FoldJob(summary, folds, tuple(window), p))
        except SummarizerError as exc:
            folder.defer_or_raise(exc)
            return None
        if thread_id is not None:
            yield from folder.record_steps(thread_id, record)
        record.log()
        return text

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        """A summary of ``messages`` onto ``summary``, nothing recorded (the middleware's
        summary writer called on its own, as stock's ``_create_summary`` may be)."""
        return run_sync(self._summary(summary, messages))

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        return await run_async(self._summary(summary, messages))

    def _summary(self, summary: str, messages: Sequence[BaseMessage]) -> Steps[str]:
        job = FoldJob(summary, 0, tuple(messages), FoldPlan(len(messages), "forced"))
        text, _record = yield from self.folder.summarize_steps("", job)
        return text

    def agent_fold(self) -> FoldFn:
        thread_id = _run_thread()
        steps = self._background if self.background and thread_id else self._fold

        def fold(summary: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan) -> str | None:
            return run_sync(steps(summary, folds, window, p, thread_id))
        return fold

    def agent_afold(self) -> Any:
        thread_id = _run_thread()
        steps = self._background if self.background and thread_id else self._fold

        async def afold(summary: str, folds: int, window: Sequence[BaseMessage],
                        p: FoldPlan) -> str | None:
            return await run_async(steps(summary, folds, window, p, thread_id))
        return afold

    # -- background folds (``MemoryPolicy(fold="background")``) ---------------------------------
    def agent_ready(self, window: Sequence[BaseMessage]) -> FoldJob | None:
        """The finished background fold of this run's thread, to land at this model call
        (waiting for the one in flight when ``window`` is past the lag bound)."""
        return run_sync(self._ready(window))

    async def aagent_ready(self, window: Sequence[BaseMessage]) -> FoldJob | None:
        return await run_async(self._ready(window))

    def _ready(self, window: Sequence[BaseMessage]) -> Steps[FoldJob | None]:
        if not self.background or not (thread_id := _run_thread()):
            return None
        if (held := self.folds.get(thread_id)) is None:
            return None
        job, future = held
        if not future.done() and over_lag(self.folder.policy, window):
            try:  # bounded: a hung provider never holds the agent's turn past the lag bound
                yield wait_future(future, lag_seconds(self.folder.policy))
            except Exception:  # noqa: S110 - failed (logged where it failed) or still running
                pass
        if future.done() and future.exception() is None:
            return job
        return None

    def _background(self, summary: str, folds: int, window: Sequence[BaseMessage],
                    p: FoldPlan, thread_id: str | None) -> Steps[str | None]:
        """Land the thread's finished fold if it is exactly this one; else start this one in
        the background (unless one is in flight) and answer "not now"."""
        assert thread_id is not None
        held = self.folds.get(thread_id)
        if held is not None:
            job, future = held
            if not future.done():
                return None  # in flight: it lands at a later call
            self.folds.drop(thread_id, future)
            if future.exception() is None and job.same(summary, folds, window, p):
                text, record = future.result()
                yield from self._land(thread_id, text, record, folds, window[p.cutoff:])
                return text
        yield from self._start(thread_id, FoldJob(summary, folds, tuple(window), p))
        return None

    def _land(self, thread_id: str, text: str, record: FoldRecord, folds: int,
              rest: Sequence[BaseMessage]) -> Steps[None]:
        """The fold lands (the agent writes the state): record it; if what remains is due
        again (inline would fold at this call too), start that fold."""
        yield from self.folder.record_steps(thread_id, record)
        record.log()
        policy = self.folder.policy
        if policy.trigger_reason(rest):
            yield from self._start(thread_id, FoldJob(text, folds + 1, tuple(rest),
                                                      policy.plan_fold(rest)))

    def _start(self, thread_id: str, job: FoldJob) -> Steps[None]:
        if (future := self.folds.start(thread_id, job)) is not None:
            yield IO(self._spawn, self._aspawn, thread_id, job, future)

    def _spawn(self, thread_id: str, job: FoldJob, future: Future[Any]) -> None:
        def work() -> None:
            try:
                future.set_result(run_sync(self.folder.summarize_steps(thread_id, job)))
            except BaseException as exc:  # a worker must not raise; the turn is committed
                future.set_exception(exc)
                background_failed(exc)
        try:
            run_in_background(work)
        except WorkersBusy as exc:
            future.set_exception(exc)
            self.folds.drop(thread_id, future)

    async def _aspawn(self, thread_id: str, job: FoldJob, future: Future[Any]) -> None:
        async def work() -> None:
            try:
                future.set_result(await run_async(self.folder.summarize_steps(thread_id, job)))
            except BaseException as exc:
                future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                background_failed(exc)
        self.folds.keep(asyncio.get_running_loop().create_task(work()), background_failed)

    def _after(self, thread_id: str, window: Sequence[BaseMessage]) -> Steps[None]:
        store, folder = self.store, self.folder
        if self.through is not None:  # first, as a classic save writes through first
            yield IO(self.through, _in_thread(self.through), thread_id, list(window))
        if not folder.records:
            return

        def body(tx: Tx) -> Steps[None]:
            yield store_io(store, tx, store.append_transcript, folder.for_transcript(window))
        yield from in_transaction(store, thread_id, body)

    def after_agent(self, window: Sequence[BaseMessage]) -> None:
        """The agent's turn reaches the transcript (retention runs where the checkpointer
        writes a run's input: ``adapters.stores.placed``, never beside LangGraph's writes)."""
        if (thread_id := _run_thread()) is not None:
            run_sync(self._after(thread_id, window))

    async def aafter_agent(self, window: Sequence[BaseMessage]) -> None:
        if (thread_id := _run_thread()) is not None:
            await run_async(self._after(thread_id, window))


def _in_thread(sink: TurnSink) -> Callable[[str, list[BaseMessage]], Awaitable[None]]:
    """The async twin of a blocking sink: a stock history's driver is synchronous."""
    async def run(thread_id: str, window: list[BaseMessage]) -> None:
        await asyncio.to_thread(sink, thread_id, window)
    return run


def _run_thread() -> str | None:
    """The thread id of the LangGraph run we are called from, if any, as the stores keep it
    (the key of an id over the byte budget, as ``memory.checkpointer`` writes it)."""
    from langgraph.config import get_config

    try:
        tid = get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a graph run
        return None
    return storage_id(tid) if isinstance(tid, str) and tid else tid
