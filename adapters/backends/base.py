"""The backend contract: small on purpose. A missing method fails at construction.

A backend turns a store transaction into memory behaviour with a real LangChain class.
It never calls the summarizer itself: ``save`` receives a ``fold`` function from the
engine and the real class calls it when it decides a fold is due. ``fold`` answers with
the new summary text, or ``None`` for "not now" (the engine plans folds inside the
turn's transaction and writes them in a later one, with no summarizer call in between).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

from langchain_core.messages import BaseMessage

from adapters.policy import FoldPlan, MemoryPolicy
from adapters.stores.base import Store, Tx
from adapters.view import MemoryView, ThreadRecord

__all__ = ["FoldFn", "MemoryBackend"]

# (previous summary, folds so far, whole window, plan) -> new summary, or None: not now
FoldFn = Callable[[str, int, Sequence[BaseMessage], FoldPlan], "str | None"]


class MemoryBackend(ABC):
    """One summary-memory implementation over one store."""

    name: ClassVar[str]

    def __init__(self, *, policy: MemoryPolicy, store: Store, human_prefix: str = "Human",
                 ai_prefix: str = "AI") -> None:
        self.policy = policy
        self.store = store
        self.human_prefix = human_prefix
        self.ai_prefix = ai_prefix

    @abstractmethod
    def load(self, tx: Tx) -> MemoryView:
        """The thread's summary and verbatim window (copies)."""

    @abstractmethod
    def save(self, tx: Tx, turn: Sequence[BaseMessage], fold: FoldFn) -> bool:
        """Append ``turn`` (may be empty) and let the real class fold through ``fold``.
        Returns whether a fold was written."""

    @abstractmethod
    def clear(self, tx: Tx) -> None:
        """Forget the thread's summary and window."""

    @abstractmethod
    def restore(self, tx: Tx, record: ThreadRecord) -> None:
        """Overwrite the thread's memory state (migration, rollback, resummarize)."""

    def close(self) -> None:
        """Release what the backend holds (the store is closed by its owner)."""
