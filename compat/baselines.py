"""Discard strategies from the source documents, as baselines beside summary memory.

``trim``: LangChain's ``trim_messages`` (token strategy ``"last"``, starting on a human
message, the same history budget as the policy). ``filter``: ``filter_messages`` keeping
human and AI text only (tool calls and results dropped). Facts are marked tokens
(``FACT-<thread>-<n>``) in the bundled conversations, so what survives is counted exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, filter_messages, trim_messages

from adapters import MemoryPolicy
from adapters.tokens import message_text

__all__ = ["BASELINES", "FACT", "baseline_history", "facts_in"]

BASELINES = ("trim", "filter")
FACT = re.compile(r"FACT-[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*-\d+")


def baseline_history(name: str, history: Sequence[BaseMessage], policy: MemoryPolicy) -> list[BaseMessage]:
    """What the strategy would send as history (before the new question)."""
    if name == "trim":
        return trim_messages(list(history), max_tokens=policy.max_tokens or 10**9,
                             token_counter=policy.counter, strategy="last", start_on="human",
                             include_system=True, allow_partial=False)
    if name == "filter":
        return filter_messages(list(history), include_types=["human", "ai"], exclude_tool_calls=True)
    raise ValueError(f"unknown baseline {name!r}; use one of {BASELINES}")


def facts_in(messages: Sequence[BaseMessage], extra: str = "") -> set[str]:
    text = extra + "\n" + "\n".join(message_text(m) for m in messages)
    return set(FACT.findall(text))
