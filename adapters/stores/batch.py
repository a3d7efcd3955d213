"""PostgreSQL transactions in as few round trips as their reads allow.

A write transaction used to cost one round trip per statement: ``BEGIN``, the lock, each
write, ``COMMIT`` (8 for a classic save + load). Here the writes of a transaction wait in a
queue and travel with the next statement whose result is needed, or with ``COMMIT``, as one
simple-protocol message: ``BEGIN; SELECT pg_advisory_xact_lock(…); INSERT …; SELECT …``.
PostgreSQL runs them in order, each statement with its own snapshot, so a read still sees
everything committed before the lock was granted, and the lock is still taken before
anything is read or written. A failing statement aborts the rest and the transaction.

Parameters are adapted by psycopg itself (``ClientCursor.mogrify``, psycopg's quoting for
the connection's encoding and settings), never formatted by memshift. Measured on loopback
(lock, insert, select, insert, commit): 991 µs one statement at a time, 533 µs in psycopg's
pipeline mode, 281 µs as two batched messages.

The queue is a property of one sync connection checkout; anything that needs the
connection directly (``PostgresSaver``, SQLAlchemy statements) flushes it first
(``SqlStore`` does, in ``_conn``), so statements always run in the order they were issued.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Batch"]

Params = Mapping[str, Any] | Sequence[Any] | None
# one row of placeholders, as SQLAlchemy writes it: VALUES (%(a)s::VARCHAR, %(b)s)
_VALUES = re.compile(r"\bVALUES (\((?:%\(\w+\)s|[^()%])*\))")


class Batch:
    """The queued statements of one transaction on one psycopg connection (autocommit
    mode: ``BEGIN`` and ``COMMIT`` are sent by the batch, in the same messages)."""

    def __init__(self, raw: Any, *, begin: Sequence[tuple[str, Params]] = ()) -> None:
        import psycopg

        self._cursor = psycopg.ClientCursor(raw)
        self._pending: list[str] = []
        self._opened = False  # a BEGIN has reached the server
        if begin:
            self._pending.append("BEGIN")
            for sql, params in begin:
                self.add(sql, params)
        self._opening = len(self._pending)  # BEGIN and the lock: 0 for a read-only batch

    def add(self, sql: str, params: Params = None) -> None:
        """Queue a statement whose result nobody reads."""
        self._pending.append(sql if params is None else self._cursor.mogrify(sql, params))

    def add_many(self, sql: str, rows: Sequence[Params]) -> None:
        """Queue one statement per row, or one multi-row ``INSERT … VALUES (…), (…)``
        (rows keep their order, and so their ids)."""
        match = _VALUES.search(sql) if len(rows) > 1 else None
        if match is None or "%" in sql[:match.start(1)] + sql[match.end(1):]:
            for params in rows:
                self.add(sql, params)
            return
        values = ", ".join(self._cursor.mogrify(match.group(1), params) for params in rows)
        self._pending.append(sql[:match.start(1)] + values + sql[match.end(1):])

    def flush(self, sql: str | None = None, params: Params = None) -> list[tuple] | None:
        """Send what is queued (and ``sql``, whose rows are returned) in one round trip."""
        if sql is not None:
            self.add(sql, params)
        if not self._pending:
            return None
        statements, self._pending = self._pending, []
        self._opened = self._opened or bool(self._opening)
        self._cursor.execute("; ".join(statements))
        if sql is None:
            return None
        while self._cursor.nextset():
            pass
        return self._cursor.fetchall()

    def commit(self) -> None:
        """``COMMIT`` with the last writes; nothing at all when nothing was read or written
        (the queue still holds only ``BEGIN`` and the lock)."""
        if not self._opening or (not self._opened and len(self._pending) == self._opening):
            self._pending.clear()
            return
        self.add("COMMIT")
        self.flush()

    def close(self) -> None:
        self._pending.clear()
        self._cursor.close()
