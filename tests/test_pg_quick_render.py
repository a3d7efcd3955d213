"""What the PostgreSQL classic quick path keeps between calls (issue 38): the string
rendering of a thread's window and the token counts of its window, each reused by the
identity of the messages that path keeps, and equal to what is computed afresh through
turns, folds, clears, restores, another writer and an erasure; and its parameters, sent as
array literals, carry any text unchanged."""

from __future__ import annotations

import random
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage, get_buffer_string

from adapters import MemoryPolicy, ThreadRecord
from compat import SummaryMemory, admin
from compat._stock import BufferRenderer
from compat.testing import filler_turn
from tests.test_pg_batch import trips

STYLE = ("Human", "AI", SystemMessage)


def _expected(memory: SummaryMemory, thread: str) -> str:
    """What the stock class renders for the stored summary and window."""
    return get_buffer_string(memory.prompt_messages(memory.load(thread)),
                             human_prefix=memory.human_prefix, ai_prefix=memory.ai_prefix)


def test_string_loads_equal_get_buffer_string_through_every_kind_of_write(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    policy = MemoryPolicy(max_tokens=300, keep_tokens=120)
    with SummaryMemory(backend="classic", store=url, policy=policy, human_prefix="User") as one, \
            SummaryMemory(backend="classic", store=url, policy=policy) as two:
        assert one._rt.renderer is not None  # the quick load keeps its messages: rendered once
        rng = random.Random(11)
        folds = 0
        for step in range(90):
            thread = rng.choice(["a", "b"])
            action = rng.random()
            if action < 0.7:
                human, ai = filler_turn(thread, step, 12)
                one.save_context({"input": human, "thread_id": thread}, {"output": ai})
            elif action < 0.8:  # another writer: what ``one`` saw is stale
                two.save(thread, *filler_turn(thread, step, 12))
            elif action < 0.9:
                view = one.load(thread)
                admin.restore_thread(one, ThreadRecord(thread, f"restored {step}",
                                                       view.messages[-3:], view.folds))
            else:
                one.clear(thread)
            for _ in range(2):  # the second load is the steady state: nothing new read
                got = one.load_memory_variables({"thread_id": thread})["history"]
                assert got == _expected(one, thread)
            folds = max(folds, one.load(thread).folds)
        assert folds >= 2  # the sequence went through folds, not only appends


def test_an_erased_thread_leaves_no_rendering(fresh_store: Any) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("postgres")) as memory:
        for i in range(3):
            memory.save_context({"input": f"secret {i}", "thread_id": "t"}, {"output": "ok"})
            memory.load_memory_variables({"thread_id": "t"})
        renderer = memory._rt.renderer
        assert renderer is not None and "t" in renderer._cache
        admin.forget(memory, "t")
        assert "t" not in renderer._cache
        assert memory.load_memory_variables({"thread_id": "t"})["history"] == ""


def test_the_rendering_cache_is_bounded_by_characters() -> None:
    renderer = BufferRenderer(chars=100)
    for i in range(20):
        text = renderer.render(f"t{i}", "", [HumanMessage("x" * 30)], STYLE)
        assert text == "Human: " + "x" * 30
        assert renderer._held == sum(e[5] for e in renderer._cache.values()) <= 100
    renderer.forget("t19")
    assert "t19" not in renderer._cache
    assert renderer._held == sum(e[5] for e in renderer._cache.values())


HOSTILE = ['say "hi"', "back\\slash \\\\ and \\\" both", "{braces},{and},commas", "NULL", "",
           "  blanks  ", "naïve 日本語 ✓", "line\nbreak\ttab", '"}{\\', "x" * 9000]


def test_hostile_texts_travel_through_the_quick_statements_unchanged(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    policy = MemoryPolicy(max_tokens=100_000, keep_tokens=100_000)  # no fold: every row stays
    with SummaryMemory(backend="classic", store=url, policy=policy, return_messages=True) as \
            memory, SummaryMemory(backend="classic", store=url, policy=policy) as fresh:
        memory.save("t", "warm", "up")
        memory.load("t")
        for i, text in enumerate(HOSTILE):
            with trips() as sent:
                memory.save("t", text, f"{i} {text}")
            assert sent == [["WITH"]], sent  # the quick save: its texts in array literals
            assert memory.load("t").messages[-2:] == fresh.load("t").messages[-2:]
        expected = [x for i, t in enumerate(HOSTILE) for x in (t, f"{i} {t}")]
        assert [m.content for m in fresh.load("t").messages][2:] == expected
        assert [m.content for m in memory.transcript("t")][2:] == expected
