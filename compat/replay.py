"""Replay a conversation file through both backends and compare after every turn."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from adapters import MemoryPolicy, compare_views
from adapters.summarizer import CachingSummarizer, ExtractiveSummarizer, Summarizer
from compat.baselines import baseline_history, facts_in
from compat.conversations import Turn, iter_turns, read_messages
from compat.memory import SummaryMemory

__all__ = ["DEFAULT_REPLAY_POLICY", "ReplayReport", "TurnResult", "replay", "replay_file"]

DEFAULT_REPLAY_POLICY = MemoryPolicy(max_tokens=400, keep_tokens=200)


@dataclass(frozen=True)
class TurnResult:
    index: int
    thread_id: str
    turn: int  # 1-based within the thread
    line: int
    diffs: list[str]
    windows: dict[str, int]  # backend -> verbatim messages after the save
    folds: dict[str, int]  # backend -> folds so far on the thread
    summaries: dict[str, str]
    window: list[tuple[str, str]]  # (type, content) of the first backend's window
    prompt_tokens: dict[str, int]  # backend or "full" -> tokens sent with this turn's question

    @property
    def match(self) -> bool:
        return not self.diffs


@dataclass
class ReplayReport:
    backends: tuple[str, ...]
    policy: MemoryPolicy
    turns: list[TurnResult] = field(default_factory=list)
    summarizer_calls: int = 0
    shared_folds: int = 0
    baselines: tuple[str, ...] = ()
    # strategy -> (facts still visible at the end, facts stated), over all threads
    facts: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def strategies(self) -> list[str]:
        """Every prompt-token series: full history, the backends, the baselines."""
        return ["full", *self.backends, *self.baselines]

    @property
    def divergences(self) -> list[TurnResult]:
        return [t for t in self.turns if not t.match]

    def total_prompt_tokens(self, key: str) -> int:
        return sum(t.prompt_tokens[key] for t in self.turns)

    @property
    def threads(self) -> list[str]:
        return list(dict.fromkeys(t.thread_id for t in self.turns))


def replay(
    turns: Iterable[Turn],
    *,
    policy: MemoryPolicy | None = None,
    summarizer: Summarizer | None = None,
    backends: tuple[str, ...] = ("classic", "middleware"),
    share_summaries: bool = True,
    baselines: tuple[str, ...] = (),
    on_turn: Callable[[TurnResult], None] | None = None,
) -> ReplayReport:
    """Save every turn on every backend; compare the views after each save."""
    policy = policy or DEFAULT_REPLAY_POLICY
    inner = summarizer or ExtractiveSummarizer()
    shared = CachingSummarizer(inner) if share_summaries else None
    memories = {
        name: SummaryMemory(backend=name, policy=policy, store="memory",
                            summarizer=shared or inner)
        for name in backends
    }
    report = ReplayReport(backends=backends, policy=policy, baselines=tuple(baselines))
    per_thread: dict[str, int] = {}
    first = memories[backends[0]]
    for index, turn in enumerate(turns):
        number = per_thread[turn.thread_id] = per_thread.get(turn.thread_id, 0) + 1
        question = [m for m in turn.messages[:1]]
        history = first.transcript(turn.thread_id)
        prompt = {"full": policy.count(history + question)}
        for name in baselines:
            prompt[name] = policy.count(baseline_history(name, history, policy) + question)
        for name, memory in memories.items():
            prompt[name] = policy.count(memory.load(turn.thread_id).as_messages() + question)
            memory.save_messages(turn.thread_id, turn.messages)
        views = {name: m.load(turn.thread_id) for name, m in memories.items()}
        base = views[backends[0]]
        diffs = [f"{backends[0]} vs {name}: {d}" for name in backends[1:]
                 for d in compare_views(base, views[name])]
        result = TurnResult(
            index=index, thread_id=turn.thread_id, turn=number, line=turn.line, diffs=diffs,
            windows={n: len(v.messages) for n, v in views.items()},
            folds={n: v.folds for n, v in views.items()},
            summaries={n: v.summary for n, v in views.items()},
            window=[(m.type, str(m.content)) for m in base.messages],
            prompt_tokens=prompt,
        )
        report.turns.append(result)
        if on_turn is not None:
            on_turn(result)
    if shared is not None:
        report.summarizer_calls, report.shared_folds = shared.calls, shared.hits
    report.facts = _facts_at_end(report, memories, first, policy)
    return report


def _facts_at_end(report: ReplayReport, memories: dict[str, SummaryMemory],
                  first: SummaryMemory, policy: MemoryPolicy) -> dict[str, tuple[int, int]]:
    """Per strategy: marked facts still visible to the model after the last turn."""
    seen = {k: 0 for k in report.strategies}
    stated = 0
    for thread in report.threads:
        history = first.transcript(thread)
        facts = facts_in(history)
        stated += len(facts)
        seen["full"] += len(facts)
        for name, memory in memories.items():
            view = memory.load(thread)
            seen[name] += len(facts & facts_in(view.messages, view.summary))
        for name in report.baselines:
            seen[name] += len(facts & facts_in(baseline_history(name, history, policy)))
    return {k: (v, stated) for k, v in seen.items()}


def replay_file(path: str | Path, **kwargs: object) -> ReplayReport:
    """Replay a JSONL conversation file (see ``compat.conversations``)."""
    return replay(list(iter_turns(read_messages(path))), **kwargs)  # type: ignore[arg-type]
