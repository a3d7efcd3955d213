"""The store seam: where a thread's transcript, classic window/summary and checkpoints live.

One ``Store`` per URL serves both backends, so the raw transcript sits beside the
memory it explains and a fold can be one transaction.
"""

from __future__ import annotations

import hashlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["ClassicRecord", "Store"]


@dataclass(frozen=True)
class ClassicRecord:
    """The part of a classic thread that stock ``ConversationSummaryBufferMemory`` never persists."""

    summary: str = ""
    folds: int = 0


class Store(ABC):
    """Persistence for one store URL. Thread ids are data: never paths, never SQL."""

    url: str  # redacted: never carries a password

    lock_stripes = 256  # bounded memory for any number of threads; re-entrant per stripe

    def __init__(self) -> None:
        self._locks = [threading.RLock() for _ in range(self.lock_stripes)]

    # -- raw transcript (append-only) --------------------------------------------------
    @abstractmethod
    def transcript(self, thread_id: str) -> list[BaseMessage]:
        """Every message ever saved on the thread, in order; ``[]`` for an unknown thread."""

    @abstractmethod
    def append_transcript(self, thread_id: str, messages: Sequence[BaseMessage]) -> int:
        """Append messages whose ids the thread does not hold yet; return how many were new."""

    def known_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that the thread's transcript holds."""
        wanted = set(ids)
        return {m.id for m in self.transcript(thread_id) if m.id in wanted} if wanted else set()

    @abstractmethod
    def thread_ids(self) -> list[str]:
        """Threads with a transcript, in first-seen order."""

    def iter_thread_ids(self) -> Iterator[str]:
        """Threads with a transcript, streamed (SQL stores page through them)."""
        return iter(self.thread_ids())

    # -- fold records ------------------------------------------------------------------
    @abstractmethod
    def append_fold(self, record: dict[str, Any]) -> None:
        """Persist one fold record (see ``adapters.folds.FoldRecord``)."""

    @abstractmethod
    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's fold records, oldest first."""

    # -- classic backend -------------------------------------------------------------
    @abstractmethod
    def classic_history(self, thread_id: str) -> BaseChatMessageHistory:
        """The verbatim window of a classic thread, as a real LangChain chat history."""

    @abstractmethod
    def classic_record(self, thread_id: str) -> ClassicRecord:
        """The persisted running summary and fold count."""

    @abstractmethod
    def classic_fold(
        self, thread_id: str, summary: str, folds: int, window: Sequence[BaseMessage]
    ) -> None:
        """Write the new summary and replace the window in one step (both or neither)."""

    @abstractmethod
    def classic_clear(self, thread_id: str) -> None:
        """Forget the window and summary (the transcript stays)."""

    # -- middleware backend ------------------------------------------------------------
    @property
    @abstractmethod
    def checkpointer(self) -> BaseCheckpointSaver:
        """The LangGraph checkpointer that ``create_agent`` continues threads on."""

    def retain(self, thread_id: str) -> None:
        """Drop old checkpoints of a thread (retention). Default: keep everything."""

    # -- coordination ------------------------------------------------------------------
    @contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        """Serialise writers of one thread (in-process; SQL stores add cross-process locks)."""
        digest = hashlib.blake2b(thread_id.encode(), digest_size=4).digest()
        with self._locks[int.from_bytes(digest, "big") % self.lock_stripes]:
            yield

    @contextmanager
    def guard(self, what: str = "store operation") -> Iterator[None]:
        """Translate driver errors into ``StoreError`` (SQL stores); no-op in memory."""
        yield

    def close(self) -> None:
        """Release connections."""
