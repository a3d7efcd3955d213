"""An optional concern of a store's classic state: the steady-state save and load in one
statement each (issue 38: 1 + 1 round trips on PostgreSQL).

Why it exists: a classic loop loads a thread, then saves a turn on it. The load's statement
reads the placement record, a version of the thread's classic state and the state itself;
the save's statement writes the turn (transcript and window) only if the placement and the
version are still the ones that load saw — a compare-and-set, checked and written by the
same statement, under the thread's lock. What it saw is what the real class steps on to
decide the fold, so nothing is read back. A miss (another writer, a moved placement, a cold
cache) writes nothing, and the caller takes the usual path: the transaction with its lock,
its placement guard and its read.

Every other write of the classic state must change the version (the compare-and-set would
otherwise pass on a state this process never saw).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.stores.base import ClassicSnapshot, Placement

__all__ = ["ClassicSeen", "QuickClassic", "keeps_messages"]


@dataclass(frozen=True)
class ClassicSeen:
    """A classic thread as one statement saw it. ``version``: ``None`` when its state has
    none yet (the next save takes the usual path, which gives it one). ``snapshot``: the
    caller's own (its lists may be edited; its messages are shared unless asked detached)."""

    placement: Placement
    version: Any
    snapshot: ClassicSnapshot


class QuickClassic(ABC):
    """``store.classic`` of a store that offers the one-statement save and load."""

    keeps_messages = False  # a quick read hands out the same window objects while unchanged

    @abstractmethod
    def quick_read(self, thread_id: str, detached: bool) -> ClassicSeen | None:
        """Placement, version and state in one statement; ``None``: no placement record.
        ``detached``: messages the caller may give away (copies)."""

    async def aquick_read(self, thread_id: str, detached: bool) -> ClassicSeen | None:
        return self.quick_read(thread_id, detached)

    @abstractmethod
    def seen(self, thread_id: str) -> ClassicSeen | None:
        """What the last quick read or write of the thread in this process saw (no I/O)."""

    @abstractmethod
    def quick_append(self, thread_id: str, seen: ClassicSeen,
                     transcript: Sequence[BaseMessage], window: Sequence[BaseMessage]) -> bool:
        """Append to the transcript and the window if the thread is still as ``seen`` (its
        placement and its version), in one statement; ``False``: nothing was written."""

    async def aquick_append(self, thread_id: str, seen: ClassicSeen,
                            transcript: Sequence[BaseMessage],
                            window: Sequence[BaseMessage]) -> bool:
        return self.quick_append(thread_id, seen, transcript, window)


def keeps_messages(store: Any) -> bool:
    """Whether ``store``'s quick classic load hands out the same window objects while a
    thread's window is unchanged (what is computed from them may be kept by identity)."""
    quick = getattr(store, "classic", None)
    return isinstance(quick, QuickClassic) and quick.keeps_messages
