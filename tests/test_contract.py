"""The contract suite over every backend x store, as a user would subclass it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory
from compat.testing import BackendEquivalenceContract, SummaryMemoryContract
from tests.conftest import BACKENDS


class TestContractTokens(SummaryMemoryContract):
    @pytest.fixture(params=[*BACKENDS, "shadow"])
    def memory(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[SummaryMemory]:
        with SummaryMemory(backend=request.param, store=store_url,
                           policy=MemoryPolicy(max_tokens=120, keep_tokens=60)) as memory:
            yield memory


class TestContractMessagesAndRaise(SummaryMemoryContract):
    """Message-count trigger, message cuts, and errors raised instead of deferred."""

    @pytest.fixture(params=BACKENDS)
    def memory(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[SummaryMemory]:
        policy = MemoryPolicy(max_tokens=400, max_messages=6, keep_messages=4, cut="message",
                              on_summary_error="raise")
        with SummaryMemory(backend=request.param, store=store_url, policy=policy,
                           return_messages=True, human_prefix="User", ai_prefix="Bot") as memory:
            yield memory


class TestEquivalenceDefault(BackendEquivalenceContract):
    pass


class TestEquivalenceHysteresisByMessage(BackendEquivalenceContract):
    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=300, keep_tokens=100, max_messages=10, keep_messages=5,
                            cut="message")


class TestEquivalenceNoHysteresisTiktoken(BackendEquivalenceContract):
    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=150, token_counter="o200k_base")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
class TestEquivalencePersistentStores(BackendEquivalenceContract):
    """Each backend on its own fresh persistent store (messages round-trip through SQL)."""

    hypothesis_examples = 4

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
    @pytest.fixture(params=BACKENDS)
    def memory(self, request: pytest.FixtureRequest) -> Iterator[SummaryMemory]:
        policy = MemoryPolicy(max_tokens=120, keep_tokens=60, summary_format="structured",
                              redact=True)
        with SummaryMemory(backend=request.param, policy=policy) as memory:
            yield memory
