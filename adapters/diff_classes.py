"""Classes of difference between two views of one thread: the shadow's ``compare=`` and
``ignore=`` rules, after GitHub Scientist's ``compare`` and ``ignore`` blocks.

Every view mismatch is named by the first class that explains it: the caller's own rules
first (in the order given), then the built-in ones below, else ``"window"`` (the verbatim
messages differ: the one difference no rule should explain away by default). A mismatch whose
class is ignored is still recorded and counted by class, but never counts against a rollout
guard. Candidate failures (errors, timeouts, drops, the breaker) are not view classes and
cannot be ignored: a candidate that fails says nothing about equivalence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from adapters.errors import ConfigError
from adapters.view import MemoryView, compare_views, message_signature

__all__ = ["BUILTIN", "DiffClass", "Verdict", "Rules"]

Test = Callable[[MemoryView, MemoryView], bool]
_SPACE = re.compile(r"\s+")


def _squash(text: object) -> str:
    return _SPACE.sub(" ", str(text)).strip()


def _squashed(view: MemoryView) -> list[tuple]:
    """Each message's signature (type, tool calls, call id) with its text squashed."""
    return [(sig[0], _squash(m.content), *sig[2:])
            for m, sig in ((m, message_signature(m)) for m in view.messages)]


def _same_window(a: MemoryView, b: MemoryView) -> bool:
    return [message_signature(m) for m in a.messages] == [message_signature(m) for m in b.messages]


def _whitespace(a: MemoryView, b: MemoryView) -> bool:
    """Equal once runs of whitespace are one space (summary and every message's text; roles,
    tool calls and their ids exactly)."""
    return (a.folds == b.folds and _squash(a.summary) == _squash(b.summary)
            and _squashed(a) == _squashed(b))


def _summary_text(a: MemoryView, b: MemoryView) -> bool:
    """Only the summary's wording differs (a known prompt or model difference): same number
    of folds, same verbatim window."""
    return a.folds == b.folds and a.summary != b.summary and _same_window(a, b)


def _fold_count(a: MemoryView, b: MemoryView) -> bool:
    """Only the number of summarizer calls differs (same summary and window)."""
    return a.folds != b.folds and a.summary == b.summary and _same_window(a, b)


def _message_roles(a: MemoryView, b: MemoryView) -> bool:
    """The same messages where only system and human roles trade places (a summary carried
    as a human message on one side and a system message on the other); tool calls, ids and
    every other role exactly equal."""
    if a.summary != b.summary or a.folds != b.folds or len(a.messages) != len(b.messages):
        return False
    swapped = False
    for x, y in zip(a.messages, b.messages):
        sx, sy = message_signature(x), message_signature(y)
        if sx[1:] != sy[1:]:
            return False
        if sx[0] != sy[0]:
            if {sx[0], sy[0]} != {"system", "human"}:
                return False
            swapped = True
    return swapped


@dataclass(frozen=True)
class DiffClass:
    """A named class of difference: ``test(primary, candidate)`` says whether it explains a
    mismatch."""

    name: str
    test: Test


BUILTIN: dict[str, DiffClass] = {c.name: c for c in (
    DiffClass("whitespace", _whitespace), DiffClass("summary_text", _summary_text),
    DiffClass("fold_count", _fold_count), DiffClass("message_roles", _message_roles))}
FALLBACK = "window"
NOT_VIEWS = ("candidate_error", "candidate_timeout", "candidate_dropped", "candidate_disabled")


@dataclass(frozen=True)
class Verdict:
    """The comparison of one load: ``diffs`` empty when equal; else the class and whether it
    is ignored."""

    diffs: list[str]
    cls: str = ""
    ignored: bool = False


class Rules:
    """``compare``: ``(primary, candidate) -> bool`` (True: equal), instead of memshift's
    equivalence; ``ignore``: class names (built-in ones, or ``"window"``), ``DiffClass``
    objects, or plain functions (named by ``__name__``) whose mismatches are expected."""

    def __init__(self, compare: Test | None = None,
                 ignore: Iterable[str | DiffClass | Test] | None = None) -> None:
        if compare is not None and not callable(compare):
            raise ConfigError(f"compare= takes a function (primary, candidate) -> bool, got "
                              f"{type(compare).__name__}")
        self.compare = compare
        self.custom: list[DiffClass] = []
        self.ignored: set[str] = set()
        for rule in ignore or ():
            if isinstance(rule, str):
                if rule in NOT_VIEWS:
                    raise ConfigError(f"ignore={rule!r}: candidate failures always count")
                if rule not in BUILTIN and rule not in (FALLBACK, "compare"):
                    raise ConfigError(f"ignore={rule!r} is not a class of difference; use one "
                                      f"of {sorted([*BUILTIN, FALLBACK])}, a DiffClass or a "
                                      "function (primary, candidate) -> bool")
                self.ignored.add(rule)
            elif isinstance(rule, DiffClass) or callable(rule):
                named = rule if isinstance(rule, DiffClass) else \
                    DiffClass(getattr(rule, "__name__", "custom"), rule)
                self.custom.append(named)
                self.ignored.add(named.name)
            else:
                raise ConfigError(f"ignore= takes class names, DiffClass objects or "
                                  f"functions, got {type(rule).__name__}")

    def names(self) -> Sequence[str]:
        return sorted(self.ignored)

    def judge(self, primary: MemoryView, candidate: MemoryView) -> Verdict:
        diffs = compare_views(primary, candidate)
        if self.compare is not None:
            try:
                equal = self.compare(primary, candidate)
            except Exception as exc:  # noqa: BLE001 - a broken rule never hides a mismatch
                return Verdict([f"compare= raised {type(exc).__name__}: {exc}"[:200]],
                               "compare_error")
            if equal:
                return Verdict([])
            if not diffs:  # memshift's own comparison finds nothing: the rule's class
                return Verdict(["compare= found the views different"], "compare",
                               "compare" in self.ignored)
        elif not diffs:
            return Verdict([])
        name = self.classify(primary, candidate)
        return Verdict(diffs, name, name in self.ignored)

    def classify(self, primary: MemoryView, candidate: MemoryView) -> str:
        """The first class that explains the difference (the caller's rules first). A rule
        that raises explains nothing: the mismatch counts."""
        for rule in (*self.custom, *BUILTIN.values()):
            try:
                if rule.test(primary, candidate):
                    return rule.name
            except Exception:  # noqa: BLE001 - a broken rule never hides a mismatch
                continue
        return FALLBACK
