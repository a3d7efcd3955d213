"""LangChain's own memory/chain unit-test scenarios, pointed at ``SummaryMemory`` (both
backends, no thread id: the import-line swap)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain
from langchain_core.language_models import LLM
from langchain_core.prompts import PromptTemplate

from compat import SummaryMemory

BACKENDS = ["classic", "middleware"]


class LastPrompt(LLM):
    last: str = ""

    @property
    def _llm_type(self) -> str:
        return "last-prompt"

    def _call(self, prompt: str, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
        self.last = prompt
        return "dummy"


@pytest.mark.parametrize("backend", BACKENDS)
def test_prefixes_render_like_stock(backend: str) -> None:
    ai = SummaryMemory(backend=backend, memory_key="foo", ai_prefix="Assistant")
    ai.save_context({"input": "bar"}, {"output": "foo"})
    assert ai.load_memory_variables({}) == {"foo": "Human: bar\nAssistant: foo"}
    human = SummaryMemory(backend=backend, memory_key="foo", human_prefix="Friend")
    human.save_context({"input": "bar"}, {"output": "foo"})
    assert human.load_memory_variables({}) == {"foo": "Friend: bar\nAI: foo"}

    async def run() -> None:
        memory = SummaryMemory(backend=backend, memory_key="foo", ai_prefix="Assistant")
        await memory.asave_context({"input": "bar"}, {"output": "foo"})
        assert await memory.aload_memory_variables({}) == {"foo": "Human: bar\nAssistant: foo"}
    asyncio.run(run())


@pytest.mark.parametrize("backend", BACKENDS)
def test_conversation_chain_with_a_custom_prompt_and_input_key(backend: str) -> None:
    llm = LastPrompt()
    chain = ConversationChain(llm=llm, prompt=PromptTemplate.from_template("{foo} {bar}"),
                              memory=SummaryMemory(backend=backend, memory_key="foo"),
                              input_key="bar")
    chain.invoke({"bar": "aaa"})
    assert llm.last == " aaa"
    chain.invoke({"bar": "bbb"})
    assert llm.last == "Human: aaa\nAI: dummy bbb"
    asyncio.run(chain.ainvoke({"bar": "ccc"}))
    assert llm.last == "Human: aaa\nAI: dummy\nHuman: bbb\nAI: dummy ccc"


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_rules_raise_value_errors_like_stock(backend: str) -> None:
    memory = SummaryMemory(backend=backend, memory_key="baz")
    memory.save_context({"foo": "bar", "baz": "foo"}, {"bar": "foo"})  # the input is "foo"
    for inputs, outputs in (({"foo": "bar", "foo1": "bar"}, {"bar": "foo"}),  # two candidates
                            ({"baz": "bar"}, {"bar": "foo"}),                 # only the memory key
                            ({"foo": "bar", "baz": "foo"}, {}),               # no output
                            ({"foo": "bar", "baz": "foo"}, {"foo": "b", "foo1": "b"})):
        with pytest.raises(ValueError):
            memory.save_context(inputs, outputs)
    assert memory.load_memory_variables({}) == {"baz": "Human: bar\nAI: foo"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_clearing_like_stock(backend: str) -> None:
    memory = SummaryMemory(backend=backend, memory_key="baz")
    memory.save_context({"foo": "bar", "baz": "foo"}, {"bar": "foo"})
    memory.clear()
    assert memory.load_memory_variables({}) == {"baz": ""}

    async def run() -> None:
        other = SummaryMemory(backend=backend, memory_key="baz")
        await other.asave_context({"foo": "bar", "baz": "foo"}, {"bar": "foo"})
        await other.aclear()
        assert await other.aload_memory_variables({}) == {"baz": ""}
    asyncio.run(run())
