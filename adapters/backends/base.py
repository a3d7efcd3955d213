"""The backend contract: small on purpose. A missing method fails at construction.

A backend turns a store transaction into memory behaviour with a real LangChain class, in
three parts: ``read`` the thread's state (I/O, with an async twin), ``step`` (no I/O: the
real class appends the turn and decides about a fold), ``write`` what the step produced
(I/O, with an async twin). It never calls the summarizer: ``step`` receives a ``fold``
function from the engine and the real class calls it when it decides a fold is due;
``fold`` answers with the new summary text, or ``None`` for "not now".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

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

    # -- I/O (sync and async twins, nothing else in them) ------------------------------
    @abstractmethod
    def read(self, tx: Tx) -> Any:
        """The thread's state inside ``tx``."""

    @abstractmethod
    async def aread(self, tx: Tx) -> Any:
        """``read`` on the async driver."""

    @abstractmethod
    def write(self, tx: Tx, writes: Any) -> None:
        """Persist what a step produced."""

    @abstractmethod
    async def awrite(self, tx: Tx, writes: Any) -> None:
        """``write`` on the async driver."""

    # -- behaviour (no I/O) -------------------------------------------------------------
    @abstractmethod
    def step(self, state: Any, turn: Sequence[BaseMessage], fold: FoldFn) -> tuple[Any, bool]:
        """Append ``turn`` (may be empty) and let the real class fold through ``fold``.
        Returns (writes or ``None``, whether a fold happened)."""

    @abstractmethod
    def view(self, thread_id: str, state: Any) -> MemoryView:
        """What ``load`` returns for a state."""

    @abstractmethod
    def holds(self, state: Any) -> bool:
        """Whether the state holds anything of the thread (a summary or a message): asked
        of the other side before a placement is first written, without building a view."""

    def holds_in(self, tx: Tx) -> bool:
        """``holds`` of the thread's state inside ``tx``: what the placement guard asks of
        the other side. A backend may answer from a cheaper lookup (the middleware asks the
        saver for a checkpoint before building its graph); by default it reads the state."""
        return self.holds(self.read(tx))

    async def aholds_in(self, tx: Tx) -> bool:
        """``holds_in`` on the async driver."""
        return self.holds(await self.aread(tx))

    def shared_view(self, thread_id: str, state: Any) -> MemoryView:
        """``view`` for a caller that only reads it and lets nothing escape (a string
        rendering): it may share the store's messages. By default the detached ``view``."""
        return self.view(thread_id, state)

    @abstractmethod
    def clear_writes(self) -> Any:
        """Writes that forget the thread's summary and window."""

    @abstractmethod
    def restore_writes(self, record: ThreadRecord) -> Any:
        """Writes that overwrite the thread's state (migration, rollback, resummarize)."""

    def close(self) -> None:
        """Release what the backend holds (the store is closed by its owner)."""
