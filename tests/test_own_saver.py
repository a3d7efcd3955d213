"""The application's own LangGraph saver (``SummaryMemory(checkpointer=...)``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from adapters import ConfigError, MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)


def test_a_user_inmemory_saver_holds_the_threads_create_agent_continues() -> None:
    saver = InMemorySaver()
    memory = SummaryMemory(backend="middleware", policy=POLICY, checkpointer=saver)
    assert memory.checkpointer.inner is saver  # asked where each thread lives first
    for i in range(6):
        memory.save("t", *filler_turn("t", i, 8))
    view = memory.load("t")
    assert view.folds >= 1
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
    model = GenericFakeChatModel(messages=iter([AIMessage("agent says hi")]))
    agent = create_agent(model, middleware=[memory.middleware], checkpointer=saver)
    agent.invoke({"messages": [("user", "next question")]}, {"configurable": {"thread_id": "t"}})
    assert [m.content for m in memory.load("t").messages][-2:] == ["next question", "agent says hi"]
    assert len(memory.transcript("t")) == 14


def test_a_user_async_sqlite_saver(tmp_path: Path) -> None:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def run() -> None:
        async with aiosqlite.connect(str(tmp_path / "app.db")) as conn:
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
            memory = SummaryMemory(backend="middleware", policy=POLICY, checkpointer=saver,
                                   store=f"sqlite:///{tmp_path}/memshift.db")
            for i in range(6):
                await memory.asave("t", *filler_turn("t", i, 8))
            view = await memory.aload("t")
            assert view.folds >= 1 and "FACT-t-5 " in view.messages[-2].content
            assert await saver.aget_tuple({"configurable": {"thread_id": "t"}}) is not None
            model = GenericFakeChatModel(messages=iter([AIMessage("agent says hi")]))
            agent = create_agent(model, middleware=[memory.middleware], checkpointer=saver)
            await agent.ainvoke({"messages": [("user", "next")]}, {"configurable": {"thread_id": "t"}})
            assert (await memory.aload("t")).messages[-1].content == "agent says hi"
            await memory.aclose()
    asyncio.run(run())


def test_not_a_saver_is_refused() -> None:
    with pytest.raises(ConfigError, match="BaseCheckpointSaver"):
        SummaryMemory(backend="middleware", policy=POLICY, checkpointer=object())
