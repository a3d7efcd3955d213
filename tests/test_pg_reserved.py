"""The quick path's reserved connection on PostgreSQL (``ReservedConnection``): a steady-state
classic save+load checks no connection out of the pool, and the connection it keeps instead
never costs a turn — terminated, shared by threads, inherited by a forked child, closed with
the store."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool

from adapters import StoreError
from compat import SummaryMemory

pytestmark = pytest.mark.postgres


@contextmanager
def checkouts() -> Iterator[list[int]]:
    """Every connection checked out of any SQLAlchemy pool meanwhile."""
    seen: list[int] = []

    def on_checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        seen.append(id(dbapi_conn))
    event.listen(Pool, "checkout", on_checkout)
    try:
        yield seen
    finally:
        event.remove(Pool, "checkout", on_checkout)


def _turn(memory: SummaryMemory, tid: str, i: int) -> str:
    memory.save_context({"input": f"q{i}", "thread_id": tid}, {"output": f"a{i}"})
    return memory.load_memory_variables({"thread_id": tid})["history"]


def _backends(pg_server: Any, dbname: str) -> list[int]:
    with pg_server.admin() as admin:
        return [r[0] for r in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,)).fetchall()]


def test_a_steady_state_save_and_load_check_no_connection_out_of_the_pool(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    with SummaryMemory(backend="classic", store=url) as memory:
        for i in range(3):  # the first saves take the transactional path
            _turn(memory, "t", i)
        with checkouts() as taken:
            for i in range(3, 8):
                history = _turn(memory, "t", i)
        assert taken == []
        assert history.endswith("Human: q7\nAI: a7")
        assert [str(m.content) for m in memory.load("t").messages] == \
            [x for i in range(8) for x in (f"q{i}", f"a{i}")]


def test_a_terminated_reserved_connection_costs_no_turn(fresh_store: Any, pg_server: Any) -> None:
    url = fresh_store("postgres")
    dbname = url.rsplit("/", 1)[-1]
    with SummaryMemory(backend="classic", store=url) as memory:
        for i in range(3):
            _turn(memory, "t", i)
        with pg_server.admin() as admin:
            for pid in _backends(pg_server, dbname):
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        done = list(range(3))
        for i in range(3, 6):  # a call on a dead connection fails clearly, the next one works
            try:
                _turn(memory, "t", i)
                done.append(i)
            except StoreError:
                pass
        _turn(memory, "t", 6)
        done.append(6)
        assert len(done) >= 6, done  # at most one call met the dead connection
        assert [str(m.content) for m in memory.load("t").messages] == \
            [x for i in done for x in (f"q{i}", f"a{i}")]


def test_threads_share_it_or_take_the_pool(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    errors: list[BaseException] = []
    with SummaryMemory(backend="classic", store=url) as memory:
        def talk(n: int) -> None:
            try:
                for i in range(15):
                    assert _turn(memory, f"t{n}", i).endswith(f"Human: q{i}\nAI: a{i}")
            except BaseException as exc:  # reported below
                errors.append(exc)
        workers = [threading.Thread(target=talk, args=(n,)) for n in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        for n in range(6):
            assert [str(m.content) for m in memory.load(f"t{n}").messages] == \
                [x for i in range(15) for x in (f"q{i}", f"a{i}")]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
def test_a_forked_child_never_uses_its_parents_connection(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    with SummaryMemory(backend="classic", store=url) as memory:
        for i in range(3):
            _turn(memory, "parent", i)
        pid = os.fork()
        if pid == 0:  # the child: its own connection, the parent's socket untouched
            code = 1
            try:
                for i in range(3):
                    if not _turn(memory, "child", i).endswith(f"AI: a{i}"):
                        break
                else:
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        for i in range(3, 6):  # the parent's reserved connection still in step
            assert _turn(memory, "parent", i).endswith(f"Human: q{i}\nAI: a{i}")
        assert len(memory.load("child").messages) == 6


def test_close_closes_it(fresh_store: Any, pg_server: Any) -> None:
    url = fresh_store("postgres")
    dbname = url.rsplit("/", 1)[-1]
    memory = SummaryMemory(backend="classic", store=url)
    for i in range(4):
        _turn(memory, "t", i)
    assert _backends(pg_server, dbname)
    memory.close()
    assert _backends(pg_server, dbname) == []
