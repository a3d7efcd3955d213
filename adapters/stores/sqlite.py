"""Embedded store: one SQLite file, zero setup, safe across processes.

A write is one ``BEGIN IMMEDIATE`` transaction on one connection: SQLite's writer lock is
the thread lock, held only while the turn is written (never during a summarizer call).
``SqliteSaver`` joins that transaction (its per-call commit is disabled for memshift's
writes). Schema creation runs under a file lock, so any number of processes may open a
fresh file at once. WAL, ``synchronous=NORMAL``, a long busy timeout.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import create_engine, event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from adapters._upstream import daemon_aiosqlite, mark_setup_done
from adapters.errors import ConfigError
from adapters.stores.base import Checkpoints, Placement, Tx
from adapters.stores.schema import load_placement
from adapters.stores.checkpoint_sql import SqlCheckpointOps
from adapters.stores.sql import SqlStore, SqlTx, _conn, metadata

__all__ = ["SqliteStore"]

BUSY_TIMEOUT_S = 60
_READ_PLACEMENT = ("SELECT backend, version, since, pinned FROM memshift_placement "
                   "WHERE thread_id = ?")


_PRAGMAS = (f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}", "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=NORMAL")


def _pragmas(conn: Any) -> None:
    for pragma in _PRAGMAS:
        conn.execute(pragma)


@contextmanager
def _file_lock(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class _SqliteCheckpoints(SqlCheckpointOps, Checkpoints):
    dialect = "sqlite"

    def __init__(self, store: SqliteStore, keep: int) -> None:
        self.store, self.keep = store, keep
        self._standalone: Any = None

    def saver(self, tx: Tx) -> BaseCheckpointSaver:
        from adapters._upstream import sqlite_saver_in_transaction

        if tx.saver is None:  # one per transaction: reads, writes and retention share it
            tx.saver = sqlite_saver_in_transaction(_conn(tx).connection.driver_connection)  # type: ignore[arg-type]
        return tx.saver

    async def asaver(self, tx: Tx) -> BaseCheckpointSaver:
        from adapters._upstream import async_sqlite_saver_in_transaction

        assert isinstance(tx, SqlTx) and tx.aconn is not None
        if tx.saver is None:
            raw = await tx.aconn.get_raw_connection()
            tx.saver = async_sqlite_saver_in_transaction(raw.driver_connection)
        return tx.saver

    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        """``SqliteSaver`` for ``invoke``, ``AsyncSqliteSaver`` (per event loop) for ``ainvoke``."""
        if self._standalone is None:
            from langgraph.checkpoint.sqlite import SqliteSaver

            from adapters.stores.dual import DualSaver

            with self.store.guard("open checkpointer"):
                conn = sqlite3.connect(str(self.store.path), check_same_thread=False,
                                       timeout=BUSY_TIMEOUT_S)
                _pragmas(conn)
                saver = mark_setup_done(SqliteSaver(conn))
            self._standalone = DualSaver(saver, self._make_async)
        return self._standalone

    async def _make_async(self) -> tuple[BaseCheckpointSaver, Any]:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        conn = await daemon_aiosqlite(aiosqlite.connect(str(self.store.path),
                                                        timeout=BUSY_TIMEOUT_S))
        for pragma in _PRAGMAS:
            await conn.execute(pragma)
        return mark_setup_done(AsyncSqliteSaver(conn)), conn.close

    async def aretain(self, tx: Tx) -> None:
        await self.store.arun(tx, self.retain)

    def close(self) -> None:
        if self._standalone is not None:
            self._standalone.sync.conn.close()
            self._standalone = None

    async def aclose(self) -> None:
        if self._standalone is not None:
            await self._standalone.aclose()


def _configure(engine: Any) -> None:
    """Pragmas on every connection; memshift issues BEGIN itself (writers: IMMEDIATE)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi: Any, _record: Any) -> None:
        dbapi.isolation_level = None  # no implicit BEGIN from the driver
        cursor = dbapi.cursor()
        for pragma in _PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:  # writers take SQLite's lock up front
        write = conn.get_execution_options().get("memshift_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class SqliteStore(SqlStore):
    """``sqlite:///relative.db`` or ``sqlite:////absolute/path.db``."""

    translated = (SQLAlchemyError, sqlite3.Error)

    def __init__(self, url: str, *, keep_checkpoints: int = 4) -> None:
        path = url.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise ConfigError(f"sqlite URL needs a file path: sqlite:///file.db, got {url!r}")
        self.path = Path(path[1:])  # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # transcripts are private: the database (and the -wal/-shm files SQLite creates with the
        # database's mode) is 0600, or stricter under a stricter umask
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
        engine = create_engine(f"sqlite:///{self.path}", connect_args={
            "timeout": BUSY_TIMEOUT_S, "check_same_thread": False})
        _configure(engine)
        super().__init__(url, engine)
        self.checkpoints = _SqliteCheckpoints(self, keep_checkpoints)
        with self.guard("create tables"), _file_lock(str(self.path) + ".memshift-lock"):
            metadata.create_all(engine)
            from langgraph.checkpoint.sqlite import SqliteSaver

            setup = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S)
            try:
                _pragmas(setup)
                SqliteSaver(setup).setup()
            finally:
                setup.close()

    @property
    def keep_checkpoints(self) -> int:
        return self.checkpoints.keep

    def _dialect_insert(self, table: Any) -> Any:
        return sqlite_insert(table)

    def _make_async_engine(self) -> Any:
        from sqlalchemy.ext.asyncio import create_async_engine

        # No pool: an aiosqlite connection owns a thread that reports to its event loop, and
        # opening one costs less than a millisecond.
        engine = create_async_engine(f"sqlite+aiosqlite:///{self.path}", poolclass=NullPool,
                                     connect_args={"timeout": BUSY_TIMEOUT_S})
        _configure(engine.sync_engine)
        return engine

    def _lock(self, conn: Connection, thread_id: str) -> None:
        """``BEGIN IMMEDIATE`` (in the begin event) already holds SQLite's one writer lock."""

    def placement(self, tx: Tx) -> Placement | None:
        """Read on the driver's own connection (inside the transaction): every load and save
        asks it, and SQLAlchemy's statement machinery would cost more than the query."""
        cursor = _conn(tx).connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:  # (the DBAPI connection: sqlite3's, or aiosqlite's adapted one in its greenlet)
            cursor.execute(_READ_PLACEMENT, (tx.thread_id,))
            row = cursor.fetchone()
        finally:
            cursor.close()
        return load_placement(row, tx.thread_id)
