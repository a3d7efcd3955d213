"""The classic backend's state in SQL: the summary row (``memshift_classic``) and the
verbatim window (``memshift_window``).

Why a module of its own: ``adapters.stores.sql`` is the store (connections, transactions,
batching, errors, schema); this is one concern it hosts, read in one statement and written
through the store's ``send`` (queued when the store batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from adapters.stores.base import ClassicSnapshot, ClassicState, Tx
from adapters.stores.schema import (
    DELETE_CLASSIC, DELETE_FOLDED, DELETE_WINDOW, INSERT_WINDOW, READ_CLASSIC, dump_message,
    forget_decoded, load_message,
)

if TYPE_CHECKING:
    from adapters.stores.sql import SqlStore

__all__ = ["SqlClassic", "classic_snapshot"]


def classic_snapshot(rows: Sequence[Any], thread_id: str) -> ClassicSnapshot:
    """The state from ``READ_CLASSIC``'s rows, ``(kind, text, n, ...)`` ordered by kind then
    ``n``: the summary row (kind 0: summary, folds), then the window rows (kind 1: message,
    id); rows of any other kind are not the state's."""
    summary, folds = (rows[0][1], rows[0][2]) if rows and rows[0][0] == 0 else ("", 0)
    window = [r for r in rows if r[0] == 1]
    return ClassicSnapshot(summary, folds,
                           [load_message(r[1], thread_id, "memshift_window", r[2], keep=True)
                            for r in window],
                           [r[2] for r in window])


class SqlClassic(ClassicState):
    """Classic summary + window in ``memshift_classic`` / ``memshift_window``."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def read(self, tx: Tx) -> ClassicSnapshot:
        """Summary and window in one statement (one round trip): the summary row first
        (kind 0), then the window rows (kind 1) by id."""
        return classic_snapshot(self.store.fetch(tx, READ_CLASSIC, {"tid": tx.thread_id}),
                                tx.thread_id)

    def append(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        if messages:
            self.store.send(tx, INSERT_WINDOW, [
                {"tid": tx.thread_id, "message": dump_message(m)} for m in messages])

    def fold(self, tx: Tx, summary: str, folds: int, drop: Sequence[Any]) -> None:
        if drop:
            self.store.send(tx, DELETE_FOLDED, {"tid": tx.thread_id, "upto": max(drop)})
        self.store.upsert_classic(tx, summary, folds)

    def replace(self, tx: Tx, summary: str, folds: int, window: Sequence[BaseMessage]) -> None:
        self.store.send(tx, DELETE_WINDOW, {"tid": tx.thread_id})
        self.append(tx, window)
        self.store.upsert_classic(tx, summary, folds)

    def clear(self, tx: Tx) -> None:
        forget_decoded()
        self.store.send(tx, DELETE_WINDOW, {"tid": tx.thread_id})
        self.store.send(tx, DELETE_CLASSIC, {"tid": tx.thread_id})
