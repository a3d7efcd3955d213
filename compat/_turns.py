"""What users hand to the memory, as memshift stores it: thread ids, turns of messages, and
the input/output key rules of the classic drop-in API (the same rules and messages as stock
``BaseChatMemory._get_input_output``; the thread key is removed first so it is never mistaken
for the prompt's input)."""

from __future__ import annotations

import functools
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    message_chunk_to_message,
)

from adapters.errors import ContentError, InputKeyError, InvalidThreadId
from adapters.thread_keys import MAX_STORED_BYTES, storage_id
from adapters.view import OwnedTurn, detach, new_message

__all__ = ["as_messages", "as_turn", "check_thread_id", "resolve_input", "resolve_output",
           "split_turns", "stable_id", "stable_ids"]

MAX_THREAD_ID_LENGTH = 1024
# Ids longer than this in UTF-8 are stored under a key derived from them (adapters.thread_keys).
MAX_THREAD_ID_BYTES = MAX_STORED_BYTES
_ID_NAMESPACE = uuid.UUID("6d656d73-6869-6674-2d6d-696772617465")


def check_thread_id(thread_id: Any) -> str:
    """Thread ids are opaque, non-empty strings: data, never paths or SQL. Returns the id
    the stores keep (``storage_id``: the id itself, or the key of an id over the byte
    budget)."""
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidThreadId(f"thread id must be a non-empty string, got {thread_id!r}")
    if len(thread_id) > MAX_THREAD_ID_LENGTH or "\x00" in thread_id:
        raise InvalidThreadId(
            f"thread id must be at most {MAX_THREAD_ID_LENGTH} characters without NUL bytes"
        )
    if not thread_id.isascii():  # isascii: O(1); an ASCII id's bytes are its characters
        if not _encodable(thread_id):
            raise InvalidThreadId("thread id is not valid Unicode (a lone surrogate)")
        return storage_id(thread_id)
    return thread_id


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


def _check_content(message: BaseMessage) -> None:
    """Any content LangChain itself accepts is stored unchanged: text, or a list of text and
    other blocks (image, audio, file, tool use). Only other shapes are refused."""
    content = message.content
    if type(content) is str and content.isascii() and "\x00" not in content \
            and not message.__dict__.get("tool_calls"):  # (getattr: pydantic's slow fallback)
        return  # the common case, decided without walking anything
    texts = list(_texts([content, message.__dict__.get("tool_calls")]))
    if not all(_encodable(t) for t in texts):
        raise ContentError(f"{message.type} message text is not valid Unicode (a lone surrogate); "
                           "nothing was stored")
    if any("\x00" in t for t in texts):  # PostgreSQL cannot store it: refused on every store
        raise ContentError(f"{message.type} message text contains a NUL byte; nothing was stored")
    if isinstance(content, str):
        return
    if isinstance(content, list) and all(isinstance(b, (str, dict)) for b in content):
        return
    raise ContentError(
        f"{message.type} message content must be a string or a list of str/dict blocks, "
        f"got {type(content).__name__}")


def _message(value: Any, cls: type[BaseMessage], side: str) -> BaseMessage:
    if type(value) is str:  # the common case first (a str is neither kind of message)
        message = new_message(cls, value)  # = cls(content=value), at half its cost
    elif isinstance(value, BaseMessageChunk):  # a streamed answer: store the whole message
        message = message_chunk_to_message(value).model_copy(deep=True)
    elif isinstance(value, BaseMessage):
        message = detach(value)  # = model_copy(deep=True), at a fraction of its cost
    elif isinstance(value, (str, list)):  # text, or content blocks as stock stores them
        try:
            message = cls(content=value)
        except ValueError as exc:  # LangChain's own validation refused it
            raise ContentError(f"{side} content is not valid message content: "
                               f"{str(exc).splitlines()[0]}") from exc
    else:
        raise ContentError(f"{side} must be text, text blocks or a BaseMessage, got {type(value).__name__}")
    _check_content(message)
    return message  # a message without an id gets one from the engine (no retry check needed)


def as_turn(human: Any, ai: Any) -> OwnedTurn:
    """``human`` (str | message) and ``ai`` (str | message | list of messages) as one turn,
    of new objects that nobody else holds (the store may keep them as they are)."""
    turn = OwnedTurn([_message(human, HumanMessage, "human")])
    if isinstance(ai, (list, tuple)) and ai and all(isinstance(m, BaseMessage) for m in ai):
        turn.extend(_message(m, AIMessage, "ai") for m in ai)  # an agent turn
    else:
        turn.append(_message(ai, AIMessage, "ai"))
    return turn


def as_messages(messages: Iterable[Any]) -> OwnedTurn:
    """Copies of ``messages`` (checked), which nobody else holds."""
    out = OwnedTurn()
    for m in messages:
        if not isinstance(m, BaseMessage):
            raise ContentError(f"expected BaseMessage, got {type(m).__name__}")
        out.append(_message(m, HumanMessage, m.type))
    return out


def split_turns(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Cut a flat message list into turns, each starting at a HumanMessage."""
    turns: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage) or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns


@functools.cache
def _prompt_input_key() -> Callable[[dict[str, Any], list[str]], str]:
    """Stock's ``get_prompt_input_key``, imported on the first save that needs it (its
    package imports LangChain's prompts and models, ~1 s) and then held: a function-level
    import on every save costs ~1-3 us of a ~100 us save."""
    from langchain_classic.memory.utils import get_prompt_input_key

    return get_prompt_input_key


def resolve_input(
    inputs: Mapping[str, Any], *, input_key: str | None, memory_variables: Sequence[str],
    thread_key: str,
) -> Any:
    if input_key is None:
        visible = {k: v for k, v in inputs.items() if k != thread_key}
        try:
            input_key = _prompt_input_key()(visible, list(memory_variables))
        except ValueError as exc:
            raise InputKeyError(f"{exc}; set input_key= to choose one") from exc
    if input_key not in inputs:
        raise InputKeyError(f"input key {input_key!r} not found in inputs {sorted(inputs)}")
    return inputs[input_key]


def resolve_output(outputs: Mapping[str, Any], *, output_key: str | None, owner: str) -> Any:
    if output_key is None:
        if len(outputs) == 1:
            output_key = next(iter(outputs))
        elif "output" in outputs:
            output_key = "output"
            warnings.warn(
                f"'{owner}' got multiple output keys: {outputs.keys()}. The default 'output' "
                "key is being used. If this is not desired, please manually set 'output_key'.",
                stacklevel=4,
            )
        else:
            raise InputKeyError(
                f"Got multiple output keys: {outputs.keys()}, cannot determine which to store "
                "in memory. Please set the 'output_key' explicitly."
            )
    if output_key not in outputs:
        raise InputKeyError(f"output key {output_key!r} not found in outputs {sorted(outputs)}")
    return outputs[output_key]


def stable_id(thread_id: str, index: int, message: BaseMessage) -> str:
    """The message's id, or a deterministic one from its place in the thread's history."""
    if message.id is not None:
        return message.id
    return str(uuid.uuid5(_ID_NAMESPACE, f"{thread_id}\x00{index}\x00{message.type}"
                                         f"\x00{message.content}"))


def stable_ids(thread_id: str, messages: list[BaseMessage]) -> list[BaseMessage]:
    """Give id-less messages a deterministic id, so re-running a migration duplicates nothing."""
    out = []
    for index, message in enumerate(messages):
        if message.id is None:
            message = message.model_copy()
            message.id = stable_id(thread_id, index, message)
        out.append(message)
    return out
