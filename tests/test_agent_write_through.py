"""Rollback after the agent cutover loses no turn: while a stock history is written through
(a persistent ``chat_memory=`` history, or ``legacy_write=True``), every turn an agent saves
through ``memory.middleware`` + ``memory.checkpointer`` reaches it too, once, in order — so
the stock import swapped back sees every turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from compat import MemoryPolicy, SummaryMemory
from tests.test_cutover_agent import RecordingFake, cfg

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)


def _stock(url: str, session: str) -> Any:
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    return SQLChatMessageHistory(session_id=session, connection=url)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_agent_turns_reach_the_stock_history(fresh_store, kind: str, mode: str) -> None:
    url = fresh_store(kind)
    expected: list[str] = []
    for i in range(3):  # the app before the cutover: classic, per-request history
        with SummaryMemory(store=url, policy=POLICY, chat_memory=_stock(url, "u1")) as memory:
            memory.save_context({"input": f"classic question {i}"},
                                {"output": f"classic answer {i}"})
        expected += [f"classic question {i}", f"classic answer {i}"]
    answers = [AIMessage(f"agent answer {i} " + "words " * 12) for i in range(6)]
    model = RecordingFake(messages=iter(answers))
    for i in range(6):  # after the cutover: the agent, one memory per request
        with SummaryMemory(backend="middleware", store=url, policy=POLICY,
                           chat_memory=_stock(url, "u1")) as memory:
            agent = create_agent(model=model, middleware=[memory.middleware],
                                 checkpointer=memory.checkpointer)
            payload = {"messages": [HumanMessage(f"agent question {i}")]}
            if mode == "async":
                asyncio.run(agent.ainvoke(payload, cfg("u1")))
            else:
                agent.invoke(payload, cfg("u1"))
        expected += [f"agent question {i}", answers[i].text]
    # the rollback: the stock import again, on the same table
    assert [m.text for m in _stock(url, "u1").messages] == expected
