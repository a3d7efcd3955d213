"""``BackendEquivalenceContract``: classic and middleware give the same memory.

For any sequence of turns on any set of threads, with a deterministic summarizer,
after every save both backends have the same summary text, the same verbatim
messages, the same number of folds, and the summarizer got the same inputs.

Subclass it and override ``summarizer`` (your chat model or LLM, a ``Summarizer``, or a plain
``fn(summary, messages) -> str``; default memshift's deterministic one), ``policy``, and
``make_memory(backend, summarizer)`` for another store (pass the ``summarizer`` it is given
on to ``SummaryMemory(summarizer=...)``: the suite has wrapped yours in its recorder). Both
backends share one cache of your summarizer's answers, so a model that words each answer
differently is not reported as a difference between the backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import MemoryPolicy, compare_views
from adapters.fold import comparable
from compat.memory import SummaryMemory
from compat.testing._guard import assert_no_silent_overrides
from adapters.summarizer import Summarizer
from compat.testing.conversations import agent_turn, filler_turn
from compat.testing.summarizers import SuiteSummarizer
from compat import admin

__all__ = ["BackendEquivalenceContract"]

MemoryFactory = Callable[[str, Summarizer], SummaryMemory]

# (thread index, agent turn?, words per message)
_STEPS = st.lists(
    st.tuples(st.integers(0, 3), st.booleans(), st.integers(1, 60)), min_size=1, max_size=40
)


class BackendEquivalenceContract:
    """Override ``summarizer`` and ``policy`` (and ``make_memory`` for another store)."""

    backends: tuple[str, str] = ("classic", "middleware")
    hypothesis_examples: int = 25

    @pytest.fixture
    def summarizer(self) -> Any:
        """Your summarizer as you have it: a chat model or LLM (prompted with the policy's
        prompt), a ``Summarizer``, a ``fn(summary, messages) -> str``, or ``None``."""
        return None

    @pytest.fixture
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=200, keep_tokens=120)

    @pytest.fixture
    def make_memory(self, policy: MemoryPolicy) -> MemoryFactory:
        def make(backend: str, summarizer: Summarizer) -> SummaryMemory:
            return SummaryMemory(backend=backend, policy=policy, summarizer=summarizer, store="memory")

        return make

    def _replay(self, make_memory: MemoryFactory, summarizer: Any, policy: MemoryPolicy,
                steps: list[tuple[int, bool, int]]) -> None:
        team = SuiteSummarizer(summarizer, policy)  # one cache for both sides
        (left_h, left_s), (right_h, right_s) = team.recorded(), team.recorded()
        left = make_memory(self.backends[0], left_h)
        right = make_memory(self.backends[1], right_h)
        counters: dict[str, int] = {}
        for n, (thread_index, agent, size) in enumerate(steps):
            thread = f"thread-{thread_index}"
            i = counters[thread] = counters.get(thread, -1) + 1
            human, ai = agent_turn(thread, i, size) if agent else filler_turn(thread, i, size)
            left.save(thread, human, ai)
            right.save(thread, human, ai)
            left.drain()  # background folds (MemoryPolicy(fold="background")) land here
            right.drain()
            diffs = compare_views(left.load(thread), right.load(thread))
            assert not diffs, f"step {n} ({thread} turn {i}): " + "; ".join(diffs)
            assert left_s.calls == right_s.calls, f"step {n}: summarizer inputs differ"
        for thread in counters:
            assert left.transcript(thread) and [m.content for m in left.transcript(thread)] == [
                m.content for m in right.transcript(thread)]
            records = [[comparable(r) for r in admin.summary_history(m, thread)] for m in (left, right)]
            assert records[0] == records[1], f"{thread}: fold records differ"

    def test_random_conversations_stay_equivalent(self, make_memory: MemoryFactory,
                                                  summarizer: Any, policy: MemoryPolicy) -> None:
        """Hypothesis-generated multi-thread conversations (``hypothesis_examples`` of them)."""
        run = settings(max_examples=self.hypothesis_examples, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck))(
            given(steps=_STEPS)(
                lambda steps: self._replay(make_memory, summarizer, policy, steps)))
        run()

    def test_long_interleaved_conversation_stays_equivalent(
            self, make_memory: MemoryFactory, summarizer: Any, policy: MemoryPolicy) -> None:
        steps = [(n % 4, n % 7 == 3, 5 + (n * 13) % 50) for n in range(120)]
        self._replay(make_memory, summarizer, policy, steps)

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:
        """Equivalence tests may not be silently overridden or removed; mark them xfail."""
        assert_no_silent_overrides(type(self), BackendEquivalenceContract)
