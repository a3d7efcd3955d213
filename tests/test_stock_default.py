"""A stock-shaped constructor (``SummaryMemory(llm=..., max_token_limit=...)``, no ``policy=``)
gets stock's rule: its ``SUMMARY_PROMPT``, message-by-message cuts and the llm's own token
count — or, where that count would download or fails, memshift's offline counter with one
warning. (The chain shapes are in ``test_stock_differential``, run both ways.)"""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_classic.memory.prompt import SUMMARY_PROMPT
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage

from compat import MemoryPolicy, SummaryMemory
from tests.test_stock_differential import Scripted

QUESTIONS = [f"question {i}: tell me about item {i} and the rest" for i in range(9)]


class Wordy(Scripted):
    """Counts three tokens a word: unlike memshift's counter, so a default that ignored the
    llm's count would cut elsewhere."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return 3 * sum(len(str(m.content).split()) for m in messages)


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_the_llms_own_count_decides_as_in_stock(backend: str) -> None:
    runs = {}
    for name in ("stock", "ours"):
        summary_llm, chat = Wordy(seen=[]), Wordy(seen=[])
        memory = ConversationSummaryBufferMemory(llm=summary_llm, max_token_limit=90) \
            if name == "stock" else SummaryMemory(backend=backend, llm=summary_llm,
                                                  max_token_limit=90)
        chain = ConversationChain(llm=chat, memory=memory)
        answers = [chain.invoke({"input": q})["response"] for q in QUESTIONS]
        runs[name] = (answers, chat.seen, summary_llm.seen)
    assert len(runs["stock"][2]) >= 2  # it folded, more than once
    assert runs["ours"] == runs["stock"]


def test_the_default_is_stocks_rule_spelled_out() -> None:
    llm = Wordy(seen=[])
    policy = SummaryMemory(llm=llm, max_token_limit=90).active_policy
    assert policy.cut == "message" and policy.max_tokens == policy.keep_tokens == 90
    assert policy.prompt.template == SUMMARY_PROMPT.template
    assert policy.count([AIMessage("a b c")]) == 9
    assert MemoryPolicy.stock(90, llm).prompt.template == SUMMARY_PROMPT.template


def test_a_count_that_would_download_falls_back_offline_with_one_warning(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("memshift tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    caplog.set_level(logging.WARNING, logger="memshift.tokens")

    class Plain(GenericFakeChatModel):  # langchain-core's default count: GPT-2 from the hub
        pass

    for _ in range(2):
        memory = SummaryMemory(llm=Plain(messages=iter([AIMessage("s")] * 9)), store="memory",
                               max_token_limit=50)
        for i in range(2):
            memory.save("t", f"hello {i} " * 30, "there " * 30)
        assert memory.load("t").folds >= 1
    warned = [r for r in caplog.records if "Plain.get_num_tokens_from_messages" in r.message]
    assert len(warned) == 1 and "offline counter" in warned[0].message


def test_a_failing_count_falls_back_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="memshift.tokens")

    class Broken(Scripted):
        def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
            raise ImportError("no tokenizer here")

    memory = SummaryMemory(llm=Broken(seen=[]), store="memory", max_token_limit=50)
    for i in range(2):
        memory.save("t", f"hello {i} " * 30, "there " * 30)
    assert memory.load("t").folds >= 1
    assert sum("Broken.get_num_tokens_from_messages failed (ImportError)" in r.message
               for r in caplog.records) == 1


def test_chat_openai_counts_offline_with_its_own_tokenizer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("memshift tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    llm = ChatOpenAI(model="gpt-4o-mini", api_key="sk-test-not-used")  # type: ignore[arg-type]
    policy = SummaryMemory(llm=llm, store="memory", max_token_limit=50).active_policy
    message = [AIMessage("The quick brown fox jumps over the lazy dog.")]
    assert policy.count(message) == llm.get_num_tokens_from_messages(message)
