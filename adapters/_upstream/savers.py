"""LangGraph savers inside memshift's transaction: setup marked done, commits left to the
transaction's owner, SQL cursors, and the DDL their ``setup()`` runs.

Part of ``adapters._upstream`` (every private upstream detail in one package): read it when
LangGraph's checkpoint packages (or aiosqlite) release.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

__all__ = ["async_sqlite_saver_in_transaction", "daemon_aiosqlite", "mark_setup_done",
           "postgres_saver_migrations", "saver_cursor", "sqlite_get_tuple_with",
           "sqlite_saver_in_transaction", "sqlite_saver_setup_sql"]


def mark_setup_done(saver: Any) -> Any:
    """Tell a SQLite saver its tables exist (created under memshift's file lock): its own
    ``setup()`` runs ``executescript``, which would COMMIT an open transaction."""
    saver.is_setup = True
    return saver


def saver_cursor(saver: Any) -> Any:
    """A cursor context on a ``SqliteSaver`` or ``PostgresSaver`` (legacy sources page
    thread ids with SQL: ``list()`` holds the saver's lock for the whole iteration)."""
    return saver.cursor() if type(saver).__name__ == "SqliteSaver" else saver._cursor()


def daemon_aiosqlite(conn: Any) -> Any:
    """An ``aiosqlite`` connection (not yet awaited) whose worker thread does not keep the
    interpreter alive: a script that forgets ``arelease()`` still exits (SQLAlchemy's aiosqlite
    dialect does the same). Private (``Connection._thread``)."""
    conn._thread.daemon = True
    return conn


# -- SQLite: SqliteSaver inside memshift's transaction --------------------------------------
def sqlite_saver_in_transaction(conn: sqlite3.Connection) -> Any:
    """A ``SqliteSaver`` on ``conn`` that neither runs setup (executescript would COMMIT)
    nor commits after each call: memshift's transaction commits once."""
    return mark_setup_done(_in_transaction_class()(conn))


@functools.cache
def _in_transaction_class() -> type:
    """Defined once, on first use (the SQLite extra is optional)."""
    from contextlib import contextmanager

    from langgraph.checkpoint.sqlite import SqliteSaver

    from adapters.stores.tx_saver import ReadOnce

    class _InTransaction(ReadOnce, SqliteSaver):
        @contextmanager
        def cursor(self, transaction: bool = True) -> Any:
            with self.lock:
                cur = self.conn.cursor()
                try:
                    yield cur
                finally:
                    cur.close()
    return _InTransaction


def async_sqlite_saver_in_transaction(conn: Any) -> Any:
    """An ``AsyncSqliteSaver`` on ``conn`` whose per-call ``commit`` is a no-op (it calls
    ``conn.commit()`` after each write): memshift's transaction commits once."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from adapters.stores.tx_saver import read_once

    return mark_setup_done(read_once(AsyncSqliteSaver)(_NoCommit(conn)))


def sqlite_get_tuple_with(conn: Any, config: Any, also: str,
                          params: tuple[Any, ...]) -> tuple[Any, list[tuple[Any, ...]]]:
    """``SqliteSaver.get_tuple(config)`` and the rows of ``also`` (a ``SELECT`` of six
    columns, ``params`` its parameters) in one statement on the DBAPI connection ``conn``:
    one snapshot without ``BEGIN``/``COMMIT``. ``get_tuple``'s two statements (the checkpoint,
    its pending writes: ``pending_writes_sql``) and its deserialization, as one ``UNION ALL``
    (``tests/test_upstream.py`` checks it answers what ``get_tuple`` answers)."""
    import json

    from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
    from langgraph.checkpoint.sqlite.utils import load_pending_writes

    conf = config["configurable"]
    thread_id, ns, wanted = str(conf["thread_id"]), conf.get("checkpoint_ns", ""), \
        get_checkpoint_id(config)
    pick = "AND checkpoint_id = ?" if wanted else "ORDER BY checkpoint_id DESC LIMIT 1"
    sql = ("WITH c AS (SELECT thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
           f"metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? {pick}) "
           "SELECT 0, * FROM c UNION ALL SELECT 1, w.task_id, w.channel, w.type, w.value, "
           "w.task_path, w.idx FROM writes w JOIN c ON w.thread_id = c.thread_id "
           "AND w.checkpoint_id = c.checkpoint_id WHERE w.checkpoint_ns = ? "
           f"UNION ALL SELECT 2, * FROM ({also})")
    args = (thread_id, ns, *((wanted,) if wanted else ()), ns, *params)
    cursor = conn.cursor()
    try:
        cursor.execute(sql, args)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    parts: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
    for row in rows:
        parts[row[0]].append(tuple(row[1:]))
    (found, writes, extra) = parts
    if not found:
        return None, extra
    tid, checkpoint_id, parent, type_, checkpoint, metadata = found[0]
    if not wanted:
        config = {"configurable": {"thread_id": tid, "checkpoint_ns": ns,
                                   "checkpoint_id": checkpoint_id}}
    serde = _serde()
    parent_config = {"configurable": {"thread_id": tid, "checkpoint_ns": ns,
                                      "checkpoint_id": parent}} if parent else None
    return CheckpointTuple(config, serde.loads_typed((type_, checkpoint)),
                           json.loads(metadata) if metadata is not None else {},
                           parent_config, load_pending_writes(writes, serde)), extra


@functools.cache
def _serde() -> Any:
    """The serializer a saver built without one uses (the joined savers' own)."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    return BaseCheckpointSaver().serde


class _NoCommit:
    """The connection, minus ``commit``."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def commit(self) -> None:
        """The transaction's owner commits."""


# -- savers' own schema: what their setup() runs (for `memshift schema`) ----------------------
def postgres_saver_migrations() -> list[str]:
    """``PostgresSaver.MIGRATIONS``: LangGraph's DDL, one entry per version recorded in its
    ``checkpoint_migrations`` table (its ``setup()`` runs the ones past the recorded ``v``)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    return list(PostgresSaver.MIGRATIONS)


def sqlite_saver_setup_sql() -> list[str]:
    """The statements ``SqliteSaver.setup()`` runs, recorded by running it against a
    connection that only writes them down (its script is a literal inside the method)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class _Recorder:
        def __init__(self) -> None:
            self.statements: list[str] = []

        def executescript(self, script: str) -> None:
            self.statements += [s.strip() for s in script.split(";") if s.strip()]

        def execute(self, sql: str, *args: Any) -> None:
            self.statements.append(sql.strip())

        def commit(self) -> None:
            pass

    recorder = _Recorder()
    saver = SqliteSaver.__new__(SqliteSaver)
    saver.conn, saver.is_setup = recorder, False  # type: ignore[assignment]
    SqliteSaver.setup(saver)
    return recorder.statements
