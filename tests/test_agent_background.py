"""``MemoryPolicy(fold="background")`` inside ``create_agent``: the agent's ``before_model``
hands a due fold to the background and the model answers at once; the summary lands at the
thread's next model call (a fold lands one turn later), through the same compare-and-set;
after ``drain`` every model call sees what inline mode's sees, turn for turn; a window past
the lag bound waits; a fold lost with its process is planned again."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from adapters import MemoryPolicy
from adapters.errors import SummarizerError
from adapters.extractive import ExtractiveSummarizer
from compat import SummaryMemory, admin
from compat.testing.conversations import filler_turn
from tests.test_background_folds import Counting, Gated
from tests.test_cutover_agent import RecordingFake as Recording  # answers at once, records

STORES = ["memory", "sqlite", "postgres"]


def _model() -> Recording:
    return Recording(messages=iter([AIMessage(f"agent answer {i} with a few words")
                                    for i in range(200)]))


def _policy(**kw: Any) -> MemoryPolicy:
    return MemoryPolicy(max_tokens=150, keep_tokens=80, **kw)


def _agent(memory: SummaryMemory, model: Recording) -> Any:
    return create_agent(model, middleware=[memory.middleware], checkpointer=memory.checkpointer)


def _cfg(tid: str) -> dict:
    return {"configurable": {"thread_id": tid}}


def _ask(agent: Any, tid: str, i: int) -> dict:
    return agent.invoke({"messages": [HumanMessage(filler_turn(tid, i, 12)[0])]}, _cfg(tid))


def _texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def _turns_until_due(agent: Any, gated: Gated, tid: str) -> int:
    for i in range(40):
        _ask(agent, tid, i)  # returns: the model answered while the fold waits
        if gated.entered.wait(0.05):
            return i + 1
    raise AssertionError("no fold was ever due")


@pytest.mark.parametrize("kind", STORES)
def test_the_agent_answers_before_the_summarizer_and_the_fold_lands_next_turn(
        kind: str, fresh_store: Any) -> None:
    gated = Gated()
    memory = SummaryMemory(store=fresh_store(kind), backend="middleware", summarizer=gated,
                           policy=_policy(fold="background"))
    model = _model()
    agent = _agent(memory, model)
    turns = _turns_until_due(agent, gated, "t")
    assert not gated.gate.is_set()  # the turn that asked for the fold has its answer
    view = memory.load("t")
    assert view.folds == 0 and len(view.messages) == 2 * turns  # nothing folded, nothing lost
    gated.gate.set()
    memory.drain()
    assert memory.load("t").folds == 0  # the summary waits for the thread's next model call
    _ask(agent, "t", 100)
    seen = model.seen[-1]
    assert seen[0].additional_kwargs.get("lc_source") == "summarization"
    view = memory.load("t")
    assert view.folds == 1 and view.summary and view.messages[-1].text == "agent answer " \
        f"{turns} with a few words"
    assert len(memory.transcript("t")) == 2 * turns + 2
    records = admin.summary_history(memory, "t")
    assert [r["version"] for r in records] == [1] and records[0]["error"] is None
    assert gated.calls == 1
    memory.close()


def _fold_counts(memory: SummaryMemory, tid: str) -> int:
    return memory.load(tid).folds


@pytest.mark.parametrize("keep", [80, 140])  # 140: what a fold keeps is due again next turn
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_after_drain_every_model_call_sees_what_inline_mode_sees(
        kind: str, mode: str, keep: int, fresh_store: Any) -> None:
    """A fold lands one turn later: at every turn where inline did not fold, the model gets
    exactly inline's messages; where inline folded, it gets the window inline summarized."""
    pol = MemoryPolicy(max_tokens=150, keep_tokens=keep)
    inline = SummaryMemory(store=fresh_store(kind), backend="middleware", summarizer=Counting(),
                           policy=pol)
    background = SummaryMemory(store=fresh_store(kind), backend="middleware",
                               summarizer=Counting(), policy=dataclasses.replace(pol, fold="background"))
    m_in, m_bg = _model(), _model()
    a_in, a_bg = _agent(inline, m_in), _agent(background, m_bg)

    async def aturn(agent: Any, memory: SummaryMemory, tid: str, i: int) -> None:
        await agent.ainvoke({"messages": [HumanMessage(filler_turn(tid, i, 12)[0])]}, _cfg(tid))
        await memory.adrain()

    def turn(agent: Any, memory: SummaryMemory, tid: str, i: int) -> None:
        if mode == "async":
            asyncio.run(aturn(agent, memory, tid, i))
        else:
            _ask(agent, tid, i)
            memory.drain()

    inline_folded, same = 0, 0
    for i in range(30):
        before = _fold_counts(inline, "t")
        turn(a_in, inline, "t", i)
        turn(a_bg, background, "t", i)
        if _fold_counts(inline, "t") == before:  # inline did not fold: the very same input
            assert _texts(m_bg.seen[-1]) == _texts(m_in.seen[-1]), i
            same += 1
        else:
            inline_folded += 1
    assert inline_folded >= 3 and same >= (20 if keep == 80 else 0)
    assert background.summarizer.calls == inline.summarizer.calls
    turn(a_in, inline, "t", 30)  # one more turn: the last fold has landed on both
    turn(a_bg, background, "t", 30)
    a, b = inline.load("t"), background.load("t")
    if a.folds == b.folds:
        assert (a.summary, _texts(a.messages)) == (b.summary, _texts(b.messages))
    assert [r["version"] for r in admin.summary_history(background, "t")] == \
        list(range(1, len(admin.summary_history(background, "t")) + 1))
    assert _texts(inline.transcript("t")) == _texts(background.transcript("t"))
    inline.close()
    background.close()


def test_async_agent_turns_run_the_fold_as_a_task_of_the_loop(fresh_store: Any) -> None:
    url = fresh_store("sqlite")

    async def run() -> None:
        gated = Gated()
        async with SummaryMemory(store=url, backend="middleware", summarizer=gated,
                                 policy=_policy(fold="background")) as memory:
            model = _model()
            agent = _agent(memory, model)
            for i in range(40):
                await agent.ainvoke({"messages": [HumanMessage(filler_turn("t", i, 12)[0])]},
                                    _cfg("t"))
                await asyncio.sleep(0.01)
                if gated.entered.is_set():
                    break
            assert gated.entered.is_set() and (await memory.aload("t")).folds == 0
            gated.gate.set()
            await memory.adrain()
            await agent.ainvoke({"messages": [HumanMessage("next")]}, _cfg("t"))
            assert (await memory.aload("t")).folds == 1
            assert model.seen[-1][0].additional_kwargs.get("lc_source") == "summarization"
    asyncio.run(run())


def test_a_window_past_the_lag_bound_waits_for_the_fold(fresh_store: Any) -> None:
    gated = Gated()
    memory = SummaryMemory(store=fresh_store("sqlite"), backend="middleware", summarizer=gated,
                           policy=_policy(fold="background", max_lag_tokens=40))
    model = _model()
    agent = _agent(memory, model)
    _turns_until_due(agent, gated, "t")
    finished = threading.Event()

    def keep_talking() -> None:
        for i in range(100, 110):
            _ask(agent, "t", i)
        finished.set()

    talker = threading.Thread(target=keep_talking)
    talker.start()
    assert not finished.wait(1.0)  # a turn past the bound waits for the fold in flight
    assert memory.active_policy.count(memory.load("t").messages) <= 150 + 40 + 2 * 40
    gated.gate.set()
    talker.join(60)
    assert finished.is_set()
    memory.drain()
    assert memory.load("t").folds >= 1
    memory.close()


def test_a_fold_lost_with_its_process_is_planned_again(fresh_store: Any) -> None:
    """The pending summary lives in the process: a new process (here: a new memory on the
    same file, the gate never opened) finds the full window and folds it."""
    url = fresh_store("sqlite")
    gated = Gated()
    first = SummaryMemory(store=url, backend="middleware", summarizer=gated,
                          policy=_policy(fold="background"))
    turns = _turns_until_due(_agent(first, _model()), gated, "t")
    second = SummaryMemory(store=url, backend="middleware", summarizer=Counting(),
                           policy=_policy(fold="background"))
    agent = _agent(second, _model())
    assert len(second.load("t").messages) == 2 * turns  # nothing lost
    _ask(agent, "t", 50)  # plans the fold again
    second.drain()
    _ask(agent, "t", 51)
    assert second.summarizer.calls == 1 and second.load("t").folds == 1
    assert len(second.transcript("t")) == 2 * turns + 4
    gated.gate.set()
    first.close()
    second.close()


def test_a_stale_summary_never_lands(fresh_store: Any) -> None:
    """While the background summary is computed, another process folds the thread: the
    summary no longer matches the stored state and is dropped (compare-and-set)."""
    url = fresh_store("sqlite")
    gated = Gated()
    slow = SummaryMemory(store=url, backend="middleware", summarizer=gated,
                         policy=_policy(fold="background"))
    agent = _agent(slow, _model())
    _turns_until_due(agent, gated, "t")
    other = SummaryMemory(store=url, backend="middleware", summarizer=Counting(),
                          policy=_policy())
    other_agent = _agent(other, _model())
    _ask(other_agent, "t", 60)  # inline: folds the thread now
    folded = other.load("t")
    assert folded.folds == 1
    gated.gate.set()
    slow.drain()
    _ask(agent, "t", 61)
    view = slow.load("t")
    assert view.folds == 1 and view.summary == folded.summary  # the stale one was dropped
    assert [r["version"] for r in admin.summary_history(slow, "t")
            if r["error"] is None] == [1]
    slow.close()
    other.close()


class Failing(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def summarize(self, summary: str, messages: Any) -> str:
        self.calls += 1
        if self.calls == 1:
            raise SummarizerError("provider down")
        return super().summarize(summary, messages)


def test_a_background_summary_that_fails_is_recorded_and_retried(fresh_store: Any) -> None:
    memory = SummaryMemory(store=fresh_store("sqlite"), backend="middleware",
                           summarizer=Failing(),
                           policy=_policy(fold="background", summary_retries=0, retry_backoff=0))
    agent = _agent(memory, _model())
    for i in range(30):
        _ask(agent, "t", i)
        memory.drain()
        if memory.load("t").folds:
            break
    assert memory.load("t").folds == 1
    records = admin.summary_history(memory, "t")
    assert [bool(r["error"]) for r in records] == [True, False]
    memory.close()
