"""Replay files: one JSON object per line, read into per-thread turns; and the discard
strategies a replay shows beside summary memory.

``{"thread_id", "role": "human"|"ai"|"tool"|"system", "content", "tool_calls"?,
"tool_call_id"?}``. Bad lines raise ``ReplayFormatError`` naming the line number.

Baselines, from the source documents: ``trim`` is LangChain's ``trim_messages`` (token
strategy ``"last"``, starting on a human message, the same history budget as the policy);
``filter`` is ``filter_messages`` keeping human and AI text only (tool calls and results
dropped). Facts are marked tokens (``FACT-<thread>-<n>``) in the bundled conversations, so
what survives is counted exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import (
    AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, filter_messages,
    trim_messages,
)

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from adapters.tokens import message_text

__all__ = ["BASELINES", "FACT", "ReplayFormatError", "Turn", "baseline_history", "facts_in",
           "iter_turns", "read_messages"]

_ROLES = {"human", "ai", "tool", "system"}


class ReplayFormatError(ConfigError):
    """A replay file line is not valid (the message names the file and line)."""


@dataclass(frozen=True)
class Turn:
    """One saved unit: a question and everything up to the final answer."""

    thread_id: str
    messages: list[BaseMessage]
    line: int  # first line of the turn in the file


def _message(obj: dict, where: str) -> BaseMessage:
    role, content = obj.get("role"), obj.get("content")
    if role not in _ROLES:
        raise ReplayFormatError(f"{where}: role must be one of {sorted(_ROLES)}, got {role!r}")
    if not isinstance(content, str):
        raise ReplayFormatError(f"{where}: content must be a string")
    if role == "human":
        return HumanMessage(content=content)
    if role == "system":
        return SystemMessage(content=content)
    if role == "tool":
        call_id = obj.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ReplayFormatError(f"{where}: a tool line needs a tool_call_id")
        return ToolMessage(content=content, tool_call_id=call_id)
    calls = obj.get("tool_calls") or []
    if not isinstance(calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("id"), str)
        for c in calls
    ):
        raise ReplayFormatError(f"{where}: tool_calls must be a list of {{name, args, id}}")
    return AIMessage(content=content, tool_calls=[
        {"name": c["name"], "args": c.get("args") or {}, "id": c["id"]} for c in calls])


def read_messages(path: str | Path) -> Iterator[tuple[int, str, BaseMessage]]:
    """(line number, thread id, message) for every non-blank line."""
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ReplayFormatError(f"{where}: not valid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict):
                raise ReplayFormatError(f"{where}: expected a JSON object")
            thread = obj.get("thread_id")
            if not isinstance(thread, str) or not thread:
                raise ReplayFormatError(f"{where}: thread_id must be a non-empty string")
            yield number, thread, _message(obj, where)


def iter_turns(lines: Iterable[tuple[int, str, BaseMessage]]) -> Iterator[Turn]:
    """Group lines into turns: a final AI answer (no tool calls) closes a turn."""
    pending: dict[str, Turn] = {}
    for number, thread, message in lines:
        turn = pending.get(thread)
        has_question = turn is not None and any(isinstance(m, HumanMessage) for m in turn.messages)
        if isinstance(message, HumanMessage) and has_question:
            yield pending.pop(thread)
            turn = None
        if turn is None:
            turn = pending[thread] = Turn(thread, [], number)
        turn.messages.append(message)
        if isinstance(message, AIMessage) and not message.tool_calls:
            yield pending.pop(thread)
    yield from pending.values()


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
