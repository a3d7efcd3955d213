"""What ``memory.middleware`` does inside ``create_agent`` runs: ``FoldHooks``.

The middleware declares what it needs (``adapters.backends.middleware.AgentHooks``); this is
the one implementation, built by the engine from the fold routine it shares
(``adapters.fold.Folder``) and its store — it knows nothing of the engine. Inside an agent
step the agent's own checkpointer writes the state, so a fold summarizes at once (no memshift
lock or transaction is open) and records itself.

The agent's messages reach the transcript without a step or a transaction of their own (an
``after_agent`` node cost a checkpoint, its writes and a transaction every run):
``memory.checkpointer`` records them in the transaction of the checkpoint write that first
holds the answer (``turn`` / ``record_steps``); with any other saver, the model call that
produced the answer records them (``model_turn``). A stock history written through
(``write_through``) receives them just before, outside any lock, as a classic save writes
through first.

With ``MemoryPolicy(fold="background")`` a due fold is handed to the background instead and the
model answers at once; the summary waits in this process (``adapters.fold_slots.AgentFolds``)
for the thread's next model call, where it lands only if the state still holds exactly the
messages it summarized (the same compare-and-set as an inline fold), and is recorded then. A
process that dies with a summary pending loses nothing: the next call plans the fold again.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from adapters._upstream import run_checkpointer
from adapters.backends.base import FoldFn
from adapters.backends.middleware_parts import split_summary
from adapters.errors import SummarizerError
from adapters.fold import FoldJob, FoldRecord, Folder
from adapters.fold_slots import AgentFolds, background_failed, lag_seconds, over_lag
from adapters.io import IO, Steps, run_async, run_sync, wait_future
from adapters.policy import FoldPlan
from adapters.stores.base import Store, Tx, in_transaction, store_io
from adapters.thread_keys import storage_id
from adapters.workers import WorkersBusy, run_in_background

__all__ = ["FoldHooks", "Turn", "TurnSink"]

TurnSink = Callable[[str, list[BaseMessage]], None]  # (thread, the agent's window after a turn)


@dataclass(frozen=True)
class Turn:
    """What the transcript still needs of one thread's state: its ``window`` (the summary
    message left out) and the ``new`` messages in it, ``None`` when this process does not know
    which are recorded (the store is asked, in the recording transaction)."""

    thread_id: str
    window: tuple[BaseMessage, ...]
    new: tuple[BaseMessage, ...] | None


class FoldHooks:
    """The middleware's hooks inside ``create_agent`` runs, over a fold routine and a store."""

    recorded_size = 10_000  # threads whose recorded window this process remembers

    def __init__(self, folder: Folder, store: Store) -> None:
        self.folder, self.store = folder, store
        self.folds = AgentFolds()  # background summaries waiting for their thread's next call
        self.through: TurnSink | None = None
        # savers that record these hooks' turns in their own checkpoint transactions
        self.recorders: weakref.WeakSet[Any] = weakref.WeakSet()
        self._recorded: dict[str, frozenset[str]] = {}  # thread -> ids of its recorded window

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

    # -- the agent's turns in the transcript ----------------------------------------------------
    def records_turns(self, saver: Any) -> None:
        """``saver`` (``memory.checkpointer``) records these hooks' turns in the transactions of
        its checkpoint writes: runs on it skip ``model_turn``."""
        self.recorders.add(saver)

    def turn(self, thread_id: str, messages: Sequence[BaseMessage]) -> Turn | None:
        """What a thread's state (``messages``) adds to the transcript; ``None`` when nothing is
        new, or while the newest message is a question awaiting its answer (the question is
        recorded with the answer, as it was at the end of the run)."""
        window = split_summary(messages)[2]
        if not window or isinstance(window[-1], HumanMessage):
            return None
        known = self._recorded.get(thread_id)
        if known is None:
            return Turn(thread_id, tuple(window), None)
        new = tuple(m for m in window if m.id not in known)
        return Turn(thread_id, tuple(window), new) if new else None

    def through_steps(self, turn: Turn) -> Steps[None]:
        """The turn to the stock history written through, first (outside any transaction: it
        may live in the same database)."""
        if self.through is not None:
            yield IO(self.through, _in_thread(self.through), turn.thread_id, list(turn.window))

    def record_steps(self, tx: Tx, turn: Turn, read: bool = True) -> Steps[None]:
        """Inside ``tx`` (a write transaction of the turn's thread): its new messages. Without
        ``read`` (a transaction that reads nothing), a window nobody told this process about
        goes whole: the transcript ignores the message ids it holds."""
        if not self.folder.records:  # a shadow candidate: the primary keeps the transcript
            return
        store, new = self.store, turn.new
        if new is None and not read:
            new = turn.window
        elif new is None:
            held = yield store_io(store, tx, store.known_ids, [m.id for m in turn.window if m.id])
            new = tuple(m for m in turn.window if m.id not in held)
        if new:
            yield store_io(store, tx, store.append_transcript, self.folder.for_transcript(new))

    def recorded(self, turn: Turn) -> None:
        """``turn``'s transaction committed: its window is in the transcript."""
        if len(self._recorded) >= self.recorded_size:
            self._recorded.clear()  # a bound, not an LRU: a forgotten thread asks the store
        self._recorded[turn.thread_id] = frozenset(m.id for m in turn.window if m.id)

    def _turn_steps(self, thread_id: str, messages: Sequence[BaseMessage]) -> Steps[None]:
        if (turn := self.turn(thread_id, messages)) is None:
            return
        yield from self.through_steps(turn)

        def body(tx: Tx) -> Steps[None]:
            yield from self.record_steps(tx, turn)
        if self.folder.records:
            yield from in_transaction(self.store, thread_id, body)
        self.recorded(turn)

    def model_turn(self, messages: Sequence[BaseMessage]) -> None:
        """After a model call (``messages``: the state's and the answer): on a saver that
        does not record these hooks' turns, record them now, in a transaction of their own."""
        if (thread_id := _run_thread()) is not None and run_checkpointer() not in self.recorders:
            run_sync(self._turn_steps(thread_id, messages))

    async def amodel_turn(self, messages: Sequence[BaseMessage]) -> None:
        if (thread_id := _run_thread()) is not None and run_checkpointer() not in self.recorders:
            await run_async(self._turn_steps(thread_id, messages))


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

