"""Deterministic conversation builders and a recording summarizer for the contract suites."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from adapters.summarizer import DeterministicSummarizer

__all__ = ["FlakySummarizer", "RecordingSummarizer", "agent_turn", "filler_turn", "words"]

_VOCAB = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
          "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa")


def words(n: int, seed: int = 0) -> str:
    return " ".join(_VOCAB[(seed + i * 7) % len(_VOCAB)] for i in range(max(n, 1)))


def filler_turn(thread: str, index: int, size: int = 30) -> tuple[str, str]:
    """A turn whose text carries a fact marker unique to the thread and turn."""
    fact = f"FACT-{thread}-{index}"
    return (f"question {index} {fact} {words(size, index)}",
            f"answer {index} about {fact} {words(size, index + 3)}")


def agent_turn(thread: str, index: int, size: int = 10) -> tuple[str, list[BaseMessage]]:
    """A human question and an agent answer with one tool call and its result."""
    call_id = f"call-{thread}-{index}"
    return (
        f"look up {index} FACT-{thread}-{index} {words(size, index)}",
        [
            AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"q": str(index)},
                                               "id": call_id}]),
            ToolMessage(content=f"result {index} {words(size, index + 1)}", tool_call_id=call_id),
            AIMessage(content=f"found {index} {words(size, index + 2)}"),
        ],
    )


class RecordingSummarizer:
    """The offline summarizer, recording every call's input (thread-safe)."""

    def __init__(self, inner: object | None = None) -> None:
        self.inner = inner or DeterministicSummarizer()
        self.calls: list[tuple[str, tuple]] = []
        self._lock = threading.Lock()

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        with self._lock:
            self.calls.append((summary, tuple((m.type, str(m.content)) for m in messages)))
        return self.inner.summarize(summary, messages)  # type: ignore[attr-defined]


class FlakySummarizer:
    """Fails while ``failing`` is true, then delegates."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.failing = True
        self.attempts = 0

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        self.attempts += 1
        if self.failing:
            raise RuntimeError("summarizer is down")
        return self.inner.summarize(summary, messages)  # type: ignore[attr-defined]
