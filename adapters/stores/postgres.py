"""Scale-out store: PostgreSQL via psycopg 3.

A write is one connection checkout and one transaction. Its first statement takes
``pg_advisory_xact_lock(hash(thread id))``: the lock ends with the transaction, so a dead
connection rolls the turn back and releases the lock together, and a committed turn is
never overwritten. ``PostgresSaver`` joins the same transaction for checkpoint writes. A
steady-state classic save and load are one statement each, under the same lock
(``adapters.stores.postgres_classic``).

Schema setup (memshift's tables, ``PostgresSaver.setup()``) runs under a *try*-lock that
waiters poll: ``setup()`` runs ``CREATE INDEX CONCURRENTLY``, which waits for every open
transaction, so a waiter blocked in ``pg_advisory_lock`` would close a cycle PostgreSQL
cannot see.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import create_engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import ConfigError, StoreError
from adapters.stores.base import Checkpoints, Placement, Tx
from adapters.stores.batch import Batch
from adapters.stores.checkpoint_sql import MOVED, POSTGRES, SqlCheckpointOps
from adapters.stores.pg_calls import ReservedConnection, call_on
from adapters.stores.postgres_classic import PostgresClassic
from adapters.stores.schema import load_placement
from adapters.stores.sql import SqlStore, SqlTx, _conn, scrub_password
from adapters.stores.tx_saver import Moved, read_once
from adapters.stores.url import (
    DEFAULT_CONNECT_TIMEOUT, libpq_conninfo, lock_key, scrub_cause, split_url, sqlalchemy_url,
    url_problem,
)

__all__ = ["PostgresStore", "setup_lock"]

_SETUP_LOCK_KEY = 0x6D656D7368696674  # "memshift"
_LOCK = "SELECT pg_advisory_xact_lock(%(key)s)"
_READ_PLACEMENT = ("SELECT backend, version, since, pinned FROM memshift_placement "
                   "WHERE thread_id = %(tid)s")
SETUP_TIMEOUT_S = 300.0


class _PostgresCheckpoints(SqlCheckpointOps, Checkpoints):
    dialect = "postgresql"

    def __init__(self, store: PostgresStore, keep: int) -> None:
        self.store, self.keep = store, keep
        self._pool: Any = None
        self._standalone: Any = None

    def saver(self, tx: Tx) -> BaseCheckpointSaver:
        from langgraph.checkpoint.postgres import PostgresSaver

        conn = _conn(tx)  # queued statements (BEGIN, the lock, the turn) go first
        if tx.saver is None:  # one per transaction: reads, writes and retention share it
            tx.saver = read_once(PostgresSaver)(conn.connection.driver_connection)
        return tx.saver

    async def asaver(self, tx: Tx) -> BaseCheckpointSaver:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        assert isinstance(tx, SqlTx) and tx.aconn is not None
        await self.store.aflush(tx)  # queued statements (BEGIN, the lock, the turn) go first
        if tx.saver is None:
            raw = await tx.aconn.get_raw_connection()
            tx.saver = read_once(AsyncPostgresSaver)(raw.driver_connection)
        return tx.saver

    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        """``PostgresSaver`` (its own small pool) for ``invoke``; ``AsyncPostgresSaver``
        (a pool per event loop) for ``ainvoke``."""
        if self._standalone is None:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg_pool import ConnectionPool

            from adapters.stores.dual import DualSaver

            with self.store.guard("open checkpointer"):
                self._pool = ConnectionPool(self.store.conninfo, min_size=1, max_size=4,
                                            open=True, kwargs=_saver_kwargs())
                self._standalone = DualSaver(PostgresSaver(self._pool),  # type: ignore[arg-type]
                                             self._make_async)
        return self._standalone

    async def _make_async(self) -> tuple[BaseCheckpointSaver, Any]:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(self.store.conninfo, min_size=1, max_size=4, open=False,
                                   kwargs=_saver_kwargs())
        await pool.open()
        return AsyncPostgresSaver(pool), pool.close  # type: ignore[arg-type]

    async def aretain(self, tx: Tx) -> None:
        await self.store.arun(tx, self.retain)

    def get_placed(self, tx: Tx, config: Any) -> tuple[Placement | None, Any]:
        """The thread's placement and ``get_tuple(config)`` in one statement (one snapshot:
        no ``BEGIN``/``COMMIT``), sent by the transaction's batch."""
        from adapters._upstream import postgres_get_tuple_with

        assert isinstance(tx, SqlTx) and tx.batch is not None
        found, row = postgres_get_tuple_with(tx.batch.flush, config, _READ_PLACEMENT,
                                             {"tid": tx.thread_id})
        return load_placement(row if row[0] is not None else None, tx.thread_id), found

    def put_placed(self, tx: Tx, args: tuple[Any, ...], placed: Placement | None,
                   retain: bool) -> Any:
        """``put(*args)`` (the statements ``PostgresSaver.put`` sends) with, when ``placed``,
        a guard that aborts everything unless the thread is still placed there, and with
        ``retain`` retention (one statement with the guard): queued, and sent whole with the
        commit as one implicit transaction (``Batch.implicit``), after the thread's lock when
        either is asked. A failed guard is ``Moved`` at the commit. What else the
        transaction queues (the transcript) commits with it."""
        from adapters._upstream import postgres_put_statements

        assert isinstance(tx, SqlTx) and tx.batch is not None
        batch = tx.batch
        batch.implicit(lock=placed is not None or retain)
        stored, statements = postgres_put_statements(*args)
        for sql, params in statements:
            batch.add(sql, params)
        params = {"t": tx.thread_id, "skip": max(self.keep, 1) - 1}
        if placed is not None:
            batch.add(POSTGRES["retain_placed" if retain else "placed"],
                      {**params, "backend": placed.backend, "version": placed.version})
        elif retain:
            batch.add(POSTGRES["retain"][0], params)
        return stored

    def retain(self, tx: Tx) -> None:
        """Whole turns (``adapters.stores.checkpoint_sql``); one statement, batched: it goes
        with the COMMIT."""
        (sql,) = POSTGRES["retain"]
        self.store.send(tx, sql, {"t": tx.thread_id, "skip": max(self.keep, 1) - 1})

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = self._standalone = None

    async def aclose(self) -> None:
        if self._standalone is not None:
            await self._standalone.aclose()


def _saver_kwargs() -> dict[str, Any]:
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


@contextmanager
def setup_lock(conn: Any, shown: str) -> Iterator[None]:
    """Hold the schema setup lock on ``conn`` (a psycopg autocommit connection): a try-lock
    polled, never a blocked ``pg_advisory_lock`` (see the module docstring)."""
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    while not _first(conn.execute("SELECT pg_try_advisory_lock(%s) AS ok",
                                  (_SETUP_LOCK_KEY,)).fetchone()):
        if time.monotonic() > deadline:
            raise StoreError(f"schema setup on {shown}: another process held the setup lock "
                             f"for {SETUP_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))


def _first(row: Any) -> Any:
    return row["ok"] if isinstance(row, dict) else row[0]  # dict_row or tuple rows


class PostgresStore(SqlStore):
    """``postgresql://user:password@host:port/dbname`` (``postgres://`` accepted)."""

    autocommit_reads = True
    batches = True

    def __init__(self, url: str, redacted: str, *, keep_checkpoints: int = 4,
                 pool_size: int = 8, params: dict[str, str] | None = None,
                 create_schema: bool = True) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigError("postgresql stores need: pip install 'memshift[postgres]'") from exc
        self.translated = (SQLAlchemyError, psycopg.Error)
        problem = url_problem(url)
        if problem is not None:  # libpq would quote the password in its refusal
            raise ConfigError(f"cannot use store URL {redacted!r}: {problem}")
        parts = split_url(url)
        if not parts.path.strip("/"):
            raise ConfigError(f"postgresql URL needs a database name: {redacted!r}")
        # libpq's own parameters (TLS, timeouts, application_name, ...) travel in the URL
        # every connection is made from: the engine, the savers' pools, sync and async
        self.conninfo = libpq_conninfo(url, params)
        self._secret = url
        timeout: dict[str, Any] = {} if "connect_timeout" in (params or {}) else \
            {"connect_timeout": DEFAULT_CONNECT_TIMEOUT}
        failed = None
        try:  # fail fast and clearly
            psycopg.connect(self.conninfo, **timeout).close()
        except psycopg.Error as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            failed = f"{type(exc).__name__}: {scrub_password(detail, url)}"
            scrub_cause(exc, url)  # in place: the driver's text may quote the password
        if failed is not None:  # raised outside the handler: no __context__ to walk to
            raise StoreError(f"cannot connect to {redacted}: {failed}")
        engine = create_engine(sqlalchemy_url(self.conninfo), pool_size=pool_size,
                               max_overflow=pool_size, hide_parameters=True,
                               connect_args={"prepare_threshold": None})
        super().__init__(redacted, engine)
        self.classic = PostgresClassic(self)
        self.reserved = ReservedConnection(engine)  # the quick path's (sync) connection
        self._pool_size = pool_size
        self.checkpoints = _PostgresCheckpoints(self, keep_checkpoints)
        if create_schema:
            self._setup(psycopg)
        else:
            self.prepare_schema(False)

    @property
    def keep_checkpoints(self) -> int:
        return self.checkpoints.keep

    def _setup(self, psycopg: Any) -> None:
        """Create or upgrade memshift's and LangGraph's tables once, whatever number of
        processes start at the same time (try-lock polling: never a blocked lock across
        CONCURRENTLY)."""
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with self.guard("schema setup"), psycopg.connect(
                self.conninfo, autocommit=True, row_factory=dict_row) as conn, \
                setup_lock(conn, self.url):
            self.prepare_schema(True, PostgresSaver(conn).setup)  # type: ignore[arg-type]

    def _dialect_insert(self, table: Any) -> Any:
        return pg_insert(table)

    def _make_async_engine(self) -> Any:
        from sqlalchemy.ext.asyncio import create_async_engine

        return create_async_engine(sqlalchemy_url(self.conninfo), pool_size=self._pool_size,
                                   max_overflow=self._pool_size, hide_parameters=True,
                                   connect_args={"prepare_threshold": None})

    def call(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """One statement in a transaction of its own, in one round trip, prepared
        (``adapters.stores.postgres_classic``)."""
        return self.reserved.call(sql, params)

    async def acall(self, sql: str, params: dict[str, Any]) -> list[Any]:
        from sqlalchemy.util import greenlet_spawn

        return await greenlet_spawn(call_on, self._async_engine().sync_engine, sql, params)

    def close(self) -> None:
        self.reserved.close()  # checked out: the pool's dispose would not close it
        super().close()

    def _finish(self, conn: Connection, batch: Batch | None) -> None:
        """A placement guard that aborted the transaction (``put_placed``) is ``Moved``."""
        try:
            super()._finish(conn, batch)
        except self.translated[-1] as exc:
            if MOVED in str(exc):
                raise Moved(known=False) from None
            raise

    def _lock(self, conn: Connection, thread_id: str) -> None:
        conn.exec_driver_sql(_LOCK, {"key": lock_key(thread_id)})

    def _batch(self, conn: Connection, thread_id: str, write: bool) -> Batch:
        raw = conn.connection.driver_connection
        return Batch(raw, begin=[(_LOCK, {"key": lock_key(thread_id)})] if write else ())
