"""In-process store: InMemoryChatMessageHistory windows and an InMemorySaver."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from adapters.stores.base import ClassicRecord, Store

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """Everything in this process; gone when it exits."""

    url = "memory"

    def __init__(self, *, keep_checkpoints: int = 4) -> None:
        super().__init__()
        self.keep_checkpoints = keep_checkpoints
        self._guard = threading.RLock()
        self._transcripts: dict[str, list[BaseMessage]] = {}
        self._transcript_ids: dict[str, set[str]] = {}
        self._histories: dict[str, InMemoryChatMessageHistory] = {}
        self._records: dict[str, ClassicRecord] = {}
        self._saver = InMemorySaver()
        self._folds: dict[str, list[dict[str, Any]]] = {}

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        with self._guard:
            return [m.model_copy(deep=True) for m in self._transcripts.get(thread_id, [])]

    def append_transcript(self, thread_id: str, messages: Sequence[BaseMessage]) -> int:
        with self._guard:
            log = self._transcripts.setdefault(thread_id, [])
            ids = self._transcript_ids.setdefault(thread_id, set())
            added = 0
            for message in messages:
                if message.id is not None and message.id in ids:
                    continue
                log.append(message.model_copy(deep=True))
                if message.id is not None:
                    ids.add(message.id)
                added += 1
            return added

    def known_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        with self._guard:
            return set(ids) & self._transcript_ids.get(thread_id, set())

    def thread_ids(self) -> list[str]:
        with self._guard:
            return list(self._transcripts)

    def append_fold(self, record: dict[str, Any]) -> None:
        with self._guard:
            self._folds.setdefault(record["thread_id"], []).append(dict(record))

    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        with self._guard:
            return [dict(r) for r in self._folds.get(thread_id, [])]

    def classic_history(self, thread_id: str) -> BaseChatMessageHistory:
        with self._guard:
            return self._histories.setdefault(thread_id, InMemoryChatMessageHistory())

    def classic_record(self, thread_id: str) -> ClassicRecord:
        with self._guard:
            return self._records.get(thread_id, ClassicRecord())

    def classic_fold(
        self, thread_id: str, summary: str, folds: int, window: Sequence[BaseMessage]
    ) -> None:
        with self._guard:
            history = self._histories.setdefault(thread_id, InMemoryChatMessageHistory())
            history.messages = list(window)
            self._records[thread_id] = ClassicRecord(summary=summary, folds=folds)

    def classic_clear(self, thread_id: str) -> None:
        with self._guard:
            self._histories.pop(thread_id, None)
            self._records.pop(thread_id, None)

    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        return self._saver

    def retain(self, thread_id: str) -> None:
        """Keep the newest checkpoints of the root namespace, their writes and their blobs."""
        saver = self._saver
        checkpoints = saver.storage.get(thread_id, {}).get("")
        if not checkpoints or len(checkpoints) <= self.keep_checkpoints:
            return
        doomed = sorted(checkpoints)[: -self.keep_checkpoints]
        for checkpoint_id in doomed:
            checkpoints.pop(checkpoint_id, None)
            saver.writes.pop((thread_id, "", checkpoint_id), None)
        live: set[tuple] = set()
        for serialized, _meta, _parent in checkpoints.values():
            versions = saver.serde.loads_typed(serialized).get("channel_versions", {})
            live.update((thread_id, "", ch, v) for ch, v in versions.items())
        for key in [k for k in list(saver.blobs)  # a snapshot: other threads write meanwhile
                    if k[0] == thread_id and k[1] == "" and k not in live]:
            saver.blobs.pop(key, None)
