"""The backend contract: small on purpose. A missing method fails at construction."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from langchain_core.messages import BaseMessage

from adapters.policy import MemoryPolicy
from adapters.stores.base import Store
from adapters.summarizer import Summarizer, run_summarizer
from adapters.view import MemoryView

__all__ = ["MemoryBackend"]


class MemoryBackend(ABC):
    """One summary-memory implementation over one store.

    ``save`` appends a turn to the thread's window and folds per the policy. If the
    summarizer fails, the turn stays stored and ``SummarizerError`` is raised; the fold
    is retried on the next save. The transcript is written by the facade, not here.
    """

    name: ClassVar[str]

    def __init__(
        self,
        *,
        policy: MemoryPolicy,
        summarizer: Summarizer,
        store: Store,
        human_prefix: str = "Human",
        ai_prefix: str = "AI",
    ) -> None:
        self.policy = policy
        self.summarizer = summarizer
        self.store = store
        self.human_prefix = human_prefix
        self.ai_prefix = ai_prefix

    # -- the contract --------------------------------------------------------------
    @abstractmethod
    def load(self, thread_id: str) -> MemoryView:
        """The thread's summary and verbatim window (copies)."""

    @abstractmethod
    def _save(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        """Append and fold; called with the thread's lock held."""

    @abstractmethod
    def clear(self, thread_id: str) -> None:
        """Forget the thread's summary and window."""

    @abstractmethod
    def restore(self, thread_id: str, summary: str, window: Sequence[BaseMessage], folds: int) -> None:
        """Overwrite the thread's memory state (migration, rollback)."""

    # -- shared behaviour ------------------------------------------------------------
    def save(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        with self.store.lock(thread_id):
            self._save(thread_id, messages)

    def summarize(self, summary: str, messages: Sequence[BaseMessage], thread_id: str | None) -> str:
        """The one summarization routine: same input and retries on every backend."""
        return run_summarizer(
            self.summarizer, summary, messages,
            retries=self.policy.summary_retries, thread_id=thread_id,
        )

    async def aload(self, thread_id: str) -> MemoryView:
        return await asyncio.to_thread(self.load, thread_id)

    async def asave(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.save, thread_id, messages)

    async def aclear(self, thread_id: str) -> None:
        await asyncio.to_thread(self.clear, thread_id)

    def close(self) -> None:
        """Release what the backend holds (the store is closed by its owner)."""
