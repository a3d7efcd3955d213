"""Classic backend: the real ``ConversationSummaryBufferMemory``, one per thread, fixed.

Fixes over stock (each measured in DESIGN.md): counts with the policy's offline
counter instead of ``llm.get_num_tokens_from_messages``; folds through an explicit
store operation (stock ``prune()`` pops a *copy*, so persistent histories never
shrink); persists the running summary per thread; never splits a tool-call pair;
never loses a message when the summarizer raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import PrivateAttr

from adapters.base import MemoryBackend
from adapters.policy import FoldPlan
from adapters.summarizer import SummarizerChatModel
from adapters.view import MemoryView

__all__ = ["ClassicBackend", "PolicySummaryBufferMemory"]


class PolicySummaryBufferMemory(ConversationSummaryBufferMemory):
    """``ConversationSummaryBufferMemory`` whose prune follows a memshift policy."""

    _backend: Any = PrivateAttr(default=None)
    _thread_id: str = PrivateAttr(default="")
    _folds: int = PrivateAttr(default=0)
    _pending: Any = PrivateAttr(default=None)  # (window, plan) of the fold prune() started

    def predict_new_summary(self, messages: list[BaseMessage], existing_summary: str) -> str:
        window, plan = self._pending or (messages, FoldPlan(len(messages), "forced"))
        return self._backend.fold(self._thread_id, existing_summary, window, plan, self._folds + 1)

    async def apredict_new_summary(self, messages: list[BaseMessage], existing_summary: str) -> str:
        return self.predict_new_summary(messages, existing_summary)

    def prune(self) -> None:
        """Fold per the policy; the summary and the shorter window are written together."""
        window = list(self.chat_memory.messages)  # a copy: never mutate what a getter returned
        plan = self._backend.policy.plan_fold(window)
        if not plan.cutoff:
            return
        self._pending = (window, plan)
        try:
            summary = self.predict_new_summary(window[: plan.cutoff], self.moving_summary_buffer)
        finally:
            self._pending = None
        self._backend.store.classic_fold(
            self._thread_id, summary, self._folds + 1, window[plan.cutoff :]
        )
        self.moving_summary_buffer = summary
        self._folds += 1

    async def aprune(self) -> None:
        self.prune()


class ClassicBackend(MemoryBackend):
    name = "classic"

    def __init__(
        self,
        *,
        llm: BaseLanguageModel | None = None,
        summary_message_cls: type[BaseMessage] = SystemMessage,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.summary_message_cls = summary_message_cls
        # The stock class validates llm as a BaseLanguageModel; the fold never calls it.
        self.llm = llm or SummarizerChatModel(
            summarizer=self.summarizer, token_counter=self.policy.counter
        )

    def memory_for(self, thread_id: str) -> PolicySummaryBufferMemory:
        """A real classic memory bound to the thread's stored window and summary."""
        record = self.store.classic_record(thread_id)
        memory = PolicySummaryBufferMemory(
            llm=self.llm,
            chat_memory=self.store.classic_history(thread_id),
            moving_summary_buffer=record.summary,
            max_token_limit=self.policy.max_tokens or 2000,
            prompt=self.policy.prompt,
            human_prefix=self.human_prefix,
            ai_prefix=self.ai_prefix,
            summary_message_cls=self.summary_message_cls,
            return_messages=True,
        )
        memory._backend = self
        memory._thread_id = thread_id
        memory._folds = record.folds
        return memory

    def load(self, thread_id: str) -> MemoryView:
        memory = self.memory_for(thread_id)
        buffer = memory.load_memory_variables({})[memory.memory_key]
        summary = memory.moving_summary_buffer
        head, window = (buffer[0], buffer[1:]) if summary else (None, buffer)
        return MemoryView(
            thread_id=thread_id,
            summary=summary,
            messages=[m.model_copy(deep=True) for m in window],
            folds=memory._folds,
            summary_message=head.model_copy(deep=True) if head is not None else None,
            backend=self.name,
        )

    def _save(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        memory = self.memory_for(thread_id)
        memory.chat_memory.add_messages([m.model_copy(deep=True) for m in messages])
        memory.prune()

    def clear(self, thread_id: str) -> None:
        with self.store.lock(thread_id):
            self.store.classic_clear(thread_id)

    def restore(self, thread_id: str, summary: str, window: Sequence[BaseMessage], folds: int) -> None:
        with self.store.lock(thread_id):
            self.store.classic_fold(thread_id, summary, folds, [m.model_copy(deep=True) for m in window])
