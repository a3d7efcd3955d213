"""Scale-out store: PostgreSQL via psycopg 3 pools, ``PostgresSaver`` for checkpoints.

Writers to one thread are serialised across processes with a session advisory lock
keyed by a hash of the thread id (parameterised; the id is never spliced into SQL).
``PostgresSaver.setup()`` runs once under a global advisory lock (concurrent setup
from several processes fails otherwise). Retention is ``prune(keep_latest)``, retried
on serialization failures and deadlocks.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import create_engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import ConfigError, StoreError
from adapters.stores import sqlalchemy_url
from adapters.stores.sql import SqlStore, scrub_password

__all__ = ["PostgresStore"]

_SETUP_LOCK_KEY = 0x6D656D7368696674  # "memshift"
PRUNE_ATTEMPTS = 5


def _lock_key(thread_id: str) -> int:
    """A signed 64-bit advisory-lock key for a thread id."""
    return int.from_bytes(hashlib.blake2b(thread_id.encode(), digest_size=8).digest(), "big",
                          signed=True)


class PostgresStore(SqlStore):
    """``postgresql://user:password@host:port/dbname`` (``postgres://`` accepted)."""

    def __init__(self, url: str, redacted: str, *, pool_size: int = 8) -> None:
        try:
            import psycopg
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError as exc:
            raise ConfigError("postgresql stores need: pip install 'memshift[postgres]'") from exc
        self.translated = (SQLAlchemyError, psycopg.Error, PoolTimeout)
        parts = urlsplit(url)
        if not parts.path.strip("/"):
            raise ConfigError(f"postgresql URL needs a database name: {redacted!r}")
        conninfo = parts._replace(scheme="postgresql").geturl()
        self._secret = parts.password
        self._psycopg = psycopg
        self._pool_kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        self.url = redacted
        try:  # fail fast and clearly (a refused connection would wait out the pool timeout)
            psycopg.connect(conninfo, connect_timeout=10).close()
        except psycopg.Error as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreError(f"cannot connect to {redacted}: {type(exc).__name__}: "
                             f"{scrub_password(detail, parts.password)}") from None
        try:
            self._pool = ConnectionPool(conninfo, kwargs=self._pool_kwargs, min_size=1,
                                        max_size=pool_size, open=False,
                                        check=ConnectionPool.check_connection)
            self._locks_pool = ConnectionPool(conninfo, kwargs={"autocommit": True}, min_size=0,
                                              max_size=pool_size * 2, open=False,
                                              check=ConnectionPool.check_connection)
            self._pool.open(wait=True, timeout=15)
            self._locks_pool.open()
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(f"cannot connect to {redacted}: {type(exc).__name__}") from None
        engine = create_engine(
            sqlalchemy_url(conninfo),
            pool_pre_ping=True, pool_size=pool_size, max_overflow=pool_size,
            hide_parameters=True,
        )
        with self._advisory(_SETUP_LOCK_KEY):
            super().__init__(redacted, engine)
            from langgraph.checkpoint.postgres import PostgresSaver

            self._saver = PostgresSaver(self._pool)  # type: ignore[arg-type]
            with self.guard("checkpointer setup"):
                self._saver.setup()

    # -- dialect ---------------------------------------------------------------------
    def _dialect_insert(self, table: Any) -> Any:
        return pg_insert(table)

    # -- checkpoints -------------------------------------------------------------------
    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        return self._saver

    def retain(self, thread_id: str) -> None:
        errors = self._psycopg.errors
        for attempt in range(1, PRUNE_ATTEMPTS + 1):
            with self.guard("retention"):
                try:
                    self._saver.prune([thread_id], strategy="keep_latest")
                    return
                except (errors.SerializationFailure, errors.DeadlockDetected):
                    if attempt == PRUNE_ATTEMPTS:
                        raise
            time.sleep(0.02 * attempt)

    # -- cross-process coordination -----------------------------------------------------------
    @contextmanager
    def _advisory(self, key: int) -> Iterator[None]:
        held: dict[tuple[int, int], int] = self.__dict__.setdefault("_held", {})
        ident = (threading.get_ident(), key)
        if held.get(ident):  # re-entrant within one thread
            held[ident] += 1
            try:
                yield
            finally:
                held[ident] -= 1
            return
        with self.guard("advisory lock"), self._locks_pool.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            held[ident] = 1
            try:
                yield
            finally:
                held.pop(ident, None)
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                except self._psycopg.Error:
                    pass  # the session ended: the server released the lock with it

    @contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        with super().lock(thread_id), self._advisory(_lock_key(thread_id)):
            yield

    def close(self) -> None:
        self._pool.close()
        self._locks_pool.close()
        super().close()
