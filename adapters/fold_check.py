"""Fail-closed folds: a new summary is checked before it replaces anything.

A summary replaces messages for good (they stay in the transcript, not in what the model
reads), so a reply that is not a summary must fail the fold instead of becoming one: the
window then stays verbatim and the fold is retried with the backoff of a failed summarizer
call. Two checks run on every reply inside the summarizer's retries (``check_reply``: empty,
over the output cap); the others need the whole fold (``verdict``: the previous summary, the
folded text, the window kept) and run once per fold, in ``Folder.summarize_steps`` — the one
place both backends and the agent hooks get a summary from — unless
``MemoryPolicy.check_summaries`` is off.

A rejection is a ``SummaryRejected`` whose message starts ``summary rejected (<reason>)``:
what ``split(":")[0]`` gives the fold record's log line and the ``error.type`` metric. It
never quotes the summary or the conversation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.policy_checks import DEFAULT_SUMMARY_CAP
from adapters.policy_prompt import DEFAULT_SUMMARY_PROMPT
from adapters.specifics import normalize as _norm
from adapters.specifics import specifics
from adapters.structured import STRUCTURED_PROMPT
from adapters.tokens import TokenCounter, message_text

if TYPE_CHECKING:
    from adapters.policy import MemoryPolicy

__all__ = ["REJECTED", "SummaryRejected", "check_reply", "specifics", "verdict"]

REJECTED = "summary rejected"
# too short: under this share of the folded text's tokens and under FLOOR_TOKENS tokens ("OK",
# "N/A", "Summary:" for a fold of a few hundred tokens; one token is enough up to 200)
FLOOR_SHARE, FLOOR_TOKENS = 0.005, 8
# the folded text's specifics a summary must keep some of: at least SPECIFICS_SHARE of them
# (rounded up, at least one) once there are SPECIFICS_MIN, and no more than the room its
# output cap leaves could hold (a specific is kept in a sentence: TOKENS_PER_SPECIFIC each,
# a CJK one included)
SPECIFICS_MIN, SPECIFICS_SHARE, TOKENS_PER_SPECIFIC = 5, 0.1, 48
REFUSAL_CHARS = 600  # a refusal is short: a longer reply that starts with "Sorry" is a summary
PROMPT_LINE_CHARS = 30  # a prompt line long enough that a summary never repeats it by chance


class SummaryRejected(ValueError):
    """A reply that must not become the summary; ``reason`` names its class."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{REJECTED} ({reason}): {detail}")
        self.reason = reason


def check_reply(reply: str, max_tokens: int | None, counter: TokenCounter) -> str:
    """The reply stripped; empty or over ``max_tokens`` raises (a model that ignores the cap
    must not poison the next fold's prompt). Per attempt: another attempt may do better."""
    text = reply.strip()
    if not text:
        raise SummaryRejected("empty", "the summarizer returned no text")
    if max_tokens and (size := counter([HumanMessage(content=text)])) > max_tokens:
        raise SummaryRejected("over cap", f"a summary of {size} tokens exceeds "
                                          f"max_summary_tokens={max_tokens}")
    return text


def _kept(wanted: set[str], text: str) -> int:
    haystack = _norm(text)
    return sum(1 for s in wanted if s in haystack)


def _tokens(policy: MemoryPolicy, text: str) -> int:
    """The tokens of ``text`` alone (a message's own overhead left out)."""
    return max(policy.count([HumanMessage(content=text)]) - policy.count([HumanMessage("")]), 0)


# -- the whole-fold checks ------------------------------------------------------------------
_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry\b|my apologies|i apologi[sz]e|as an ai\b|"
    r"(?:unfortunately,?\s*)?i (?:can ?not|can'?t|cannot|won'?t|will not|am unable|'?m unable|"
    r"am not able|'?m not able)\b|抱歉|对不起|很抱歉|我无法|我不能)", re.I)
_SPACE = re.compile(r"\s+")
_VARIABLE = re.compile(r"\{[A-Za-z_]+\}")


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def prompt_text(policy: MemoryPolicy) -> str:
    """The summary prompt's template text (the built-in one for the format when unset)."""
    prompt = policy.summary_prompt
    if prompt is None:
        return STRUCTURED_PROMPT if policy.summary_format == "structured" else \
            DEFAULT_SUMMARY_PROMPT
    return prompt if isinstance(prompt, str) else str(policy.prompt.template)


def _prompt_echoed(text: str, prompt: str, source: str) -> bool:
    """One of the prompt's own long lines in the reply, unless ``source`` (the folded text and
    the previous summary) has it too: a small model that echoes an instruction or copies the
    prompt's example does so a line at a time."""
    lines = {_flat(line) for part in _VARIABLE.split(prompt) for line in part.splitlines()}
    flat, given = _flat(text), _flat(source)
    return any(len(line) >= PROMPT_LINE_CHARS and line in flat and line not in given
               for line in lines)


def verdict(text: str, policy: MemoryPolicy, previous: str,
            folded: Sequence[BaseMessage], kept: Sequence[BaseMessage],
            carried: str = "") -> SummaryRejected | None:
    """Why ``text`` must not replace ``previous`` and ``folded`` (``kept``: the window that
    stays verbatim; ``carried``: the specifics ledger that goes with ``text``, which counts
    towards the specifics kept and nothing else), or ``None``. Each rule errs towards
    accepting."""
    folded_text = "\n".join(message_text(m) for m in folded)
    if len(text) <= REFUSAL_CHARS and _REFUSAL.match(text.replace("\u2019", "'")):
        return SummaryRejected("refusal", "the reply reads as a refusal or an apology")
    if _prompt_echoed(text, prompt_text(policy), previous + "\n" + folded_text):
        return SummaryRejected("prompt echoed", "the reply repeats the summary prompt")
    kept_text = _norm("\n".join(message_text(m) for m in kept))
    # specifics of the folded text a summary has to carry (those in the kept window stay)
    wanted = {s for s in specifics(folded_text) if s not in kept_text}
    size = _tokens(policy, text)
    cap = policy.max_summary_tokens or DEFAULT_SUMMARY_CAP
    fit = max(cap - size, 0) // TOKENS_PER_SPECIFIC  # specifics the room left could hold
    if previous and fit and _flat(text) == _flat(previous):
        new = {s for s in wanted if s not in _norm(previous)}
        if len(new) >= SPECIFICS_MIN:
            return SummaryRejected("previous echoed", f"the summary is the previous one "
                                   f"unchanged though the folded text brought {len(new)} "
                                   "new number(s) or identifier(s)")
    source = _tokens(policy, folded_text)
    floor = min(FLOOR_TOKENS, FLOOR_SHARE * source, cap / 4)
    if size < floor:
        return SummaryRejected("too short", f"a summary of {size} tokens for {source} tokens "
                                            f"folded (the floor is {floor:.1f})")
    need = min(max(1, math.ceil(SPECIFICS_SHARE * len(wanted))), fit)
    if len(wanted) >= SPECIFICS_MIN and (have := _kept(wanted, text + "\n" + carried)) < need:
        return SummaryRejected("specifics dropped", f"the summary keeps {have} of the "
                               f"{len(wanted)} numbers, identifiers, paths, URLs and e-mails "
                               f"of the folded text (at least {need} required)")
    return None
