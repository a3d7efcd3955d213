"""SQL stores (SQLite, PostgreSQL): memshift's tables (``adapters.stores.schema``, created
before LangChain's, every statement parameterised) through SQLAlchemy Core.

A write is one connection and one transaction (``SqlStore.transaction``); the dialect
modules bring the per-thread lock that lives exactly as long as it. On PostgreSQL a
transaction's writes are queued and sent with its next read or its ``COMMIT``
(``adapters.stores.batch``), on either driver: the async one runs this module's sync code
in SQLAlchemy's greenlet (``adapters.stores.sql_tx``). What the store keeps per thread:
``adapters.stores.sql_log`` (transcript, folds, placement) and ``adapters.stores.sql_classic``.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cached_property
from typing import Any

from sqlalchemy import Table, bindparam
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import StoreError
from adapters.stores.base import Placements, Reads, Tx
from adapters.stores.batch import Batch
from adapters.stores.evidence import EvidenceLog
from adapters.stores.marks import SqlMarks
from adapters.stores.schema import (
    COUNT_TRANSCRIPT, ERASE_EVIDENCE, ERASE_FOLDS, ERASE_LONG_ID, ERASE_PLACEMENT,
    ERASE_TRANSCRIPT, classic_table, forget_decoded, metadata,
)
from adapters.stores.sql_classic import SqlClassic
from adapters.stores.sql_evidence import SqlEvidence
from adapters.stores.sql_log import SqlThreadLog
from adapters.stores.sql_tx import AsyncDriver, SqlTx, _conn  # noqa: F401 (_conn: re-exported)
from adapters.stores.url import scrub as scrub_password, scrub_cause

__all__ = ["SqlStore", "SqlTx", "metadata", "scrub_password"]

logger = logging.getLogger("memshift.store")


class SqlStore(SqlThreadLog, AsyncDriver, Placements, Reads, SqlMarks, SqlEvidence, EvidenceLog):
    """Shared SQL behaviour; dialect modules bring the engine, the lock and the checkpoints."""

    _secret: str | None = None  # the store URL whose password is scrubbed from driver messages
    translated: tuple[type[BaseException], ...] = (SQLAlchemyError,)
    # Read-only transactions without BEGIN/COMMIT: only where every read the backends make
    # in one is a single statement (PostgreSQL: the union read, PostgresSaver.get_tuple).
    autocommit_reads = False
    # Transactions queue their writes and send them with the next read or the COMMIT
    # (``adapters.stores.batch``): PostgreSQL, where every statement is a round trip.
    batches: bool = False
    schema_applied: tuple[str, ...] = ()  # the schema steps this open ran (``prepare_schema``)

    def __init__(self, url: str, engine: Engine) -> None:
        super().__init__()
        self.url = url
        self.engine = engine
        self.classic = SqlClassic(self)
        self._compiled: dict[int, str] = {}

    # -- dialect ---------------------------------------------------------------------
    @abstractmethod
    def _dialect_insert(self, table: Table) -> Any:
        """The dialect's INSERT construct (it has ``on_conflict_do_nothing/_update``)."""

    @abstractmethod
    def _lock(self, conn: Connection, thread_id: str) -> None:
        """Take the thread's lock inside the open transaction (released by its end)."""

    def _batch(self, conn: Connection, thread_id: str, write: bool) -> Batch:
        """A batch on ``conn`` (autocommit) that opens the transaction and takes the lock."""
        raise NotImplementedError

    # -- statements: one SQLAlchemy construct each, run directly or through the batch ------
    def _sql(self, stmt: Any) -> str:
        """``stmt`` compiled once for this dialect (the batch sends driver SQL)."""
        sql = self._compiled.get(id(stmt))
        if sql is None:
            # compiled as for executemany: an INSERT without a RETURNING nobody reads
            sql = self._compiled[id(stmt)] = str(stmt.compile(dialect=self.engine.dialect,
                                                              for_executemany=True))
        return sql

    def send(self, tx: Tx, stmt: Any, params: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Run a statement whose result is not needed (queued when the store batches).
        ``stmt``: a SQLAlchemy construct, or driver SQL (a string in the driver's paramstyle)."""
        batch = tx.batch if isinstance(tx, SqlTx) else None
        if batch is None:
            if isinstance(stmt, str):
                _conn(tx).exec_driver_sql(stmt, params)
            else:
                _conn(tx).execute(stmt, params)
            return
        sql = stmt if isinstance(stmt, str) else self._sql(stmt)
        if isinstance(params, list):
            batch.add_many(sql, params)
        else:
            batch.add(sql, params)

    def fetch(self, tx: Tx, stmt: Any, params: dict[str, Any]) -> Sequence[Any]:
        """A statement's rows (with whatever the batch queued before it, in one round trip)."""
        batch = tx.batch if isinstance(tx, SqlTx) else None
        if batch is None:
            return _conn(tx).execute(stmt, params).all()
        return batch.flush(self._sql(stmt), params) or []

    # -- errors ----------------------------------------------------------------------
    @contextmanager
    def guard(self, what: str = "store operation") -> Iterator[None]:
        """Translate driver errors into ``StoreError`` (the password never appears)."""
        try:
            yield
        except StoreError:
            raise
        except self.translated as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            detail = scrub_password(detail, self._secret)[:300]
            raise StoreError(f"{what} failed on {self.url}: {type(exc).__name__}: {detail}") from scrub_cause(exc, self._secret)

    # -- transactions: the steps both drivers run (the async one in SQLAlchemy's greenlet) --
    def _open(self, conn: Connection, thread_id: str, write: bool,
              single: bool = False) -> Batch | None:
        """Open the transaction on ``conn``: ``BEGIN`` and the lock now, or a batch that
        sends them with the first statement (and then nothing was sent yet). ``single``: a
        read whose body is one statement (its own snapshot): no ``BEGIN``/``COMMIT``."""
        conn.execution_options(memshift_write=write, memshift_single=single and not write)
        if self.batches or (not write and self.autocommit_reads):  # no BEGIN/COMMIT
            conn.execution_options(isolation_level="AUTOCOMMIT")  # of its own
        conn.begin()
        if self.batches:  # BEGIN and the lock wait for the first statement
            return self._batch(conn, thread_id, write)
        if write:
            self._lock(conn, thread_id)
        return None

    def _finish(self, conn: Connection, batch: Batch | None) -> None:
        """Commit: the batch's last writes travel with its ``COMMIT``."""
        if batch is not None:
            batch.commit()
        conn.commit()

    def begin(self, thread_id: str, write: bool = True, single: bool = False) -> Tx:
        lock = self._stripe(thread_id) if write else None
        if lock is not None:
            lock.acquire()
        conn = None
        try:
            with self.guard("begin"):
                conn = self.engine.connect()
                batch = self._open(conn, thread_id, write, single)
            return SqlTx(thread_id, conn, lock=lock, batch=batch)
        except BaseException:
            if conn is not None:
                _close_quietly(conn)
            if lock is not None:
                lock.release()
            raise

    def commit(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.conn is not None
        try:
            with self.guard("commit"):
                self._finish(tx.conn, tx.batch)
        finally:
            if tx.batch is not None:
                tx.batch.close()
            _close_quietly(tx.conn)
            if tx.lock is not None:
                tx.lock.release()
                tx.lock = None

    def rollback(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.conn is not None
        if tx.batch is not None:
            tx.batch.close()  # what is still queued is simply never sent
        _close_quietly(tx.conn)  # closing a connection rolls its transaction back
        if tx.lock is not None:
            tx.lock.release()
            tx.lock = None

    def run(self, tx: Tx, fn: Any, *args: Any) -> Any:
        with self.guard("store operation"):
            return fn(tx, *args)

    @cached_property
    def _upsert_classic(self) -> Any:
        stmt = self._dialect_insert(classic_table).values(
            thread_id=bindparam("tid"), summary=bindparam("summary"), folds=bindparam("folds"))
        return stmt.on_conflict_do_update(index_elements=["thread_id"], set_={
            "summary": stmt.excluded.summary, "folds": stmt.excluded.folds})

    def upsert_classic(self, tx: Tx, summary: str, folds: int) -> None:
        self.send(tx, self._upsert_classic, {"tid": tx.thread_id, "summary": summary,
                                              "folds": folds})

    def erase(self, tx: Tx, placement: bool) -> int:
        """``Store.erase`` in SQL: memshift's rows and LangGraph's checkpoint tables, in the
        thread's transaction (``_before_erase``: SQLite zeroes what it deletes)."""
        self._before_erase(tx)
        forget_decoded()
        (count,) = self.fetch(tx, COUNT_TRANSCRIPT, {"tid": tx.thread_id})[0]
        # the whole thread: its id goes too (placement, a long id's original, shadow evidence)
        whole = (ERASE_PLACEMENT, ERASE_LONG_ID, ERASE_EVIDENCE) if placement else ()
        for stmt in (ERASE_TRANSCRIPT, ERASE_FOLDS, *whole):
            self.send(tx, stmt, {"tid": tx.thread_id})
        self.classic.clear(tx)
        self.checkpoints.erase(tx)
        return int(count)

    def _before_erase(self, tx: Tx) -> None:
        """A dialect's preparation for deleting content for good."""

    # -- schema ----------------------------------------------------------------------
    def prepare_schema(self, create: bool, setup_saver: Any = None) -> None:
        """``create``: bring memshift's tables to this version (the caller holds the dialect's
        setup lock), then LangGraph's (``setup_saver``). Otherwise run no DDL and refuse a
        store that is missing either or is behind. A newer memshift's store is always refused."""
        from adapters.stores.saver_schema import saver_status
        from adapters.stores.versions import require_current, upgrade

        with self.guard("schema setup"):
            if create:
                self.schema_applied = tuple(upgrade(self.engine, self.url))
                setup_saver()
                return
            with self.engine.connect() as conn:  # one connection reads both schemas
                require_current(conn, self.url)
                saver = saver_status(conn)
            if saver.pending:
                raise StoreError(f"{self.url}: LangGraph's checkpoint tables are {saver.state} "
                                 "and create_schema=False runs no DDL: run `memshift schema "
                                 "upgrade --store URL` (or `--sql` for the statements)")

    def close(self) -> None:
        super().close()
        self.engine.dispose()
        self._aengines.clear()  # their pools are dropped with their loops


def _close_quietly(conn: Connection) -> None:
    """Close (which rolls back); a connection that died is discarded, not returned."""
    try:
        conn.close()
    except Exception as exc:
        logger.debug("discarding a dead connection: %s", type(exc).__name__)
        with suppress(Exception):
            conn.invalidate()
