"""``MemoryPolicy(keep_specifics=True)``: the specifics a summarizer dropped, carried verbatim.

A summary replaces its messages for good, and summarizers drop exactly what users ask about
later: paths, numbers, ids, URLs. With ``keep_specifics`` every fold (``Folder``, the one place
both backends get a summary from) carries, after the summary, a small ledger of the sentences
whose specifics (``adapters.specifics``) the new summary does not contain:

    <the summarizer's summary>

    Kept verbatim (specifics the summary left out):
    - The config lives at /etc/ledgerd/shards.toml.

The summarizer is sent the summary without its ledger (the prompt is the one it always had).
A ledger line comes from the folded messages or from the previous summary (a specific the
previous summary held and the new one lost). Corrections in the folded messages apply to it
with the offline summarizer's rules ("not X" forgets what names X; "my budget is 700"
replaces the sentence about the budget), and only the user corrects: a model's or a tool's
"not X" changes nothing. It is bounded by ``max_specifics_tokens`` (the oldest lines go
first), lives in the summary text (so it is stored, rendered, erased and rebuilt with it:
``memshift forget --match`` rebuilds the summary without the erased messages), and costs no
summarizer call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.extractive import ExtractiveSummarizer
from adapters.specifics import normalize, specifics
from adapters.structured import FIELDS, Item, StructuredSummary, parse_rendered, render
from adapters.tokens import TokenCounter

__all__ = ["HEADER", "carry", "split"]

HEADER = "Kept verbatim (specifics the summary left out):"
_MARK = "\n\n" + HEADER + "\n"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
# applies corrections; never bounded by size here (``max_specifics_tokens`` bounds the ledger)
_RULES = ExtractiveSummarizer(max_chars=10**9)


def split(summary: str) -> tuple[str, list[str]]:
    """The summary without its ledger, and the ledger's lines (oldest first)."""
    body, sep, ledger = summary.rpartition(_MARK)
    if not sep:
        return summary, []
    return body, [line[2:].strip() for line in ledger.splitlines() if line.startswith("- ")]


def _sentences(text: str) -> list[str]:
    lines = (line.strip().removeprefix("- ") for line in text.splitlines())
    return [s.strip() for line in lines for s in _SENTENCE.split(line) if s and s.strip()]


def _missing(line: str, body: str) -> bool:
    """Does ``line`` hold a specific that ``body`` does not?"""
    return any(s not in body for s in specifics(line))


def carry(previous: str, body: str, folded: Sequence[BaseMessage], *, budget: int,
          counter: TokenCounter) -> str:
    """``body`` (the summarizer's new summary) with the ledger this fold leaves: the previous
    ledger and what ``body`` lost of the previous summary, corrected by ``folded``, plus the
    sentences of ``folded`` holding specifics; only the lines ``body`` left a specific out
    of, within ``budget`` tokens."""
    old_body, lines = split(previous)
    new = normalize(body)
    old = normalize(old_body)
    lost = [s for s in _sentences(old_body) if _missing(s, new)
            and any(x in old for x in specifics(s))]
    prior = StructuredSummary(facts=[Item(value=v) for v in dict.fromkeys([*lines, *lost])])
    doc = parse_rendered(_RULES.summarize(render(prior), folded)) if folded else prior
    kept = list(dict.fromkeys(
        line for name in FIELDS for line in _values(getattr(doc, name)) if _missing(line, new)))
    while kept and counter([HumanMessage(content=_render(kept))]) > budget:
        kept.pop(0)  # the oldest first
    return body + _render(kept) if kept else body


def _values(items: list[Item]) -> list[str]:
    return [f"{i.key}: {i.value}" if i.key and i.key != "option" else i.value for i in items]


def _render(lines: Sequence[str]) -> str:
    return _MARK + "\n".join(f"- {line}" for line in lines)
