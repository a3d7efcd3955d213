"""Replay files: one JSON object per line, read into per-thread turns; and the discard
strategies a replay shows beside summary memory.

``{"thread_id", "role": "human"|"ai"|"tool"|"system", "content", "tool_calls"?,
"tool_call_id"?}`` (what ``memshift export`` writes). Also read, each with ``thread_id`` on
the line: the roles ``user``/``assistant`` (``developer``: ``system``); LangChain message dicts
as ``messages_to_dict`` writes them (``{"type": "human", "data": {"content": ...}}``); OpenAI
chat dicts (``tool_calls: [{"id", "type": "function", "function": {"name", "arguments":
"<JSON>"}}]``, ``{"role": "tool", "tool_call_id", ...}``, ``null`` content beside tool calls).
Content is text or LangChain content blocks. Bad lines raise ``ReplayFormatError`` naming the
line number.

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
from typing import Any

from langchain_core.messages import (
    AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, filter_messages,
    trim_messages,
)

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from adapters.tokens import message_text

__all__ = ["BASELINES", "FACT", "ReplayFormatError", "Turn", "baseline_history", "facts_in",
           "iter_turns", "message_line", "read_messages"]

_ROLES = {"human", "ai", "tool", "system"}
# OpenAI's chat roles, and LangChain's message types (``messages_to_dict``), as memshift's
_ALIASES = {"user": "human", "assistant": "ai", "developer": "system"}
_TYPES = {"human": "human", "ai": "ai", "tool": "tool", "system": "system"}


class ReplayFormatError(ConfigError):
    """A replay file line is not valid (the message names the file and line)."""


@dataclass(frozen=True)
class Turn:
    """One saved unit: a question and everything up to the final answer."""

    thread_id: str
    messages: list[BaseMessage]
    line: int  # first line of the turn in the file


def _fields(obj: dict, where: str) -> dict:
    """A line of any accepted form as memshift's own fields (role, content, tool_calls,
    tool_call_id): a LangChain message dict is ``{"type", "data": {...}}``; an OpenAI chat
    dict or memshift's line has a ``role`` (``user``/``assistant`` for ``human``/``ai``)."""
    if "role" not in obj and ("type" in obj or "data" in obj):
        kind, data = obj.get("type"), obj.get("data")
        if not isinstance(data, dict):
            raise ReplayFormatError(f"{where}: a LangChain message dict's data must be an object")
        if kind not in _TYPES:
            raise ReplayFormatError(f"{where}: a LangChain message dict's type must be one of "
                                    f"{sorted(_TYPES)}, got {kind!r}")
        return {"role": _TYPES[kind], "content": data.get("content"),
                "tool_calls": data.get("tool_calls"), "tool_call_id": data.get("tool_call_id")}
    role = obj.get("role")
    return {**obj, "role": _ALIASES.get(role, role) if isinstance(role, str) else role}


def _content(content: object, where: str, calls: bool) -> str | list:
    """Text, or content blocks (strings and ``{"type": ...}`` objects) kept as they are; an
    OpenAI assistant line that only calls tools has ``null`` content."""
    if content is None and calls:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
            isinstance(b, str) or isinstance(b, dict) and isinstance(b.get("type"), str)
            for b in content):
        return content
    raise ReplayFormatError(f"{where}: content must be a string or a list of content blocks")


def _call(call: object, where: str) -> dict:
    """One tool call: memshift's/LangChain's ``{name, args, id}`` or OpenAI's ``{id, type:
    "function", function: {name, arguments: "<JSON object>"}}``."""
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        function, raw = call["function"], call["function"].get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise ReplayFormatError(f"{where}.function.arguments is not valid JSON "
                                    f"({exc.msg})") from None
        if not isinstance(args, dict):
            raise ReplayFormatError(f"{where}.function.arguments must be a JSON object")
        call = {"name": function.get("name"), "args": args, "id": call.get("id")}
    if not (isinstance(call, dict) and isinstance(call.get("name"), str)
            and isinstance(call.get("id"), str) and isinstance(call.get("args") or {}, dict)):
        raise ReplayFormatError(f"{where} must be {{name, args (an object), id}} (or OpenAI's "
                                "{id, type, function: {name, arguments}})")
    return {"name": call["name"], "args": call.get("args") or {}, "id": call["id"]}


def _message(obj: dict, where: str) -> BaseMessage:
    fields = _fields(obj, where)
    role, calls = fields.get("role"), fields.get("tool_calls") or []
    if role not in _ROLES:
        raise ReplayFormatError(f"{where}: role must be one of {sorted(_ROLES)} (or "
                                f"{', '.join(sorted(_ALIASES))}), got {role!r}")
    if not isinstance(calls, list) or calls and role != "ai":
        raise ReplayFormatError(f"{where}: tool_calls must be a list, on an ai line")
    content = _content(fields.get("content"), where, bool(calls))
    if role == "human":
        return HumanMessage(content=content)
    if role == "system":
        return SystemMessage(content=content)
    if role == "tool":
        call_id = fields.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ReplayFormatError(f"{where}: a tool line needs a tool_call_id")
        return ToolMessage(content=content, tool_call_id=call_id)
    return AIMessage(content=content, tool_calls=[
        _call(c, f"{where}: tool_calls[{i}]") for i, c in enumerate(calls)])


def message_line(thread_id: str, message: BaseMessage) -> dict[str, Any]:
    """The replay line of one stored message (what ``read_messages`` reads back as the same
    type, content, tool calls and tool call id); ids, names and metadata are not part of the
    format. A message type the format has no role for is a ``ReplayFormatError``."""
    if message.type not in _ROLES:
        raise ReplayFormatError(f"thread {thread_id!r}: a {message.type!r} message has no replay "
                                f"role (the format has {sorted(_ROLES)})")
    line: dict[str, Any] = {"thread_id": thread_id, "role": message.type,
                            "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        line["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c["id"]}
                              for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        line["tool_call_id"] = message.tool_call_id
    return line


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
