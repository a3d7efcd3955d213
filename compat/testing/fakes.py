"""An offline, deterministic chat model for examples and tests (works inside create_agent)."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["EchoChatModel"]


class EchoChatModel(BaseChatModel):
    """Answers ``"(n msgs) echo: <last message>"``; records what it was sent in ``seen``."""

    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "memshift-echo"

    def bind_tools(self, tools: Any, **kwargs: Any) -> EchoChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        last = messages[-1].text if messages else ""
        reply = AIMessage(content=f"({len(messages)} msgs) echo: {last[:60]}")
        return ChatResult(generations=[ChatGeneration(message=reply)])
