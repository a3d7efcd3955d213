"""The chat histories legacy code takes: ``memory.chat_memory`` and ``memory.chat_history(id)``
for ``RunnableWithMessageHistory``. Imported on first use only, so ``import compat`` and the
agent path define no ``BaseChatMessageHistory`` subclass (langchain-core 1.8.3 deprecates the
class, for removal in 2.0; see the guide).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from compat._turns import split_turns

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["MemshiftChatHistory", "WindowHistory"]


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


class MemshiftChatHistory(BaseChatMessageHistory):
    """``messages`` is the summarized view; ``add_messages`` saves turn by turn."""

    def __init__(self, memory: SummaryMemory, session_id: str) -> None:
        self.memory = memory
        self.session_id = session_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return self.memory.prompt_messages(self.memory.load(self.session_id))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        # RunnableWithMessageHistory hands over [human, ai] once per turn.
        for turn in split_turns(list(messages)):
            self.memory.save_messages(self.session_id, turn)

    def clear(self) -> None:
        self.memory.clear(self.session_id)
