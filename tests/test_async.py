"""Async end to end: async drivers (no ``to_thread``), real ``create_agent`` ainvoke/astream,
many concurrent ``asave`` tasks."""

from __future__ import annotations

import asyncio
import sys

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from adapters import MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn

BACKENDS = ["classic", "middleware"]
STORES = ["memory", "sqlite", "postgres"]
POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)


def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """memshift's async paths never hop to a worker thread (upstream savers may, e.g.
    AsyncPostgresSaver serialises blobs with ``to_thread``: that is theirs)."""
    real = asyncio.to_thread

    def guarded(*args: object, **kwargs: object) -> object:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.split(".")[0] in ("adapters", "compat"):
            raise AssertionError(f"{caller} fell back to a worker thread")
        return real(*args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(asyncio, "to_thread", guarded)


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_200_concurrent_asaves_lose_nothing(backend: str, kind: str, fresh_store,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _no_threads(monkeypatch)
    url = fresh_store(kind)

    async def run() -> None:
        async with SummaryMemory(backend=backend, store=url, policy=POLICY) as memory:
            await asyncio.gather(*(memory.asave(f"t{i % 4}", *filler_turn(f"t{i % 4}", i, 8))
                                   for i in range(200)))
            for k in range(4):
                view = await memory.aload(f"t{k}")
                transcript = memory.transcript(f"t{k}")
                assert len(transcript) == 100 and len({m.id for m in transcript}) == 100
                assert view.folds >= 1 and POLICY.count(view.messages) <= POLICY.max_tokens
                stored = " ".join(str(m.content) for m in transcript)
                assert all(f"FACT-t{k}-{i} " in stored for i in range(k, 200, 4))
                # the newest turn is verbatim, in the order the transcript committed it
                assert [m.id for m in view.messages[-2:]] == [m.id for m in transcript[-2:]]
            await memory.aclear("t0")
            assert (await memory.aload("t0")).messages == []
    asyncio.run(run())


@pytest.mark.parametrize("kind", STORES)
def test_create_agent_ainvoke_and_astream_continue_memory_threads(kind: str, fresh_store) -> None:
    url = fresh_store(kind)

    async def run() -> None:
        async with SummaryMemory(backend="middleware", store=url, policy=POLICY) as memory:
            for i in range(3):
                await memory.asave("t", *filler_turn("t", i, 8))
            model = GenericFakeChatModel(messages=iter([AIMessage(f"agent answer {i}") for i in range(20)]))
            agent = create_agent(model, middleware=[memory.middleware], checkpointer=memory.checkpointer)
            config = {"configurable": {"thread_id": "t"}}
            for i in range(3, 8):
                await agent.ainvoke({"messages": [("user", f"question {i} FACT-t-{i} and more words here")]}, config)
            chunks = [c async for c in agent.astream({"messages": [("user", "streamed question")]}, config)]
            assert chunks
            view = await memory.aload("t")
            assert view.folds >= 1, "the agent's turns never folded"
            assert [m.content for m in view.messages][-2:] == ["streamed question", "agent answer 5"]
            stored = memory.transcript("t")
            transcript = [str(m.content) for m in stored]
            assert "streamed question" in transcript and "agent answer 5" in transcript
            assert len({m.id for m in stored}) == len(stored) == 2 * 9  # each message once
            # the sync API sees the same thread
            assert memory.load("t").messages == view.messages
    asyncio.run(run())


def test_async_and_sync_drivers_run_the_same_steps() -> None:
    """One implementation: the async twin gives exactly the sync result, fold by fold."""
    sync = SummaryMemory(backend="middleware", policy=POLICY)
    other = SummaryMemory(backend="middleware", policy=POLICY)

    async def run() -> None:
        for i in range(12):
            sync.save("t", *filler_turn("t", i, 8))
            await other.asave("t", *filler_turn("t", i, 8))
            a, b = sync.load("t"), await other.aload("t")
            assert (a.summary, a.folds, [m.content for m in a.messages]) == \
                (b.summary, b.folds, [m.content for m in b.messages])
    asyncio.run(run())
