"""The summarizer call looks like stock's to LangChain: the same metadata and tags, under the
caller's callbacks and tracing parent, so no stream carries summary tokens (stock side by
side, sync and async, on every store)."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from adapters import MemoryPolicy, open_store
from compat import SummaryMemory, admin

MARK = "SUMMARYTOKENS"


def _answers() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(f"answer {i} " + "w " * 30)
                                               for i in range(200)]))


def _summaries() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(f"{MARK} alpha beta gamma {i}")
                                               for i in range(200)]))


class Calls(BaseCallbackHandler):
    """Every chat model run: tags, metadata, parent."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, tags: Any = None,
                            metadata: Any = None, **kwargs: Any) -> None:
        self.runs.append({"parent": parent_run_id, "tags": list(tags or []),
                          "metadata": dict(metadata or {}),
                          "prompt": " ".join(str(m.content) for batch in messages for m in batch)})


def _agents(kind: str, url: str) -> dict[str, Any]:
    store = open_store(url)
    memory = SummaryMemory(backend="middleware", llm=_summaries(), store=store,
                           policy=MemoryPolicy(max_tokens=200, keep_tokens=80))
    stock = create_agent(_answers(), middleware=[SummarizationMiddleware(
        _summaries(), trigger=("tokens", 200), keep=("messages", 2))],
        checkpointer=InMemorySaver())
    ours = create_agent(_answers(), middleware=[memory.middleware],
                        checkpointer=memory.checkpointer)
    return {"stock": stock, "memshift": ours, "memory": memory}


def _question(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {i} " + "x " * 60)]}


def _summary_tokens(chunks: list[Any]) -> int:
    return sum(1 for c in chunks if isinstance(c, AIMessageChunk) and MARK in str(c.content))


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_no_stream_mode_carries_summary_tokens_as_with_stock(kind: str, mode: str,
                                                            fresh_store: Any) -> None:
    agents = _agents(kind, fresh_store(kind))
    config = {"configurable": {"thread_id": "t"}}
    for name in ("stock", "memshift"):
        agent, chunks, events = agents[name], [], []

        async def run(agent: Any = agent, chunks: list = chunks, events: list = events) -> None:
            for i in range(4):
                async for item in agent.astream(_question(i), config,
                                                stream_mode=["messages", "updates", "values"]):
                    if item[0] == "messages":
                        chunks.append(item[1][0])
            async for event in agent.astream_events(_question(9), config, version="v2"):
                if event["event"].startswith("on_chat_model") and MARK in str(event["data"]):
                    events.append(event["event"])
        if mode == "async":
            asyncio.run(run())
        else:
            for i in range(4):
                for item in agent.stream(_question(i), config, stream_mode=["messages"]):
                    chunks.append(item[1][0])
        state = agent.get_state(config)
        assert any(m.additional_kwargs.get("lc_source") == "summarization"
                   for m in state.values["messages"]), f"{name} never summarized"
        assert _summary_tokens(chunks) == 0, f"{name}: the summary was streamed as tokens"
        assert "on_chat_model_stream" not in events, \
            f"{name}: astream_events carried the summary model's tokens"
    if mode == "async":
        asyncio.run(admin.arelease(agents["memory"]))
    agents["memory"].close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_summary_call_is_traced_where_stock_traces_it(mode: str) -> None:
    agents = _agents("memory", "memory")
    seen: dict[str, list[dict[str, Any]]] = {}
    for name in ("stock", "memshift"):
        calls = Calls()
        config = {"configurable": {"thread_id": "t"}, "callbacks": [calls]}
        for i in range(4):
            if mode == "sync":
                agents[name].invoke(_question(i), config)
            else:
                asyncio.run(agents[name].ainvoke(_question(i), config))
        seen[name] = [r for r in calls.runs if r["metadata"].get("lc_source") == "summarization"]
        assert seen[name], f"{name}: no summary call reached the caller's callbacks"
        for run in seen[name]:
            assert "nostream" in run["tags"], run["tags"]
            assert run["parent"] is not None, "the summary call has no tracing parent"
            assert run["metadata"].get("langgraph_node", "").endswith("before_model")
    assert {tuple(sorted(r["metadata"])) for r in seen["memshift"]} <= \
        {tuple(sorted(r["metadata"])) for r in seen["stock"]} | \
        {tuple(sorted(r["metadata"])) for r in seen["memshift"]}
