"""Window messages as the report shows them: only what a turn added, tool calls and tool
results as readable rows (name, key=value arguments, short call id) instead of raw JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compat.report._text import clip, format_value, short_id, text
from compat.replay import TurnResult

__all__ = ["MESSAGE_CHARS", "MISMATCH_MESSAGE_CHARS", "Item", "ToolCall", "added_items",
           "render_items", "window_items"]

# Characters per message shown inline (the replay file holds the full text): short on
# matching turns, which are the bulk of the page, longer where a mismatch needs reading.
MESSAGE_CHARS = 120
MISMATCH_MESSAGE_CHARS = 600
_KIND_LABEL = {"human": "human", "ai": "ai", "tool": "tool result", "system": "system"}


@dataclass(frozen=True)
class ToolCall:
    """One tool call an AI message made."""

    name: str
    args: tuple[tuple[str, Any], ...]
    call_id: str | None


@dataclass(frozen=True)
class Item:
    """One window message, reduced to what the report renders."""

    kind: str
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


def _from_message(message: Any) -> Item:
    content = message.content if isinstance(message.content, str) else str(message.content)
    calls = tuple(
        ToolCall(str(c.get("name", "?")), tuple(sorted((c.get("args") or {}).items())), c.get("id"))
        for c in (getattr(message, "tool_calls", None) or []))
    return Item(str(message.type), content, calls, getattr(message, "tool_call_id", None))


def window_items(turn: TurnResult) -> list[Item]:
    """The first backend's window after the save.

    ``TurnResult.window`` keeps only (type, content), so tool calls are invisible there;
    when a turn also carries ``window_messages`` (the window's message objects, an optional
    field this report reads if present) the tool calls and call ids are shown too.
    """
    messages: Sequence[Any] | None = getattr(turn, "window_messages", None)
    if messages:
        return [_from_message(m) for m in messages]
    return [Item(kind, content) for kind, content in turn.window]


def added_items(before: list[Item], after: list[Item]) -> tuple[int, list[Item]]:
    """(messages carried over, messages this turn added): the longest suffix of the window
    before that starts the window after; a fold only drops messages from the front."""
    limit = min(len(before), max(len(after) - 1, 0))  # the newest turn always stays verbatim
    for overlap in range(limit, 0, -1):
        if before[len(before) - overlap:] == after[:overlap]:
            return overlap, after[overlap:]
    return 0, after


def _args_html(pairs: Sequence[tuple[str, Any]]) -> str:
    return " ".join(f"<span class='arg'><i>{text(k)}</i>={text(format_value(v))}</span>"
                    for k, v in pairs) or "<span class='arg'>(no arguments)</span>"


def _call_id_html(call_id: str | None) -> str:
    if not call_id:
        return ""
    return f" <span class='callid' title='{text(call_id)}'>{text(short_id(call_id))}</span>"


def _tool_result_html(item: Item, limit: int) -> str:
    try:
        parsed = json.loads(item.text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        body = _args_html(list(parsed.items()))
    else:
        body = text(clip(item.text, limit))
    return (f"<tr class='msg tool-result'><th>tool result{_call_id_html(item.tool_call_id)}"
            f"</th><td>{body}</td></tr>")


def _item_html(item: Item, limit: int) -> str:
    if item.kind == "tool":
        return _tool_result_html(item, limit)
    rows = []
    if item.text or not item.tool_calls:
        label = _KIND_LABEL.get(item.kind, item.kind)
        rows.append(f"<tr class='msg {text(item.kind)}'><th>{text(label)}</th>"
                    f"<td>{text(clip(item.text, limit))}</td></tr>")
    for call in item.tool_calls:
        rows.append(f"<tr class='msg toolcall'><th>tool call{_call_id_html(call.call_id)}</th>"
                    f"<td><code class='tool'>{text(call.name)}</code> {_args_html(call.args)}"
                    "</td></tr>")
    return "".join(rows)


def render_items(items: list[Item], limit: int = MESSAGE_CHARS) -> str:
    """A two-column table: what kind of message, and its text (``limit`` chars) or its call."""
    if not items:
        return ""
    return f"<table class='msgs'>{''.join(_item_html(i, limit) for i in items)}</table>"
