"""Folding when the summarizer cannot take the whole input at once.

Two triggers: the fold input (previous summary + folded messages) is larger than
``MemoryPolicy.max_summary_input_tokens``, or the summarizer rejects its input as too long
(``MemoryPolicy.overflowed``). Either way the fold runs in chunks, oldest first, each onto
the running summary; a single message larger than the limit is shortened *for the summarizer
only* (head and tail kept, a marker between). The stored messages are never touched, and the
window never stays over ``max_tokens`` because of a summarizer's input limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.errors import SummarizerError
from adapters.io import Steps
from adapters.policy import DEFAULT_SUMMARY_CAP, MemoryPolicy
from adapters.summarizer import Summarizer, summarize_steps
from adapters.tokens import message_text

__all__ = ["chunks", "shorten", "summarize_in_chunks"]

MAX_SPLITS = 6  # an overflowing input is halved at most this many times


def shorten(message: BaseMessage, tokens: int, policy: MemoryPolicy) -> BaseMessage:
    """A copy of ``message`` cut to about ``tokens``: head and tail kept, a marker between."""
    text = message_text(message)
    size = max(policy.count([message]), 1)
    keep = max(int(len(text) * min(tokens / size, 1.0)) - 40, 16)
    if keep >= len(text):
        return message
    head, tail = text[: keep // 2], text[len(text) - keep // 2:]
    copy = message.model_copy()
    copy.content = f"{head} […{len(text) - len(head) - len(tail)} characters omitted…] {tail}"
    return copy


def chunks(summary: str, messages: Sequence[BaseMessage], limit: int,
           policy: MemoryPolicy) -> list[list[BaseMessage]]:
    """Consecutive chunks, each fitting ``limit`` together with a summary as large as the
    previous one (a message that alone does not fit is shortened)."""
    base = policy.count([HumanMessage(summary)]) if summary else 0
    room = max(limit - base, 1)
    out: list[list[BaseMessage]] = [[]]
    for message in messages:
        if policy.count([message]) > room:
            message = shorten(message, room, policy)
        if out[-1] and policy.count([*out[-1], message]) > room:
            out.append([])
        out[-1].append(message)
    return [c for c in out if c]


def summarize_in_chunks(summarizer: Summarizer, policy: MemoryPolicy, summary: str,
                        messages: Sequence[BaseMessage], thread_id: str) -> Steps[str]:
    """The fold's summary, chunked by ``max_summary_input_tokens`` and split further on
    overflow errors."""
    limit = policy.max_summary_input_tokens
    parts = chunks(summary, messages, limit, policy) if limit else [list(messages)]
    for part in parts:
        summary = yield from _split_on_overflow(summarizer, policy, summary, part, thread_id, 0)
    return summary


def _split_on_overflow(summarizer: Summarizer, policy: MemoryPolicy, summary: str,
                       part: list[BaseMessage], thread_id: str, depth: int) -> Steps[str]:
    try:
        return (yield from summarize_steps(
            summarizer, summary, part, retries=policy.summary_retries, thread_id=thread_id,
            timeout=policy.summary_timeout,
            max_tokens=policy.max_summary_tokens or DEFAULT_SUMMARY_CAP,
            counter=policy.counter, give_up_on=policy.overflowed))
    except SummarizerError as exc:
        if depth >= MAX_SPLITS or not policy.overflowed(exc):
            raise
    if len(part) > 1:  # halve: the older half onto the summary, then the newer half
        middle = len(part) // 2
        for half in (part[:middle], part[middle:]):
            summary = yield from _split_on_overflow(summarizer, policy, summary, half, thread_id,
                                                    depth + 1)
        return summary
    shorter = shorten(part[0], max(policy.count(part) // 2, 1), policy)
    return (yield from _split_on_overflow(summarizer, policy, summary, [shorter], thread_id,
                                          depth + 1))
