"""The prompt a policy-driven command follows: the one the store recorded when memshift ships
it (its own two, and the stock classic class's ``SUMMARY_PROMPT``), the one passed with
``--summary-prompt``, or — for a proof (``replay``) — a refusal naming how to supply it."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from adapters import MemoryPolicy
from adapters.errors import ConfigError

__all__ = ["UNLOADABLE", "follow_prompt", "known_prompts"]

UNLOADABLE = "substituted"  # how a note saying the run does not follow the record begins


@functools.cache
def known_prompts() -> dict[str, tuple[str, Any]]:
    """Prompt version -> (name, prompt) for the prompts memshift ships: its own two and the
    stock classic class's ``SUMMARY_PROMPT`` (what ``MemoryPolicy.stock`` records)."""
    from langchain_classic.memory.prompt import SUMMARY_PROMPT

    from adapters.policy_prompt import BUILT_IN_PROMPTS

    named = [("memshift default", BUILT_IN_PROMPTS[0]), ("memshift structured", BUILT_IN_PROMPTS[1]),
             ("stock ConversationSummaryBufferMemory SUMMARY_PROMPT", SUMMARY_PROMPT)]
    return {MemoryPolicy(max_tokens=100, summary_prompt=p).prompt_version: (n, p)
            for n, p in named}


def follow_prompt(policy: MemoryPolicy, version: str | None, prompt: Any, strict: bool,
                   where: str, notes: list[str]) -> MemoryPolicy:
    """The run's policy with the prompt the threads were summarized with: the one passed
    (``--summary-prompt``), else the recorded one when memshift ships it; otherwise a strict
    command refuses, naming how to supply it, and any other says what it substituted."""
    if prompt is not None:
        policy = replace(policy, summary_prompt=prompt)
        if version and version != policy.prompt_version:
            notes.append(f"{UNLOADABLE}: the recorded summaries used prompt {version}; this run "
                         f"uses the --summary-prompt given ({policy.prompt_version})")
        return policy
    if not version or version == policy.prompt_version:
        return policy
    known = known_prompts().get(version)
    if known is not None:
        return replace(policy, summary_prompt=known[1])
    if strict:
        raise ConfigError(f"the summaries recorded in {where} used prompt {version}, which "
                          "memshift does not ship: pass it with --summary-prompt FILE (the "
                          "prompt's text, with {summary} and {new_lines})")
    notes.append(f"{UNLOADABLE}: the recorded summaries used prompt {version}; this run's "
                 f"prompt is {policy.prompt_version} (memshift's default, or the one passed)")
    return policy
