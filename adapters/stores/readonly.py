"""Opening stores for reading only: dry runs, sources, ``history``.

Nothing here can write. SQLite is opened through ``file:...?mode=ro`` URIs, so a missing file
is an error instead of a new empty database; a dry run adds ``immutable=1`` when no ``-wal``
file exists (otherwise SQLite would create ``-wal``/``-shm`` beside a WAL database).
PostgreSQL sessions run with ``default_transaction_read_only=on``. A read-only store is a
``SqlStore`` whose write transactions raise, so a ``SummaryMemory`` on it can load and list
threads and nothing else; no schema is created, no lock file either.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from adapters.errors import StoreError
from adapters.stores.base import Checkpoints, Tx
from adapters.stores.sql import SqlStore, SqlTx
from adapters.stores.url import sqlalchemy_url
from adapters.stores.url import kind_of, scrub, show_url, sqlite_path

__all__ = ["ReadOnlyStore", "open_read_only", "read_engine", "read_only_saver", "table_names"]

BUSY_TIMEOUT_S = 60
_PG_READ_ONLY = "-c default_transaction_read_only=on"


def _sqlite_uri(path: Path, snapshot: bool) -> str:
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    return uri + ("&immutable=1" if snapshot and not wal.exists() else "")


def _sqlite_connect(path: Path, snapshot: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(_sqlite_uri(path, snapshot), uri=True, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_S)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    return conn


def read_engine(url: str, *, snapshot: bool = False) -> Engine:
    """A SQLAlchemy engine that cannot write to ``url`` (sqlite or postgresql)."""
    if kind_of(url) == "sqlite":
        path = sqlite_path(url)
        engine = create_engine("sqlite://", creator=lambda: _sqlite_connect(path, snapshot),
                               poolclass=NullPool)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi: Any, _record: Any) -> None:
            dbapi.isolation_level = None  # memshift's BEGIN, below: one snapshot per read

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN")
        return engine
    conninfo, args = _read_only_session(url)
    return create_engine(sqlalchemy_url(conninfo), poolclass=NullPool, hide_parameters=True,
                         connect_args={"prepare_threshold": None, **args})


def _read_only_session(url: str) -> tuple[str, dict[str, Any]]:
    """A PostgreSQL store URL as libpq reads it (``postgres://`` / ``postgresql+psycopg://``
    spelled ``postgresql://``, libpq's parameters kept, memshift's own dropped), and the
    connect arguments of a read-only session: the URL's ``options`` joined to the read-only
    one, its ``connect_timeout`` (default 10 s). Both read-only paths (engine, saver) use it."""
    from adapters.stores.url import DEFAULT_CONNECT_TIMEOUT, driver_params, libpq_conninfo

    params = driver_params(url.partition("?")[2], show_url(url))
    args: dict[str, Any] = {"options": " ".join(filter(None, (params.pop("options", None),
                                                              _PG_READ_ONLY)))}
    if "connect_timeout" not in params:
        args["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
    return libpq_conninfo(url, params), args


def _guarded(url: str, what: str, exc: BaseException) -> StoreError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return StoreError(f"{what} {show_url(url)}: {type(exc).__name__}: "
                      f"{scrub(detail, url)[:300]}")


def table_names(url: str, *, snapshot: bool = False) -> set[str]:
    """The tables in a store, read without writing anything."""
    if kind_of(url) == "memory":
        return set()
    engine = read_engine(url, snapshot=snapshot)
    try:
        return set(inspect(engine).get_table_names())
    except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
        raise _guarded(url, "cannot read", exc) from None
    finally:
        engine.dispose()


class _ReadCheckpoints(Checkpoints):
    """LangGraph savers inside a read transaction; retention and standalone savers refuse."""

    def __init__(self, store: ReadOnlyStore) -> None:
        self.store = store

    def saver(self, tx: Tx) -> BaseCheckpointSaver:
        assert isinstance(tx, SqlTx) and tx.conn is not None
        raw = tx.conn.connection.driver_connection
        if self.store.dialect == "sqlite":
            from adapters._upstream import sqlite_saver_in_transaction

            return sqlite_saver_in_transaction(raw)  # type: ignore[arg-type]
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver(raw)  # type: ignore[arg-type]

    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        raise self.store.refuse("a checkpointer")

    def retain(self, tx: Tx) -> None:
        raise self.store.refuse("checkpoint retention")


class ReadOnlyStore(SqlStore):
    """A SQL store memshift can read threads from and never write to."""

    read_only = True

    def __init__(self, url: str, engine: Engine) -> None:
        super().__init__(show_url(url), engine)
        self.dialect = kind_of(url)
        if self.dialect == "sqlite":
            self.translated = (SQLAlchemyError, sqlite3.Error)
        else:
            import psycopg

            self.translated = (SQLAlchemyError, psycopg.Error)
        self.checkpoints = _ReadCheckpoints(self)

    def refuse(self, what: str) -> StoreError:
        return StoreError(f"{self.url} is open read-only: {what} would write")

    def begin(self, thread_id: str, write: bool = True) -> Tx:
        if write:
            raise self.refuse(f"a write to thread {thread_id!r}")
        return super().begin(thread_id, write=False)

    def _dialect_insert(self, table: Any) -> Any:
        raise self.refuse("an insert")

    def _lock(self, conn: Any, thread_id: str) -> None:
        raise self.refuse("a thread lock")


def open_read_only(url: str, *, snapshot: bool = False) -> ReadOnlyStore | None:
    """A read-only store on ``url``, or ``None`` when it holds no memshift tables (or, for
    SQLite, no file): nothing to read, and nothing was created to find that out."""
    if kind_of(url) == "memory":
        return None
    if kind_of(url) == "sqlite" and not sqlite_path(url).exists():
        return None
    if "memshift_transcript" not in table_names(url, snapshot=snapshot):
        return None
    engine = read_engine(url, snapshot=snapshot)
    _refuse_newer(engine, url)
    return ReadOnlyStore(url, engine)


def _refuse_newer(engine: Engine, url: str) -> None:
    """A store written by a newer memshift may mean something this one cannot read; one
    whose tables are behind this memshift's lacks what the reads ask for (nothing is
    upgraded by a read-only open)."""
    from adapters.stores.versions import CURRENT, read_status, refuse_newer

    try:
        with engine.connect() as conn:
            status = read_status(conn)
    except (SQLAlchemyError, sqlite3.Error) as exc:
        raise _guarded(url, "cannot read the schema of", exc) from None
    refuse_newer(status, show_url(url))
    if status.behind:
        raise StoreError(f"{show_url(url)} has {status.describe()}; this memshift reads "
                         f"version {CURRENT}: run `memshift schema upgrade --store URL` first "
                         "(a read-only command never changes the schema)")


def read_only_saver(url: str, *, snapshot: bool = False) -> BaseCheckpointSaver:
    """A LangGraph saver that reads someone else's graph threads (``--from graph``)."""
    from adapters._upstream import mark_setup_done

    if kind_of(url) == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        try:
            lite = _sqlite_connect(sqlite_path(url), snapshot)
        except sqlite3.Error as exc:
            raise _guarded(url, "cannot open", exc) from None
        return mark_setup_done(SqliteSaver(lite))
    if kind_of(url) != "postgresql":
        raise StoreError(f"--from graph needs a sqlite or postgresql store, got {show_url(url)}")
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conninfo, args = _read_only_session(url)
    try:
        conn = psycopg.Connection.connect(conninfo, autocommit=True, prepare_threshold=0,
                                          row_factory=dict_row, **args)
    except (psycopg.Error, ValueError) as exc:
        raise _guarded(url, "cannot connect to", exc) from None
    return PostgresSaver(conn)  # type: ignore[arg-type]
