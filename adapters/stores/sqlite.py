"""Embedded store: one SQLite file, zero setup, safe across processes.

A write is one ``BEGIN IMMEDIATE`` transaction on one connection: SQLite's writer lock is
the thread lock, held only while the turn is written (never during a summarizer call).
``SqliteSaver`` joins that transaction (its per-call commit is disabled for memshift's
writes). Schema creation runs under a file lock, so any number of processes may open a
fresh file at once. WAL, ``synchronous=NORMAL``, a long busy timeout.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import sqlite3
import stat
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
from adapters.errors import ConfigError, StoreError
from adapters.stores.base import Checkpoints, Placement, Tx
from adapters.stores.schema import load_placement
from adapters.stores.checkpoint_sql import SqlCheckpointOps
from adapters.stores.sql import SqlStore, SqlTx, _conn
from adapters.stores.sqlite_classic import SqliteClassic

logger = logging.getLogger("memshift.store")

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
def _file_lock(path: str, follow: bool = False) -> Iterator[None]:
    """An exclusive ``flock`` on a private lock file, never through a symbolic link (a dangling
    link would otherwise create its victim)."""
    flags = os.O_RDWR | os.O_CREAT | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_refused(f"the lock file {path!r}") from None
        raise
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

    def get_placed(self, tx: Tx, config: Any) -> tuple[Placement | None, Any]:
        """The thread's placement and ``get_tuple(config)`` in one statement (one snapshot: no
        ``BEGIN``/``COMMIT`` needed), on the DBAPI connection as ``SqliteStore.placement``."""
        from adapters._upstream import sqlite_get_tuple_with

        found, rows = sqlite_get_tuple_with(
            _conn(tx).connection.dbapi_connection, config,
            _READ_PLACEMENT.replace("pinned FROM", "pinned, NULL, NULL FROM"), (tx.thread_id,))
        return load_placement(rows[0][:4] if rows else None, tx.thread_id), found

    def close(self) -> None:
        if self._standalone is not None:
            self._standalone.sync.conn.close()
            self._standalone = None

    async def aclose(self) -> None:
        if self._standalone is not None:
            await self._standalone.aclose()


def _configure(engine: Any, store: SqliteStore) -> None:
    """Pragmas on every connection; memshift issues BEGIN itself (writers: IMMEDIATE), after
    checking that the database file is still the one it opened."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi: Any, _record: Any) -> None:
        dbapi.isolation_level = None  # no implicit BEGIN from the driver
        cursor = dbapi.cursor()
        for pragma in _PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:  # writers take SQLite's lock up front
        options = conn.get_execution_options()
        store.check_identity()
        if not options.get("memshift_single"):  # a read of one statement: its own snapshot
            conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get("memshift_write") else "BEGIN")


class SqliteStore(SqlStore):
    """``sqlite:///relative.db`` or ``sqlite:////absolute/path.db``."""

    translated = (SQLAlchemyError, sqlite3.Error)

    def __init__(self, url: str, *, keep_checkpoints: int = 4, allow_symlinks: int = 0,
                 create_schema: bool = True) -> None:
        path = url.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise ConfigError(f"sqlite URL needs a file path: sqlite:///file.db, got {url!r}")
        # sqlite:///rel.db -> rel.db, sqlite:////abs.db -> /abs.db; made absolute now, so a
        # process that changes directory later (a daemon's chdir("/")) keeps the same file
        self.path = Path(os.path.abspath(path[1:]))
        self.follow = bool(allow_symlinks)
        self.identity = private_files(self.path, self.follow)
        engine = create_engine(f"sqlite:///{self.path}", connect_args={
            "timeout": BUSY_TIMEOUT_S, "check_same_thread": False})
        _configure(engine, self)
        super().__init__(url, engine)
        self.classic = SqliteClassic(self)  # the load in one statement
        self.checkpoints = _SqliteCheckpoints(self, keep_checkpoints)
        if not create_schema:
            self.prepare_schema(False)
            return
        with self.guard("schema setup"), _file_lock(str(self.path) + ".memshift-lock",
                                                    self.follow):
            self.prepare_schema(True, self._setup_saver)

    def _setup_saver(self) -> None:
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
        _configure(engine.sync_engine, self)
        return engine

    def check_identity(self) -> None:
        """The database file memshift opened is still at its path: one deleted or replaced
        under a running writer would take every later save (SQLite keeps writing the unlinked
        file) — a ``StoreError`` before the transaction begins, nothing written."""
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self.identity:
            raise StoreError(f"the SQLite database {str(self.path)!r} was "
                             f"{'deleted' if now is None else 'replaced'} while memshift had it "
                             "open; nothing was written (open the store again)")

    def _lock(self, conn: Connection, thread_id: str) -> None:
        """``BEGIN IMMEDIATE`` (in the begin event) already holds SQLite's one writer lock."""

    def _before_erase(self, tx: Tx) -> None:
        """Deleted content is overwritten with zeros, not left in free pages (``compact``
        then drops the pages older deletes left behind)."""
        _conn(tx).exec_driver_sql("PRAGMA secure_delete = ON")

    def compact(self) -> None:
        """Rewrite the file without free pages and empty the write-ahead log, so no deleted
        content stays in either (``VACUUM``, then ``wal_checkpoint(TRUNCATE)``)."""
        with self.guard("compact"), _file_lock(str(self.path) + ".memshift-lock", self.follow):
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            try:
                _pragmas(conn)
                conn.execute("PRAGMA secure_delete = ON")
                conn.execute("VACUUM")
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.close()
        if busy:
            raise StoreError(f"compact {self.url}: a reader kept the write-ahead log busy; "
                             "run it again when the store is quiet")

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


def private_files(path: Path, follow: bool) -> tuple[int, int]:
    """Open (creating) the database privately; its identity (device, inode).

    The directories memshift creates are 0700; a symbolic link at the database path is refused
    unless ``follow``; the file is opened without following one (``O_NOFOLLOW``); an existing
    database and its ``-wal``/``-shm`` files wider than 0600 are tightened to 0600 (with a
    warning: the transcripts they hold are private)."""
    _private_dirs(path.parent)
    if not follow and path.is_symlink():
        raise _link_refused(f"the SQLite database path {str(path)!r}")
    flags = os.O_CREAT | os.O_RDWR | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags, 0o600)
    try:
        info = os.fstat(fd)
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
            logger.warning("the SQLite database %r was readable by others (mode %o); memshift "
                           "made it 0600", str(path), stat.S_IMODE(info.st_mode))
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.is_symlink() and not follow:
            raise _link_refused(repr(str(side)))
        if side.exists() and stat.S_IMODE(side.stat().st_mode) & 0o077:
            os.chmod(side, 0o600)
    return info.st_dev, info.st_ino


def _link_refused(what: str) -> ConfigError:
    return ConfigError(f"{what} is a symbolic link; memshift does not follow it (pass "
                       "?allow_symlinks=1 to allow links)")


def _private_dirs(directory: Path) -> None:
    """Create the missing directories, each 0700 (whatever the umask)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            continue
        os.chmod(made, 0o700)

