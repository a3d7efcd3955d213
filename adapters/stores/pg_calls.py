"""The quick path's calls on PostgreSQL: one prepared statement in autocommit (its own
transaction, one round trip), on a connection kept for it or checked out of the pool.

Why a module of its own: ``adapters.stores.postgres_classic`` decides what the statements
are; this is how they travel (connections, the fork and failure rules), sync and async.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

__all__ = ["ReservedConnection", "call_on"]

logger = logging.getLogger("memshift.store")
_EXPLICIT_ONLY = 2**31  # psycopg prepares after this many runs: never, unless asked to


def call_on(engine: Any, sql: str, params: dict[str, Any]) -> list[Any]:
    """``sql`` prepared, in autocommit (its own transaction, one round trip), on a connection
    of ``engine``'s pool, which is given back as it was; sync, or in SQLAlchemy's greenlet on
    the async engine's pool."""
    raw = engine.raw_connection()
    conn = raw.driver_connection
    wait: Any = _ready if type(conn) in _SYNC else _waiter(conn)
    try:
        conn.prepare_threshold = _EXPLICIT_ONLY
        wait(conn.set_autocommit(True))
        cur = conn.cursor()
        wait(cur.execute(sql, params, prepare=True))
        rows = wait(cur.fetchall())
        conn.prepare_threshold = None
        wait(conn.set_autocommit(False))
    except BaseException:
        raw.invalidate()  # in an unknown state: never handed out again
        raise
    finally:
        raw.close()
    return rows


class ReservedConnection:
    """One of the pool's connections, kept for the quick path's one-statement calls (sync).

    Checking a connection out of SQLAlchemy's pool and back, switching it to autocommit and
    back and making a cursor cost ~60 µs of client CPU a save+load (0.38 -> 0.42x the raw
    driver, BENCHMARKS.md); one is enough (with 8 threads, up to 4 kept measured no better).
    This connection stays in autocommit with its statements prepared. A call takes it only when no other thread holds it and uses the pool
    otherwise (it never waits); a failing call drops it (invalidated: the next call checks out
    a fresh one), and so does any connection of the pool found dead (SQLAlchemy then renews
    the whole pool: a server restart costs one failed call, not one per path); a forked child
    leaves its parent's alone; ``close`` closes it."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.engine = engine
        self._lock = threading.Lock()
        self._raw: Any = None  # the pool's connection record, checked out
        self._cursor: Any = None
        self._pid = 0
        self._stale = False  # a connection of the pool was invalidated since it was taken
        self._closed = False
        event.listen(engine.pool, "invalidate", self._on_invalidate)

    def _on_invalidate(self, dbapi_connection: Any, record: Any, exception: Any) -> None:
        self._stale = True

    def call(self, sql: str, params: dict[str, Any]) -> list[Any]:
        if self._closed or not self._lock.acquire(blocking=False):
            return call_on(self.engine, sql, params)
        try:
            fresh = self._pid == os.getpid() and not self._stale
            cursor = self._cursor if fresh else self._open()
            try:
                cursor.execute(sql, params, prepare=True)
                return cursor.fetchall()
            except BaseException:
                self._drop()  # in an unknown state (or gone): never used again
                raise
        finally:
            self._lock.release()

    def _open(self) -> Any:
        if self._pid == os.getpid():
            self._drop()  # stale
        elif self._raw is not None:  # the parent process's: its socket is the parent's
            _ABANDONED.append(self._raw)  # kept referenced: never closed or returned here
        self._raw = self._cursor = None
        self._stale = False
        raw = self.engine.raw_connection()
        try:
            conn = raw.driver_connection
            conn.prepare_threshold = _EXPLICIT_ONLY
            conn.autocommit = True
            cursor = conn.cursor()
        except BaseException:
            raw.invalidate()
            raise
        self._raw, self._cursor, self._pid = raw, cursor, os.getpid()
        return cursor

    def _drop(self) -> None:
        raw, self._raw, self._cursor, self._pid = self._raw, None, None, 0
        if raw is not None:
            try:
                raw.invalidate()
            except Exception as exc:  # already gone: nothing left to close
                logger.debug("discarding the reserved connection: %s", type(exc).__name__)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._pid == os.getpid():
                self._drop()


_ABANDONED: list[Any] = []  # a forked child's inherited reserved connections


def _ready(result: Any) -> Any:
    return result


_SYNC: set[type] = set()  # the driver's sync connection classes met: no import, no await


def _waiter(conn: Any) -> Any:
    """How ``call_on`` waits on ``conn``'s calls: awaited in SQLAlchemy's greenlet for an
    async connection; a sync one's class is remembered (its calls return their results)."""
    import psycopg
    from sqlalchemy.util import await_only

    if isinstance(conn, psycopg.AsyncConnection):
        return await_only
    _SYNC.add(type(conn))
    return _ready
