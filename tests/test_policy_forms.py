"""``MemoryPolicy(trigger=..., keep=...)``: langchain 1.5's forms with stock's meaning — read
by stock's own parser, fractions from the model profile, and a ``memory.middleware`` that
summarizes when and where stock's ``SummarizationMiddleware`` with the same arguments does."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from compat import ConfigError, MemoryPolicy, SummaryMemory


class Model(GenericFakeChatModel):
    def bind_tools(self, *args: Any, **kwargs: Any) -> Model:
        return self


def model(profile: dict | None = None) -> Model:
    built = Model(messages=(AIMessage(f"reply {i} " + "w " * 8) for i in range(10_000)))
    if profile is not None:
        built.profile = profile
    return built


def words(messages: Any) -> int:
    return sum(len(str(m.content).split()) for m in messages)


FORMS = [
    ("tokens", 120),
    ("messages", 7),
    {"tokens": 100, "messages": 5},
    [("messages", 9), {"tokens": 60, "messages": 4}],
]


@pytest.mark.parametrize("trigger", FORMS, ids=str)
def test_the_forms_are_read_as_stock_reads_them(trigger: Any) -> None:
    stock = SummarizationMiddleware(model=model(), trigger=trigger)
    policy = MemoryPolicy(trigger=trigger)
    assert [dict(c) for c in stock._trigger_clauses] == list(policy.trigger_clauses or ())
    assert policy.keep_messages == stock.keep[1] == 20  # stock's default keep


@pytest.mark.parametrize("bad", [("tokens", 0), ("fraction", 1.5), ("lines", 3), {"messages": True},
                                 {"tokens": 1.5}, {}, ["tokens"], "tokens"])
def test_a_bad_form_gets_stocks_reason_as_a_config_error(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as stock:
        SummarizationMiddleware(model=model(), trigger=bad)
    with pytest.raises(ConfigError) as ours:
        MemoryPolicy(trigger=bad)
    assert str(stock.value) in str(ours.value)


def test_mixing_the_two_vocabularies_is_refused() -> None:
    with pytest.raises(ConfigError, match="trigger= replaces max_tokens"):
        MemoryPolicy(trigger=("tokens", 100), max_tokens=100)
    with pytest.raises(ConfigError, match="keep= replaces keep_tokens"):
        MemoryPolicy(trigger=("tokens", 100), keep=("tokens", 50), keep_tokens=40)


def test_fractions_read_the_model_profile_as_stock_does() -> None:
    llm = model({"max_input_tokens": 1000})
    memory = SummaryMemory(llm=llm, backend="middleware", store="memory",
                           policy=MemoryPolicy(trigger=[("fraction", 0.8), ("messages", 50)],
                                               keep=("fraction", 0.3)))
    policy = memory.active_policy
    assert policy.trigger_clauses == ({"tokens": 800}, {"messages": 50})
    assert policy.keep_tokens == 300 and policy.model_window == 1000
    assert replace(policy, cut="message").trigger_clauses == policy.trigger_clauses
    assert memory.middleware.trigger == [("fraction", 0.8), ("messages", 50)]  # as given
    assert memory.middleware.keep == ("fraction", 0.3)
    with pytest.raises(ConfigError, match="max_input_tokens"):
        SummaryMemory(llm=model(), store="memory",
                      policy=MemoryPolicy(trigger=("fraction", 0.8)))
    with pytest.raises(ConfigError, match="llm="):
        SummaryMemory(store="memory", policy=MemoryPolicy(trigger=("tokens", 9),
                                                          keep=("fraction", 0.5)))


def test_a_clause_is_met_at_its_thresholds_and_with_all_of_them() -> None:
    policy = MemoryPolicy(trigger={"tokens": 10, "messages": 3}, token_counter=words,
                          cut="message")
    short = [HumanMessage("a b c d e f g h i j k l")]  # 12 words, 1 message
    assert policy.trigger_reason(short) == ""
    three = [HumanMessage("a b c d"), AIMessage("e f g"), HumanMessage("h i j")]  # 10 and 3
    assert policy.trigger_reason(three) == "tokens=10>=10&messages=3>=3"


def _run(middleware: Any, memory: SummaryMemory | None, turns: int) -> list[list[BaseMessage]]:
    agent = create_agent(model(), [], middleware=[middleware],
                         checkpointer=memory.checkpointer if memory else None)
    config = {"configurable": {"thread_id": "t"}}
    states, messages = [], []
    for i in range(turns):
        if memory is None:  # stock without a checkpointer: the state is handed back in
            out = agent.invoke({"messages": [*messages, HumanMessage(f"question {i} " + "q " * 6)]})
        else:
            out = agent.invoke({"messages": [HumanMessage(f"question {i} " + "q " * 6)]}, config)
        messages = out["messages"]
        states.append(list(messages))
    return states


def _summarized(state: list[BaseMessage]) -> bool:
    return bool(state) and state[0].additional_kwargs.get("lc_source") == "summarization"


@pytest.mark.parametrize("trigger,keep", [
    (("messages", 7), ("messages", 3)),
    (("tokens", 100), ("tokens", 40)),
    ({"tokens": 60, "messages": 5}, ("messages", 2)),
    ([("messages", 11), ("tokens", 90)], ("messages", 4)),
], ids=str)
def test_memory_middleware_summarizes_when_and_where_stock_does(trigger: Any, keep: Any) -> None:
    """Up to the first summary (after it, memshift's window never counts the summary message,
    stock's does: a documented difference)."""
    stock = _run(SummarizationMiddleware(model=model(), trigger=trigger, keep=keep,
                                         token_counter=words), None, 8)
    memory = SummaryMemory(llm=model(), backend="middleware", store="memory",
                           policy=MemoryPolicy(trigger=trigger, keep=keep, token_counter=words,
                                               cut="message"))
    ours = _run(memory.middleware, memory, 8)
    first = next(i for i, state in enumerate(stock) if _summarized(state))
    assert not any(_summarized(state) for state in ours[:first])
    assert [[m.text for m in s] for s in ours[:first]] == [[m.text for m in s] for s in stock[:first]]
    assert _summarized(ours[first])
    assert [m.text for m in ours[first][1:]] == [m.text for m in stock[first][1:]]
