"""Differential tests: the stock ``ConversationSummaryBufferMemory`` and ``SummaryMemory`` (both
backends) side by side on the same inputs with the same fake models; prompts and outputs must be
equal, except where the guide documents a difference."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_classic.chains import ConversationChain, LLMChain, SequentialChain
from langchain_classic.chains.conversational_retrieval.base import ConversationalRetrievalChain
from langchain_classic.memory import (
    CombinedMemory,
    ConversationBufferMemory,
    ConversationSummaryBufferMemory,
    ReadOnlySharedMemory,
)
from langchain_classic.memory.prompt import SUMMARY_PROMPT
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, get_buffer_string
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.history import RunnableWithMessageHistory

from adapters import MemoryPolicy, count_tokens_cjk
from compat import SummaryMemory

BACKENDS = ["classic", "middleware"]
LIMIT = 60


class Scripted(BaseChatModel):
    """Answers from the prompt alone (so two runs fed the same prompts answer the same), records
    every prompt, counts tokens with memshift's offline counter."""

    seen: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        prompt = get_buffer_string(messages)
        self.seen.append(prompt)
        if "Progressively summarize" in prompt:
            text = f"summary #{len(prompt)} of {prompt.count('Human:')} human lines"
        else:
            text = f"answer #{len(prompt) % 997}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return count_tokens_cjk(messages)


SHAPE = {"name": "import-line swap"}


@pytest.fixture(autouse=True, params=["import-line swap", "explicit stock policy"])
def shape(request: pytest.FixtureRequest) -> None:
    """Every test twice: memshift built exactly as stock is (no policy=: the stock-faithful
    default), and with the stock rule spelled out."""
    SHAPE["name"] = request.param


def pair(backend: str, **kwargs: Any) -> tuple[ConversationSummaryBufferMemory, SummaryMemory,
                                                Scripted, Scripted]:
    """Stock and memshift memories with the same settings; each with its own summary model."""
    stock_llm, ours_llm = Scripted(seen=[]), Scripted(seen=[])
    stock = ConversationSummaryBufferMemory(llm=stock_llm, max_token_limit=LIMIT, **kwargs)
    if SHAPE["name"] == "import-line swap":
        ours = SummaryMemory(backend=backend, llm=ours_llm, max_token_limit=LIMIT, **kwargs)
    else:
        ours = SummaryMemory(backend=backend, llm=ours_llm, prompt=SUMMARY_PROMPT,
                             policy=MemoryPolicy(max_tokens=LIMIT, cut="message"), **kwargs)
    return stock, ours, stock_llm, ours_llm


QUESTIONS = [f"question {i}: what about topic {i} and its details?" for i in range(7)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_conversation_chain(backend: str) -> None:
    stock, ours, stock_sum, ours_sum = pair(backend)
    runs = {}
    for name, memory in (("stock", stock), ("ours", ours)):
        chat = Scripted(seen=[])
        chain = ConversationChain(llm=chat, memory=memory)
        runs[name] = ([chain.invoke({"input": q})["response"] for q in QUESTIONS], chat.seen)
    assert runs["stock"] == runs["ours"]
    assert stock_sum.seen == ours_sum.seen and stock_sum.seen, "summarizer prompts differ"
    assert stock.moving_summary_buffer == ours.moving_summary_buffer
    assert [m.content for m in stock.chat_memory.messages] == \
        [m.content for m in ours.chat_memory.messages]


@pytest.mark.parametrize("backend", BACKENDS)
def test_llm_chain_with_memory_key_and_return_messages(backend: str) -> None:
    stock, ours, _, _ = pair(backend, memory_key="chat_history", return_messages=True)
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("chat_history"), ("human", "{question}")])
    runs = {}
    for name, memory in (("stock", stock), ("ours", ours)):
        chat = Scripted(seen=[])
        chain = LLMChain(llm=chat, prompt=prompt, memory=memory)
        runs[name] = ([chain.invoke({"question": q})["text"] for q in QUESTIONS], chat.seen)
    assert runs["stock"] == runs["ours"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequential_chain_and_read_only_shared_memory(backend: str) -> None:
    stock, ours, _, _ = pair(backend, input_key="topic")
    runs = {}
    for name, memory in (("stock", stock), ("ours", ours)):
        chat = Scripted(seen=[])
        first = LLMChain(llm=chat, output_key="draft", memory=ReadOnlySharedMemory(memory=memory),
                         prompt=PromptTemplate.from_template("{history}\nDraft on {topic}"))
        second = LLMChain(llm=chat, output_key="final",
                          prompt=PromptTemplate.from_template("Polish: {draft}"))
        chain = SequentialChain(chains=[first, second], input_variables=["topic"],
                                output_variables=["final"], memory=memory)
        outs = [chain.invoke({"topic": q})["final"] for q in QUESTIONS[:5]]
        runs[name] = (outs, chat.seen)
    assert runs["stock"] == runs["ours"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_combined_memory(backend: str) -> None:
    stock, ours, _, _ = pair(backend, memory_key="summary_history", input_key="input")
    runs = {}
    for name, memory in (("stock", stock), ("ours", ours)):
        chat = Scripted(seen=[])
        combined = CombinedMemory(memories=[
            memory, ConversationBufferMemory(memory_key="recent", input_key="input")])
        prompt = PromptTemplate.from_template("{summary_history}\n--\n{recent}\nHuman: {input}\nAI:")
        chain = ConversationChain(llm=chat, memory=combined, prompt=prompt)
        runs[name] = ([chain.invoke({"input": q})["response"] for q in QUESTIONS], chat.seen)
    assert runs["stock"] == runs["ours"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_runnable_with_message_history(backend: str) -> None:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q}")])
    stock, ours, _, _ = pair(backend, return_messages=True)
    runs = {}
    for name, get_history in (("stock", lambda sid: stock.chat_memory),
                              ("ours", lambda sid: ours.chat_memory)):
        chat = Scripted(seen=[])
        chain = RunnableWithMessageHistory(prompt | chat, get_history, input_messages_key="q",
                                           history_messages_key="history")
        config = {"configurable": {"session_id": "s"}}
        runs[name] = ([chain.invoke({"q": q}, config).content for q in QUESTIONS[:4]], chat.seen)
    assert runs["stock"] == runs["ours"]


class _Docs(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Document]:
        return [Document(page_content=f"doc about {query[:12]}")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_conversational_retrieval_chain(backend: str) -> None:
    """Prompts and answers are equal. Documented difference (guide §1): stock echoes its live
    message list as ``chat_history``, which then also holds the turn just saved; memshift
    returns the history as it was when the chain read it."""
    stock, ours, _, _ = pair(backend, memory_key="chat_history", return_messages=True,
                             output_key="answer")
    runs = {}
    for name, memory in (("stock", stock), ("ours", ours)):
        chat = Scripted(seen=[])
        chain = ConversationalRetrievalChain.from_llm(llm=chat, retriever=_Docs(), memory=memory)
        answers = []
        for q in QUESTIONS[:4]:
            out = chain.invoke({"question": q})
            answers.append(out["answer"])
        runs[name] = (answers, chat.seen)
    assert runs["stock"] == runs["ours"]


def test_stock_attributes_on_the_bound_thread() -> None:
    ours = SummaryMemory(max_token_limit=40)
    assert ours.max_token_limit == 40 and SummaryMemory().max_token_limit == 2000
    for q in QUESTIONS[:4]:
        ours.save_context({"input": q}, {"output": "ok " + q})
    assert ours.moving_summary_buffer and ours.load().folds >= 1
    assert [m.content for m in ours.chat_memory.messages] == [m.content for m in ours.load().messages]
    ours.moving_summary_buffer = "replaced"
    assert ours.load().summary == "replaced"
    ours.chat_memory.add_messages([AIMessage("x")])  # as stock: appended to the window
    assert ours.chat_memory.messages[-1].content == "x"
    assert ours.predict_new_summary(ours.chat_memory.messages, "before").startswith("Facts")
    with pytest.raises(AttributeError, match="validates its prompt"):
        ours.validate_prompt_input_variables  # noqa: B018
    history = InMemoryChatMessageHistory()
    assert history.messages == []  # a plain history is untouched by any of this


def test_prune_folds_the_bound_thread_now() -> None:
    ours = SummaryMemory(max_token_limit=10_000)
    for q in QUESTIONS:
        ours.save_context({"input": q}, {"output": "ok " + q})
    assert ours.load().folds == 0
    bound = ours.for_thread("t")
    for q in QUESTIONS:
        bound.save_context({"input": q}, {"output": "ok"})
    tight = SummaryMemory(policy=MemoryPolicy(max_tokens=30), store=ours._rt.store)
    tight.for_thread("t").prune()
    assert tight.load("t").folds == 1 and tight.active_policy.count(tight.load("t").messages) <= 30
