"""SQL stores (SQLite, PostgreSQL): memshift's tables through SQLAlchemy Core.

Tables (created before LangChain's, all statements parameterised):
- ``memshift_transcript``: append-only raw messages, unique per (thread, message id);
- ``memshift_window``: the classic verbatim window (64-bit row ids);
- ``memshift_classic``: the running summary and fold count per thread;
- ``memshift_folds``: fold records, written in the transaction of the state they describe.
A write is one connection and one transaction (``SqlStore.transaction``); the dialect
modules bring the per-thread lock that lives exactly as long as it.
"""

from __future__ import annotations

import json
import logging
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from sqlalchemy import (
    BigInteger, Boolean, Column, Float, Index, Integer, MetaData, Table, Text, UniqueConstraint,
    bindparam, delete, func, literal_column, select, union_all,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import StoreError
from adapters.stores.base import ClassicSnapshot, ClassicState, Placement, Store, Tx
from adapters.stores.url import scrub as scrub_password, scrub_cause

__all__ = ["SqlStore", "SqlTx", "scrub_password"]

logger = logging.getLogger("memshift.store")

_ID = BigInteger().with_variant(Integer, "sqlite")  # SQLite: INTEGER keys are 64-bit rowids

metadata = MetaData()
transcript_table = Table(
    "memshift_transcript", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("message_id", Text, nullable=False),
    Column("message", Text, nullable=False),
    UniqueConstraint("thread_id", "message_id", name="uq_memshift_transcript_message"),
    Index("ix_memshift_transcript_thread", "thread_id", "id"),
)
window_table = Table(
    "memshift_window", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("session_id", Text),
    Column("message", Text),
    Index("ix_memshift_window_session", "session_id", "id"),
)
folds_table = Table(
    "memshift_folds", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("record", Text, nullable=False),
    Index("ix_memshift_folds_thread", "thread_id", "id"),
)
classic_table = Table(
    "memshift_classic", metadata,
    Column("thread_id", Text, primary_key=True),
    Column("summary", Text, nullable=False, default=""),
    Column("folds", Integer, nullable=False, default=0),
)

placement_table = Table(
    "memshift_placement", metadata,
    Column("thread_id", Text, primary_key=True),
    Column("backend", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("since", Float, nullable=False),
    Column("pinned", Boolean, nullable=False, default=False),
)

_READ_CLASSIC = union_all(
    select(literal_column("0").label("kind"), classic_table.c.summary.label("text"),
           classic_table.c.folds.label("n")).where(classic_table.c.thread_id == bindparam("tid")),
    select(literal_column("1"), window_table.c.message, window_table.c.id)
    .where(window_table.c.session_id == bindparam("tid")),
).order_by("kind", "n")


def dump_message(message: BaseMessage) -> str:
    return json.dumps(message_to_dict(message), ensure_ascii=False)


def load_message(raw: str) -> BaseMessage:
    return messages_from_dict([json.loads(raw)])[0]


class SqlTx(Tx):
    """``conn``: the sync connection (for an async transaction, the greenlet-bridged one
    that ``AsyncConnection.run_sync`` hands over); ``aconn``: the async connection."""

    def __init__(self, thread_id: str, conn: Connection | None, aconn: Any = None,
                 lock: Any = None) -> None:
        super().__init__(thread_id)
        self.conn, self.aconn, self.lock = conn, aconn, lock


def _conn(tx: Tx) -> Connection:
    assert isinstance(tx, SqlTx) and tx.conn is not None, "run SQL through Store.run/arun"
    return tx.conn


class SqlClassic(ClassicState):
    """Classic summary + window in ``memshift_classic`` / ``memshift_window``."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def read(self, tx: Tx) -> ClassicSnapshot:
        """Summary and window in one statement (one round trip): the summary row first
        (kind 0), then the window rows (kind 1) by id."""
        conn, tid = _conn(tx), tx.thread_id
        rows = conn.execute(_READ_CLASSIC, {"tid": tid}).all()
        summary, folds = (rows[0][1], rows[0][2]) if rows and rows[0][0] == 0 else ("", 0)
        window = [r for r in rows if r[0] == 1]
        return ClassicSnapshot(summary, folds, [load_message(r[1]) for r in window],
                               [r[2] for r in window])

    def append(self, tx: Tx, messages: Sequence[BaseMessage]) -> list[Any]:
        if not messages:
            return []
        result = _conn(tx).execute(window_table.insert().returning(window_table.c.id), [
            {"session_id": tx.thread_id, "message": dump_message(m)} for m in messages])
        return [r[0] for r in result]

    def fold(self, tx: Tx, summary: str, folds: int, drop: Sequence[Any]) -> None:
        conn = _conn(tx)
        if drop:
            conn.execute(delete(window_table).where(window_table.c.session_id == tx.thread_id,
                                                    window_table.c.id <= max(drop)))
        self.store.upsert_classic(conn, tx.thread_id, summary, folds)

    def replace(self, tx: Tx, summary: str, folds: int, window: Sequence[BaseMessage]) -> None:
        conn = _conn(tx)
        conn.execute(delete(window_table).where(window_table.c.session_id == tx.thread_id))
        self.append(tx, window)
        self.store.upsert_classic(conn, tx.thread_id, summary, folds)

    def clear(self, tx: Tx) -> None:
        conn = _conn(tx)
        conn.execute(delete(window_table).where(window_table.c.session_id == tx.thread_id))
        conn.execute(delete(classic_table).where(classic_table.c.thread_id == tx.thread_id))


class SqlStore(Store):
    """Shared SQL behaviour; dialect modules bring the engine, the lock and the checkpoints."""

    _secret: str | None = None  # the store URL whose password is scrubbed from driver messages
    translated: tuple[type[BaseException], ...] = (SQLAlchemyError,)
    # Read-only transactions without BEGIN/COMMIT: only where every read the backends make
    # in one is a single statement (PostgreSQL: the union read, PostgresSaver.get_tuple).
    autocommit_reads = False

    def __init__(self, url: str, engine: Engine) -> None:
        super().__init__()
        self.url = url
        self.engine = engine
        self.classic = SqlClassic(self)
        import weakref

        self._aengines: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # -- dialect ---------------------------------------------------------------------
    @abstractmethod
    def _dialect_insert(self, table: Table) -> Any:
        """The dialect's INSERT construct (it has ``on_conflict_do_nothing/_update``)."""

    @abstractmethod
    def _lock(self, conn: Connection, thread_id: str) -> None:
        """Take the thread's lock inside the open transaction (released by its end)."""

    def _begin(self, conn: Connection) -> Any:
        return conn.begin()

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

    # -- transactions ----------------------------------------------------------------
    def begin(self, thread_id: str, write: bool = True) -> Tx:
        lock = self._stripe(thread_id) if write else None
        if lock is not None:
            lock.acquire()
        conn = None
        try:
            with self.guard("begin"):
                conn = self.engine.connect().execution_options(memshift_write=write)
                if not write and self.autocommit_reads:  # one round trip, no BEGIN/COMMIT
                    conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.begin()
                if write:
                    self._lock(conn, thread_id)
            return SqlTx(thread_id, conn, lock=lock)
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
                tx.conn.commit()
        finally:
            _close_quietly(tx.conn)
            if tx.lock is not None:
                tx.lock.release()
                tx.lock = None

    def rollback(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.conn is not None
        _close_quietly(tx.conn)  # closing a connection rolls its transaction back
        if tx.lock is not None:
            tx.lock.release()
            tx.lock = None

    # -- the async driver (same SQL, run through SQLAlchemy's async engine) --------------
    def _async_url(self) -> str:
        raise NotImplementedError

    def _async_engine(self) -> Any:
        """One async engine per event loop (async connections belong to their loop)."""
        import asyncio

        loop = asyncio.get_running_loop()
        engine = self._aengines.get(loop)
        if engine is None:
            engine = self._make_async_engine()
            self._aengines[loop] = engine
        return engine

    def _make_async_engine(self) -> Any:
        raise NotImplementedError

    async def abegin(self, thread_id: str, write: bool = True) -> Tx:
        aconn = None
        try:
            with self.guard("begin"):
                aconn = await self._async_engine().connect()
                aconn = await aconn.execution_options(memshift_write=write)
                if not write and self.autocommit_reads:
                    aconn = await aconn.execution_options(isolation_level="AUTOCOMMIT")
                await aconn.begin()
                if write:
                    await aconn.run_sync(self._lock, thread_id)
            return SqlTx(thread_id, None, aconn)
        except BaseException:
            if aconn is not None:
                await _aclose_quietly(aconn)
            raise

    async def acommit(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        try:
            with self.guard("commit"):
                await tx.aconn.commit()
        finally:
            await _aclose_quietly(tx.aconn)

    async def arollback(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        await _aclose_quietly(tx.aconn)

    async def arun(self, tx: Tx, fn: Any, *args: Any) -> Any:
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        with self.guard("store operation"):
            return await tx.aconn.run_sync(
                lambda conn: fn(SqlTx(tx.thread_id, conn, tx.aconn), *args))

    def run(self, tx: Tx, fn: Any, *args: Any) -> Any:
        with self.guard("store operation"):
            return fn(tx, *args)

    def upsert_classic(self, conn: Connection, thread_id: str, summary: str, folds: int) -> None:
        stmt = self._dialect_insert(classic_table).values(
            thread_id=thread_id, summary=summary, folds=folds)
        conn.execute(stmt.on_conflict_do_update(
            index_elements=["thread_id"], set_={"summary": summary, "folds": folds}))

    # -- thread log ------------------------------------------------------------------
    def append_transcript(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        rows = [{"thread_id": tx.thread_id, "message_id": m.id, "message": dump_message(m)}
                for m in messages if m.id is not None]
        if rows:
            _conn(tx).execute(self._dialect_insert(transcript_table).on_conflict_do_nothing(), rows)

    def known_ids(self, tx: Tx, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = _conn(tx).execute(select(transcript_table.c.message_id).where(
            transcript_table.c.thread_id == tx.thread_id,
            transcript_table.c.message_id.in_(list(ids)))).scalars()
        return set(rows)

    def last_ids(self, tx: Tx, n: int) -> list[str]:
        rows = _conn(tx).execute(select(transcript_table.c.message_id)
                                 .where(transcript_table.c.thread_id == tx.thread_id)
                                 .order_by(transcript_table.c.id.desc()).limit(n)).scalars()
        return list(reversed(list(rows)))

    def append_fold(self, tx: Tx, record: dict[str, Any]) -> None:
        _conn(tx).execute(folds_table.insert(), {
            "thread_id": tx.thread_id, "record": json.dumps(record, ensure_ascii=False)})

    def placement(self, tx: Tx) -> Placement | None:
        row = _conn(tx).execute(select(
            placement_table.c.backend, placement_table.c.version, placement_table.c.since,
            placement_table.c.pinned).where(placement_table.c.thread_id == tx.thread_id)).first()
        return Placement(row[0], row[1], row[2], bool(row[3])) if row else None

    def set_placement(self, tx: Tx, placement: Placement) -> None:
        values = {"backend": placement.backend, "version": placement.version,
                  "since": placement.since, "pinned": placement.pinned}
        stmt = self._dialect_insert(placement_table).values(thread_id=tx.thread_id, **values)
        _conn(tx).execute(stmt.on_conflict_do_update(index_elements=["thread_id"], set_=values))

    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        c = placement_table.c
        moved = func.sum(func.cast(c.version > 1, Integer))
        with self.guard("read placements"), self.engine.connect() as conn:
            rows = conn.execute(select(c.backend, c.pinned, func.count(), moved)
                                .group_by(c.backend, c.pinned).order_by(c.backend, c.pinned))
            return [(r[0], bool(r[1]), int(r[2]), int(r[3] or 0)) for r in rows]

    def transcript_in(self, tx: Tx) -> list[BaseMessage]:
        rows = _conn(tx).execute(select(transcript_table.c.message)
                                 .where(transcript_table.c.thread_id == tx.thread_id)
                                 .order_by(transcript_table.c.id)).scalars()
        return [load_message(r) for r in rows]

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        with self.guard("read transcript"), self.engine.connect() as conn:
            return self.transcript_in(SqlTx(thread_id, conn))

    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        with self.guard("read fold records"), self.engine.connect() as conn:
            rows = conn.execute(select(folds_table.c.record)
                                .where(folds_table.c.thread_id == thread_id)
                                .order_by(folds_table.c.id)).scalars()
            return [json.loads(r) for r in rows]

    def thread_ids(self) -> list[str]:
        with self.guard("list threads"), self.engine.connect() as conn:
            first = func.min(transcript_table.c.id)
            rows = conn.execute(select(transcript_table.c.thread_id, first)
                                .group_by(transcript_table.c.thread_id).order_by(first))
            return [r[0] for r in rows]

    def iter_thread_ids(self, batch: int = 1000) -> Iterator[str]:
        """Thread ids in id order, a page at a time (flat memory for any number of threads)."""
        last: str | None = None
        while True:
            query = (select(transcript_table.c.thread_id).distinct()
                     .order_by(transcript_table.c.thread_id).limit(batch))
            if last is not None:
                query = query.where(transcript_table.c.thread_id > last)
            with self.guard("list threads"), self.engine.connect() as conn:
                page = [r[0] for r in conn.execute(query)]
            yield from page
            if len(page) < batch:
                return
            last = page[-1]

    def close(self) -> None:
        super().close()
        self.engine.dispose()
        self._aengines.clear()  # their pools are dropped with their loops

    async def aclose(self) -> None:
        """Dispose of this loop's async engine (call before the loop ends)."""
        import asyncio

        engine = self._aengines.pop(asyncio.get_running_loop(), None)
        if engine is not None:
            await engine.dispose()
        await self.checkpoints.aclose()


def _close_quietly(conn: Connection) -> None:
    """Close (which rolls back); a connection that died is discarded, not returned."""
    try:
        conn.close()
    except Exception as exc:
        logger.debug("discarding a dead connection: %s", type(exc).__name__)
        with suppress(Exception):
            conn.invalidate()


async def _aclose_quietly(aconn: Any) -> None:
    try:
        await aconn.close()
    except Exception as exc:
        logger.debug("discarding a dead connection: %s", type(exc).__name__)
        with suppress(Exception):
            await aconn.invalidate()
