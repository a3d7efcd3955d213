"""The async PostgreSQL path batches like the sync one (``adapters.stores.batch`` driven
through SQLAlchemy's greenlet): the same round trips, the same order, nothing half-written
when a statement fails, the task is cancelled or the connection is terminated."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from adapters.errors import StoreError
from adapters.stores import open_store
from adapters.stores.batch import Batch
from adapters.stores.url import lock_key
from compat import SummaryMemory
from compat.testing.conversations import filler_turn
from tests.test_pg_batch import HOSTILE, trips


def _checked_out(memory: SummaryMemory) -> int:
    """Connections of this loop's async engine that are not back in its pool."""
    return memory._rt.store._async_engine().pool.checkedout()


def test_an_async_classic_save_is_two_round_trips_and_a_load_one(fresh_store: Any) -> None:
    async def run() -> None:
        async with SummaryMemory(backend="classic", store=fresh_store("postgres")) as memory:
            await memory.asave("t", "q0", "a0")
            with trips() as sent:
                await memory.asave("t", *filler_turn("t", 1, 8))
            assert sent == [["BEGIN", "SELECT", "SELECT", "INSERT", "SELECT"],
                            ["INSERT", "INSERT", "COMMIT"]], sent
            with trips() as sent:
                view = await memory.aload("t")
            assert sent == [["SELECT"]], sent  # placement, version and state: one statement
            assert [m.content for m in view.messages][-1].startswith("answer 1")
    asyncio.run(run())


def test_an_async_middleware_save_takes_the_round_trips_of_a_sync_one(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    with SummaryMemory(backend="middleware", store=url) as memory:
        memory.save("s", "q0", "a0")
        with trips() as sync_sent:
            memory.save("s", "q1", "a1")

    async def run() -> None:
        async with SummaryMemory(backend="middleware", store=url) as memory:
            await memory.asave("t", "q0", "a0")
            with trips() as sent:
                await memory.asave("t", "q1", "a1")
            assert sent[0] == ["BEGIN", "SELECT", "SELECT", "INSERT"], sent  # then the saver's
            assert sent[-1] == ["COMMIT"] or sent[-1][-1] == "COMMIT", sent
            assert sent == sync_sent, (sent, sync_sent)
            with trips() as sent:
                view = await memory.aload("t")
            # the placement, then the saver's own read (it takes the connection itself)
            assert sent == [["SELECT"], ["SELECT"]], sent
            assert [m.content for m in view.messages] == ["q0", "a0", "q1", "a1"]
    asyncio.run(run())


def test_async_saver_statements_come_after_the_queued_begin_lock_and_turn(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    store = open_store(url)

    async def run() -> None:
        tx = await store.abegin("t")
        try:
            await store.arun(tx, store.append_transcript, [HumanMessage("first", id="m1")])
            saver: Any = await store.checkpoints.asaver(tx)
            raw = saver.conn
            assert raw.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            cur = await raw.execute("SELECT message_id FROM memshift_transcript "
                                    "WHERE thread_id = %s", ("t",))
            assert [r[0] for r in await cur.fetchall()] == ["m1"]  # the turn went first
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as other:
                cur = await other.execute("SELECT pg_try_advisory_xact_lock(%s)", (lock_key("t"),))
                assert (await cur.fetchone())[0] is False  # and the lock before it
            await store.arun(tx, store.append_transcript, [AIMessage("second", id="m2")])
            with trips() as sent:
                await store.checkpoints.aretain(tx)
                assert sent == []  # queued
                await store.acommit(tx)
            assert sent == [["INSERT", "WITH", "COMMIT"]], sent  # retention goes with COMMIT
        except BaseException:
            await store.arollback(tx)
            await store.aclose()
            raise
        with trips() as sent:  # a transaction that did nothing sends nothing
            tx = await store.abegin("t")
            await store.acommit(tx)
            tx = await store.abegin("t", write=False)
            await store.acommit(tx)
        assert sent == [], sent
        await store.aclose()
    asyncio.run(run())
    assert [m.id for m in store.transcript("t")] == ["m1", "m2"]
    store.close()


def test_a_failing_statement_in_an_async_batch_writes_nothing(
        fresh_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    real_commit = Batch.commit

    def failing_commit(self: Batch) -> None:  # the last message: the window, then an error
        self.add("SELECT 1 / 0")
        real_commit(self)

    async def run() -> None:
        async with SummaryMemory(backend="classic", store=fresh_store("postgres")) as memory:
            await memory.asave("t", "q0", "a0")
            monkeypatch.setattr(Batch, "commit", failing_commit)
            with pytest.raises(StoreError, match="DivisionByZero"):
                await memory.asave("t", "q1", "a1")
            monkeypatch.setattr(Batch, "commit", real_commit)
            assert [m.content for m in memory.transcript("t")] == ["q0", "a0"]
            assert [m.content for m in (await memory.aload("t")).messages] == ["q0", "a0"]
            assert _checked_out(memory) == 0
            await memory.asave("t", "q2", "a2")  # the pool's connections are usable again
            view = await memory.aload("t")
            assert [m.content for m in view.messages] == ["q0", "a0", "q2", "a2"]
    asyncio.run(run())


async def _lock_waiter(conn: psycopg.AsyncConnection) -> None:
    while True:
        cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type "
                                 "= 'Lock' AND datname = current_database()")
        if (await cur.fetchone())[0]:
            return
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("where", ["lock", "commit", "saver"])
def test_a_cancelled_asave_writes_nothing_and_releases_its_connection(
        where: str, fresh_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled while waiting for the thread's lock, before its COMMIT, or inside
    ``AsyncPostgresSaver`` after the turn reached the server."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from sqlalchemy.util import await_only

    url = fresh_store("postgres")
    backend = "middleware" if where == "saver" else "classic"
    started = asyncio.Event()

    def hang_commit(self: Batch) -> None:
        started.set()
        await_only(asyncio.sleep(3600))

    async def hang_aput(self: Any, *args: Any, **kwargs: Any) -> Any:
        started.set()
        await asyncio.sleep(3600)

    async def run() -> None:
        async with SummaryMemory(backend=backend, store=url) as memory:
            await memory.asave("t", "q0", "a0")
            holder = await psycopg.AsyncConnection.connect(url, autocommit=True)
            if where == "lock":
                await holder.execute("SELECT pg_advisory_lock(%s)", (lock_key("t"),))
            elif where == "commit":
                monkeypatch.setattr(Batch, "commit", hang_commit)
            else:
                monkeypatch.setattr(AsyncPostgresSaver, "aput", hang_aput)
            task = asyncio.create_task(memory.asave("t", "q1", "a1"))
            if where == "lock":  # until the save's batch waits for the lock on the server
                await asyncio.wait_for(_lock_waiter(holder), 10)
            else:
                await asyncio.wait_for(started.wait(), 10)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            monkeypatch.undo()
            await holder.close()  # releases the session lock
            assert _checked_out(memory) == 0
            assert [m.content for m in memory.transcript("t")] == ["q0", "a0"]
            assert [m.content for m in (await memory.aload("t")).messages] == ["q0", "a0"]
            await memory.asave("t", "q2", "a2")
            view = await memory.aload("t")
            assert [m.content for m in view.messages] == ["q0", "a0", "q2", "a2"]
    asyncio.run(run())


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_hostile_text_round_trips_byte_for_byte_through_the_async_batch(backend: str,
                                                                       fresh_store: Any) -> None:
    url = fresh_store("postgres")
    thread = "thread ' \\ ; %s %(x)s $$"

    async def run() -> None:
        async with SummaryMemory(backend=backend, store=url) as memory:
            for i, text in enumerate(HOSTILE):
                await memory.asave(thread, text, f"{text} / {i}")
            expected = [t for i, text in enumerate(HOSTILE) for t in (text, f"{text} / {i}")]
            assert [m.content for m in memory.transcript(thread)] == expected
            assert [m.content for m in (await memory.aload(thread)).messages] == expected
            assert [m.content for m in memory.load(thread).messages] == expected
            assert (await memory.aload("thread")).messages == []
    asyncio.run(run())
    with psycopg.connect(url) as conn:  # every table is still there
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    assert {"memshift_window", "memshift_transcript", "memshift_classic"} <= tables


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_terminated_connections_fail_one_async_save_at_most(backend: str, fresh_store: Any) -> None:
    url = fresh_store("postgres")

    async def work(memory: SummaryMemory, k: int) -> None:
        for i in range(4):
            await memory.asave(f"w{k}", f"q{i}", f"a{i}")
            await memory.aload(f"w{k}")

    async def run() -> None:
        async with SummaryMemory(backend=backend, store=url) as memory:
            await asyncio.gather(*(work(memory, k) for k in range(6)))  # several connections
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                cur = await conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                killed = (await cur.fetchone())[0]
            assert killed >= 2
            failed = 0
            for i in range(8):
                try:
                    await memory.asave("x", f"q{i}", f"a{i}")
                except StoreError:
                    failed += 1
            assert failed <= 1, failed  # (the sync engine's idle connection died too: not used)
            assert len((await memory.aload("x")).messages) == 2 * (8 - failed)
            for k in range(6):
                assert len((await memory.aload(f"w{k}")).messages) == 8
            assert _checked_out(memory) == 0
    asyncio.run(run())
