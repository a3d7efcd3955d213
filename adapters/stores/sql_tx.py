"""SQL transactions: the transaction object both drivers share, and ``SqlStore``'s async driver.

A transaction's logic is written once, as sync code in ``SqlStore``: ``_open`` (options,
``BEGIN`` or a batch that will send it, the lock), the concern methods, ``_finish`` (the
batch's last writes with ``COMMIT``). The sync driver calls it directly. The async driver
runs the very same code through ``AsyncConnection.run_sync``, in SQLAlchemy's greenlet:
SQLAlchemy statements await the async DBAPI there, and so does a PostgreSQL batch
(``adapters.stores.batch``, on the raw async psycopg connection). No worker thread.

Whatever uses the connection directly sends the batch's queue first, so statements run in
the order they were issued: ``_conn`` (sync, and inside ``arun``), ``AsyncDriver.aflush``
(before ``AsyncPostgresSaver`` touches the raw connection).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from sqlalchemy.engine import Connection

from adapters.stores.base import Store, Tx
from adapters.stores.batch import Batch

__all__ = ["AsyncDriver", "SqlTx"]

logger = logging.getLogger("memshift.store")


class SqlTx(Tx):
    """``conn``: the sync connection (for an async transaction, the greenlet-bridged one
    that ``AsyncConnection.run_sync`` hands over); ``aconn``: the async connection;
    ``batch``: the queued statements of a batching store (see ``adapters.stores.batch``)."""

    def __init__(self, thread_id: str, conn: Connection | None, aconn: Any = None,
                 lock: Any = None, batch: Batch | None = None) -> None:
        super().__init__(thread_id)
        self.conn, self.aconn, self.lock, self.batch = conn, aconn, lock, batch


def _conn(tx: Tx) -> Connection:
    """The transaction's connection, with every queued statement sent first (order kept)."""
    assert isinstance(tx, SqlTx) and tx.conn is not None, "run SQL through Store.run/arun"
    if tx.batch is not None:
        tx.batch.flush()
    return tx.conn


class AsyncDriver(Store):
    """``abegin``/``arun``/``acommit``/``arollback`` of ``SqlStore``: its sync ``_open``,
    concern methods and ``_finish``, each run in one greenlet on this loop's async engine."""

    def __init__(self) -> None:
        super().__init__()
        self._aengines: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    # -- the shared sync steps (SqlStore) ---------------------------------------------
    def _open(self, conn: Connection, thread_id: str, write: bool,
              single: bool = False) -> Batch | None:
        raise NotImplementedError

    def _finish(self, conn: Connection, batch: Batch | None) -> None:
        raise NotImplementedError

    def _make_async_engine(self) -> Any:
        raise NotImplementedError

    def _async_engine(self) -> Any:
        """One async engine per event loop (async connections belong to their loop)."""
        import asyncio

        loop = asyncio.get_running_loop()
        engine = self._aengines.get(loop)
        if engine is None:
            engine = self._aengines[loop] = self._make_async_engine()
        return engine

    # -- the driver ---------------------------------------------------------------------
    async def abegin(self, thread_id: str, write: bool = True, single: bool = False) -> Tx:
        aconn = None
        try:
            with self.guard("begin"):
                aconn = await self._async_engine().connect()
                batch = await aconn.run_sync(self._open, thread_id, write, single)
            return SqlTx(thread_id, None, aconn, batch=batch)
        except BaseException:
            if aconn is not None:
                await _aclose_quietly(aconn)
            raise

    async def acommit(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        try:
            with self.guard("commit"):
                await tx.aconn.run_sync(self._finish, tx.batch)
        finally:
            if tx.batch is not None:
                tx.batch.close()
            await _aclose_quietly(tx.aconn)

    async def arollback(self, tx: Tx) -> None:
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        if tx.batch is not None:
            tx.batch.close()  # what is still queued is simply never sent
        await _aclose_quietly(tx.aconn)  # closing rolls back what the server has

    async def arun(self, tx: Tx, fn: Callable[..., Any], *args: Any) -> Any:
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        with self.guard("store operation"):
            return await tx.aconn.run_sync(
                lambda conn: fn(SqlTx(tx.thread_id, conn, tx.aconn, batch=tx.batch), *args))

    async def aflush(self, tx: Tx) -> None:
        """The async ``_conn``: send what the batch queued (``BEGIN``, the lock, the turn)
        before anything else runs on the raw connection."""
        assert isinstance(tx, SqlTx) and tx.aconn is not None
        batch = tx.batch
        if batch is not None and batch.queued:
            with self.guard("store operation"):
                await tx.aconn.run_sync(lambda _conn: batch.flush())

    async def aclose(self) -> None:
        """Dispose of this loop's async engine (call before the loop ends)."""
        import asyncio

        engine = self._aengines.pop(asyncio.get_running_loop(), None)
        if engine is not None:
            await engine.dispose()
        await self.checkpoints.aclose()


async def _aclose_quietly(aconn: Any) -> None:
    """Close (which rolls back); a connection that died is discarded, not returned."""
    try:
        await aconn.close()
    except Exception as exc:
        logger.debug("discarding a dead connection: %s", type(exc).__name__)
        with suppress(Exception):
            await aconn.invalidate()
