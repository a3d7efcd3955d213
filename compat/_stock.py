"""The stock ``ConversationSummaryBufferMemory`` surface, on the bound thread.

Legacy code reads ``memory.chat_memory.messages``, sets ``memory.moving_summary_buffer``,
calls ``predict_new_summary`` and ``prune()``; LangChain's own tests do too. Each works like
stock on the bound thread (an unbound memory on a persistent store raises
``ThreadIdRequired``). A stock attribute memshift has no equivalent for raises an
``AttributeError`` that says what to use instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from adapters import ThreadRecord
from adapters.summarizer import run_summarizer
from compat._turns import split_turns

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["StockSurface", "WindowHistory"]

# stock names with no memshift equivalent -> what to use instead
_INSTEAD = {
    "validate_prompt_input_variables": "nothing: SummaryMemory validates its prompt at construction",
    "summary_message_cls_": "summary_message_cls",
    "_get_input_output": "save_context(inputs, outputs) (memshift applies the stock key rules)",
    "get_num_tokens": "memory.active_policy.count(messages)",
}


class WindowHistory(BaseChatMessageHistory):
    """``memory.chat_memory``: the bound thread's verbatim window as a chat history (the
    summary is not in it, as with stock). ``add_messages`` appends turn by turn without
    folding, as stock's does (the next ``save_context`` or ``prune()`` folds)."""

    def __init__(self, memory: SummaryMemory, thread_id: str) -> None:
        self.memory, self.thread_id = memory, thread_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return self.memory.load(self.thread_id).messages

    async def aget_messages(self) -> list[BaseMessage]:
        return (await self.memory.aload(self.thread_id)).messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for turn in split_turns(list(messages)):
            self.memory.save_messages(self.thread_id, turn, fold=False)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        for turn in split_turns(list(messages)):
            await self.memory.asave_messages(self.thread_id, turn, fold=False)

    def clear(self) -> None:
        self.memory.clear(self.thread_id)

    async def aclear(self) -> None:
        await self.memory.aclear(self.thread_id)


class StockSurface:
    """Mixed into ``SummaryMemory``: the stock attributes, each on the bound thread."""

    @property
    def chat_memory(self: SummaryMemory) -> WindowHistory:  # type: ignore[misc]
        return WindowHistory(self, self._thread(None))

    @property
    def moving_summary_buffer(self: SummaryMemory) -> str:  # type: ignore[misc]
        return self.load().summary

    @moving_summary_buffer.setter
    def moving_summary_buffer(self: SummaryMemory, summary: str) -> None:  # type: ignore[misc]
        """Replace the running summary, keeping the window and the fold count."""
        view = self.load()
        self._backend.restore(ThreadRecord(view.thread_id, str(summary), view.messages,
                                           view.folds))

    def predict_new_summary(self: SummaryMemory, messages: list[BaseMessage],  # type: ignore[misc]
                            existing_summary: str) -> str:
        """The summarizer on ``messages`` onto ``existing_summary`` (nothing is stored)."""
        policy = self.active_policy
        return run_summarizer(self._backend.summarizer, existing_summary, messages,
                              retries=policy.summary_retries, timeout=policy.summary_timeout,
                              max_tokens=policy.max_summary_tokens, counter=policy.counter)

    async def apredict_new_summary(self: SummaryMemory, messages: list[BaseMessage],  # type: ignore[misc]
                                   existing_summary: str) -> str:
        from adapters.io import run_async
        from adapters.summarizer import summarize_steps

        policy = self.active_policy
        return await run_async(summarize_steps(
            self._backend.summarizer, existing_summary, messages,
            retries=policy.summary_retries, timeout=policy.summary_timeout,
            max_tokens=policy.max_summary_tokens, counter=policy.counter))

    def prune(self: SummaryMemory) -> None:  # type: ignore[misc]
        """Fold the bound thread now if it is over the policy's limit."""
        self._backend.prune(self._thread(None))

    async def aprune(self: SummaryMemory) -> None:  # type: ignore[misc]
        await self._backend.aprune(self._thread(None))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)  # type: ignore[misc]
        except AttributeError:
            if name in _INSTEAD:
                raise AttributeError(
                    f"SummaryMemory has no stock attribute {name!r}; use {_INSTEAD[name]}") from None
            raise

