"""The summary evaluation set: does the running summary keep what later answers need?

A case is ``<name>.jsonl`` (a replay conversation) + ``<name>.json`` (policy and checks).
Checks run on the final state: ``summary_contains`` / ``summary_not_contains``,
``summarizer_input_not_contains`` (nothing sensitive ever reaches the summarizer),
``memory_contains`` (summary + verbatim window) and ``structured`` field checks.
String checks are case-insensitive substrings. Bundled cases: ``compat/eval_cases``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from adapters.structured import FIELDS, parse_rendered
from adapters.tokens import message_text
from compat.conversations import Turn, iter_turns, read_messages
from compat.memory import SummaryMemory

__all__ = ["BUNDLED_CASES", "CaseResult", "EvalCase", "EvalReport", "case_policy", "load_cases",
           "run_eval"]

BUNDLED_CASES = Path(__file__).with_name("eval_cases")
_CHECKS = ("summary_contains", "summary_not_contains", "summarizer_input_not_contains",
           "memory_contains", "structured")


@dataclass(frozen=True)
class EvalCase:
    name: str
    language: str
    category: str
    description: str
    policy: dict[str, Any]
    checks: dict[str, Any]
    turns: list[Turn]


@dataclass
class CaseResult:
    name: str
    language: str
    category: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    summary: str = ""
    folds: int = 0
    error: str | None = None

    @property
    def score(self) -> float:
        total = len(self.passed) + len(self.failed)
        return len(self.passed) / total if total else 0.0


@dataclass
class EvalReport:
    model: str
    cases: list[CaseResult]

    @property
    def score(self) -> float:
        return sum(c.score for c in self.cases) / len(self.cases) if self.cases else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "score": round(self.score, 4),
                "cases": [{**asdict(c), "score": round(c.score, 4)} for c in self.cases]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False, indent=2)


def load_cases(folder: str | Path = BUNDLED_CASES) -> list[EvalCase]:
    """Every ``*.json`` with a sibling ``*.jsonl`` in the folder, sorted by name."""
    folder = Path(folder)
    specs = sorted(folder.glob("*.json"))
    if not specs:
        raise ConfigError(f"no evaluation cases (*.json + *.jsonl) in {folder}")
    cases = []
    for spec_path in specs:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        unknown = set(spec.get("checks", {})) - set(_CHECKS)
        if unknown:
            raise ConfigError(f"{spec_path.name}: unknown checks {sorted(unknown)}")
        conversation = spec_path.with_suffix(".jsonl")
        cases.append(EvalCase(
            name=spec.get("name", spec_path.stem), language=spec.get("language", "?"),
            category=spec.get("category", "?"), description=spec.get("description", ""),
            policy=dict(spec.get("policy", {})), checks=dict(spec.get("checks", {})),
            turns=list(iter_turns(read_messages(conversation)))))
    return cases


class _Recorder:
    """Wraps the summarizer to keep every text it was sent."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: list[str] = []

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        self.seen.append(summary)
        self.seen.extend(message_text(m) for m in messages)
        return self.inner.summarize(summary, messages)


def _contains(haystack: str, needle: str) -> bool:
    return needle.lower() in haystack.lower()


def case_policy(case: EvalCase, override: dict[str, Any] | None = None) -> MemoryPolicy:
    """The case's policy with ``override`` (e.g. an app's recorded policy) laid over it. A
    trigger overridden without its keep value drops the case's keep value too."""
    spec = dict(case.policy)
    override = {k: v for k, v in (override or {}).items() if k != "prompt_version"}
    for trigger, keep in (("max_tokens", "keep_tokens"), ("max_messages", "keep_messages")):
        if trigger in override and keep not in override:
            spec.pop(keep, None)
    return MemoryPolicy(**{**spec, **override})


def run_case(case: EvalCase, llm: Any = None,
             override: dict[str, Any] | None = None) -> CaseResult:
    result = CaseResult(case.name, case.language, case.category)
    try:
        policy = case_policy(case, override)
        with SummaryMemory(backend="classic", policy=policy, llm=llm) as memory:
            recorder = _Recorder(memory.backend_impl.summarizer)
            memory.backend_impl.summarizer = recorder
            for turn in case.turns:
                memory.save_messages(case.name, turn.messages)
            view = memory.load(case.name)
    except Exception as exc:  # a broken case or model is a failed case, not a crash
        result.error = f"{type(exc).__name__}: {exc}"
        result.failed.append(f"ran: {result.error}")
        return result
    result.summary, result.folds = view.summary, view.folds
    memory_text = view.summary + "\n" + "\n".join(message_text(m) for m in view.messages)
    sent = "\n".join(recorder.seen)

    def check(label: str, ok: bool) -> None:
        (result.passed if ok else result.failed).append(label)

    checks = case.checks
    for s in checks.get("summary_contains", []):
        check(f"summary contains {s!r}", _contains(view.summary, s))
    for s in checks.get("summary_not_contains", []):
        check(f"summary lacks {s!r}", not _contains(view.summary, s))
    for s in checks.get("summarizer_input_not_contains", []):
        check(f"summarizer never saw {s!r}", not _contains(sent, s))
    for s in checks.get("memory_contains", []):
        check(f"memory contains {s!r}", _contains(memory_text, s))
    document = parse_rendered(view.summary)
    for name, rules in checks.get("structured", {}).items():
        if name not in FIELDS:
            check(f"structured field {name!r} exists", False)
            continue
        text = document.field_text(name)
        for s in rules.get("contains", []):
            check(f"{name} contains {s!r}", _contains(text, s))
        for s in rules.get("not_contains", []):
            check(f"{name} lacks {s!r}", not _contains(text, s))
    return result


def run_eval(cases: Sequence[EvalCase], llm: Any = None, model: str = "offline",
             override: dict[str, Any] | None = None,
             on_case: Callable[[CaseResult], None] | None = None) -> EvalReport:
    """Run every case; ``override`` replaces policy fields of every case (``--store``)."""
    results = []
    for case in cases:
        results.append(run_case(case, llm, override))
        if on_case is not None:
            on_case(results[-1])
    return EvalReport(model=model, cases=results)


def format_table(report: EvalReport) -> str:
    lines = [f"{'case':<28}{'lang':<6}{'category':<16}{'checks':>8}{'score':>8}  failed",
             "-" * 80]
    for c in report.cases:
        total = len(c.passed) + len(c.failed)
        lines.append(f"{c.name[:27]:<28}{c.language:<6}{c.category[:15]:<16}"
                     f"{len(c.passed):>4}/{total:<3}{c.score:>8.2f}  " + "; ".join(c.failed)[:200])
    lines.append("-" * 80)
    lines.append(f"model: {report.model}  cases: {len(report.cases)}  mean score: {report.score:.2f}")
    return "\n".join(lines)
