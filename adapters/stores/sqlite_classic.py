"""Classic state on SQLite, with the load in one statement (``adapters.stores.quick``).

Why a module of its own: ``adapters.stores.sqlite`` is the store (the file, its locks, the
checkpointer); this is the classic concern's one-statement load. The placement record, the
summary row and the window rows come from one ``SELECT`` — its own snapshot, so no
``BEGIN``/``COMMIT`` — where a steady-state load was four statements (``BEGIN``, the
placement, the state, ``COMMIT``). Saves take the usual path: ``seen`` keeps nothing, since
on SQLite a save is one transaction under ``BEGIN IMMEDIATE`` with no round trip to spare.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from adapters.io import Steps, run_async, run_sync
from adapters.stores.base import Tx, in_transaction, store_io
from adapters.stores.quick import ClassicSeen, QuickClassic
from adapters.stores.schema import load_placement
from adapters.stores.sql import _conn
from adapters.stores.sql_classic import SqlClassic, classic_snapshot

__all__ = ["SqliteClassic"]

# kind 0: the summary row, 1: the window rows by id, 2: the placement record
_QUICK_READ = (
    "SELECT 0, summary, folds, NULL, NULL FROM memshift_classic WHERE thread_id = ?1 "
    "UNION ALL SELECT 1, message, id, NULL, NULL FROM memshift_window WHERE session_id = ?1 "
    "UNION ALL SELECT 2, backend, version, since, pinned FROM memshift_placement "
    "WHERE thread_id = ?1 ORDER BY 1, 3")


class SqliteClassic(SqlClassic, QuickClassic):
    """Classic summary + window on SQLite; the placement, the summary and the window in one
    read (the engine serves the view when the placement says this side does)."""

    def quick_read(self, thread_id: str, detached: bool) -> ClassicSeen | None:
        return run_sync(self._read_steps(thread_id))

    async def aquick_read(self, thread_id: str, detached: bool) -> ClassicSeen | None:
        return await run_async(self._read_steps(thread_id))

    def _read_steps(self, thread_id: str) -> Steps[ClassicSeen | None]:
        store = self.store

        def body(tx: Tx) -> Steps[ClassicSeen | None]:
            return (yield store_io(store, tx, self._read_all))
        return (yield from in_transaction(store, thread_id, body, write=False, single=True))

    def _read_all(self, tx: Tx) -> ClassicSeen | None:
        """On the driver's own connection, as ``SqliteStore.placement`` (sqlite3's, or
        aiosqlite's adapted one in SQLAlchemy's greenlet)."""
        cursor = _conn(tx).connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(_QUICK_READ, (tx.thread_id,))
            rows = cursor.fetchall()
        finally:
            cursor.close()
        tid = tx.thread_id
        if not rows or rows[-1][0] != 2:
            return None  # no placement record: the usual path decides (a legacy thread, ...)
        placement = load_placement(rows[-1][1:5], tid)
        assert placement is not None  # (a row was read)
        return ClassicSeen(placement, None, classic_snapshot(rows, tid))

    def seen(self, thread_id: str) -> ClassicSeen | None:
        return None  # saves take the usual path

    def quick_append(self, thread_id: str, seen: ClassicSeen,
                     transcript: Sequence[BaseMessage], window: Sequence[BaseMessage]) -> bool:
        return False
