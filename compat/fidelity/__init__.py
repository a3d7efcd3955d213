"""Fold fidelity: how many planted facts a running summary keeps, by fold depth.

The set (``compat/eval_cases/fidelity``, made by ``scripts/make_fidelity_set.py``) is one long
conversation per language with planted typed facts — names, numbers with units, dates,
identifiers, paths, URLs, e-mails, decisions — and later corrections of two of them. Each
conversation is replayed through both backends with the set's policy and one summarizer
(shared, so a model's nondeterminism is not a backend difference); after the last turn a fact
is *kept* when its value (normalized: case and whitespace) is in the summary or the verbatim
window — a corrected fact only in its corrected form. Its *depth* is how many folds the summary
went through since the fact's message was folded into it (0: still verbatim). No judge model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from adapters import MemoryPolicy
from adapters.fold_check import REJECTED
from adapters.summarizer import CachingSummarizer, build_summarizer
from adapters.tokens import message_text
from compat.memory import SummaryMemory

__all__ = ["BUCKETS", "FIDELITY_SET", "MODEL_SUMMARY_CAP", "FidelityRun", "format_fidelity",
           "prompt_named", "run_fidelity"]

FIDELITY_SET = Path(__file__).resolve().parents[1] / "eval_cases" / "fidelity"
BUCKETS = ((0, 0, "window"), (1, 1, "1"), (2, 2, "2"), (3, 4, "3-4"), (5, 7, "5-7"),
           (8, 10, "8-10"), (11, 10_000, "11+"))
# A model run's summary cap when neither the set nor the caller sets one: without it a small
# model writes until its context is full and one fold takes minutes.
MODEL_SUMMARY_CAP = 256
# The set's turns stand for a user's pace, not a replay's: a rejected or failed fold is retried
# on the next save (``retry_backoff`` 0), so ``max_failed_folds`` and the fallback are reached
# as they would be in a live conversation, not skipped by a backoff that never ends mid-replay.
SET_DEFAULTS = {"retry_backoff": 0.0}


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text).casefold()


class _Metered:
    """The summarizer, counting its calls and the tokens it is sent (summary + messages).
    Run behind ``CachingSummarizer``: both backends folding the same input share one call."""

    def __init__(self, inner: Any, policy: MemoryPolicy) -> None:
        self.inner, self.policy = inner, policy
        self.calls = self.tokens = 0

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        self.calls += 1
        self.tokens += self.policy.count([SystemMessage(summary), *messages])
        return str(self.inner.summarize(summary, messages))


@dataclass
class FidelityRun:
    """One language, one prompt: facts kept by depth (each backend), and the costs."""

    language: str
    prompt: str
    policy: dict[str, Any] = field(default_factory=dict)  # what every fold ran with
    kept: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # backend -> bucket
    facts_kept: dict[str, int] = field(default_factory=dict)
    facts: int = 0
    folds: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0  # the final prompt (summary + window), first backend
    full_tokens: int = 0  # the whole history
    summarizer_calls: int = 0
    summarizer_tokens: int = 0
    rejected: int = 0  # folds the fail-closed check turned down (first backend)
    fallback: int = 0  # folds the offline fallback made after repeated failures (first backend)
    backends_agree: bool = True
    missing: list[str] = field(default_factory=list)  # kind@depth of the facts not kept

    @property
    def per_1k_prompt_tokens(self) -> float:
        first = next(iter(self.facts_kept.values()), 0)
        return round(first / (self.prompt_tokens / 1000), 2) if self.prompt_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "facts_per_1k_prompt_tokens": self.per_1k_prompt_tokens}


def prompt_named(name: str) -> tuple[str, Any]:
    """``stock`` (classic ``SUMMARY_PROMPT``), ``memshift`` (its default) or a file's text."""
    if name == "stock":
        from langchain_classic.memory.prompt import SUMMARY_PROMPT

        return "stock", SUMMARY_PROMPT
    if name == "memshift":
        return "memshift", None
    return Path(name).name, Path(name).read_text(encoding="utf-8")


def _turns(path: Path) -> list[tuple[str, str]]:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [(lines[i]["content"], lines[i + 1]["content"]) for i in range(0, len(lines), 2)]


def _one(meta: dict[str, Any], turns: list[tuple[str, str]], backend: str, policy: MemoryPolicy,
         summarizer: Any) -> tuple[dict[int, int], str, int, int, list[dict[str, Any]]]:
    """Replay through one backend: each fact's fold number when its message left the window,
    the final memory text, its folds, its prompt tokens and its fold records."""
    from compat.admin import summary_history

    thread = meta["name"]
    said = {f["id"]: f.get("corrected", {}).get("turn", f["turn"]) for f in meta["facts"]}
    folded_at: dict[int, int] = {}
    with SummaryMemory(backend=backend, policy=policy, summarizer=summarizer) as memory:
        for index, (human, ai) in enumerate(turns):
            memory.save(thread, human, ai)
            view = memory.load(thread)
            window = {message_text(m) for m in view.messages}
            for fact_id, turn in said.items():
                if turn <= index and fact_id not in folded_at and turns[turn][0] not in window:
                    folded_at[fact_id] = view.folds
        view = memory.load(thread)
        text = view.summary + " " + " ".join(message_text(m) for m in view.messages)
        return (folded_at, text, view.folds, policy.count(view.as_messages()),
                summary_history(memory, thread))


def _bucket(depth: int) -> str:
    return next(name for low, high, name in BUCKETS if low <= depth <= high)


def run_fidelity(*, llm: Any = None, summarizer: Any = None, prompt: str = "memshift",
                 languages: Sequence[str] = ("en", "zh"),
                 backends: Sequence[str] = ("classic", "middleware"),
                 folder: Path = FIDELITY_SET, keep_specifics: bool = False,
                 overrides: dict[str, Any] | None = None) -> list[FidelityRun]:
    """Every language of the set with one prompt (``prompt_named``) and one summarizer
    (``summarizer``, or one built on ``llm``, else memshift's offline one), through each
    backend; ``keep_specifics``: with the policy's specifics ledger; ``overrides``: policy
    fields over the set's own (a model run with no cap gets ``MODEL_SUMMARY_CAP``)."""
    label, text = prompt_named(prompt)
    runs = []
    for language in languages:
        meta = json.loads((folder / f"fidelity_{language}.json").read_text(encoding="utf-8"))
        turns = _turns(folder / f"fidelity_{language}.jsonl")
        fields = {**meta["policy"], **SET_DEFAULTS, **(overrides or {})}
        if llm is not None and summarizer is None:
            fields.setdefault("max_summary_tokens", MODEL_SUMMARY_CAP)
        policy = MemoryPolicy(**fields, **({"summary_prompt": text} if text else {}),
                              keep_specifics=keep_specifics)
        metered = _Metered(build_summarizer(policy, llm, summarizer), policy)
        shared = CachingSummarizer(metered)
        run = FidelityRun(language, label + (" +ledger" if keep_specifics else ""),
                          policy=fields, facts=len(meta["facts"]))
        run.full_tokens = policy.count([SystemMessage(t) for turn in turns for t in turn])
        kept_sets = []
        for backend in backends:
            folded_at, memory_text, folds, tokens, records = _one(meta, turns, backend, policy,
                                                                  shared)
            if backend == backends[0]:
                run.rejected = sum((r["error"] or "").startswith(REJECTED) for r in records)
                run.fallback = sum(r["summarizer"] == "fallback" and not r["error"]
                                   for r in records)
            buckets = {name: [0, 0] for _, _, name in BUCKETS}
            kept_ids = set()
            for fact in meta["facts"]:
                value = fact.get("corrected", {}).get("value", fact["value"])
                depth = folds - folded_at[fact["id"]] + 1 if fact["id"] in folded_at else 0
                kept = _norm(value) in _norm(memory_text)
                buckets[_bucket(depth)][1] += 1
                buckets[_bucket(depth)][0] += kept
                if kept:
                    kept_ids.add(fact["id"])
                elif backend == backends[0]:
                    run.missing.append(f"{fact['kind']}@{depth}")
            run.kept[backend] = {k: v for k, v in buckets.items() if v[1]}
            run.facts_kept[backend] = len(kept_ids)
            run.folds[backend] = folds
            run.prompt_tokens = run.prompt_tokens or tokens
            kept_sets.append(kept_ids)
        run.backends_agree = all(s == kept_sets[0] for s in kept_sets)
        run.summarizer_calls, run.summarizer_tokens = metered.calls, metered.tokens
        runs.append(run)
    return runs


def format_fidelity(runs: list[FidelityRun]) -> str:
    """The terminal table: facts kept by fold depth, per language and prompt."""
    names = [name for _, _, name in BUCKETS]
    lines = ["facts kept (of planted) by fold depth; depth 0 = still verbatim in the window",
             f"{'lang':<5}{'prompt':<17}{'backend':<11}" + "".join(f"{n:>8}" for n in names)
             + f"{'all':>8}{'per 1k prompt tok':>19}{'calls':>7}{'rejected':>10}"
             f"{'fallback':>10}{'agree':>7}"]
    for run in runs:
        for backend, buckets in run.kept.items():
            cells = "".join(f"{f'{buckets[n][0]}/{buckets[n][1]}' if n in buckets else '-':>8}"
                            for n in names)
            lines.append(f"{run.language:<5}{run.prompt:<17}{backend:<11}{cells}"
                         f"{f'{run.facts_kept[backend]}/{run.facts}':>8}"
                         f"{run.per_1k_prompt_tokens:>19}{run.summarizer_calls:>7}"
                         f"{run.rejected:>10}{run.fallback:>10}"
                         f"{'yes' if run.backends_agree else 'NO':>7}")
    return "\n".join(lines)
