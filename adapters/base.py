"""The backend contract: small on purpose. A missing method fails at construction."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

from langchain_core.messages import BaseMessage, SystemMessage

from adapters.errors import SummarizerError
from adapters.folds import FoldRecord
from adapters.policy import FoldPlan, MemoryPolicy
from adapters.redaction import redact_messages
from adapters.stores.base import Store
from adapters.structured import parse_rendered
from adapters.summarizer import Summarizer, run_summarizer, summarizer_name
from adapters.view import MemoryView

logger = logging.getLogger("memshift")

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
    def save(self, thread_id: str, messages: Sequence[BaseMessage],
             on_locked: Callable[[], None] | None = None) -> None:
        """Append and fold under the thread's lock; ``on_locked`` runs first under the same
        lock (the facade writes the transcript there, so transcript and window keep one order)."""
        with self.store.lock(thread_id):
            if on_locked is not None:
                on_locked()
            self._save(thread_id, messages)

    record_folds: bool = True  # a shadow candidate does not write fold records

    def defer_or_raise(self, exc: SummarizerError) -> None:
        """The policy's answer to a failed fold: raise, or log (no message text) and go on.
        The turn is stored either way; the fold is retried on the next save."""
        if self.policy.on_summary_error == "raise":
            raise exc
        logger.warning("summary fold deferred (turn stored, retried on the next save): %s",
                       str(exc).split(":")[0])

    def fold(self, thread_id: str, summary: str, window: Sequence[BaseMessage], plan: FoldPlan,
             version: int) -> str:
        """The one summarization routine both backends call: redact what is sent, summarize
        (with retries), record the fold, remember structured preferences."""
        folded = list(window[: plan.cutoff])
        sent = redact_messages(folded, self.policy.redactor)
        start = time.perf_counter()
        error: str | None = None
        result = ""
        try:
            result = run_summarizer(self.summarizer, summary, sent,
                                    retries=self.policy.summary_retries, thread_id=thread_id,
                                    max_tokens=self.policy.max_summary_tokens,
                                    counter=self.policy.counter)
            return result
        except SummarizerError as exc:
            error = str(exc)
            raise
        finally:
            if self.record_folds:
                record = FoldRecord(
                    thread_id=thread_id, version=version, trigger=plan.reason or "forced",
                    messages_before=len(window), messages_kept=len(window) - len(folded),
                    folded=len(folded), folded_first_id=folded[0].id if folded else None,
                    folded_last_id=folded[-1].id if folded else None,
                    summary_tokens=self.policy.count([SystemMessage(result)]) if result else 0,
                    summarizer=summarizer_name(self.summarizer),
                    prompt_version=self.policy.prompt_version,
                    duration_ms=round((time.perf_counter() - start) * 1000, 3),
                    error=error, backend=self.name)
                self.store.append_fold(record.as_dict())
                record.log()
                if result and error is None:
                    self._remember_preferences(thread_id, result, version)

    def _remember_preferences(self, thread_id: str, summary: str, version: int) -> None:
        """Structured preferences outlive the thread: one item per key, per user."""
        store = self.policy.preferences_store
        if store is None:
            return
        # LangGraph namespaces refuse ".": encode it (and "%") so distinct users stay distinct
        user = self.policy.user_id(thread_id).replace("%", "%25").replace(".", "%2E")
        for item in parse_rendered(summary).preferences:
            key = item.key or hashlib.sha256(item.value.lower().encode()).hexdigest()[:16]
            store.put(("memshift", "preferences", user), key,
                      {"value": item.value, "thread_id": thread_id, "version": version})

    async def aload(self, thread_id: str) -> MemoryView:
        return await asyncio.to_thread(self.load, thread_id)

    async def asave(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.save, thread_id, messages)

    def known_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """Which of these message ids the thread's transcript holds already."""
        return self.store.known_ids(thread_id, ids)

    async def aclear(self, thread_id: str) -> None:
        await asyncio.to_thread(self.clear, thread_id)

    def close(self) -> None:
        """Release what the backend holds (the store is closed by its owner)."""
