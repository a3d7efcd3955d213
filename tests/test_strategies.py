"""Every strategy in the source documents: budgets, summary-only memory, the JS summary
node shape, and the discard baselines."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from adapters import MemoryPolicy
from compat import ConfigError, SummaryMemory, cli
from compat.migration import migrate
from compat.replay import replay_file
from compat.sources import GraphSource, SummaryMemorySource
from compat.testing import RecordingSummarizer, filler_turn
from tests.conftest import BACKENDS, ROOT


def test_from_budget_gives_the_history_budget_and_explains_it() -> None:
    policy = MemoryPolicy.from_budget(128_000, system=10_000, rag=40_000, output=8_000, margin=10_000)
    assert (policy.max_tokens, policy.keep_tokens) == (60_000, 30_000)
    text = policy.explain()
    assert "128,000" in text and "68,000" in text and "60,000" in text and "30,000" in text


def test_from_budget_takes_the_window_from_a_model_profile() -> None:
    class Model:
        profile = {"max_input_tokens": 32_000}

    policy = MemoryPolicy.from_budget(Model(), system=2_000, output=4_000, keep_ratio=0.25)
    assert (policy.max_tokens, policy.keep_tokens) == (26_000, 6_500)


@pytest.mark.parametrize(("window", "kwargs", "fragment"), [
    (8_000, {"system": 5_000, "rag": 4_000}, "9,000 leave -1,000 of the 8,000"),
    (8_000, {"output": -1}, "output reservation"),
    (8_000, {"keep_ratio": 0}, "keep_ratio"),
    (object(), {}, "max_input_tokens"),
])
def test_impossible_budgets_are_refused_with_the_numbers(window: Any, kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        MemoryPolicy.from_budget(window, **kwargs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_summary_only_preset_reproduces_conversation_summary_memory(backend: str) -> None:
    """Stock summarizes each turn as it is saved; the preset does it one turn later (the
    newest turn stays verbatim), with the same summarizer inputs."""
    from langchain_classic.memory import ConversationSummaryMemory

    from adapters import SummarizerChatModel

    stock_calls = RecordingSummarizer()

    class Stock(ConversationSummaryMemory):
        def predict_new_summary(self, messages: list, existing_summary: str) -> str:
            return stock_calls.summarize(existing_summary, messages)

    stock = Stock(llm=SummarizerChatModel(summarizer=stock_calls))
    ours_calls = RecordingSummarizer()
    ours = SummaryMemory(backend=backend, policy=MemoryPolicy.summary_only(), summarizer=ours_calls)
    stock_summaries = []
    for i in range(6):
        human, ai = filler_turn("t", i, 6)
        stock.save_context({"input": human}, {"output": ai})
        stock_summaries.append(stock.buffer)
        ours.save("t", human, ai)
        view = ours.load("t")
        assert [m.content for m in view.messages] == [human, ai]
        assert view.summary == (stock_summaries[i - 1] if i else "")
    assert ours_calls.calls == stock_calls.calls[:-1]


def test_conversation_summary_memory_thread_migrates_intact(tmp_path) -> None:
    from langchain_classic.memory import ConversationSummaryMemory
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    from adapters import SummarizerChatModel
    from compat import DeterministicSummarizer

    url = f"sqlite:///{tmp_path}/legacy.db"
    summarizer = DeterministicSummarizer()

    class Stock(ConversationSummaryMemory):
        def predict_new_summary(self, messages: list, existing_summary: str) -> str:
            return summarizer.summarize(existing_summary, messages)

    stock = Stock(llm=SummarizerChatModel(summarizer=summarizer),
                  chat_memory=SQLChatMessageHistory(session_id="csm-1", connection=url))
    for i in range(5):
        stock.save_context({"input": filler_turn("csm-1", i, 6)[0]}, {"output": filler_turn("csm-1", i, 6)[1]})
    target = SummaryMemory(backend="middleware", policy=MemoryPolicy.summary_only())
    report = migrate(SummaryMemorySource(url, summaries={"csm-1": stock.buffer}), target)
    assert report.ok and report.migrated == ["csm-1"]
    view = target.load("csm-1")
    assert view.summary == stock.buffer and view.messages == []
    assert len(target.transcript("csm-1")) == 10
    target.save("csm-1", "next question", "next answer")  # continues in the stock shape
    assert [m.content for m in target.load("csm-1").messages] == ["next question", "next answer"]


def _js_style_graph(saver: Any, keep_last: int = 2) -> Any:
    """Seed 002's summary node in Python: the summary is an AIMessage '【对话摘要】...' that
    replaces the old messages (RemoveMessage), followed by the last N messages."""

    def chat(state: MessagesState) -> dict:
        return {"messages": [AIMessage(f"回答：{state['messages'][-1].content}")]}

    def summarize(state: MessagesState) -> dict:
        old = [m for m in state["messages"][:-keep_last]]
        text = "；".join(str(m.content).removeprefix("【对话摘要】") for m in old)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), AIMessage(f"【对话摘要】{text}"),
                             *state["messages"][-keep_last:]]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "chat")
    builder.add_conditional_edges("chat", lambda s: "summarize" if len(s["messages"]) > 6 else END)
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("summary_in", ["auto", "messages"])
def test_seed_002_js_style_thread_migrates_with_summary_and_window(summary_in: str) -> None:
    saver = InMemorySaver()
    graph = _js_style_graph(saver)
    cfg = {"configurable": {"thread_id": "js-1"}}
    for q in ["我叫小王", "我在学 LangGraph", "裁剪消息是什么？", "总结消息呢？", "好的，谢谢"]:
        graph.invoke({"messages": [HumanMessage(q)]}, cfg)
    messages = graph.get_state(cfg).values["messages"]
    assert messages[0].content.startswith("【对话摘要】")
    target = SummaryMemory(backend="middleware", policy=MemoryPolicy(max_tokens=2000))
    report = migrate(GraphSource(saver, summary_in=summary_in), target)
    assert report.ok
    view = target.load("js-1")
    assert view.summary == messages[0].content.removeprefix("【对话摘要】")
    assert [m.content for m in view.messages] == [m.content for m in messages[1:]]


def test_replay_baselines_show_trim_losing_early_facts(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "examples" / "conversations" / "long_multithread.jsonl"
    report = replay_file(path, baselines=("trim", "filter"))
    trim, classic = report.facts["trim"], report.facts["classic"]
    assert classic[1] == 48 and report.facts["full"] == (48, 48)
    assert trim[0] < classic[0], (trim, classic)
    assert report.facts["middleware"] == classic
    assert report.total_prompt_tokens("filter") <= report.total_prompt_tokens("full")
    out = tmp_path / "r.html"
    assert cli.main(["replay", "--quiet", str(path), "--baseline", "trim", "--baseline",
                     "filter", "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "trim" in text and "early facts" not in text and "still visible" in text
    html = out.read_text()
    assert "early facts visible" in html and html.count("<polyline") == 6 * 5
