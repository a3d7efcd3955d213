"""The contract suite over every backend x store, as a user would subclass it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory
from compat.testing import (
    BackendEquivalenceContract, StagedMigrationContract, SummaryMemoryContract,
)
from tests.conftest import BACKENDS, STORES

STORES_FOR_STAGED = STORES

# memshift's own code paths emit no deprecation warning: the contract runs with them as errors
pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")


class _StoreCapabilities:
    @pytest.fixture
    def capabilities(self, store_url: str) -> set[str]:
        return set() if store_url == "memory" else {"persistent"}


# every engine a deployment can run: the fixed backends, shadow, and staged at the start,
# the middle and the end of a rollout
ENGINES = [*BACKENDS, "shadow", "staged-0.0", "staged-0.5", "staged-1.0"]


def _engine(name: str) -> dict[str, object]:
    if name.startswith("staged-"):
        return {"backend": "staged", "rollout": float(name.removeprefix("staged-"))}
    return {"backend": name}


class TestContractTokens(_StoreCapabilities, SummaryMemoryContract):
    @pytest.fixture(params=ENGINES)
    def memory(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[SummaryMemory]:
        with SummaryMemory(**_engine(request.param), store=store_url,
                           policy=MemoryPolicy(max_tokens=120, keep_tokens=60)) as memory:
            yield memory


class TestContractMessagesAndRaise(_StoreCapabilities, SummaryMemoryContract):
    """Message-count trigger, message cuts, and errors raised instead of deferred."""

    @pytest.fixture(params=[*BACKENDS, "staged-0.5"])
    def memory(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[SummaryMemory]:
        policy = MemoryPolicy(max_tokens=400, max_messages=6, keep_messages=4, cut="message",
                              on_summary_error="raise")
        with SummaryMemory(**_engine(request.param), store=store_url, policy=policy,
                           return_messages=True, human_prefix="User", ai_prefix="Bot") as memory:
            yield memory


class TestEquivalenceDefault(BackendEquivalenceContract):
    pass


class TestEquivalenceHysteresisByMessage(BackendEquivalenceContract):
    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=300, keep_tokens=100, max_messages=10, keep_messages=5,
                            cut="message")


class TestEquivalenceBackgroundFolds(BackendEquivalenceContract):
    """Both backends with background folds, drained after each turn (SQLite: the folds run
    on worker threads against a real store)."""

    hypothesis_examples = 6

    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=200, keep_tokens=120, fold="background")

    @pytest.fixture
    def make_memory(self, policy: MemoryPolicy, fresh_store) -> Any:
        def make(backend: str, summarizer: Any) -> SummaryMemory:
            return SummaryMemory(backend=backend, policy=policy, summarizer=summarizer,
                                 store=fresh_store("sqlite"))
        return make


class TestEquivalenceNoHysteresisTiktoken(BackendEquivalenceContract):
    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=150, token_counter="o200k_base")


class TestEquivalencePersistentStores(BackendEquivalenceContract):
    """Each backend on its own fresh persistent store (messages round-trip through SQL)."""

    hypothesis_examples = 4

    @pytest.fixture(params=["sqlite", "postgres"])
    def kind(self, request: pytest.FixtureRequest) -> str:
        return request.param

    @pytest.fixture
    def make_memory(self, policy: MemoryPolicy, fresh_store, kind: str):  # type: ignore[override]
        opened: list[SummaryMemory] = []

        def make(backend: str, summarizer):
            memory = SummaryMemory(backend=backend, policy=policy, summarizer=summarizer,
                                   store=fresh_store(kind))
            opened.append(memory)
            return memory

        yield make
        for memory in opened:
            memory.close()


class TestEquivalenceStructuredRedacted(BackendEquivalenceContract):
    """Structured summaries and redaction on: the backends still agree, records included."""

    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=200, keep_tokens=100, summary_format="structured", redact=True)


class TestContractStructured(SummaryMemoryContract):
    @pytest.fixture
    def capabilities(self) -> set[str]:
        return set()  # the in-memory store

    @pytest.fixture(params=BACKENDS)
    def memory(self, request: pytest.FixtureRequest) -> Iterator[SummaryMemory]:
        policy = MemoryPolicy(max_tokens=120, keep_tokens=60, summary_format="structured",
                              redact=True)
        with SummaryMemory(backend=request.param, policy=policy) as memory:
            yield memory


def test_the_guard_fails_a_subclass_that_drops_or_overrides_a_test() -> None:
    from compat.testing._guard import assert_no_silent_overrides

    class Dropped(SummaryMemoryContract):
        test_threads_never_see_each_other = None  # type: ignore[assignment]

    class Overridden(BackendEquivalenceContract):
        def test_random_conversations_stay_equivalent(self) -> None:  # type: ignore[override]
            pass

    class OptedOut(SummaryMemoryContract):
        @pytest.mark.xfail(reason="documented: this deployment shares one thread on purpose")
        def test_threads_never_see_each_other(self) -> None:  # type: ignore[override]
            raise AssertionError

    with pytest.raises(AssertionError, match="test_threads_never_see_each_other"):
        assert_no_silent_overrides(Dropped, SummaryMemoryContract)
    with pytest.raises(AssertionError, match="test_random_conversations_stay_equivalent"):
        assert_no_silent_overrides(Overridden, BackendEquivalenceContract)
    assert_no_silent_overrides(OptedOut, SummaryMemoryContract)


class TestStagedMigration(StagedMigrationContract):
    """Threads moving at random turns, on every store (a URL, opened by each memory)."""

    @pytest.fixture(params=STORES_FOR_STAGED)
    def store(self, request: pytest.FixtureRequest, fresh_store):  # type: ignore[override]
        from adapters import open_store

        store = open_store(fresh_store(request.param))
        yield store
        store.close()


class TestStagedMigrationMessageCuts(StagedMigrationContract):
    hypothesis_examples = 6

    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=300, keep_tokens=100, max_messages=10, keep_messages=5,
                            cut="message")


class TestStagedMigrationAsTheReadmeShowsIt(StagedMigrationContract):
    """The README's adopter: a URL, so each memory opens the store on its own."""

    hypothesis_examples = 4

    @pytest.fixture
    def store(self, tmp_path):  # type: ignore[override]
        return f"sqlite:///{tmp_path}/m.db"
