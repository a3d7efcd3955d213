"""Thread isolation under interleaving, and durability under summarizer failure."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapters import MemoryPolicy
from compat import DeterministicSummarizer, SummaryMemory, SummarizerError
from compat.testing.conversations import FlakySummarizer, filler_turn
from tests.conftest import BACKENDS


@pytest.mark.parametrize("backend", BACKENDS)
def test_200_interleaved_turns_over_25_threads_leak_nothing(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=MemoryPolicy(max_tokens=150, keep_tokens=80))
    threads = [f"tenant-{n:02d}:chat" for n in range(25)]
    for i in range(200):
        t = threads[(i * 7) % 25]
        memory.save(t, *filler_turn(t, i, 12))
    for t in threads:
        view = memory.load(t)
        text = view.summary + " ".join(str(m.content) for m in view.messages)
        assert f"FACT-{t}-" in text
        leaked = [o for o in threads if o != t and f"FACT-{o}-" in text]
        assert not leaked, f"{leaked} visible in {t}"
        assert all(f"FACT-{t}-" in str(m.content) for m in memory.transcript(t))


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_asyncio_saves_lose_no_turn(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=MemoryPolicy(max_tokens=150, keep_tokens=80))

    async def run() -> None:
        async def talk(t: str) -> None:
            for i in range(10):
                await memory.asave(t, *filler_turn(t, i, 10))

        await asyncio.gather(*(talk(f"t{n}") for n in range(6)), talk("t0"))

    asyncio.run(run())
    assert len(memory.transcript("t0")) == 40
    assert all(len(memory.transcript(f"t{n}")) == 20 for n in range(1, 6))


@pytest.mark.parametrize("backend", BACKENDS)
def test_summarizer_down_for_many_turns_then_recovers(backend: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    memory = SummaryMemory(backend=backend, policy=MemoryPolicy(max_tokens=100, keep_tokens=50),
                           summarizer=DeterministicSummarizer(max_chars=100_000))
    flaky = FlakySummarizer(memory.backend_impl.summarizer)
    memory.backend_impl.summarizer = flaky
    with caplog.at_level(logging.WARNING):
        for i in range(15):
            memory.save("t", *filler_turn("t", i, 8))
    # the first deferred fold tried 3 times; the later saves wait out its backoff (retry_backoff)
    assert flaky.attempts == 3
    assert "deferred" in caplog.text and "FACT-t-0" not in caplog.text  # no message text in logs
    assert len(memory.load("t").messages) == 30 and memory.load("t").folds == 0
    flaky.failing = False
    engine, now = memory.backend_impl, memory.backend_impl.clock
    engine.clock = lambda: now() + 3_600.0  # the backoff has passed
    memory.save("t", *filler_turn("t", 15, 8))
    view = memory.load("t")
    assert view.folds == 1 and "FACT-t-0" in view.summary
    assert len(memory.transcript("t")) == 32


@pytest.mark.parametrize("backend", BACKENDS)
def test_raise_mode_raises_after_storing_the_turn(backend: str) -> None:
    policy = MemoryPolicy(max_tokens=60, keep_tokens=30, on_summary_error="raise", summary_retries=0)
    memory = SummaryMemory(backend=backend, policy=policy)
    flaky = FlakySummarizer(memory.backend_impl.summarizer)
    memory.backend_impl.summarizer = flaky
    memory.save("t", *filler_turn("t", 0, 8))
    with pytest.raises(SummarizerError, match="failed 1 time"):
        for i in range(1, 6):
            memory.save("t", *filler_turn("t", i, 8))
    stored = " ".join(str(m.content) for m in memory.load("t").messages)
    assert f"FACT-t-{i} " in stored
    if backend == "middleware":  # the checkpoint is not left mid-step
        graph = memory.backend_impl.middleware_engine().backend.graph.copy({"checkpointer": memory.checkpointer})
        state = graph.get_state({"configurable": {"thread_id": "t"}})
        assert state.next == ()
