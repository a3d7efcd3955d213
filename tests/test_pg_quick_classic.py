"""The classic save and load of one statement each on PostgreSQL (``adapters.stores.quick``,
issue 38): 1 + 1 round trips in the steady state, and every guarantee of the usual path
kept when the thread is not as this process last saw it — another writer (retried, nothing
lost, nothing twice), a placement moved to the middleware side (followed, no classic write),
a view edited by its caller (never what is stored)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage

from compat import SummaryMemory
from compat.admin import placement
from compat.testing.conversations import filler_turn
from tests.test_pg_batch import trips


def _rows(url: str, sql: str, tid: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, (tid,)).fetchall()


def _window(url: str, tid: str) -> list[str]:
    rows = _rows(url, "SELECT message FROM memshift_window WHERE session_id = %s ORDER BY id",
                 tid)
    return [r[0] for r in rows]


def _transcript_ids(url: str, tid: str) -> list[str]:
    rows = _rows(url, "SELECT message_id FROM memshift_transcript WHERE thread_id = %s "
                      "ORDER BY id", tid)
    return [r[0] for r in rows]


def _contents(memory: SummaryMemory, tid: str) -> list[str]:
    return [str(m.content) for m in memory.load(tid).messages]


def test_a_steady_state_save_and_load_are_one_round_trip_each(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    with SummaryMemory(backend="classic", store=url) as memory:
        for i in range(3):  # the first save takes the usual path: no version seen yet
            memory.save_context({"input": f"q{i}", "thread_id": "t"}, {"output": f"a{i}"})
            memory.load_memory_variables({"thread_id": "t"})
        for i in range(3, 6):
            with trips() as sent:
                memory.save_context({"input": f"q{i}", "thread_id": "t"}, {"output": f"a{i}"})
                buffer = memory.load_memory_variables({"thread_id": "t"})["history"]
            assert sent == [["WITH"], ["SELECT"]], sent  # the save, then the load
            assert buffer.endswith(f"Human: q{i}\nAI: a{i}")
        assert _contents(memory, "t") == [x for i in range(6) for x in (f"q{i}", f"a{i}")]
        ids = _transcript_ids(url, "t")
        assert len(ids) == len(set(ids)) == 12


def test_an_async_steady_state_save_and_load_are_one_round_trip_each(fresh_store: Any) -> None:
    async def run() -> None:
        async with SummaryMemory(backend="classic", store=fresh_store("postgres"),
                                 return_messages=True) as memory:
            for i in range(2):
                await memory.asave("t", f"q{i}", f"a{i}")
                await memory.aload("t")
            with trips() as sent:
                await memory.asave("t", "q2", "a2")
                view = await memory.aload("t")
            assert sent == [["WITH"], ["SELECT"]], sent
            assert [m.content for m in view.messages] == ["q0", "a0", "q1", "a1", "q2", "a2"]
    asyncio.run(run())


def test_a_second_writer_between_load_and_save_makes_the_save_retry(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    with SummaryMemory(backend="classic", store=url) as one, \
            SummaryMemory(backend="classic", store=url) as two:
        one.save("t", "q0", "a0")
        one.load("t")
        two.load("t")
        two.save("t", "q1", "a1")  # the version `one` saw is gone
        with trips() as sent:
            one.save("t", "q2", "a2")
        assert sent[0] == ["WITH"] and len(sent) > 1, sent  # missed, then the usual path
        expected = ["q0", "a0", "q1", "a1", "q2", "a2"]
        assert _contents(one, "t") == _contents(two, "t") == expected
        assert len(_window(url, "t")) == 6
        ids = _transcript_ids(url, "t")
        assert len(ids) == len(set(ids)) == 6
        with trips() as sent:  # seen again by that load: quick again
            one.save("t", "q3", "a3")
        assert sent == [["WITH"]], sent
        assert _contents(two, "t")[-2:] == ["q3", "a3"]


def test_a_thread_moved_to_middleware_is_followed_without_a_classic_write(
        fresh_store: Any) -> None:
    url = fresh_store("postgres")
    with SummaryMemory(backend="classic", store=url) as classic:
        classic.save("t", "q0", "a0")
        classic.load("t")  # `classic` saw the thread on its side
        window = _window(url, "t")
        with SummaryMemory(backend="middleware", store=url) as middleware:
            assert _contents(middleware, "t") == ["q0", "a0"]  # moved at first touch
            classic.save("t", "q1", "a1")
            assert _window(url, "t") == window  # no classic state written
            assert _contents(middleware, "t") == ["q0", "a0", "q1", "a1"]
            assert _contents(classic, "t") == ["q0", "a0", "q1", "a1"]  # served where it lives
            assert placement(middleware, "t").backend == "middleware"
        ids = _transcript_ids(url, "t")
        assert len(ids) == len(set(ids)) == 4


def test_editing_a_loaded_view_changes_nothing_stored_or_seen(fresh_store: Any) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("postgres"),
                       return_messages=True) as memory:
        memory.save("t", "q0", "a0")
        view = memory.load("t")
        view.messages[0].content = "edited"
        view.messages.append(HumanMessage("appended"))
        memory.save("t", "q1", "a1")
        assert _contents(memory, "t") == ["q0", "a0", "q1", "a1"]
        loaded = memory.load_memory_variables({"thread_id": "t"})["history"]
        loaded[-1].content = "edited too"
        assert _contents(memory, "t") == ["q0", "a0", "q1", "a1"]


def test_caller_ids_and_agent_turns_take_the_usual_path(fresh_store: Any) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("postgres")) as memory:
        memory.save("t", "q0", "a0")
        memory.load("t")
        turn = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1")]
        memory.save_messages("t", turn)
        memory.save_messages("t", turn)  # a client retrying a turn that did commit: no-op
        assert _contents(memory, "t") == ["q0", "a0", "q1", "a1"]


def test_concurrent_writers_serialise_and_lose_nothing(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    memories = [SummaryMemory(backend="classic", store=url) for _ in range(3)]
    memories[0].save("t", "seed", "seed")
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(6):
                memories[w].load("t")
                memories[w].save("t", *filler_turn(f"w{w}", i, 4))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    window = [m.content for m in memories[1].load("t").messages]
    assert len(window) == 2 + 3 * 6 * 2
    for w in range(3):  # each writer's turns, whole and in its order
        mine = [c for c in window if f"w{w}-" in str(c)]
        assert mine == [x for i in range(6) for x in filler_turn(f"w{w}", i, 4)]
    for k in range(0, len(window), 2):  # a turn is never split by another writer's
        assert str(window[k]).startswith(("question", "seed"))
    ids = _transcript_ids(url, "t")
    assert len(ids) == len(set(ids)) == len(window)
    transcript = [m.content for m in memories[2].transcript("t")]
    assert transcript == window  # the transcript and the window in the same order
    for memory in memories:
        memory.close()
