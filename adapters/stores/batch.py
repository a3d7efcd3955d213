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

The queue is a property of one connection checkout; anything that needs the connection
directly (``PostgresSaver``, ``AsyncPostgresSaver``, SQLAlchemy statements) flushes it first
(``_conn`` and ``AsyncDriver.aflush`` in ``adapters.stores.sql_tx``), so statements always
run in the order they were issued.

One implementation for both drivers: on an async psycopg connection the batch runs inside
SQLAlchemy's greenlet (``AsyncConnection.run_sync``) and waits for the async cursor with
``await_only``; adaptation (``mogrify``) is the same sync code on either cursor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["Batch"]

Params = Mapping[str, Any] | Sequence[Any] | None
# one row of placeholders, as SQLAlchemy writes it: VALUES (%(a)s::VARCHAR, %(b)s)
_VALUES = re.compile(r"\bVALUES (\((?:%\(\w+\)s|[^()%])*\))")


def _ready(result: Any) -> Any:
    """A sync cursor's result needs no waiting."""
    return result


class Batch:
    """The queued statements of one transaction on one psycopg connection, sync or async
    (autocommit mode: ``BEGIN`` and ``COMMIT`` are sent by the batch, in the same messages).
    On an ``AsyncConnection`` every method that sends must run in SQLAlchemy's greenlet."""

    def __init__(self, raw: Any, *, begin: Sequence[tuple[str, Params]] = ()) -> None:
        import psycopg

        self._cursor: Any
        self._wait: Callable[[Any], Any]
        if isinstance(raw, psycopg.AsyncConnection):
            from sqlalchemy.util import await_only  # (``await_`` from SQLAlchemy 2.1 on)

            self._cursor, self._wait = psycopg.AsyncClientCursor(raw), await_only
        else:
            self._cursor, self._wait = psycopg.ClientCursor(raw), _ready
        self._pending: list[str] = []
        self._reads: dict[int, int] = {}  # index in _pending -> slot of a deferred read
        self._results: dict[int, list[tuple]] = {}  # slot -> rows, once sent
        self._slots = 0
        self._opened = False  # a BEGIN has reached the server
        self._whole = False  # sent whole with the commit, as one implicit transaction
        if begin:
            self._pending.append("BEGIN")
            for sql, params in begin:
                self.add(sql, params)
        self._opening = len(self._pending)  # BEGIN and the lock: 0 for a read-only batch

    @property
    def queued(self) -> bool:
        """Something waits to be sent (the async driver spares a greenlet otherwise)."""
        return bool(self._pending)

    def add(self, sql: str, params: Params = None) -> None:
        """Queue a statement whose result nobody reads."""
        self._pending.append(sql if params is None else self._cursor.mogrify(sql, params))

    def add_read(self, sql: str, params: Params = None) -> int:
        """Queue a statement whose rows are wanted, but not now: they travel with the next
        flush (a read of the transaction's own, or its ``COMMIT``). Gives a slot for
        :meth:`result`."""
        slot, self._slots = self._slots, self._slots + 1
        self._reads[len(self._pending)] = slot
        self.add(sql, params)
        return slot

    def result(self, slot: int) -> list[tuple]:
        """The rows of a deferred read (sending the queue first if it has not gone yet)."""
        if slot not in self._results:
            self.flush()
        return self._results.pop(slot)

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

    def implicit(self, lock: bool) -> None:
        """Send this write transaction whole, with its commit, as one message without
        ``BEGIN``/``COMMIT``: PostgreSQL runs the statements of one message as one implicit
        transaction (all or nothing; the lock, taken first, lasts until its end). Without
        ``lock``, the thread's lock is not taken (writes that need no order among writers).
        Only before anything was sent; after it nothing may read (``flush`` refuses)."""
        if self._opened or len(self._pending) != self._opening or not self._opening:
            raise RuntimeError("only a write transaction that has sent nothing runs whole")
        self._pending = self._pending[1:] if lock else []  # BEGIN goes; the lock may stay
        self._opening, self._whole = 0, True

    def flush(self, sql: str | None = None, params: Params = None) -> list[tuple] | None:
        """Send what is queued (and ``sql``, whose rows are returned) in one round trip."""
        if self._whole:  # a part sent now would commit on its own
            raise RuntimeError("a transaction sent whole reads nothing before its commit")
        if sql is not None:
            self.add(sql, params)
        if not self._pending:
            return None
        statements, self._pending = self._pending, []
        reads, self._reads = self._reads, {}
        self._opened = self._opened or bool(self._opening)
        self._wait(self._cursor.execute("; ".join(statements)))
        if sql is None and not reads:
            return None
        last = len(statements) - 1  # one result per statement, in order
        for index in range(len(statements)):
            if index in reads:
                self._results[reads[index]] = self._wait(self._cursor.fetchall())
            if index == last:
                return self._wait(self._cursor.fetchall()) if sql is not None else None
            self._cursor.nextset()
        return None

    def commit(self) -> None:
        """``COMMIT`` with the last writes; nothing at all when nothing was read or written
        (the queue still holds only ``BEGIN`` and the lock). A transaction sent whole
        (``implicit``) goes as it is."""
        if self._whole:
            self._whole = False
            self.flush()
            return
        if not self._opening or (not self._opened and len(self._pending) == self._opening):
            self._pending.clear()
            self._reads.clear()
            return
        self.add("COMMIT")
        self.flush()

    def close(self) -> None:
        """Drop what is queued (never sent). The client-side cursor holds nothing on the
        server and goes with the batch (an async cursor's ``close`` would need the greenlet,
        and a rollback runs outside it)."""
        self._pending.clear()
        self._reads.clear()
