"""``BaseChatMessageHistory`` over a ``SummaryMemory`` thread, for RunnableWithMessageHistory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from compat._turns import split_turns

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["MemshiftChatHistory"]


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
