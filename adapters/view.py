"""Value types shared by the facade and the backends (no imports from either)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from operator import is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = ["MemoryView", "OwnedTurn", "ThreadRecord", "compare_views", "detach", "fresh_ids",
           "kept_run", "message_signature", "new_id", "new_message", "set_id", "with_id"]


_PLAIN = frozenset({str, int, float, bool, type(None)})  # immutable: shared, never copied
_CONTAINERS = (list, dict)
_set = object.__setattr__
_new = object.__new__


def detach(message: BaseMessage) -> BaseMessage:
    """A copy that shares nothing mutable with ``message``: equal to
    ``model_copy(deep=True)`` at a fraction of its cost (a loaded view copies every window
    message, so this is the price of a load). Immutable values are shared; lists and dicts
    (content blocks, tool calls, kwargs) are copied deeply, empty ones made anew. Messages
    carrying pydantic extras or private state take pydantic's own deep copy."""
    extra, private = message.__pydantic_extra__, message.__pydantic_private__
    if extra or private:
        return message.model_copy(deep=True)
    values = message.__dict__
    fields = values.copy()
    for key, value in values.items():
        kind = type(value)
        if kind not in _PLAIN:
            fields[key] = deepcopy(value) if value or kind not in _CONTAINERS else kind()
    copy = _new(type(message))
    _set(copy, "__dict__", fields)
    _set(copy, "__pydantic_fields_set__", set(message.__pydantic_fields_set__))
    # both are None or empty here; an empty dict must not be shared either
    _set(copy, "__pydantic_extra__", None if extra is None else {})
    _set(copy, "__pydantic_private__", None if private is None else {})
    return copy


def with_id(message: BaseMessage, message_id: str) -> BaseMessage:
    """``message.model_copy()`` then ``.id = message_id`` (a shallow copy, as pydantic's),
    at a third of its cost: every message saved without an id goes through here."""
    extra, private = message.__pydantic_extra__, message.__pydantic_private__
    if extra or private:
        copy = message.model_copy()
        copy.id = message_id
        return copy
    fields = message.__dict__.copy()
    fields["id"] = message_id
    copy = _new(type(message))
    _set(copy, "__dict__", fields)
    _set(copy, "__pydantic_fields_set__", message.__pydantic_fields_set__ | {"id"})
    _set(copy, "__pydantic_extra__", None if extra is None else {})
    _set(copy, "__pydantic_private__", None if private is None else {})
    return copy


class OwnedTurn(list):  # type: ignore[type-arg]
    """A turn whose message objects were built or copied for this one save (``as_turn``,
    ``as_messages``) and that nobody else holds: the engine sets missing ids in place and a
    store may keep the objects themselves instead of copying them again. A plain list is
    always copied (the caller may still hold and edit its messages)."""


def set_id(message: BaseMessage, message_id: str) -> None:
    """``message.id = message_id`` without pydantic's ``__setattr__`` (for an owned message)."""
    message.__dict__["id"] = message_id
    message.__pydantic_fields_set__.add("id")


_Prototype = tuple[dict[str, Any], tuple[tuple[str, type], ...], bool]
_PROTOTYPES: dict[type, _Prototype | None] = {}  # None: this class takes its constructor


def _prototype(cls: type[BaseMessage]) -> _Prototype | None:
    try:
        message = cls(content="")
    except Exception:  # noqa: BLE001 - a class that needs more than content (ToolMessage)
        return None
    values = message.__dict__
    containers = tuple((k, type(v)) for k, v in values.items() if type(v) in _CONTAINERS)
    if message.__pydantic_private__ or message.__pydantic_fields_set__ != {"content"} or \
            message.__pydantic_extra__ or any(values[k] for k, _ in containers):
        return None  # not a plain prototype: private state, extras or non-empty defaults
    return values, containers, message.__pydantic_extra__ is None


def new_message(cls: type[BaseMessage], content: str) -> BaseMessage:
    """``cls(content=content)`` for a text ``content``, at half its cost: a copy of a
    prototype built once by the real constructor, with new empty containers (the
    constructor validates and runs LangChain's ``__init__`` in Python; a save builds two).
    A differential test holds it equal to the constructor for every message class used;
    a class whose prototype is not plain takes the constructor."""
    try:
        proto = _PROTOTYPES[cls]
    except KeyError:
        proto = _PROTOTYPES[cls] = _prototype(cls)
    if proto is None:
        return cls(content=content)
    values, containers, no_extra = proto
    fields = values.copy()
    for key, kind in containers:  # empty in the prototype: new ones, never shared
        fields[key] = kind()
    fields["content"] = content
    message = _new(cls)
    _set(message, "__dict__", fields)
    _set(message, "__pydantic_fields_set__", {"content"})
    _set(message, "__pydantic_extra__", None if no_extra else {})
    _set(message, "__pydantic_private__", None)
    return message


def kept_run(seen: Sequence[BaseMessage], window: Sequence[BaseMessage]) -> tuple[int, int]:
    """``(start, n)``: ``window[:n]`` are the very objects ``seen[start:start + n]`` (a
    window read again after a turn was appended, or after a fold dropped ``seen[:start]``);
    ``(0, 0)`` when ``window`` does not start inside ``seen``. Identity, not equality: only a
    store that never edits the objects it hands out makes this a cache key."""
    if not seen or not window:
        return 0, 0
    first = window[0]
    start = 0 if seen[0] is first else next((i for i, m in enumerate(seen) if m is first), -1)
    if start < 0:
        return 0, 0
    n = min(len(seen) - start, len(window))
    if all(map(is_, seen[start:start + n], window)):  # the common case, at C speed
        return start, n
    same = 0
    for old, new in zip(seen[start:], window):
        if old is not new:
            break
        same += 1
    return start, same


def message_signature(message: BaseMessage) -> tuple:
    """What equivalence compares for one message: type, content, tool calls, tool call id."""
    calls: tuple = ()
    if isinstance(message, AIMessage):
        calls = tuple((c["name"], repr(sorted(c["args"].items())), c.get("id")) for c in message.tool_calls)
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
    return (message.type, repr(message.content), calls, call_id)


@dataclass(frozen=True)
class MemoryView:
    """What one thread's memory holds now. A copy: editing it never changes the store."""

    thread_id: str
    summary: str
    messages: list[BaseMessage]
    folds: int = 0
    summary_message: BaseMessage | None = None  # native rendering: classic System, middleware Human
    backend: str = ""

    def as_messages(self) -> list[BaseMessage]:
        """The prompt history: native summary message (if any) then the verbatim window."""
        head = [self.summary_message] if self.summary_message is not None else []
        return [*head, *self.messages]


@dataclass(frozen=True)
class ThreadRecord:
    """A thread's full memory state, as migration carries it between backends and stores."""

    thread_id: str
    summary: str
    window: list[BaseMessage]
    folds: int = 0
    transcript: list[BaseMessage] = field(default_factory=list)
    # erasure: everything stored for the thread in the store it is written to (transcript,
    # both backends' state, every checkpoint, fold records) is deleted first, in the same
    # transaction, so the record replaces it
    replace: bool = False


def compare_views(a: MemoryView, b: MemoryView) -> list[str]:
    """Human-readable differences between two views (empty when equivalent)."""
    diffs: list[str] = []
    if a.summary != b.summary:
        diffs.append(f"summary differs: {a.summary[:80]!r} != {b.summary[:80]!r}")
    if a.folds != b.folds:
        diffs.append(f"summarizer calls differ: {a.folds} != {b.folds}")
    sa = [message_signature(m) for m in a.messages]
    sb = [message_signature(m) for m in b.messages]
    if sa != sb:
        diffs.append(f"window differs: {_brief(a.messages)} != {_brief(b.messages)}")
    return diffs


def _brief(messages: Sequence[BaseMessage]) -> str:
    return "[" + ", ".join(f"{m.type}:{str(m.content)[:24]!r}" for m in messages) + "]"

def new_id() -> str:
    """A random (version 4) UUID as a string, like ``str(uuid.uuid4())`` at 40% of its cost
    (``uuid.UUID`` validates and converts in Python)."""
    x = os.urandom(16).hex()
    return f"{x[:8]}-{x[8:12]}-4{x[13:16]}-{_VARIANT[int(x[16], 16) & 3]}{x[17:20]}-{x[20:]}"


_VARIANT = "89ab"  # RFC 4122 variant: the top two bits of byte 8 are 10


def fresh_ids(turn: list[BaseMessage], taken: set[str], owned: bool = False) -> list[BaseMessage]:
    """A message id the thread has seen (or the turn repeats) gets a new id: LangGraph's
    reducer would otherwise replace the earlier message and the transcript skip it. The
    caller's messages are copied first; an owned turn's are changed in place."""
    out, seen = [], set()
    for message in turn:
        if message.id is None or message.id in taken or message.id in seen:
            if owned:
                set_id(message, new_id())
            else:
                message = with_id(message, new_id())  # a copy: the caller's message is untouched
        seen.add(message.id)
        out.append(message)
    return out
