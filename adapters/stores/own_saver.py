"""The application's own LangGraph saver for middleware checkpoints.

``SummaryMemory(backend="middleware", checkpointer=saver)`` keeps memshift's transcript,
fold records and locks in its store and the thread's checkpoints in ``saver`` (any
``BaseCheckpointSaver``: Postgres, Redis, MongoDB, async or sync). The checkpoint write is
then not part of memshift's transaction: it is the last write of the turn, made while the
thread's lock is held. Retention uses the saver's ``prune`` when it implements one.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from adapters.errors import ConfigError
from adapters.stores.base import Checkpoints, Tx

__all__ = ["OwnSaver"]


class OwnSaver(Checkpoints):
    def __init__(self, saver: Any, keep: int) -> None:
        if not isinstance(saver, BaseCheckpointSaver):
            raise ConfigError(f"checkpointer must be a LangGraph BaseCheckpointSaver, "
                              f"got {type(saver).__name__}")
        self._saver, self.keep = saver, keep
        self.prunes = type(saver).prune is not BaseCheckpointSaver.prune
        self.aprunes = type(saver).aprune is not BaseCheckpointSaver.aprune

    def saver(self, tx: Tx) -> BaseCheckpointSaver:
        return self._saver

    async def asaver(self, tx: Tx) -> BaseCheckpointSaver:
        return self._saver

    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        return self._saver

    def retain(self, tx: Tx) -> None:
        """``prune(keep_latest)`` where the saver has one (its own connection, not ``tx``)."""
        if self.prunes:
            self._saver.prune([tx.thread_id], strategy="keep_latest")

    async def aretain(self, tx: Tx) -> None:
        if self.aprunes:
            await self._saver.aprune([tx.thread_id], strategy="keep_latest")
