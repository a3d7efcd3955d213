"""The incremental string rendering equals ``get_buffer_string`` on the same view, through
turns, folds, clears, restores and custom prefixes, and renders each message once."""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, \
    get_buffer_string

from adapters import MemoryPolicy, ThreadRecord
from compat import SummaryMemory
from compat._stock import BufferRenderer
from compat.testing import agent_turn, filler_turn
from compat import admin


def _expected(memory: SummaryMemory, thread: str) -> str:
    """What the stock class renders for the same summary and window."""
    return get_buffer_string(memory.prompt_messages(memory.load(thread)),
                             human_prefix=memory.human_prefix, ai_prefix=memory.ai_prefix)


STYLE = ("Human", "AI", SystemMessage)
KWARGS = [
    {},
    {"human_prefix": "User", "ai_prefix": "Bot", "summary_message_cls": HumanMessage},
]


@pytest.mark.parametrize("kwargs", KWARGS, ids=["stock-prefixes", "custom-prefixes"])
def test_string_loads_equal_get_buffer_string_through_every_kind_of_write(kwargs: Any) -> None:
    memory = SummaryMemory(backend="classic", store="memory",
                           policy=MemoryPolicy(max_tokens=300, keep_tokens=120), **kwargs)
    assert memory._rt.renderer is not None  # the in-memory classic string path uses it
    rng = random.Random(7)
    threads = ["a", "b", "c"]
    folds_seen = 0
    for step in range(240):
        thread = rng.choice(threads)
        action = rng.random()
        if action < 0.75:
            memory.save_context({"input": filler_turn(thread, step, 12)[0], "thread_id": thread},
                                {"output": filler_turn(thread, step, 12)[1]})
        elif action < 0.85:
            question, answer = agent_turn(thread, step)
            memory.save(thread, question, answer)
        elif action < 0.9:
            memory.clear(thread)
        elif action < 0.95:
            view = memory.load(thread)
            admin.restore_thread(memory, ThreadRecord(thread_id=thread, summary=f"restored {step}",
                                               window=view.messages[-3:], folds=view.folds))
        got = memory.load_memory_variables({"thread_id": thread})["history"]
        assert got == _expected(memory, thread)
        folds_seen = max(folds_seen, memory.load(thread).folds)
    assert folds_seen >= 2  # the sequence went through folds, not only appends


def test_each_message_is_rendered_once_while_it_stays_in_the_window() -> None:
    renderer = BufferRenderer()
    rendered: list[BaseMessage] = []
    real = renderer._line
    renderer._line = lambda m, s: (rendered.append(m), real(m, s))[1]  # type: ignore[method-assign]
    window: list[BaseMessage] = []
    for i in range(5):
        window += [HumanMessage(f"q{i}"), AIMessage(f"a{i}")]
        assert renderer.render("t", "", window, STYLE) == get_buffer_string(window)
    assert len(rendered) == 10
    window = window[4:]  # a fold drops the head, then a new summary heads the rest
    head = SystemMessage("s1")
    assert renderer.render("t", "s1", window, STYLE) == get_buffer_string([head, *window])
    assert len(rendered) == 11  # only the summary line is new
    same = [HumanMessage(m.content) if isinstance(m, HumanMessage) else AIMessage(m.content)
            for m in window]  # equal, but not the same objects: rendered again
    assert renderer.render("t", "s1", same, STYLE) == get_buffer_string([head, *same])
    assert len(rendered) == 11 + len(same)


def test_a_replaced_message_is_never_served_from_an_older_rendering() -> None:
    renderer = BufferRenderer()
    window: list[BaseMessage] = [HumanMessage("q"), AIMessage("a")]
    renderer.render("t", "", window, STYLE)
    window[1] = AIMessage("a different answer")
    assert renderer.render("t", "", window, STYLE) == "Human: q\nAI: a different answer"
    assert renderer.render("t", "", [], STYLE) == ""
    assert renderer.render("u", "only a summary", [], STYLE) == "System: only a summary"


def test_the_cache_is_bounded_by_threads() -> None:
    renderer = BufferRenderer(threads=4)
    for i in range(10):
        renderer.render(f"t{i}", "", [HumanMessage("q")], STYLE)
        assert len(renderer._cache) <= 4


def test_other_stores_and_backends_render_with_the_stock_function(tmp_path: Any) -> None:
    for memory in (SummaryMemory(backend="middleware", store="memory"),
                   SummaryMemory(backend="classic", store=f"sqlite:///{tmp_path}/r.db",
                                 thread_id="t")):
        assert memory._rt.renderer is None
        memory.save_context({"input": "hi"}, {"output": "hello"})
        assert memory.load_memory_variables({})["history"] == "Human: hi\nAI: hello"
        memory.close()


def test_prefixes_and_return_messages_reassigned_after_construction_are_followed() -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert memory.buffer == "Human: hi\nAI: hello"
    memory.human_prefix, memory.ai_prefix = "User", "Bot"
    assert memory.buffer == "User: hi\nBot: hello"
    memory.return_messages = True
    assert [m.content for m in memory.buffer] == ["hi", "hello"]
    memory.buffer[0].content = "edited"  # a message view is still the caller's own copy
    memory.return_messages = False
    assert memory.buffer == "User: hi\nBot: hello"
