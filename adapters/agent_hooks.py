"""What ``memory.middleware`` does inside ``create_agent`` runs: ``FoldHooks``.

The middleware declares what it needs (``adapters.backends.middleware.AgentHooks``); this is
the one implementation, built by the engine from the fold routine it shares
(``adapters.fold.Folder``) and its store — it knows nothing of the engine. Inside an agent
step the agent's own checkpointer writes the state, so a fold summarizes at once (no memshift
lock or transaction is open) and records itself; after the agent's turn the messages reach the
transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.backends.base import FoldFn
from adapters.errors import SummarizerError
from adapters.fold import FoldJob, Folder
from adapters.io import Steps, run_async, run_sync
from adapters.policy import FoldPlan
from adapters.stores.base import Store, Tx, in_transaction, store_io
from adapters.thread_keys import storage_id

__all__ = ["FoldHooks"]


class FoldHooks:
    """The middleware's hooks inside ``create_agent`` runs, over a fold routine and a store."""

    def __init__(self, folder: Folder, store: Store) -> None:
        self.folder, self.store = folder, store

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

        def fold(summary: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan) -> str | None:
            return run_sync(self._fold(summary, folds, window, p, thread_id))
        return fold

    def agent_afold(self) -> Any:
        thread_id = _run_thread()

        async def afold(summary: str, folds: int, window: Sequence[BaseMessage],
                        p: FoldPlan) -> str | None:
            return await run_async(self._fold(summary, folds, window, p, thread_id))
        return afold

    def _after(self, thread_id: str, window: Sequence[BaseMessage]) -> Steps[None]:
        store, folder = self.store, self.folder

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


def _run_thread() -> str | None:
    """The thread id of the LangGraph run we are called from, if any, as the stores keep it
    (the key of an id over the byte budget, as ``memory.checkpointer`` writes it)."""
    from langgraph.config import get_config

    try:
        tid = get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a graph run
        return None
    return storage_id(tid) if isinstance(tid, str) and tid else tid
