"""Named regression fixtures for upstream defects: each runs the stock class on the shape
that breaks it (and asserts that it still breaks, so a fixed upstream is noticed), then
memshift on the same shape, on both backends.

- langchain#38352: parallel tool calls from two AI messages at the cut; stock keeps a
  ``ToolMessage`` whose AI message was summarized away, and the provider answers 400.
- langchain#39261: no ``HumanMessage`` in the trim window; stock replaces the history with
  "Previous conversation was too long to summarize."
- langchain#38867: a failing summary; the classic class loses the messages it popped, the
  middleware fails the user's turn.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.exceptions import ModelAuthenticationError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage,
)

from compat import MemoryPolicy, SummaryMemory

BACKENDS = ["classic", "middleware"]


class ProviderError(Exception):
    """What OpenAI and Anthropic answer (HTTP 400) to a tool result with no tool call."""


def orphans(messages: list[BaseMessage]) -> list[str]:
    called: set[str] = set()
    lost = []
    for message in messages:
        if isinstance(message, AIMessage):
            called |= {c["id"] for c in message.tool_calls if c.get("id")}
        elif isinstance(message, ToolMessage) and message.tool_call_id not in called:
            lost.append(message.tool_call_id)
    return lost


class Provider(GenericFakeChatModel):
    """A chat model that checks its input as a provider does; counts words as tokens."""

    def bind_tools(self, *args: Any, **kwargs: Any) -> Provider:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if lost := orphans(messages):
            raise ProviderError(f"400: tool result {lost} has no preceding tool call")
        return super()._generate(messages, *args, **kwargs)

    def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
        return sum(len(str(m.content).split()) + 1 for m in messages)


def provider(text: str = "answer") -> Provider:
    return Provider(messages=(AIMessage(text) for _ in range(1000)))  # fresh ids per reply


def _call(tc_id: str, name: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": tc_id}])


def parallel_turn() -> list[BaseMessage]:
    """Two AI messages, each with a tool call, then both results (a HIL / multi-agent run)."""
    return [HumanMessage("look up the order and the invoice"), _call("a", "order"),
            _call("b", "invoice"), ToolMessage("order 17 shipped", tool_call_id="a"),
            ToolMessage("invoice 9 paid", tool_call_id="b")]


# -- langchain#38352 -------------------------------------------------------------------------
def test_38352_stock_middleware_leaves_an_orphan_tool_message() -> None:
    stock = SummarizationMiddleware(model=provider("SUMMARY"), trigger=("messages", 6),
                                    keep=("messages", 4))
    agent = create_agent(provider(), [], middleware=[stock])
    with pytest.raises(ProviderError):
        agent.invoke({"messages": [*parallel_turn(), HumanMessage("and now?")]})


@pytest.mark.parametrize("cut", ["message", "turn"])
def test_38352_memshift_agent_never_sends_an_orphan(cut: str, store_url: str) -> None:
    memory = SummaryMemory(llm=provider("SUMMARY"), store=store_url, backend="middleware",
                           policy=MemoryPolicy(max_messages=6, keep_messages=4, cut=cut))
    agent = create_agent(provider(), [], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    config = {"configurable": {"thread_id": f"t-38352-{cut}"}}
    agent.invoke({"messages": [*parallel_turn(), HumanMessage("and now?")]}, config)
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(f"q{i}")]}, config)
        assert orphans(agent.get_state(config).values["messages"]) == []
    assert memory.load(f"t-38352-{cut}").folds >= 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cut", ["message", "turn"])
def test_38352_memshift_prompt_never_has_an_orphan(backend: str, cut: str) -> None:
    memory = SummaryMemory(llm=provider("SUMMARY"), store="memory", backend=backend,
                           policy=MemoryPolicy(max_messages=6, keep_messages=4, cut=cut))
    tid, model, folds = f"t-{backend}-{cut}", provider(), 0
    for i in range(5):
        memory.save_messages(tid, [*parallel_turn(), AIMessage(f"done {i}")])
        view = memory.load(tid)
        model.invoke([*memory.prompt_messages(view), HumanMessage("next")])  # no 400
        assert orphans(view.messages) == []
        folds = view.folds
    assert folds >= 1


# -- langchain#39261 -------------------------------------------------------------------------
def _no_human_tail() -> list[BaseMessage]:
    return [HumanMessage("start: my account number is 4242"), _call("a", "fetch"),
            ToolMessage("record " * 400, tool_call_id="a"), AIMessage("checked " * 50)]


def test_39261_stock_middleware_replaces_history_with_a_placeholder() -> None:
    stock = SummarizationMiddleware(model=provider("SUMMARY"), trigger=("messages", 5),
                                    keep=("messages", 2), trim_tokens_to_summarize=50)
    out = stock.before_model({"messages": [*_no_human_tail(), HumanMessage("h2"),
                                           AIMessage("a2")]}, None)  # type: ignore[arg-type]
    kept = [m for m in out["messages"] if not isinstance(m, RemoveMessage)]
    assert "Previous conversation was too long to summarize." in kept[0].content
    assert not any("4242" in str(m.content) for m in kept)


@pytest.mark.parametrize("backend", BACKENDS)
def test_39261_memshift_summarizes_what_it_cuts(backend: str) -> None:
    seen: list[str] = []

    class Recording(Provider):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            seen.append("\n".join(str(m.content) for m in messages))
            return super()._generate(messages, *args, **kwargs)

    memory = SummaryMemory(llm=Recording(messages=(AIMessage("account 4242; fetched") for _ in range(99))),
                           store="memory", backend=backend,
                           policy=MemoryPolicy(max_messages=5, keep_messages=2, cut="message"))
    memory.save_messages("t", _no_human_tail())
    memory.save("t", "h2", "a2")
    view = memory.load("t")
    assert view.folds >= 1 and seen and "4242" in seen[0]
    assert "too long to summarize" not in view.summary
    assert len(memory.transcript("t")) == 6  # and every message stays in the transcript


# -- langchain#38867 -------------------------------------------------------------------------
class Down(Provider):
    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        # an error stock's with_retry does not retry (it would wait seconds between attempts)
        raise ModelAuthenticationError("provider down")


def down() -> Down:
    return Down(messages=iter([]))


def test_38867_stock_classic_loses_the_messages_of_a_failed_summary() -> None:
    history = InMemoryChatMessageHistory()
    stock = ConversationSummaryBufferMemory(llm=down(), chat_memory=history, max_token_limit=20)
    for i in range(3):
        with pytest.raises(ModelAuthenticationError):
            stock.save_context({"input": f"fact {i} " + "w " * 10}, {"output": "ok " * 10})
    assert len(history.messages) < 6 and stock.moving_summary_buffer == ""  # lost


def test_38867_stock_middleware_fails_the_turn() -> None:
    stock = SummarizationMiddleware(model=down(), trigger=("messages", 3), keep=("messages", 1))
    agent = create_agent(provider(), [], middleware=[stock])
    with pytest.raises(ModelAuthenticationError, match="provider down"):
        agent.invoke({"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]})


@pytest.mark.parametrize("backend", BACKENDS)
def test_38867_memshift_keeps_every_message_and_the_turn(backend: str, store_url: str) -> None:
    memory = SummaryMemory(llm=down(), store=store_url, backend=backend,
                           policy=MemoryPolicy(max_tokens=20, keep_tokens=5, retry_backoff=0))
    for i in range(3):
        memory.save("t", f"fact {i} " + "w " * 10, "ok " * 10)  # the fold is deferred
    view = memory.load("t")
    assert [m.content.split()[:2] for m in view.messages[::2]] == \
        [["fact", "0"], ["fact", "1"], ["fact", "2"]]
    assert len(memory.transcript("t")) == 6 and view.folds == 0


def test_38867_memshift_agent_answers_while_the_summarizer_is_down(store_url: str) -> None:
    memory = SummaryMemory(llm=down(), store=store_url, backend="middleware",
                           policy=MemoryPolicy(max_messages=3, keep_messages=1, retry_backoff=0))
    agent = create_agent(provider("here"), [], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        out = agent.invoke({"messages": [HumanMessage(f"q{i}")]}, config)
        assert out["messages"][-1].content == "here"
    assert [m.content for m in agent.get_state(config).values["messages"]] == \
        ["q0", "here", "q1", "here", "q2", "here"]
