"""The suites take the team's summarizer as it is: a chat model or a plain function, through
the one ``summarizer`` fixture (issue 39 #5). Each class below is what an adopter writes."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from adapters import MemoryPolicy, open_store
from adapters.errors import ConfigError
from compat import SummaryMemory
from compat.testing import (
    BackendEquivalenceContract, EchoChatModel, StagedMigrationContract, SummaryMemoryContract,
    filler_turn, summarizer_settings,
)

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")

KINDS = ["memory", "sqlite"]  # the in-memory store and SQLite keep the runtime modest


def team_summarize(summary: str, messages: list[BaseMessage]) -> str:
    """A team's summarizer as a plain function: the old lines plus each message's first words."""
    lines = [line for line in summary.splitlines() if line][-12:]
    lines += [f"TEAM {m.type}: " + " ".join(str(m.content).split()[:4]) for m in messages]
    return "\n".join(lines) or "TEAM (nothing)"


class _CountedFunction:
    """``team_summarize``, counting its calls so a test can see the suite used it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        self.calls += 1
        return team_summarize(summary, list(messages))


class TeamChatModel(BaseChatModel):
    """A team's chat model, offline: it reads memshift's summary prompt and answers with the
    previous summary plus each new line's first words. Every answer is numbered, so no two
    calls answer alike (as with a real model): the suites must not mistake that for a
    difference between backends."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "team-fake"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls += 1
        prompt = messages[-1].text
        previous = re.search(r"Previous summary:\n(.*?)\n\nNew lines", prompt, re.S)
        new = re.search(r"<<<\n(.*?)\n>>>", prompt, re.S)
        lines = previous.group(1).splitlines()[-12:] if previous else []
        lines = [line for line in lines if line.startswith("TEAM")]
        for line in (new.group(1).splitlines() if new else []):
            lines.append("TEAM " + " ".join(line.split()[:5]))
        reply = f"(answer {self.calls})\n" + "\n".join(lines or ["TEAM (nothing)"])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


@pytest.fixture(params=KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


def _may_not_fold(request: pytest.FixtureRequest) -> bool:
    """Only the fixed conversations always fold: Hypothesis may draw short ones, and the
    create_agent test talks too little to fold before the agent's turn."""
    return not any(name in request.node.name for name in ("long_interleaved", "both_ways"))


# -- SummaryMemoryContract: the default memory, built from the fixtures ---------------------------
class _TeamSummaryChecks:
    def test_the_team_summarizer_writes_the_summary(self, memory: SummaryMemory) -> None:
        for i in range(12):
            memory.save("t1", *filler_turn("t1", i, 30))
        view = memory.load("t1")
        assert view.folds >= 1 and "TEAM" in view.summary, view.summary


class _OnMemoryOrSqlite:
    @pytest.fixture
    def store(self, store_kind: str, tmp_path: Any) -> str:
        return "memory" if store_kind == "memory" else f"sqlite:///{tmp_path}/m.db"


class TestSummaryMemoryWithAChatModel(_OnMemoryOrSqlite, _TeamSummaryChecks,
                                       SummaryMemoryContract):
    @pytest.fixture
    def summarizer(self) -> TeamChatModel:
        return TeamChatModel()


class TestSummaryMemoryWithAFunction(_OnMemoryOrSqlite, _TeamSummaryChecks,
                                     SummaryMemoryContract):
    @pytest.fixture
    def summarizer(self) -> Any:
        return team_summarize


# -- BackendEquivalenceContract ----------------------------------------------------------------
class _EquivalenceOnMemoryOrSqlite:
    hypothesis_examples = 4

    @pytest.fixture
    def make_memory(self, policy: MemoryPolicy, store_kind: str,
                    fresh_store: Any) -> Iterator[Any]:
        opened: list[SummaryMemory] = []

        def make(backend: str, summarizer: Any) -> SummaryMemory:
            memory = SummaryMemory(backend=backend, policy=policy, summarizer=summarizer,
                                   store=fresh_store(store_kind))
            opened.append(memory)
            return memory

        yield make
        for memory in opened:
            memory.close()


class TestEquivalenceWithAChatModel(_EquivalenceOnMemoryOrSqlite, BackendEquivalenceContract):
    @pytest.fixture
    def summarizer(self, request: pytest.FixtureRequest) -> Iterator[TeamChatModel]:
        model = TeamChatModel()
        yield model
        assert model.calls or _may_not_fold(request), "the suite never asked the team's model"


class TestEquivalenceWithAFunction(_EquivalenceOnMemoryOrSqlite, BackendEquivalenceContract):
    @pytest.fixture
    def summarizer(self, request: pytest.FixtureRequest) -> Iterator[_CountedFunction]:
        function = _CountedFunction()
        yield function
        assert function.calls or _may_not_fold(request), "the suite never called the function"


# -- StagedMigrationContract -------------------------------------------------------------------
class _StagedOnMemoryOrSqlite:
    hypothesis_examples = 3

    @pytest.fixture
    def store(self, store_kind: str, tmp_path: Any) -> Iterator[Any]:
        """Every memory of a test on one store: an in-memory one is shared as an object."""
        if store_kind == "sqlite":
            yield f"sqlite:///{tmp_path}/m.db"
            return
        store = open_store("memory")
        yield store
        store.close()


class TestStagedWithAChatModel(_StagedOnMemoryOrSqlite, StagedMigrationContract):
    """A model that answers differently on every call: the suite still compares like with
    like (the twin gets the same summary for the same input)."""

    @pytest.fixture
    def summarizer(self, request: pytest.FixtureRequest) -> Iterator[TeamChatModel]:
        model = TeamChatModel()
        yield model
        assert model.calls or _may_not_fold(request), "the suite never asked the team's model"


class TestStagedWithAFunction(_StagedOnMemoryOrSqlite, StagedMigrationContract):
    @pytest.fixture
    def summarizer(self, request: pytest.FixtureRequest) -> Iterator[_CountedFunction]:
        function = _CountedFunction()
        yield function
        assert function.calls or _may_not_fold(request), "the suite never called the function"


# -- what is refused ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [object(), 42, "gpt-4.1-mini"])
def test_anything_else_is_refused_naming_what_is_accepted(bad: object) -> None:
    from compat.testing.summarizers import SuiteSummarizer

    policy = MemoryPolicy(max_tokens=200)
    for adapt in (summarizer_settings, lambda value: SuiteSummarizer(value, policy)):
        with pytest.raises(ConfigError) as caught:
            adapt(bad)
        message = str(caught.value)
        for kind in ("chat model", "Summarizer", "fn(summary, messages)", type(bad).__name__):
            assert kind in message, message


def test_the_old_factory_form_is_still_accepted() -> None:
    from compat.testing import RecordingSummarizer

    settings = summarizer_settings(RecordingSummarizer)
    assert isinstance(settings["summarizer"], RecordingSummarizer)
    assert summarizer_settings(None) == {}
    assert summarizer_settings(EchoChatModel()).keys() == {"llm"}
