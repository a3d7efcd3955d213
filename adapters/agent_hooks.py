"""What ``memory.middleware`` does inside ``create_agent`` runs, on the engine's behalf.

Inside an agent step the agent's own checkpointer writes the state, so a fold summarizes at
once (no memshift lock or transaction is open) and records itself; after the agent's turn the
messages reach the transcript and old checkpoints are retained away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from adapters.backends.base import FoldFn
from adapters.errors import SummarizerError
from adapters.io import IO, Steps, run_async, run_sync
from adapters.policy import FoldPlan
from adapters.stores.base import Tx, in_transaction

if TYPE_CHECKING:
    from adapters.engine import MemoryEngine

__all__ = ["AgentHooks"]


class AgentHooks:
    """The middleware's view of the engine inside ``create_agent`` runs."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def _fold(self, summary: str, folds: int, window: Sequence[BaseMessage],
              p: FoldPlan, thread_id: str | None) -> Steps[str | None]:
        """Inside an agent step the agent's checkpointer writes the state: summarize now (no
        memshift lock or transaction is open) and record the fold."""
        from adapters.engine import FoldJob

        engine = self.engine
        try:
            text, record = yield from engine._summarize(
                thread_id or "", FoldJob(summary, folds, tuple(window), p))
        except SummarizerError as exc:
            engine.defer_or_raise(exc)
            return None
        if thread_id is not None and engine.owns_transcript:
            yield from engine._append_record(thread_id, record)
        record.log()
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
        engine = self.engine

        def body(tx: Tx) -> Steps[None]:
            if engine.owns_transcript:
                yield engine._run(tx, engine.store.append_transcript,
                                  engine._for_transcript(window))
            checkpoints = engine.store.checkpoints
            yield IO(checkpoints.retain, checkpoints.aretain, tx)
        yield from in_transaction(engine.store, thread_id, body)

    def after_agent(self, window: Sequence[BaseMessage]) -> None:
        """The agent's turn reaches the transcript; checkpoints stay bounded."""
        if (thread_id := _run_thread()) is not None:
            run_sync(self._after(thread_id, window))

    async def aafter_agent(self, window: Sequence[BaseMessage]) -> None:
        if (thread_id := _run_thread()) is not None:
            await run_async(self._after(thread_id, window))


def _run_thread() -> str | None:
    """The thread id of the LangGraph run we are called from, if any."""
    from langgraph.config import get_config

    try:
        return get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a graph run
        return None
