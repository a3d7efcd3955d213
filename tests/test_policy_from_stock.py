"""``policy_from_stock``: a stock ``ConversationSummaryBufferMemory`` or ``SummarizationMiddleware``
read into the ``MemoryPolicy`` that folds at the same turns, counter included.

Each differential test drives one conversation through the stock object and through a
``SummaryMemory`` built on the translated policy, each with its own counting summary model:
the turns at which the summarizer is called must be the same (and so their number). The
classic class is driven through the drop-in API (``save_context``), the middleware through
``create_agent`` (stock's middleware with its own checkpointer; memshift's ``memory.middleware``
with ``memory.checkpointer``)."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_classic.memory import ConversationSummaryBufferMemory, ConversationSummaryMemory
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, get_buffer_string
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import PromptTemplate
from langgraph.checkpoint.memory import InMemorySaver

from adapters import ConfigError, MemoryPolicy
from adapters import policy_from_stock
from compat import SummaryMemory

ROOT = Path(__file__).resolve().parents[1]
TURNS = 30
CLOCK = {"turn": -1}  # the turn the conversation is at: what a summary call is stamped with


def words(messages: Any) -> int:
    return sum(len(str(m.content).split()) for m in messages)


class Summaries(BaseChatModel):
    """The summary model: records the turn of every call (and its prompt); counts tokens as
    a provider's tokenizer would, ~4 characters a token (not memshift's counter)."""

    calls: list[int] = []
    prompts: list[str] = []
    counter: str = "chars"  # or "words"

    @property
    def _llm_type(self) -> str:
        return "summaries"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.calls.append(CLOCK["turn"])
        self.prompts.append(get_buffer_string(messages))
        numbers = sorted(set(re.findall(r"\b\d+\b", self.prompts[-1])), key=int)
        text = f"the user asked about topics {', '.join(numbers)} and got replies"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return words(messages) if self.counter == "words" else \
            count_tokens_approximately(messages, chars_per_token=4.0)


def summaries(profile: dict | None = None, counter: str = "chars") -> Summaries:
    model = Summaries(calls=[], prompts=[], counter=counter)
    if profile is not None:
        model.profile = profile
    return model


class Answers(BaseChatModel):
    """The agent's model: answers of varying length, the same on both sides turn for turn."""

    @property
    def _llm_type(self) -> str:
        return "answers"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        i = CLOCK["turn"]
        text = f"reply {i}: " + "here is a detail " * (1 + i % 5)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    def bind_tools(self, *args: Any, **kwargs: Any) -> Answers:
        return self


def question(i: int) -> str:
    return f"question {i}: tell me about topic {i} " + "and more " * (i % 4)


def answer(i: int) -> str:
    return f"reply {i}: " + "here is a detail " * (1 + i % 5)


# -- the middleware ------------------------------------------------------------------------
def chinese(i: int) -> str:
    return f"问题 {i}：请详细介绍一下第{i}个主题的背景、现状和未来的发展方向。" * (1 + i % 2)


def run_agent(middleware: Any, checkpointer: Any, turns: int = TURNS, ask: Any = question,
              tid: str = "t") -> None:
    agent = create_agent(Answers(), [], middleware=[middleware], checkpointer=checkpointer)
    config = {"configurable": {"thread_id": tid}}
    for i in range(turns):
        CLOCK["turn"] = i
        agent.invoke({"messages": [HumanMessage(ask(i))]}, config)


def run_stock_agent(middleware: SummarizationMiddleware, turns: int = TURNS,
                    ask: Any = question) -> None:
    run_agent(middleware, InMemorySaver(), turns, ask)


def run_memory_agent(memory: SummaryMemory, turns: int = TURNS, tid: str = "t",
                     ask: Any = question) -> None:
    run_agent(memory.middleware, memory.checkpointer, turns, ask, tid)


WINDOW = {"max_input_tokens": 1000}
MIDDLEWARES: dict[str, dict[str, Any]] = {
    "tokens, keep messages, stock's counter": dict(trigger=("tokens", 200), keep=("messages", 4)),
    "messages, keep messages": dict(trigger=("messages", 9), keep=("messages", 4)),
    "fraction, keep fraction (profile)": dict(trigger=("fraction", 0.15), keep=("fraction", 0.06)),
    "tokens, keep tokens": dict(trigger=("tokens", 150), keep=("tokens", 60)),
    "clauses, keep tokens, app counter": dict(
        trigger=[{"tokens": 100, "messages": 6}, ("messages", 14)], keep=("tokens", 50),
        token_counter=words),
    "default keep (20 messages)": dict(trigger=("messages", 24)),
}
# Stock counts its own summary message (a HumanMessage) towards the trigger once a thread has
# one: the translated policy does too (``count_summary``), so every fold lands on stock's turn.


def stock_middleware(settings: dict[str, Any]) -> tuple[SummarizationMiddleware, Summaries]:
    model = summaries(WINDOW)
    return SummarizationMiddleware(model=model, **settings), model


def both_agents(name: str) -> tuple[list[int], list[int]]:
    """The turns stock and the translated policy summarize at, on one conversation."""
    stock, stock_model = stock_middleware(MIDDLEWARES[name])
    run_stock_agent(stock)
    ours_model = summaries(WINDOW)
    memory = SummaryMemory(llm=ours_model, backend="middleware", store="memory",
                           policy=policy_from_stock(stock))
    run_memory_agent(memory)
    assert len(stock_model.calls) >= 2, "the conversation must fold more than once"
    return stock_model.calls, ours_model.calls


@pytest.mark.parametrize("name", list(MIDDLEWARES))
def test_the_middleware_policy_folds_first_at_stocks_turn(name: str) -> None:
    stock, ours = both_agents(name)
    assert ours[:1] == stock[:1], f"stock first summarized at turn {stock[0]}, memshift {ours[:1]}"


@pytest.mark.parametrize("name", list(MIDDLEWARES))
def test_the_middleware_policy_folds_at_stocks_turns(name: str) -> None:
    stock, ours = both_agents(name)
    assert ours == stock, f"stock summarized at turns {stock}, memshift at {ours}"


def test_the_literal_rewrite_is_not_equivalent_and_from_stock_is() -> None:
    """Issue 39: ``MemoryPolicy(trigger=..., keep=...)`` copied from the stock constructor counts
    with memshift's counter, not the app's (stock's ~4 characters a token under-counts
    Chinese), and folds far more often; the translated policy counts as stock does."""
    settings = dict(trigger=("tokens", 400), keep=("messages", 6))
    stock, stock_model = stock_middleware(settings)
    run_stock_agent(stock, ask=chinese)
    literal_model, ours_model = summaries(WINDOW), summaries(WINDOW)
    literal = SummaryMemory(llm=literal_model, backend="middleware", store="memory",
                            policy=MemoryPolicy(cut="message", **settings))
    run_memory_agent(literal, ask=chinese)
    ours = SummaryMemory(llm=ours_model, backend="middleware", store="memory",
                         policy=policy_from_stock(stock))
    run_memory_agent(ours, ask=chinese)
    assert len(literal_model.calls) >= 2 * len(stock_model.calls) > 0
    assert ours_model.calls[:1] == stock_model.calls[:1] != literal_model.calls[:1]
    sample = [HumanMessage(chinese(3))]
    assert policy_from_stock(stock).count(sample) == stock.token_counter(sample)


def test_the_first_summary_prompt_is_stocks() -> None:
    """The middleware's own ``summary_prompt`` is carried: the first fold's prompt is equal."""
    stock, stock_model = stock_middleware(dict(trigger=("messages", 9), keep=("messages", 4),
                                               summary_prompt="Shorten:\n{messages}"))
    run_stock_agent(stock, 6)
    ours_model = summaries(WINDOW)
    memory = SummaryMemory(llm=ours_model, backend="middleware", store="memory",
                           policy=policy_from_stock(stock))
    run_memory_agent(memory, 6)
    assert stock_model.prompts and ours_model.prompts[:1] == stock_model.prompts[:1]


# -- the classic memory --------------------------------------------------------------------
CUSTOM = PromptTemplate.from_template("Old: {summary}\nNew:\n{new_lines}\nSummary:")
CLASSICS: dict[str, dict[str, Any]] = {
    "60 tokens, the llm's count": dict(max_token_limit=60),
    "150 words, a custom prompt and prefixes": dict(max_token_limit=150, prompt=CUSTOM,
                                                    human_prefix="User", ai_prefix="Bot"),
    "default limit (2000), long turns": dict(),
}
COUNTERS = {"150 words, a custom prompt and prefixes": "words"}


def drive_classic(memory: Any, turns: int = TURNS, scale: int = 1) -> None:
    for i in range(turns):
        CLOCK["turn"] = i
        memory.save_context({"input": question(i) * scale}, {"output": answer(i) * scale})


def stock_classic(name: str) -> tuple[ConversationSummaryBufferMemory, Summaries]:
    model = summaries(counter=COUNTERS.get(name, "chars"))
    return ConversationSummaryBufferMemory(llm=model, **CLASSICS[name]), model


def prefixes(stock: ConversationSummaryBufferMemory) -> dict[str, str]:
    return {"human_prefix": stock.human_prefix, "ai_prefix": stock.ai_prefix}


@pytest.mark.parametrize("backend", ["classic", "middleware"])
@pytest.mark.parametrize("name", list(CLASSICS))
def test_the_classic_policy_folds_at_stocks_turns(name: str, backend: str) -> None:
    scale = 12 if "2000" in name else 1
    stock, stock_model = stock_classic(name)
    drive_classic(stock, scale=scale)
    ours_model = summaries(counter=COUNTERS.get(name, "chars"))
    memory = SummaryMemory(llm=ours_model, backend=backend, policy=policy_from_stock(stock),
                           **prefixes(stock))
    drive_classic(memory, scale=scale)
    assert len(stock_model.calls) >= 2, "the conversation must fold more than once"
    assert ours_model.calls == stock_model.calls, (
        f"stock summarized at turns {stock_model.calls}, memshift at {ours_model.calls}")
    assert ours_model.prompts == stock_model.prompts  # the prompt and the prefixes too
    assert memory.moving_summary_buffer == stock.moving_summary_buffer


def test_the_literal_classic_rewrite_is_not_equivalent() -> None:
    stock, stock_model = stock_classic("60 tokens, the llm's count")
    drive_classic(stock)
    literal_model = summaries()
    drive_classic(SummaryMemory(llm=literal_model, policy=MemoryPolicy(max_tokens=60)))
    assert literal_model.calls != stock_model.calls


# -- on a store ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_on_a_store_the_classic_policy_folds_at_stocks_turns(kind: str, fresh_store: Any) -> None:
    stock, stock_model = stock_classic("60 tokens, the llm's count")
    drive_classic(stock)
    ours_model = summaries()
    with SummaryMemory(llm=ours_model, store=fresh_store(kind), thread_id="chat-thread",
                       policy=policy_from_stock(stock)) as memory:
        drive_classic(memory)
        assert memory.moving_summary_buffer == stock.moving_summary_buffer
        assert memory.load().folds == len(stock_model.calls)
    assert len(stock_model.calls) >= 2 and ours_model.calls == stock_model.calls


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_on_a_store_the_middleware_policy_folds_as_in_memory(kind: str, fresh_store: Any) -> None:
    """The first fold at stock's turn, and every fold where the in-memory run has it (the
    later ones part from stock as ``SUMMARY_COUNTED`` says)."""
    stock, stock_model = stock_middleware(MIDDLEWARES["fraction, keep fraction (profile)"])
    run_stock_agent(stock)
    policy = policy_from_stock(stock)
    in_memory = summaries(WINDOW)
    run_memory_agent(SummaryMemory(llm=in_memory, backend="middleware", store="memory",
                                   policy=policy))
    ours_model = summaries(WINDOW)
    with SummaryMemory(llm=ours_model, backend="middleware", store=fresh_store(kind),
                       policy=policy) as memory:
        run_memory_agent(memory, tid="agent-thread")
        assert memory.load("agent-thread").folds == len(ours_model.calls)
    assert ours_model.calls == in_memory.calls and len(ours_model.calls) >= 2
    assert ours_model.calls[:1] == stock_model.calls[:1]


# -- what is translated, and what is refused ----------------------------------------------
def test_the_middleware_settings_are_read_as_stock_holds_them() -> None:
    stock, _ = stock_middleware(dict(trigger=[("fraction", 0.5), ("messages", 30)],
                                     keep=("fraction", 0.2), summary_prompt="S {messages}"))
    policy = policy_from_stock(stock)
    assert policy.trigger_clauses == ({"tokens": 500}, {"messages": 30})
    assert policy.keep_tokens == 200 and policy.model_window == 1000
    assert policy.cut == "message" and policy.prompt.template == "S {messages}"
    assert policy.trigger == stock.trigger and policy.keep == stock.keep
    never = policy_from_stock(SummarizationMiddleware(model=summaries()))  # trigger=None
    assert never.trigger_clauses == () and never.trigger_reason([HumanMessage("x")] * 99) == ""


def test_the_classic_settings_are_read_as_stock_holds_them() -> None:
    stock, model = stock_classic("150 words, a custom prompt and prefixes")
    policy = policy_from_stock(stock)
    assert policy.max_tokens == policy.keep_tokens == 150 and policy.cut == "message"
    assert policy.prompt.template == CUSTOM.template
    sample = [HumanMessage("one two three"), AIMessage("four five")]
    assert policy.count(sample) == model.get_num_tokens_from_messages(sample) == 5


def test_overrides_are_policy_fields() -> None:
    stock, _ = stock_classic("60 tokens, the llm's count")
    policy = policy_from_stock(stock, fold="background", summary_retries=0,
                               token_counter=words)
    assert policy.fold == "background" and policy.summary_retries == 0
    assert policy.count([HumanMessage("a b c")]) == 3
    with pytest.raises(ConfigError, match="no_such_field"):
        policy_from_stock(stock, no_such_field=1)


def test_memshifts_own_objects_give_their_policy() -> None:
    policy = MemoryPolicy(trigger=("messages", 8), keep=("messages", 3))
    memory = SummaryMemory(llm=summaries(), backend="middleware", policy=policy)
    assert policy_from_stock(memory.middleware) == memory.active_policy


class Tuned(SummarizationMiddleware):
    """An app's subclass: it may decide otherwise when to summarize."""


def summary_memory() -> Any:
    with warnings.catch_warnings():  # stock's deprecation notice of the class
        warnings.simplefilter("ignore", DeprecationWarning)
        return ConversationSummaryMemory(llm=summaries())


@pytest.mark.parametrize("make,match", [
    (summary_memory, "ConversationSummaryMemory.*summary_only"),
    (lambda: Tuned(model=summaries(), trigger=("messages", 5)), "Tuned"),
    (object, "ConversationSummaryBufferMemory or a SummarizationMiddleware"),
], ids=["summary-memory", "subclass", "other"])
def test_what_cannot_be_translated_is_refused_by_name(make: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        policy_from_stock(make())


def test_a_limit_no_policy_holds_is_refused_by_its_stock_name() -> None:
    with pytest.raises(ConfigError, match="max_token_limit=0"):
        policy_from_stock(ConversationSummaryBufferMemory(llm=summaries(), max_token_limit=0))


def test_importing_it_loads_neither_stock_class() -> None:
    code = ("import sys, json; sys.path.insert(0, %r)\n"
            "import adapters.policy_stock\n"
            "print(json.dumps([m for m in sys.modules if m.startswith(('langchain.agents', "
            "'langchain_classic.memory'))]))" % str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_without_counting_the_summary_later_folds_drift() -> None:
    """The field is what makes them equal: off, stock folds more often after the first fold."""
    stock, stock_model = stock_middleware(MIDDLEWARES["tokens, keep tokens"])
    run_stock_agent(stock)
    ours_model = summaries(WINDOW)
    memory = SummaryMemory(llm=ours_model, backend="middleware", store="memory",
                           policy=policy_from_stock(stock, count_summary=False))
    run_memory_agent(memory)
    assert ours_model.calls[:1] == stock_model.calls[:1]
    assert len(ours_model.calls) < len(stock_model.calls)


def test_memory_policy_from_stock_is_the_spelling() -> None:
    from langchain_classic.memory import ConversationSummaryBufferMemory
    from langchain_core.language_models.fake import FakeListLLM

    class Offline(FakeListLLM):
        def get_num_tokens(self, text: str) -> int:
            return max(1, len(text) // 4)

    stock = ConversationSummaryBufferMemory(llm=Offline(responses=["s"]), max_token_limit=321)
    ours = MemoryPolicy.from_stock(stock)
    assert ours.max_tokens == 321 and ours.recorded() == policy_from_stock(stock).recorded()
