"""Cutover: threads saved through SummaryMemory(backend="middleware") continue in
``langchain.agents.create_agent`` with ``memory.middleware`` and ``memory.checkpointer``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

import compat
from compat import MemoryPolicy, SummaryMemory
from compat.testing.conversations import filler_turn


class RecordingFake(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools and records every message list it received."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingFake:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append([m.model_copy(deep=True) for m in messages])
        return super()._generate(messages, *args, **kwargs)


@tool
def lookup(q: str) -> str:
    """Look up a fact."""
    return f"result for {q}"


def sig(messages: list[BaseMessage]) -> list[tuple]:
    out = []
    for m in messages:
        calls = tuple((c["name"], c["id"]) for c in getattr(m, "tool_calls", None) or [])
        out.append((m.type, m.text, calls, getattr(m, "tool_call_id", None)))
    return out


def is_summary(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and (
        message.additional_kwargs.get("lc_source") == "summarization")


def cfg(tid: str) -> dict:
    return {"configurable": {"thread_id": tid}}


def saved_history(memory: SummaryMemory, tid: str, turns: int, size: int = 8) -> list[BaseMessage]:
    saved: list[BaseMessage] = []
    for i in range(turns):
        q, a = filler_turn(tid, i, size=size)
        memory.save(tid, q, a)
        saved += [HumanMessage(q), AIMessage(a)]
    return saved


def run(agent: Any, question: str, tid: str, mode: str) -> dict:
    payload = {"messages": [HumanMessage(question)]}
    if mode == "async":
        return asyncio.run(agent.ainvoke(payload, cfg(tid)))
    return agent.invoke(payload, cfg(tid))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_agent_continues_a_folded_thread(mode: str) -> None:
    pol = MemoryPolicy(max_tokens=120, keep_tokens=60)
    memory = SummaryMemory(backend="middleware", policy=pol)
    tid = "tenant-1:user-42:chat-1"
    saved = saved_history(memory, tid, 6)
    saved_history(memory, "other-thread", 3)
    view = memory.load(tid)
    assert view.folds >= 1 and view.summary
    question = HumanMessage("next question")
    # precondition: the new question does not itself trigger a fold inside the agent
    assert not pol.trigger_reason([*view.messages, question])

    model = RecordingFake(messages=iter([AIMessage("agent answer")]))
    agent = create_agent(model, tools=[], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    result = run(agent, question.text, tid, mode)
    assert result["messages"][-1].text == "agent answer"

    assert len(model.seen) == 1
    sent = model.seen[0]
    assert is_summary(sent[0]) and sent[0].text.endswith(view.summary)
    assert sig(sent[1:]) == sig([*view.messages, question])
    assert "FACT-other-thread" not in " ".join(m.text for m in sent)

    after = memory.load(tid)
    assert after.summary == view.summary and after.folds == view.folds
    assert sig(after.messages) == sig([*view.messages, question, AIMessage("agent answer")])
    transcript = memory.transcript(tid)
    assert sig(transcript) == sig([*saved, question, AIMessage("agent answer")])
    assert len({m.id for m in transcript}) == len(transcript)
    # the classic drop-in API keeps working on the continued thread
    memory.save(tid, "after the agent", "still here")
    rendered = memory.load_memory_variables({"thread_id": tid})["history"]
    assert "agent answer" in rendered and rendered.endswith("Human: after the agent\nAI: still here")
    assert len(memory.transcript(tid)) == len(transcript) + 2


def test_agent_folds_but_keeps_the_pending_question() -> None:
    pol = MemoryPolicy(max_tokens=120, keep_tokens=60)
    memory = SummaryMemory(backend="middleware", policy=pol)
    tid = "t-long"
    saved = saved_history(memory, tid, 6)
    view = memory.load(tid)
    question = HumanMessage("long question " + filler_turn(tid, 99, size=30)[0])
    assert pol.trigger_reason([*view.messages, question])  # the agent must fold first

    model = RecordingFake(messages=iter([AIMessage("short answer")]))
    agent = create_agent(model, tools=[], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    agent.invoke({"messages": [question]}, cfg(tid))
    sent = model.seen[0]
    assert is_summary(sent[0]) and sum(map(is_summary, sent)) == 1
    assert sig(sent[-1:]) == sig([question])
    assert "FACT-t-long-99" not in sent[0].text  # the pending question is never folded
    after = memory.load(tid)
    assert after.folds > view.folds
    assert sig(after.messages[-2:]) == sig([question, AIMessage("short answer")])
    assert sig(memory.transcript(tid)) == sig([*saved, question, AIMessage("short answer")])


@pytest.mark.parametrize("cut", ["turn", "message"])
def test_agent_tool_call_turn_then_classic_saves(cut: str) -> None:
    pol = MemoryPolicy(max_tokens=100, keep_tokens=50, cut=cut)  # 3 turns of ~37 tokens fold
    memory = SummaryMemory(backend="middleware", policy=pol)
    tid = "tools"
    saved = saved_history(memory, tid, 3)
    assert memory.load(tid).folds >= 1

    call = {"name": "lookup", "args": {"q": "x"}, "id": "call-1"}
    model = RecordingFake(messages=iter([AIMessage("", tool_calls=[call]),
                                         AIMessage("final answer")]))
    agent = create_agent(model, tools=[lookup], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    agent.invoke({"messages": [HumanMessage("use the tool")]}, cfg(tid))
    assert len(model.seen) == 2
    assert sig(model.seen[1][-2:]) == sig([AIMessage("", tool_calls=[call]),
                                           ToolMessage("result for x", tool_call_id="call-1")])

    agent_turn = [HumanMessage("use the tool"), AIMessage("", tool_calls=[call]),
                  ToolMessage("result for x", tool_call_id="call-1"), AIMessage("final answer")]
    transcript = memory.transcript(tid)
    assert sig(transcript) == sig([*saved, *agent_turn])
    assert len({m.id for m in transcript}) == len(transcript)

    folds = memory.load(tid).folds
    tool_turn_in_window = True
    for i in range(10, 16):
        q, a = filler_turn(tid, i, size=12)
        memory.save(tid, q, a)
        saved_after = [HumanMessage(q), AIMessage(a)]
        agent_turn += saved_after
        window = memory.load(tid).messages
        assert window and not isinstance(window[0], ToolMessage)
        if cut == "turn":
            assert isinstance(window[0], HumanMessage)
        call_ids = {c["id"] for m in window if isinstance(m, AIMessage) for c in m.tool_calls}
        for m in window:
            if isinstance(m, ToolMessage):
                assert m.tool_call_id in call_ids  # never an orphan tool result
        tool_turn_in_window = any(isinstance(m, ToolMessage) for m in window)
    assert not tool_turn_in_window  # the tool turn was folded away in the end
    assert memory.load(tid).folds > folds
    assert sig(memory.transcript(tid)) == sig([*saved, *agent_turn])


def test_cutover_handles_need_the_middleware_backend() -> None:
    classic = SummaryMemory(backend="classic", policy=MemoryPolicy(max_tokens=120))
    with pytest.raises(compat.ConfigError, match="middleware"):
        classic.checkpointer  # noqa: B018
    with pytest.raises(compat.ConfigError, match="middleware"):
        classic.middleware  # noqa: B018
    middleware = SummaryMemory(backend="middleware", policy=MemoryPolicy(max_tokens=120))
    assert middleware.checkpointer is middleware.checkpointer
    assert middleware.middleware is middleware.backend_impl.middleware_engine().middleware


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_agent_runs_keep_checkpoints_bounded(kind: str, fresh_store) -> None:
    memory = SummaryMemory(backend="middleware", store=fresh_store(kind),
                           policy=MemoryPolicy(max_tokens=150, keep_tokens=80))
    model = RecordingFake(messages=iter([AIMessage(f"answer {i} " + "word " * 20) for i in range(40)]))
    agent = create_agent(model, tools=[], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    for i in range(30):
        agent.invoke({"messages": [HumanMessage(f"question {i} " + "word " * 20)]}, cfg("a"))
    checkpoints = list(memory.checkpointer.list(cfg("a")))
    assert len(checkpoints) <= 20, len(checkpoints)
    assert len(memory.transcript("a")) == 60
    view = memory.load("a")
    assert view.folds >= 3 and view.messages[-1].content.startswith("answer 29")
    memory.save("a", "after the agent", "still fine")  # memory saves continue the same thread
    assert memory.load("a").messages[-1].content == "still fine"
    memory.close()
