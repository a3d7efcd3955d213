"""The ``summarizer`` fixture every suite shares: what it takes, and how a suite runs it.

A team hands over what it has — a LangChain chat model or LLM (``ChatOpenAI(...)``), a
memshift ``Summarizer`` (``.summarize(summary, messages)``), a plain
``fn(summary, messages) -> str``, or ``None`` for memshift's offline summarizer — and the
suites adapt it as ``SummaryMemory`` would (a model gets the policy's prompt, cap and format)
and record each memory's calls themselves, so no adopter names a recorder or a signature.
"""

from __future__ import annotations

import inspect
from typing import Any

from langchain_core.language_models import BaseLanguageModel

from adapters.errors import ConfigError
from adapters.policy import MemoryPolicy
from adapters.summarizer import (
    CachingSummarizer, DeterministicSummarizer, StructuredSummarizer, Summarizer,
    build_summarizer,
)
from compat.testing.conversations import RecordingSummarizer

__all__ = ["ACCEPTED", "SuiteSummarizer", "summarizer_settings"]

ACCEPTED = (
    "a LangChain chat model or LLM (e.g. ChatOpenAI(...))",
    "a Summarizer (an object with .summarize(summary, messages) -> str)",
    "a callable fn(summary, messages) -> str",
    "None (memshift's offline summarizer)",
)


def _takes(signature: inspect.Signature, *args: Any) -> bool:
    try:
        signature.bind(*args)
    except TypeError:
        return False
    return True


def _is_factory(value: Any) -> bool:
    """A zero-argument callable: the form ``StagedMigrationContract`` took before (a class
    such as ``RecordingSummarizer``, or a lambda returning a summarizer), still accepted."""
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin without a signature: not a factory we know
        return False
    return _takes(signature) and not _takes(signature, "", [])


def _kind(value: Any) -> str:
    """``none`` | ``model`` | ``summarizer`` | ``function`` | ``factory``, or a ConfigError."""
    if value is None:
        return "none"
    if isinstance(value, BaseLanguageModel):
        return "model"
    if isinstance(value, type):  # a class has a ``summarize`` attribute too: never a summarizer
        if _is_factory(value):
            return "factory"
    elif isinstance(value, Summarizer):
        return "summarizer"
    elif callable(value):
        return "factory" if _is_factory(value) else "function"
    raise ConfigError(
        f"the suites' `summarizer` fixture got {type(value).__name__} ({value!r:.60}); it takes "
        + "; ".join(ACCEPTED))


def _accepted(value: Any) -> tuple[str, Any]:
    kind = _kind(value)
    if kind == "factory":
        value = value()
        kind = _kind(value)
        if kind == "factory":
            raise ConfigError(f"the `summarizer` fixture's factory returned another factory "
                              f"({value!r:.60}); return the summarizer itself")
    return kind, value


def summarizer_settings(value: Any) -> dict[str, Any]:
    """The ``SummaryMemory`` keywords that run ``value`` as a deployment would: ``llm=`` for
    a model (so the policy reads its profile and prompt), ``summarizer=`` otherwise, nothing
    for ``None``. Use it in your own ``memory`` fixture to take the ``summarizer`` fixture."""
    kind, value = _accepted(value)
    if kind == "none":
        return {}
    return {"llm": value} if kind == "model" else {"summarizer": value}


class SuiteSummarizer:
    """One replay's summarizer: the team's, adapted once under ``policy`` and cached, so a
    model that answers differently each time still gives every memory being compared the
    same summary for the same input. Each memory gets it behind a recorder of its own."""

    def __init__(self, value: Any, policy: MemoryPolicy) -> None:
        kind, value = _accepted(value)
        if kind == "none":  # the suites' deterministic default (not the facade's extractive)
            built = build_summarizer(policy, summarizer=DeterministicSummarizer())
        elif kind == "model":
            built = build_summarizer(policy, llm=value)
        else:
            built = build_summarizer(policy, summarizer=value)
        # the recorder goes inside the structured layer: it sees what the team's code sees
        self.json_summary = built.json_summary if isinstance(built, StructuredSummarizer) else None
        inner = built.inner if isinstance(built, StructuredSummarizer) else built
        self.shared = CachingSummarizer(inner)

    def recorded(self) -> tuple[Summarizer, RecordingSummarizer]:
        """What to hand one memory (``summarizer=``), and the recorder of what it asked."""
        recorder = RecordingSummarizer(self.shared)
        if self.json_summary is None:
            return recorder, recorder
        return StructuredSummarizer(recorder, json_summary=self.json_summary), recorder
