"""Embedded store: one SQLite file, zero setup, safe across processes.

WAL, a long busy timeout, memshift's tables created before LangChain's, and a file
lock that serialises writers across processes (SQLite allows one writer anyway).
``SqliteSaver`` has no ``prune()``: retention deletes old rows of ``checkpoints`` and
``writes`` in the root namespace (checkpoint ids sort by time).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import create_engine, event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import ConfigError
from adapters.stores.sql import SqlStore

__all__ = ["SqliteStore"]

BUSY_TIMEOUT_S = 60


def _pragmas(conn: Any) -> None:
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")


class SqliteStore(SqlStore):
    """``sqlite:///relative.db`` or ``sqlite:////absolute/path.db``."""

    translated = (SQLAlchemyError, sqlite3.Error)

    def __init__(self, url: str, *, keep_checkpoints: int = 4) -> None:
        path = url.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise ConfigError(f"sqlite URL needs a file path: sqlite:///file.db, got {url!r}")
        self.path = Path(path[1:])  # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.keep_checkpoints = keep_checkpoints
        self._lock_path = str(self.path) + ".memshift-lock"
        self._depth = threading.local()
        engine = create_engine(f"sqlite:///{self.path}", connect_args={
            "timeout": BUSY_TIMEOUT_S, "check_same_thread": False})
        event.listen(engine, "connect", lambda dbapi, _: _pragmas(dbapi))
        super().__init__(url, engine)  # memshift's tables first
        self._saver: BaseCheckpointSaver | None = None

    # -- dialect ---------------------------------------------------------------------
    def _dialect_insert(self, table: Any) -> Any:
        return sqlite_insert(table)

    # -- checkpoints -------------------------------------------------------------------
    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        if self._saver is None:
            from langgraph.checkpoint.sqlite import SqliteSaver

            with self.guard("open checkpointer"), self._file_lock():
                conn = sqlite3.connect(str(self.path), check_same_thread=False,
                                       timeout=BUSY_TIMEOUT_S)
                _pragmas(conn)
                saver = SqliteSaver(conn)
                saver.setup()
            self._saver = saver
        return self._saver

    def retain(self, thread_id: str) -> None:
        """Keep the newest ``keep_checkpoints`` checkpoints of the thread's root namespace."""
        saver: Any = self.checkpointer
        keep = "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' " \
               "ORDER BY checkpoint_id DESC LIMIT ?"
        with self.guard("retention"), saver.cursor() as cur:
            for table in ("writes", "checkpoints"):
                cur.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = '' "
                    f"AND checkpoint_id NOT IN ({keep})",
                    (thread_id, thread_id, self.keep_checkpoints),
                )

    # -- cross-process coordination -----------------------------------------------------------
    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if depth:
            self._depth.n = depth + 1
            try:
                yield
            finally:
                self._depth.n = depth
            return
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._depth.n = 1
            try:
                yield
            finally:
                self._depth.n = 0
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextmanager
    def lock(self, thread_id: str) -> Iterator[None]:
        with super().lock(thread_id), self._file_lock():
            yield

    def close(self) -> None:
        if self._saver is not None:
            self._saver.conn.close()  # type: ignore[attr-defined]
            self._saver = None
        super().close()
