"""What one classic step writes, and the window counts the classic side keeps between steps
(shared by the backend and the real class it drives)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.view import kept_run

__all__ = ["ClassicWrites", "WindowCounts"]


@dataclass
class ClassicWrites:
    """What one step changes: messages to append, then a fold, a replacement or a clear."""

    append: list[BaseMessage] = field(default_factory=list)
    fold: tuple[str, int, list[Any]] | None = None  # summary, folds, rows to drop
    replace: tuple[str, int, list[BaseMessage]] | None = None
    clear: bool = False
    folded: bool = False  # the real class folded in this step


class WindowCounts:
    """``counter(window)`` for an additive counter, counting only what is new. On a store
    whose reads hand out its own, never-edited message objects (every read of a store that
    ``shares_messages``; a ``ClassicSnapshot.kept`` of PostgreSQL's quick path), a thread's
    window is the previous one plus a turn, or minus a folded head: the count of the common
    head is kept (prefix sums, keyed by the identity of the window's first message, which the
    entry holds so the identity is not reused) and only the rest is counted. A window that starts
    elsewhere is counted whole. Only the first ``stored`` messages (those read from the store;
    the rest are this step's, which the store keeps as its own copies) are kept."""

    def __init__(self, counter: Any, windows: int = 4096) -> None:
        self.counter, self.windows = counter, windows
        self.base: int = counter([])
        self._sums: dict[int, tuple[tuple[BaseMessage, ...], list[int]]] = {}

    def __call__(self, window: Sequence[BaseMessage], stored: int | None = None) -> int:
        if not window:
            return self.base
        entry = self._sums.get(id(window[0]))
        same = 0 if entry is None else kept_run(entry[0], window)[1]  # starts at 0: same key
        sums = entry[1][: same + 1] if entry is not None else [0]
        total = sums[-1]
        counter, base = self.counter, self.base
        for message in window[same:]:
            total += counter([message]) - base
            sums.append(total)
        stored = len(window) if stored is None else stored
        if stored:
            if len(self._sums) >= self.windows:
                self._sums.clear()  # a bound, not an LRU
            self._sums[id(window[0])] = (tuple(window[:stored]), sums[: stored + 1])
        return base + total
