"""What the middleware backend and its ``SummarizationMiddleware`` subclass share: the
summary message's shape and the hooks the engine hands the middleware (a module of its own so
``agent_middleware``, imported lazily, and ``middleware`` do not import each other)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, HumanMessage

from adapters import _upstream
from adapters.backends.base import FoldFn
from adapters.fold import FoldJob

__all__ = ["FOLD_NODE", "SUMMARY_PREFIX", "AgentHooks", "build_summary_message",
           "is_summary_message", "split_summary"]

FOLD_NODE = "memshift_fold"
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


def is_summary_message(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and (
        message.additional_kwargs.get("lc_source") == "summarization"
    )


def split_summary(messages: Sequence[BaseMessage]) -> tuple[BaseMessage | None, str, list[BaseMessage]]:
    """(summary message, summary text, verbatim window) of a middleware thread."""
    if messages and is_summary_message(messages[0]):
        head = messages[0]
        text = head.content if isinstance(head.content, str) else str(head.content)
        return head, text.removeprefix(SUMMARY_PREFIX), list(messages[1:])
    return None, "", list(messages)


def build_summary_message(summary: str) -> HumanMessage:
    """The exact message stock ``SummarizationMiddleware`` writes."""
    return _upstream.build_summary_message(summary)


class AgentHooks(Protocol):
    """What the middleware needs from the engine when ``create_agent`` runs it."""

    def agent_fold(self) -> FoldFn: ...

    def agent_afold(self) -> Any: ...

    def agent_ready(self, window: Sequence[BaseMessage]) -> FoldJob | None: ...

    async def aagent_ready(self, window: Sequence[BaseMessage]) -> FoldJob | None: ...

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str: ...

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str: ...

    def model_turn(self, messages: Sequence[BaseMessage]) -> None: ...

    async def amodel_turn(self, messages: Sequence[BaseMessage]) -> None: ...
