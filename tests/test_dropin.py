"""The classic drop-in API on both backends: LCEL, legacy chains, RunnableWithMessageHistory,
stock constructor keywords, errors, and byte-identical string rendering."""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_classic.memory import (
    CombinedMemory,
    ConversationBufferMemory,
    ConversationSummaryBufferMemory,
)
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.runnables.history import RunnableWithMessageHistory
from pydantic import Field

import compat
from compat import MemoryPolicy, SummaryMemory
from compat.testing.conversations import filler_turn

BACKENDS = ["classic", "middleware"]
FACT = re.compile(r"FACT-[\w]+-\d+")


class RecordingChat(FakeListChatModel):
    """FakeListChatModel that records every message list it was called with."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        self.seen.append(list(messages))
        return super()._call(messages, *args, **kwargs)


class FactSummaryLLM(RecordingChat):
    """Summary model: the FACT markers of its prompt (previous summary + new lines), in order."""

    responses: list[str] = ["unused"]

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        self.seen.append(list(messages))
        return " ".join(dict.fromkeys(FACT.findall(messages[-1].text))) or "(no facts)"


class CountingChat(FakeListChatModel):
    """Stock classic counts with llm.get_num_tokens_from_messages (transformers): stay offline."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return count_tokens_approximately(messages)


def policy() -> MemoryPolicy:
    return MemoryPolicy(max_tokens=120, keep_tokens=60)


def facts(messages: list[BaseMessage]) -> list[str]:
    return list(dict.fromkeys(f for m in messages for f in FACT.findall(m.text)))


def sig(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in messages]


def assert_thread_state(memory: SummaryMemory, tid: str, saved: list[BaseMessage]) -> None:
    """Window is the tail of what was saved, the summary holds exactly the folded facts."""
    view = memory.load(tid)
    transcript = memory.transcript(tid)
    assert sig(transcript) == sig(saved)
    n = len(view.messages)
    assert 0 < n < len(saved) and view.folds >= 1
    assert sig(view.messages) == sig(saved[-n:])
    assert isinstance(view.messages[0], HumanMessage)
    assert memory.active_policy.count(view.messages) <= memory.active_policy.max_tokens
    assert view.summary.split() == facts(saved[:-n])
    head = view.summary_message
    if memory.backend_name == "classic":
        assert isinstance(head, SystemMessage) and head.content == view.summary
    else:
        assert isinstance(head, HumanMessage)
        assert head.additional_kwargs.get("lc_source") == "summarization"
        assert head.text.endswith(view.summary)


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_004_lcel_chain_two_interleaved_threads(backend: str) -> None:
    summary_llm = FactSummaryLLM()
    memory = SummaryMemory(backend=backend, policy=policy(), llm=summary_llm, return_messages=True)
    plan = [(t, *filler_turn(t, i, size=12)) for i in range(6) for t in ("t1", "t2")]
    chat_llm = RecordingChat(responses=[a for _, _, a in plan])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are helpful."), MessagesPlaceholder("history"), ("human", "{query}")]
    )
    chain = (
        RunnablePassthrough.assign(
            history=RunnableLambda(memory.load_memory_variables) | itemgetter("history"))
        | prompt | chat_llm | StrOutputParser()
    )
    saved: dict[str, list[BaseMessage]] = {"t1": [], "t2": []}
    for k, (t, q, expected_answer) in enumerate(plan):
        before = memory.prompt_messages(memory.load(t))
        answer = chain.invoke({"query": q, "thread_id": t})
        assert answer == expected_answer
        sent = chat_llm.seen[k]
        assert sig(sent) == sig([SystemMessage("You are helpful."), *before, HumanMessage(q)])
        other = "t2" if t == "t1" else "t1"
        assert f"FACT-{other}-" not in "\n".join(m.text for m in sent)
        memory.save_context({"query": q, "thread_id": t}, {"output": answer})
        saved[t] += [HumanMessage(q), AIMessage(answer)]
    for t in ("t1", "t2"):
        assert_thread_state(memory, t, saved[t])
    # every summarizer call saw one thread only
    assert summary_llm.seen
    for call in summary_llm.seen:
        found = {f.split("-")[1] for f in FACT.findall(call[-1].text)}
        assert len(found) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_conversation_chain_bound_and_unbound(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=policy(), llm=FactSummaryLLM())
    answers = [filler_turn("t1", i, size=12)[1] for i in range(5)]
    llm = RecordingChat(responses=answers)
    chain = ConversationChain(llm=llm, memory=memory.for_thread("t1"))
    saved: list[BaseMessage] = []
    for i in range(5):
        q = filler_turn("t1", i, size=12)[0]
        history = memory.load_memory_variables({"thread_id": "t1"})["history"]
        assert isinstance(history, str)
        result = chain.invoke({"input": q})
        assert result["response"] == answers[i]
        sent = llm.seen[i][-1].text
        assert f"Current conversation:\n{history}\nHuman: {q}\nAI:" in sent
        saved += [HumanMessage(q), AIMessage(answers[i])]
    assert_thread_state(memory, "t1", saved)

    llm2 = RecordingChat(responses=["second thread answer"])
    result = ConversationChain(llm=llm2, memory=memory).invoke(
        {"input": "hello from t2", "thread_id": "t2"})
    assert result["response"] == "second thread answer"
    assert "FACT-t1" not in llm2.seen[0][-1].text
    assert sig(memory.transcript("t2")) == [("human", "hello from t2"),
                                            ("ai", "second thread answer")]
    assert len(memory.transcript("t1")) == 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_llm_chain_with_memory(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=policy(), thread_id="t1")
    llm = RecordingChat(responses=["first reply", "second reply"])
    prompt = PromptTemplate.from_template("Chat so far:\n{history}\nUser says: {input}\nReply:")
    chain = LLMChain(llm=llm, prompt=prompt, memory=memory)
    assert chain.invoke({"input": "one"})["text"] == "first reply"
    assert chain.invoke({"input": "two"})["text"] == "second reply"
    assert llm.seen[0][-1].text == "Chat so far:\n\nUser says: one\nReply:"
    assert llm.seen[1][-1].text == "Chat so far:\nHuman: one\nAI: first reply\nUser says: two\nReply:"
    assert sig(memory.load().messages) == [("human", "one"), ("ai", "first reply"),
                                           ("human", "two"), ("ai", "second reply")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_combined_memory_accepts_summary_memory(backend: str) -> None:
    summary = SummaryMemory(backend=backend, policy=policy(), memory_key="history")
    lines = ConversationBufferMemory(memory_key="lines", input_key="input")
    combined = CombinedMemory(memories=[summary, lines])
    assert combined.memory_variables == ["history", "lines"]
    inputs = {"input": "hi there", "thread_id": "t1"}
    assert combined.load_memory_variables(inputs) == {"history": "", "lines": ""}
    combined.save_context(inputs, {"output": "hello"})
    expected = "Human: hi there\nAI: hello"
    assert combined.load_memory_variables(inputs) == {"history": expected, "lines": expected}
    assert sig(summary.transcript("t1")) == [("human", "hi there"), ("ai", "hello")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_runnable_with_message_history(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=policy(), llm=FactSummaryLLM())
    turns = [filler_turn("s1", i, size=12) for i in range(6)]
    llm = RecordingChat(responses=[a for _, a in turns])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")])
    chain = RunnableWithMessageHistory(prompt | llm, memory.chat_history,
                                       input_messages_key="question",
                                       history_messages_key="history")
    saved: list[BaseMessage] = []
    for i, (q, a) in enumerate(turns):
        before = memory.chat_history("s1").messages
        reply = chain.invoke({"question": q}, config={"configurable": {"session_id": "s1"}})
        assert reply.content == a
        assert sig(llm.seen[i]) == sig([SystemMessage("Be brief."), *before, HumanMessage(q)])
        saved += [HumanMessage(q), AIMessage(a)]
    assert_thread_state(memory, "s1", saved)
    assert memory.load("s1").folds >= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_stock_constructor_keywords(backend: str) -> None:
    summary_llm = FactSummaryLLM()
    memory = SummaryMemory(backend=backend, llm=summary_llm, max_token_limit=50,
                           memory_key="chat_history", input_key="question", output_key="answer",
                           return_messages=True, human_prefix="U", ai_prefix="B")
    assert memory.backend_name == backend
    assert memory.memory_variables == ["chat_history"]
    assert memory.active_policy.max_tokens == 50
    assert memory.load_memory_variables({"thread_id": "t"}) == {"chat_history": []}
    for i in range(4):
        q, a = filler_turn("t", i, size=10)
        memory.save_context({"question": q, "context": "ignored", "thread_id": "t"},
                            {"answer": a, "sources": "ignored"})
    loaded = memory.load_memory_variables({"thread_id": "t"})["chat_history"]
    assert isinstance(loaded, list) and all(isinstance(m, BaseMessage) for m in loaded)
    view = memory.load("t")
    assert view.folds >= 1 and loaded == memory.prompt_messages(view)
    assert isinstance(loaded[0], SystemMessage) and loaded[0].content == view.summary
    assert "ignored" not in " ".join(m.text for m in memory.transcript("t"))
    assert len(memory.transcript("t")) == 8
    # the summarizer is the given llm and renders the folded lines with the custom prefixes
    assert summary_llm.seen
    text = summary_llm.seen[0][-1].text
    assert "U: question 0 FACT-t-0" in text and "B: answer 0 about FACT-t-0" in text
    new_lines = text.split("New lines of conversation:")[-1]  # stock's prompt has an example
    assert "Human:" not in new_lines and "AI:" not in new_lines


def test_unknown_keyword_is_rejected() -> None:
    with pytest.raises(compat.UnknownArgumentError, match="max_tokens_limit"):
        SummaryMemory(max_tokens_limit=50)


def test_backend_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SummaryMemory().backend_name == "classic"
    monkeypatch.setenv("MEMSHIFT_BACKEND", "middleware")
    assert SummaryMemory().backend_name == "middleware"
    monkeypatch.setenv("MEMSHIFT_BACKEND", "nosuchbackend")
    with pytest.raises(compat.ConfigError, match="nosuchbackend"):
        SummaryMemory()


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_errors_are_value_errors_like_stock(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=policy())
    stock = ConversationSummaryBufferMemory(llm=CountingChat(responses=["s"]))
    cases = [
        ({"a": "x", "b": "y"}, {"output": "z"}),          # ambiguous input keys
        ({"a": "x"}, {}),                                  # empty outputs
        ({"a": "x"}, {"one": "1", "two": "2"}),            # ambiguous outputs
    ]
    for inputs, outputs in cases:
        with pytest.raises(ValueError):
            stock.save_context(inputs, outputs)
        with pytest.raises(ValueError):
            memory.save_context({**inputs, "thread_id": "t"}, outputs)
    keyed = SummaryMemory(backend=backend, policy=policy(), input_key="question")
    with pytest.raises(ValueError, match="question"):
        keyed.save_context({"query": "x", "thread_id": "t"}, {"output": "z"})
    memory.save_context({"query": "x"}, {"output": "z"})  # in memory: the object's own thread
    assert memory.transcript("t") == [] and keyed.transcript("t") == []
    assert memory.load().messages[0].content == "x"


@pytest.mark.parametrize("backend", BACKENDS)
def test_only_content_langchain_rejects_is_refused(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=policy())
    with pytest.raises(compat.ContentError):
        memory.save_context({"input": "hi", "thread_id": "t"}, {"output": 42})
    with pytest.raises(compat.ContentError):
        memory.save("t", "hi", [3.5])
    assert memory.transcript("t") == [] and memory.load("t").messages == []


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 500}}
AUDIO = {"type": "audio", "source_type": "base64", "data": "UklGRg==", "mime_type": "audio/wav"}


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_multimodal_messages_round_trip_and_reach_the_summarizer_as_stock_shows_them(
        backend: str, kind: str, fresh_store) -> None:
    from compat.testing import RecordingSummarizer

    recorder = RecordingSummarizer(compat.DeterministicSummarizer())
    with SummaryMemory(backend=backend, store=fresh_store(kind), summarizer=recorder,
                       policy=MemoryPolicy(max_tokens=300, keep_tokens=150)) as memory:
        question = HumanMessage(content=[{"type": "text", "text": "what is in this picture?"}, IMAGE])
        tool_use = {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"x": 2}}
        answer = AIMessage(content=[{"type": "text", "text": "a cat"}, AUDIO, tool_use])
        memory.save_messages("t", [question, answer])
        view = memory.load("t")
        assert [m.content for m in view.messages] == [question.content, answer.content]
        assert [m.content for m in memory.transcript("t")] == [question.content, answer.content]
        for i in range(8):
            memory.save("t", *filler_turn("t", i, 12))
        assert memory.load("t").folds >= 1
        sent = " ".join(content for call in recorder.calls for _, content in call[1])
        # as stock SummarizationMiddleware shows them: base64 data and tool blocks left out,
        # a URL image as <image url=... /> (tests/test_summary_blocks.py, stock side by side)
        assert "what is in this picture?" in sent and "a cat" in sent
        assert "base64" not in sent and "UklGRg" not in sent and "toolu_1" not in sent


def test_non_text_blocks_count_by_the_stated_rule() -> None:
    from adapters.tokens import NON_TEXT_BLOCK_TOKENS

    text = HumanMessage(content="look")
    with_image = HumanMessage(content=[{"type": "text", "text": "look"}, IMAGE])
    policy_ = MemoryPolicy(max_tokens=100)
    assert policy_.count([with_image]) - policy_.count([text]) in range(
        NON_TEXT_BLOCK_TOKENS, NON_TEXT_BLOCK_TOKENS + 4)  # plus the short "[image]" placeholder


TURNS = [("aaa", "dummy"), ("multi\nline?", "  spaced  "), ("ünïcødé ✓", "Human: tricky")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prefixes", [{}, {"human_prefix": "User", "ai_prefix": "Bot"}])
def test_string_rendering_byte_identical_to_stock(backend: str, prefixes: dict) -> None:
    stock = ConversationSummaryBufferMemory(
        llm=CountingChat(responses=["never used"]), max_token_limit=10_000, **prefixes)
    memory = SummaryMemory(backend=backend, thread_id="t", **prefixes)
    unbound = SummaryMemory(backend=backend, **prefixes)
    assert memory.load_memory_variables({}) == stock.load_memory_variables({}) == {"history": ""}
    for human, ai in TURNS:
        stock.save_context({"input": human}, {"output": ai})
        memory.save_context({"input": human}, {"output": ai})
        unbound.save_context({"input": human, "thread_id": "t"}, {"output": ai})
        expected = stock.load_memory_variables({})
        assert memory.load_memory_variables({}) == expected
        assert unbound.load_memory_variables({"thread_id": "t"}) == expected
    assert stock.load_memory_variables({})["history"].startswith(
        f"{prefixes.get('human_prefix', 'Human')}: aaa\n{prefixes.get('ai_prefix', 'AI')}: dummy")
    stock.clear()
    memory.clear()
    unbound.clear("t")
    assert memory.load_memory_variables({}) == stock.load_memory_variables({}) == {"history": ""}
    assert unbound.load_memory_variables({"thread_id": "t"}) == {"history": ""}
    assert len(memory.transcript("t")) == 6  # clear() keeps the audit transcript


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_block_content_renders_like_stock(backend: str) -> None:
    blocks = [{"type": "text", "text": "b1"}, {"type": "text", "text": "b2"}]
    stock = ConversationSummaryBufferMemory(llm=CountingChat(responses=["x"]), max_token_limit=10_000)
    memory = SummaryMemory(backend=backend, thread_id="t")
    for human, ai in [(blocks, "plain"), ("plain", blocks), ("q", ["s1", "s2"])]:
        stock.save_context({"input": human}, {"output": ai})
        memory.save_context({"input": human}, {"output": ai})
        assert memory.load_memory_variables({}) == stock.load_memory_variables({})


def test_the_flag_changes_nothing_an_old_chain_sees() -> None:
    """Same turns, both backends: identical strings and message lists through BaseMemory."""
    rendered = {}
    for backend in BACKENDS:
        for return_messages in (False, True):
            memory = SummaryMemory(backend=backend, policy=policy(), return_messages=return_messages)
            for i in range(6):
                memory.save_context({"input": filler_turn("t", i, 10)[0], "thread_id": "t"},
                                    {"output": filler_turn("t", i, 10)[1]})
            value = memory.load_memory_variables({"thread_id": "t"})["history"]
            assert memory.load("t").folds >= 1
            rendered[backend, return_messages] = value if isinstance(value, str) else sig(value)
            history = memory.chat_history("t").messages
            assert sig(history) == sig(memory.load_memory_variables({"thread_id": "t"})["history"]) \
                if return_messages else history[0].type == "system"
    assert rendered["classic", False] == rendered["middleware", False]
    assert rendered["classic", False].startswith("System: ")
    assert rendered["classic", True] == rendered["middleware", True]
