"""PostgreSQL transactions in few round trips (``adapters.stores.batch``): how many trips a
save and a load take, that data survives the client-side adaptation byte for byte, and that
a failure anywhere in a batch leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from adapters.errors import StoreError
from adapters.stores import open_store
from adapters.stores.batch import Batch
from compat import SummaryMemory
from compat.testing.conversations import filler_turn


@contextmanager
def trips() -> Iterator[list[list[str]]]:
    """Every round trip to the server, sync or async, as the statements it carried (first
    word of each; a driver's implicit ``BEGIN`` is a trip of its own)."""
    sent: list[list[str]] = []
    real: dict[tuple[type, str], Any] = {}  # the patched methods, restored on exit

    def flush(self: Batch, sql: str | None = None, params: Any = None) -> Any:
        batch = [*self._pending, *([sql] if sql is not None else [])]
        if batch:
            sent.append([s.split()[0].upper() for s in batch])
        return real[Batch, "flush"](self, sql, params)

    def record(cursor: Any, query: Any, many: bool = False) -> None:
        if isinstance(cursor, (psycopg.ClientCursor, psycopg.AsyncClientCursor)):
            return  # the batch's own cursors: counted by flush
        conn, idle = cursor.connection, psycopg.pq.TransactionStatus.IDLE
        if not conn.autocommit and conn.info.transaction_status == idle:
            sent.append(["BEGIN"])
        sent.append([("MANY " if many else "") + str(query).split()[0].upper()])

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        record(self, query)
        return real[psycopg.Cursor, "execute"](self, query, *args, **kwargs)

    def executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        record(self, query, many=True)
        return real[psycopg.Cursor, "executemany"](self, query, *args, **kwargs)

    async def aexecute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        record(self, query)
        return await real[psycopg.AsyncCursor, "execute"](self, query, *args, **kwargs)

    async def aexecutemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        record(self, query, many=True)
        return await real[psycopg.AsyncCursor, "executemany"](self, query, *args, **kwargs)

    def commit(self: Any) -> None:
        if self.info.transaction_status != 0:
            sent.append(["COMMIT"])
        real[psycopg.Connection, "commit"](self)

    async def acommit(self: Any) -> None:
        if self.info.transaction_status != 0:
            sent.append(["COMMIT"])
        await real[psycopg.AsyncConnection, "commit"](self)
    fakes = {(Batch, "flush"): flush, (psycopg.Connection, "commit"): commit,
             (psycopg.AsyncConnection, "commit"): acommit, (psycopg.Cursor, "execute"): execute,
             (psycopg.Cursor, "executemany"): executemany,
             (psycopg.AsyncCursor, "execute"): aexecute,
             (psycopg.AsyncCursor, "executemany"): aexecutemany}
    for (cls, name), fake in fakes.items():
        real[cls, name] = getattr(cls, name)
        setattr(cls, name, fake)
    try:
        yield sent
    finally:
        for (cls, name), fn in real.items():
            setattr(cls, name, fn)


def test_a_classic_save_is_two_round_trips_and_a_load_one(fresh_store: Any) -> None:
    memory = SummaryMemory(backend="classic", store=fresh_store("postgres"))
    memory.save("t", "q0", "a0")
    with trips() as sent:  # no load seen the thread here: the usual path
        memory.save("t", *filler_turn("t", 1, 8))
    # the lock is taken before anything is read; the placement read, the turn and the state
    # read travel together; the window and the state row's new version with the COMMIT
    assert sent == [["BEGIN", "SELECT", "SELECT", "INSERT", "SELECT"],
                    ["INSERT", "INSERT", "COMMIT"]], sent
    with trips() as sent:
        view = memory.load("t")
    assert sent == [["SELECT"]], sent  # placement, version and state: one statement
    assert [m.content for m in view.messages][-1].startswith("answer 1")
    memory.close()


def test_a_middleware_save_sends_the_turn_with_begin_and_the_lock(fresh_store: Any) -> None:
    memory = SummaryMemory(backend="middleware", store=fresh_store("postgres"))
    memory.save("t", "q0", "a0")
    with trips() as sent:
        memory.save("t", "q1", "a1")
    assert sent[0] == ["BEGIN", "SELECT", "SELECT", "INSERT"], sent  # lock, placement, turn
    assert sent[-1] == ["COMMIT"] or sent[-1][-1] == "COMMIT", sent
    assert len(sent) <= 7, sent  # then the saver's own read and writes
    assert [m.content for m in memory.load("t").messages] == ["q0", "a0", "q1", "a1"]
    memory.close()


def test_a_transaction_that_does_nothing_sends_nothing(fresh_store: Any) -> None:
    store = open_store(fresh_store("postgres"))
    with trips() as sent:
        with store.transaction("t"):
            pass
    assert sent == []
    store.close()


HOSTILE = ["it's", "back\\slash \\x00ff \\", "%s %(x)s %% %", "'; DROP TABLE memshift_window; --",
           "$$ $tag$ E'\\n'", "semi; colon; \"quoted\"", "naïve 漢字 العربية 🎉", "\t\r\n tabs",
           "?", ":name"]


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_hostile_text_round_trips_byte_for_byte(backend: str, fresh_store: Any) -> None:
    url = fresh_store("postgres")
    memory = SummaryMemory(backend=backend, store=url)
    thread = "thread ' \\ ; %s $$"
    for i, text in enumerate(HOSTILE):
        memory.save(thread, text, f"{text} / {i}")
    expected = [t for i, text in enumerate(HOSTILE) for t in (text, f"{text} / {i}")]
    assert [m.content for m in memory.transcript(thread)] == expected
    assert [m.content for m in memory.load(thread).messages] == expected
    assert memory.load("thread").messages == []  # no other thread sees any of it
    memory.close()
    with psycopg.connect(url) as conn:  # every table is still there
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    assert {"memshift_window", "memshift_transcript", "memshift_classic"} <= tables


def test_a_failing_statement_in_a_batch_writes_nothing(fresh_store: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    memory = SummaryMemory(backend="classic", store=fresh_store("postgres"))
    memory.save("t", "q0", "a0")
    real_commit = Batch.commit

    def failing_commit(self: Batch) -> None:  # the last message: the window, then an error
        self.add("SELECT 1 / 0")
        real_commit(self)
    monkeypatch.setattr(Batch, "commit", failing_commit)
    with pytest.raises(StoreError, match="DivisionByZero"):
        memory.save("t", "q1", "a1")
    monkeypatch.setattr(Batch, "commit", real_commit)
    assert [m.content for m in memory.transcript("t")] == ["q0", "a0"]  # nor the transcript
    assert [m.content for m in memory.load("t").messages] == ["q0", "a0"]
    memory.save("t", "q2", "a2")  # the pool's connections are usable again
    assert [m.content for m in memory.load("t").messages] == ["q0", "a0", "q2", "a2"]
    memory.close()


def test_queued_statements_go_before_anything_run_on_the_connection(fresh_store: Any) -> None:
    """Order is kept: a statement run directly (SQLAlchemy, a saver) sends the queue first."""
    from adapters.stores.sql import _conn

    store = open_store(fresh_store("postgres"))
    with store.transaction("t") as tx:
        store.append_transcript(tx, [HumanMessage("first", id="m1")])
        seen = _conn(tx).exec_driver_sql(
            "SELECT message_id FROM memshift_transcript WHERE thread_id = %(t)s", {"t": "t"}).all()
        assert [r[0] for r in seen] == ["m1"]
        store.append_transcript(tx, [AIMessage("second", id="m2")])
    assert [m.id for m in store.transcript("t")] == ["m1", "m2"]
    store.close()


def test_retention_is_amortized_and_bounded(fresh_store: Any) -> None:
    from adapters import MemoryPolicy

    url = fresh_store("postgres")
    memory = SummaryMemory(backend="middleware", store=url,
                           policy=MemoryPolicy(max_tokens=120, keep_tokens=60))
    retentions = 0
    for i in range(40):
        before = memory.load("t")
        with trips() as sent:
            memory.save("t", f"q{i} " + "word " * 8, f"a{i} " + "word " * 8)
        retentions += sum(w in ("DELETE", "WITH") for trip in sent for w in trip)
        assert len(list(memory.checkpointer.list({"configurable": {"thread_id": "t"}}))) <= 20
        after = memory.load("t")  # retention never touches the state it keeps
        assert after.folds > before.folds or after.messages[:-2] == before.messages
    every = memory._rt.store.checkpoints.retain_every
    assert every == 16 and memory.load("t").folds >= 3
    assert retentions == (40 + memory.load("t").folds) // every  # one statement per retention
    with psycopg.connect(url) as conn:
        kept = {r[0]: r[1] for r in conn.execute(
            "SELECT checkpoint_id, checkpoint -> 'channel_versions' FROM checkpoints "
            "WHERE thread_id = 't' AND checkpoint_ns = ''")}
        writes = {r[0] for r in conn.execute(
            "SELECT DISTINCT checkpoint_id FROM checkpoint_writes WHERE thread_id = 't'")}
        blobs = conn.execute("SELECT channel, version FROM checkpoint_blobs "
                             "WHERE thread_id = 't'").fetchall()
    assert writes <= set(kept)  # no writes of a dropped checkpoint
    named = {(c, v) for versions in kept.values() for c, v in versions.items()}
    assert blobs and set(blobs) <= named  # no blob that no kept checkpoint names
    memory.close()


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_terminated_connections_fail_one_save_at_most(backend: str, fresh_store: Any) -> None:
    """Errors raised by a batch bypass SQLAlchemy's disconnect handling: the pool must still
    drop every dead connection, not hand them out one failed save at a time."""
    import threading

    url = fresh_store("postgres")
    memory = SummaryMemory(backend=backend, store=url)

    def work(k: int) -> None:  # several connections in the pool
        for i in range(4):
            memory.save(f"w{k}", f"q{i}", f"a{i}")
            memory.load(f"w{k}")
    workers = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with psycopg.connect(url, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
    assert killed >= 2
    failed = 0
    for i in range(8):
        try:
            memory.save("x", f"q{i}", f"a{i}")
        except StoreError:
            failed += 1
    assert failed <= 1, failed
    assert len(memory.transcript("x")) == 2 * (8 - failed)
    assert all(len(memory.load(f"w{k}").messages) == 8 for k in range(6))
    memory.close()
