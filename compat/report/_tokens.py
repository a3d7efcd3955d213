"""Why prompt-token counts differ between backends on a turn, even when memory matches.

A turn's prompt tokens are counted before its save: the memory the previous turn of the
thread left (summary message + verbatim window) plus the question. Both backends hold the
same summary, but render it natively: classic as a bare ``SystemMessage``, the middleware
as a ``HumanMessage`` with a fixed preface. The report recounts each backend's summary
message to say how much of the gap that rendering explains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from compat.replay import ReplayReport, TurnResult

__all__ = ["TokenNote", "TokenExplainer"]


def _renderers() -> dict[str, Callable[[str], BaseMessage]]:
    """How each backend turns a summary into the message it sends (the defaults replay uses)."""
    from adapters.backends.middleware import build_summary_message
    from compat.memory import SummaryMemory

    classic_cls = SummaryMemory.model_fields["summary_message_cls"].default
    return {"classic": lambda s: classic_cls(content=s), "middleware": build_summary_message}


@dataclass(frozen=True)
class TokenNote:
    """The gap on one turn: a short badge for the turn line and a sentence for its body."""

    badge: str
    detail: str
    explained: bool


def _rendering(message: BaseMessage, summary: str) -> str:
    content = message.content if isinstance(message.content, str) else str(message.content)
    kind = type(message).__name__
    if content == summary:
        return f"a {kind} holding the bare summary"
    if content.endswith(summary):
        preface = content[: len(content) - len(summary)].strip()
        return f"a {kind} that starts {preface!r}"
    return f"a {kind} ({len(content)} chars for a {len(summary)}-char summary)"


class TokenExplainer:
    """Explains per-turn token gaps of one report (caches summary-message counts)."""

    def __init__(self, report: ReplayReport) -> None:
        self.report = report
        self.renderers = _renderers()
        self._cache: dict[tuple[str, str], tuple[int, str]] = {}

    def _summary_cost(self, backend: str, summary: str) -> tuple[int, str] | None:
        """(tokens, description) of a backend's summary message; ``None`` if unknown."""
        if not summary:
            return 0, "no summary message"
        render = self.renderers.get(backend)
        if render is None:
            return None
        key = (backend, summary)
        if key not in self._cache:
            message = render(summary)
            self._cache[key] = (self.report.policy.count([message]), _rendering(message, summary))
        return self._cache[key]

    def explain(self, turn: TurnResult, previous: TurnResult | None) -> TokenNote | None:
        """``None`` when every backend sent the same number of tokens."""
        backends = self.report.backends
        base = backends[0]
        counts = {b: turn.prompt_tokens[b] for b in backends}
        if len(set(counts.values())) <= 1:
            return None
        gaps = {b: counts[b] - counts[base] for b in backends[1:]}
        badge = ", ".join(f"{b} {gap:+d}" for b, gap in gaps.items() if gap)
        summaries = {b: previous.summaries.get(b, "") if previous else "" for b in backends}
        costs = {b: self._summary_cost(b, summaries[b]) for b in backends}
        if any(c is None for c in costs.values()):
            unknown = ", ".join(b for b, c in costs.items() if c is None)
            return TokenNote(f"Δ {badge}", f"Token counts differ ({_counts(counts)}). This report "
                             f"does not know how {unknown} renders its summary message, so it "
                             "cannot say which message accounts for the gap.", False)
        known = {b: c for b, c in costs.items() if c is not None}
        if not any(summaries.values()):
            lines = ["No backend sends a summary message yet."]
        else:
            same = len({summaries[b] for b in backends}) == 1
            lines = ["Message 1, the summary" + ("" if same else " (its text differs)")
                     + ", is rendered differently: "
                     + ", ".join(f"{b} {known[b][0]}" for b in backends) + " tokens."]
        residual = {b: gaps[b] - (known[b][0] - known[base][0]) for b in gaps}
        worst = max(abs(r) for r in residual.values())
        windows_equal = previous is None or len({previous.windows.get(b) for b in backends}) == 1
        if worst == 0 or (worst == 1 and windows_equal):
            rounding = " (±1: the counter rounds the whole prompt once)" if worst else ""
            whole = "That is the whole gap" if any(summaries.values()) else "The gap is rounding"
            lines.append(f"{whole}{rounding}; window and question count alike"
                         + ("; the memory matches." if turn.match else "."))
            return TokenNote(f"Δ {badge}: summary message", " ".join(lines), True)
        sizes = ", ".join(f"{b} {previous.windows.get(b, '?')}" for b in backends) \
            if previous else "empty"
        lines.append(
            f"Prompt tokens: {_counts(counts)}. That explains "
            + ", ".join(f"{known[b][0] - known[base][0]:+d} of {b}'s {gaps[b]:+d}" for b in gaps)
            + f"; the rest ({', '.join(f'{b} {r:+d}' for b, r in residual.items())}) is in the "
            f"verbatim window before this turn (messages: {sizes}): the backends hold or count "
            "some window messages differently (tool-call messages, for example).")
        return TokenNote(f"Δ {badge}: window", " ".join(lines), False)

    def renderings(self) -> list[tuple[str, str]]:
        """(backend, how it renders the summary message), once per report."""
        sample = "<summary>"
        out = []
        for backend in self.report.backends:
            render = self.renderers.get(backend)
            out.append((backend, _rendering(render(sample), sample) if render else "unknown"))
        return out


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{b} {n}" for b, n in counts.items())
