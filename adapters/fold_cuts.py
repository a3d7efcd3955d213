"""Where a fold cuts a window: the smallest cut whose remainder fits the policy's keep
limits, never into the newest turn (``MemoryPolicy.plan_fold``).

A fold summarized in the background lands where it was planned: while the engine commits it
(``landing(job)``, around one step of the real class, no I/O inside), ``plan_fold`` answers the
job's own cut as long as the messages it folded still head the window — turns that landed
meanwhile stay in the window for a later fold instead of moving the cut past what was
summarized."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.tokens import is_monotonic

__all__ = ["FoldPlan", "landing", "plan_fold"]


@dataclass(frozen=True)
class FoldPlan:
    """Where to cut a window: ``messages[:cutoff]`` are folded into the summary."""

    cutoff: int
    reason: str  # e.g. "tokens>200", "messages>6"; "" when nothing is folded


class Landing(Protocol):
    """A fold being committed (``adapters.fold.FoldJob``): its cut, and whether the messages
    it folded still head a window."""

    plan: FoldPlan

    def heads(self, window: Sequence[BaseMessage]) -> bool: ...


_LANDING: ContextVar[Landing | None] = ContextVar("memshift_landing", default=None)


@contextmanager
def landing(job: Landing | None) -> Iterator[None]:
    """While this block runs (in this thread or task), ``plan_fold`` cuts where ``job`` was
    planned whenever ``job``'s folded messages still head the window (``None``: never)."""
    token = _LANDING.set(job)
    try:
        yield
    finally:
        _LANDING.reset(token)


def plan_fold(self: Any, window: Sequence[BaseMessage],
              counted: Sequence[BaseMessage] = ()) -> FoldPlan:
    """The smallest cut whose remainder fits the keep limits; never into the newest turn
    (or, while a fold lands, its own cut: ``landing``).

    The plan is the same for every counter; only the cost differs. An additive counter
    (the built-ins) counts each message once: linear. A monotonic one is bisected over the
    cut points. Any other callable gets the plain scan, one count per candidate tail."""
    job = _LANDING.get()
    if job is not None and job.heads(window):
        return job.plan
    if self.counts_tokens and self.additive:
        return _plan_additive(self, window, counted)
    reason = self.trigger_reason([*counted, *window])
    if not reason:
        return FoldPlan(0, "")
    cuts = [i for i in range(1, _newest_turn_start(window) + 1) if self.is_cut_point(window, i)]
    if not cuts:
        return FoldPlan(0, "")
    if is_monotonic(self._counter):
        return FoldPlan(_first_fit(cuts, lambda i: self.fits_keep(window[i:])), reason)
    best = next((i for i in cuts if self.fits_keep(window[i:])), cuts[-1])
    return FoldPlan(best, reason)

def _plan_additive(self: Any, window: Sequence[BaseMessage],
                   counted: Sequence[BaseMessage] = ()) -> FoldPlan:
    """:meth:`plan_fold` from per-message counts: ``tail[i]`` is ``count(window[i:])``
    (``counted``: messages ahead of the window that count toward the trigger only)."""
    counter = self._counter
    base = counter([])
    tail = [base] * (len(window) + 1)
    for index in range(len(window) - 1, -1, -1):
        tail[index] = tail[index + 1] + counter([window[index]]) - base
    extra = sum(counter([m]) - base for m in counted)
    reason = self._reason(tail[0] + extra, len(window) + len(counted))
    if not reason:
        return FoldPlan(0, "")
    keep_messages, keep_tokens = self.keep_messages, self.keep_tokens
    best = 0
    for index in range(1, _newest_turn_start(window) + 1):
        if not self.is_cut_point(window, index):
            continue
        best = index
        if (keep_messages is None or len(window) - index <= keep_messages) \
                and (keep_tokens is None or tail[index] <= keep_tokens):
            break
    return FoldPlan(best, reason if best else "")


def _first_fit(cuts: list[int], fits: Callable[[int], bool]) -> int:
    """The first cut that fits, by bisection (``fits`` is False then True along ``cuts``),
    else the last cut, as the plain scan would give."""
    low, high = 0, len(cuts)
    while low < high:
        middle = (low + high) // 2
        if fits(cuts[middle]):
            high = middle
        else:
            low = middle + 1
    return cuts[low] if low < len(cuts) else cuts[-1]


def _newest_turn_start(window: Sequence[BaseMessage]) -> int:
    for index in range(len(window) - 1, -1, -1):
        if isinstance(window[index], HumanMessage):
            return index
    return max(len(window) - 1, 0)
