"""Replay a conversation file through both backends and compare after every turn."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from adapters import MemoryPolicy
from adapters.diff_classes import Rules
from adapters.summarizer import CachingSummarizer, Summarizer, build_summarizer
from compat.conversations import Turn, baseline_history, facts_in, iter_turns, read_messages
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
    # --no-share only: the summaries differ although every backend sent the summarizer the
    # same input (or the thread already diverged that way): model nondeterminism, not memory
    nondeterminism: bool = False
    window_messages: tuple = ()  # the first backend's window as messages (tool calls, ids)
    classes: tuple[str, ...] = ()  # the class of each backend's difference (diff_classes)
    expected: bool = False  # every difference is of a class the replay was told to ignore

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
    ignored: tuple[str, ...] = ()  # classes of difference the replay was told to expect
    # strategy -> (facts still visible at the end, facts stated), over all threads
    facts: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def strategies(self) -> list[str]:
        """Every prompt-token series: full history, the backends, the baselines."""
        return ["full", *self.backends, *self.baselines]

    @property
    def divergences(self) -> list[TurnResult]:
        """Turns where the backends' memory differs for a reason that is theirs (and of a
        class not ignored)."""
        return [t for t in self.turns if not t.match and not t.nondeterminism and not t.expected]

    @property
    def classes(self) -> dict[str, int]:
        """Differing turns by class of difference (ignored classes included)."""
        counts: dict[str, int] = {}
        for t in self.turns:
            for name in dict.fromkeys(t.classes):
                counts[name] = counts.get(name, 0) + 1
        return counts

    @property
    def nondeterministic(self) -> list[TurnResult]:
        """Turns that differ only because the model answered the same input differently."""
        return [t for t in self.turns if not t.match and t.nondeterminism]

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
    ignore: Iterable[str] = (),
) -> ReplayReport:
    """Save every turn on every backend; compare the views after each save. ``ignore``:
    classes of difference (``adapters.diff_classes``) that are expected, counted apart."""
    policy = policy or DEFAULT_REPLAY_POLICY
    rules = Rules(ignore=ignore)
    inner = summarizer or build_summarizer(policy)
    shared = CachingSummarizer(inner) if share_summaries else None
    tapes = {name: _Tape(shared or inner) for name in backends}
    memories = {
        name: SummaryMemory(backend=name, policy=policy, store="memory", summarizer=tapes[name])
        for name in backends
    }
    drifted: set[str] = set()
    report = ReplayReport(backends=backends, policy=policy, baselines=tuple(baselines),
                          ignored=tuple(rules.names()))
    per_thread: dict[str, int] = {}
    first = memories[backends[0]]
    for index, turn in enumerate(turns):
        number = per_thread[turn.thread_id] = per_thread.get(turn.thread_id, 0) + 1
        question = [m for m in turn.messages[:1]]
        history = first.transcript(turn.thread_id)
        prompt = {"full": policy.count(history + question)}
        for name in baselines:
            prompt[name] = policy.count(baseline_history(name, history, policy) + question)
        marks = {name: len(tape.calls) for name, tape in tapes.items()}
        for name, memory in memories.items():
            prompt[name] = policy.count(memory.load(turn.thread_id).as_messages() + question)
            memory.save_messages(turn.thread_id, turn.messages)
        views = {name: m.load(turn.thread_id) for name, m in memories.items()}
        base = views[backends[0]]
        verdicts = {name: rules.judge(base, views[name]) for name in backends[1:]}
        diffs = [f"{backends[0]} vs {name}: {d}" for name, v in verdicts.items() for d in v.diffs]
        differing = [v for v in verdicts.values() if v.diffs]
        if diffs and not share_summaries:
            calls = [tapes[n].calls[marks[n]:] for n in backends]
            same_inputs = all([c[0] for c in x] == [c[0] for c in calls[0]] for x in calls)
            if turn.thread_id in drifted or (same_inputs and calls[0]):
                drifted.add(turn.thread_id)
        result = TurnResult(
            index=index, thread_id=turn.thread_id, turn=number, line=turn.line, diffs=diffs,
            windows={n: len(v.messages) for n, v in views.items()},
            folds={n: v.folds for n, v in views.items()},
            summaries={n: v.summary for n, v in views.items()},
            window=[(m.type, str(m.content)) for m in base.messages],
            prompt_tokens=prompt,
            nondeterminism=bool(diffs) and turn.thread_id in drifted,
            window_messages=tuple(base.messages),
            classes=tuple(v.cls for v in differing),
            expected=bool(differing) and all(v.ignored for v in differing),
        )
        report.turns.append(result)
        if on_turn is not None:
            on_turn(result)
    if shared is not None:
        report.summarizer_calls, report.shared_folds = shared.calls, shared.hits
    else:
        report.summarizer_calls = sum(len(t.calls) for t in tapes.values())
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


class _Tape:
    """Records each summarizer input and output of one backend (to tell model
    nondeterminism from backend divergence when summaries are not shared)."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.calls: list[tuple[tuple, str]] = []

    def summarize(self, summary: str, messages: list) -> str:
        result = self.inner.summarize(summary, messages)
        self.calls.append((CachingSummarizer.key(summary, messages), str(result)))
        return result


def replay_file(path: str | Path, **kwargs: object) -> ReplayReport:
    """Replay a JSONL conversation file (see ``compat.conversations``)."""
    return replay(list(iter_turns(read_messages(path))), **kwargs)  # type: ignore[arg-type]
