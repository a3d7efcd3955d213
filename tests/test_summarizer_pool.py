"""Bounded summarizer workers: a hung provider holds at most the pool's threads (folds beyond it
are deferred and recorded), async saves never use the loop's default executor, and an
interrupt raised by the summarizer leaves a failed-fold record and says the turn committed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from compat import MemoryPolicy, SummaryMemory, admin, set_summarizer_workers

POLICY = MemoryPolicy(max_tokens=40, keep_tokens=20, summary_timeout=0.2, summary_retries=0,
                      retry_backoff=0)


class Hung:
    """A blocking summarizer that waits until released (a hung provider)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def summarize(self, summary: str, messages: list) -> str:
        self.release.wait(30)
        return "late summary"


@pytest.fixture
def three_workers() -> Iterator[None]:
    set_summarizer_workers(3)
    try:
        yield
    finally:
        set_summarizer_workers(None)


def test_a_hung_provider_holds_at_most_the_pool(three_workers: None) -> None:
    from adapters.workers import _WORKERS

    hung = Hung()
    memory = SummaryMemory(summarizer=hung, policy=POLICY)
    for n in range(12):  # 12 conversations, each folding against the hung provider
        for i in range(2):
            memory.save(f"t{n}", f"question {i} " + "w " * 12, "answer " + "w " * 12)
    assert _WORKERS.busy() <= 3
    errors = [r.get("error") or "" for n in range(12)
              for r in admin.summary_history(memory, f"t{n}")]
    assert any("workers of this process are busy" in e for e in errors)  # deferred, recorded
    assert all(len(memory.transcript(f"t{n}")) == 4 for n in range(12))  # nothing lost
    hung.release.set()
    memory.close()


def test_async_saves_never_use_the_loops_default_executor() -> None:
    seen: list[Any] = []

    class Watching(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            seen.append(getattr(fn, "__qualname__", repr(fn)))
            return super().submit(fn, *args, **kwargs)

    class Blocking:
        def summarize(self, summary: str, messages: list) -> str:
            return "blocking summary"

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(Watching(max_workers=2))
        memory = SummaryMemory(summarizer=Blocking(), policy=POLICY)
        await asyncio.gather(*(memory.asave(f"t{n}", f"q{i} " + "w " * 12, "a " + "w " * 12)
                               for n in range(6) for i in range(2)))
        assert any(memory.load(f"t{n}").folds for n in range(6))
        await asyncio.to_thread(lambda: None)  # the app's own use of the default executor
        memory.close()

    asyncio.run(main())
    assert not any("summarize" in name for name in seen), seen


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_an_interrupt_in_the_summarizer_says_the_turn_committed(interrupt: type,
                                                                backend: str) -> None:
    class Interrupting:
        def summarize(self, summary: str, messages: list) -> str:
            raise interrupt()

    memory = SummaryMemory(summarizer=Interrupting(), backend=backend,
                           policy=MemoryPolicy(max_tokens=40, keep_tokens=20))
    memory.save("t", "first " + "w " * 12, "reply " + "w " * 12)
    with pytest.raises(interrupt) as caught:
        memory.save("t", "second " + "w " * 12, "reply " + "w " * 12)
    assert getattr(caught.value, "memshift_turn_committed", False)
    assert any("turn was committed" in note for note in caught.value.__notes__)
    assert len(memory.transcript("t")) == 4  # the turn is stored: do not save it again
    records = admin.summary_history(memory, "t")
    assert records and records[-1]["error"] == f"interrupted: {interrupt.__name__}"
