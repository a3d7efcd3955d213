"""Background folds that keep their promise (issue 38 #4, issue 40 #6).

- While a fold is in flight, saves whose window is within the lag bound never wait for it.
- The turns that land during the fold are folded by at most one later fold; no message text
  is sent to the summarizer twice.
- A fold whose thread got new turns meanwhile still commits, on the prefix it folded (the
  compare-and-set is "the folded messages still head the window", not "nothing changed").
- Summarizer calls and input characters of a background conversation are at most inline's.
- A hung summarizer never holds a save past the lag bound: a save past the token bound waits
  at most the time bound (``adapters.fold_slots.lag_seconds``), then returns, and a fold
  record says the lag bound was exceeded.

Every summarizer here is deterministic and gated by the test (permits it hands out, or an
Event it never sets while the test runs); no assertion is about time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from adapters import MemoryPolicy
from adapters.extractive import ExtractiveSummarizer
from compat import SummaryMemory, admin
from compat.testing.conversations import filler_turn

STORES = ["memory", "sqlite"]
BACKENDS = ["classic", "middleware"]
TIMEOUT = 60.0  # a test that goes wrong fails after this, never hangs


class Recorder(ExtractiveSummarizer):
    """The offline summarizer, recording every call's input (previous summary, message
    texts). Gated: each call waits for a permit the test hands out (``let(n)``), or for
    ``opened`` (set at teardown, so a hung call never outlives its test)."""

    def __init__(self, gated: bool = False) -> None:
        super().__init__()
        self.inputs: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()
        self.gated = gated
        self.permits = threading.Semaphore(0)
        self.entered = threading.Semaphore(0)  # one release per call entered
        self.opened = threading.Event()

    def summarize(self, summary: str, messages: Any) -> str:
        with self._lock:
            self.inputs.append((summary, [m.text for m in messages]))
        self.entered.release()
        while self.gated and not self.opened.is_set():
            if self.permits.acquire(timeout=0.02):
                break
        return super().summarize(summary, messages)

    async def asummarize(self, summary: str, messages: Any) -> str:
        """A provider's async call: the gate is waited for off the event loop, as a real
        client awaits its socket (the base class's twin runs the sync code in place)."""
        return await asyncio.to_thread(self.summarize, summary, messages)

    def let(self, calls: int = 1) -> None:
        for _ in range(calls):
            self.permits.release()

    def wait_entered(self, calls: int = 1) -> None:
        for _ in range(calls):
            assert self.entered.acquire(timeout=TIMEOUT), "no summarizer call was entered"

    @property
    def calls(self) -> int:
        return len(self.inputs)

    def chars(self) -> int:
        return sum(len(summary) + sum(len(t) for t in texts) for summary, texts in self.inputs)


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    """Gated summarizers opened at teardown: a test that fails never leaves a worker hung."""
    made: list[Recorder] = []
    yield made
    for recorder in made:
        recorder.opened.set()


def _gated(recorders: list[Recorder]) -> Recorder:
    recorder = Recorder(gated=True)
    recorders.append(recorder)
    return recorder


def _policy(**kw: Any) -> MemoryPolicy:
    return MemoryPolicy(max_tokens=150, keep_tokens=80, fold="background", **kw)


def _until_fold_in_flight(memory: SummaryMemory, recorder: Recorder, tid: str) -> int:
    """Save turns until one asks for a fold and its summarizer call has started."""
    for i in range(40):
        memory.save(tid, *filler_turn(tid, i, 12))
        if recorder.entered.acquire(timeout=0.05):
            return i + 1
    raise AssertionError("no fold was ever due")


def _saves_in_a_thread(memory: SummaryMemory, tid: str, turns: list[tuple[str, str]]) -> bool:
    """Save ``turns`` on another thread; whether all of them returned (bounded wait)."""
    finished = threading.Event()

    def talk() -> None:
        for human, ai in turns:
            memory.save(tid, human, ai)
        finished.set()

    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    talker.join(TIMEOUT)
    return finished.is_set()


def _late(tid: str, count: int) -> list[tuple[str, str]]:
    return [filler_turn(tid, 100 + j, 12) for j in range(count)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", STORES)
def test_saves_within_the_lag_bound_never_wait_for_the_fold_in_flight(
        kind: str, backend: str, fresh_store: Any, recorders: list[Recorder]) -> None:
    recorder = _gated(recorders)
    memory = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=recorder,
                           policy=_policy(max_lag_tokens=400))
    turns = _until_fold_in_flight(memory, recorder, "t")
    late = _late("t", 4)
    assert _saves_in_a_thread(memory, "t", late), \
        "a save within max_lag_tokens waited for the fold in flight"
    assert recorder.calls == 1 and not recorder.opened.is_set()  # still blocked in the summarizer
    assert len(memory.transcript("t")) == 2 * (turns + len(late))
    recorder.opened.set()
    memory.close()


def _fold_then_late_turns(memory: SummaryMemory, recorder: Recorder,
                          late: int = 3) -> tuple[list[str], list[tuple[str, str]]]:
    """A fold in flight, ``late`` turns saved meanwhile; the fold's call is let through.
    Gives the texts the first call folded and the late turns."""
    _until_fold_in_flight(memory, recorder, "t")
    first = list(recorder.inputs[0][1])
    turns = _late("t", late)
    assert _saves_in_a_thread(memory, "t", turns)
    recorder.let(1)
    return first, turns


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", [*STORES, "postgres"])
def test_a_fold_outrun_by_new_turns_commits_on_the_prefix_it_folded(
        kind: str, backend: str, fresh_store: Any, recorders: list[Recorder]) -> None:
    recorder = _gated(recorders)
    memory = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=recorder,
                           policy=_policy(max_lag_tokens=400))
    first, late = _fold_then_late_turns(memory, recorder)
    recorder.wait_entered()  # the next call: the late turns are due (the window is past 150)
    view = memory.load("t")
    assert view.folds == 1, ("the fold's compare-and-set failed because turns landed: it was "
                             "thrown away (and its text summarized again)")
    window = [m.text for m in view.messages]
    assert not set(first) & set(window)  # what it folded left the window
    assert window[-2 * len(late):] == [text for turn in late for text in turn]  # kept
    records = admin.summary_history(memory, "t")
    assert [r["folded"] for r in records] == [len(first)] and records[0]["error"] is None
    summary, texts = recorder.inputs[1]
    assert summary == view.summary  # the next fold starts from the committed summary
    assert not set(texts) & set(first)
    recorder.opened.set()
    memory.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", STORES)
def test_turns_landing_during_a_fold_are_folded_once_by_one_later_fold(
        kind: str, backend: str, fresh_store: Any, recorders: list[Recorder]) -> None:
    recorder = _gated(recorders)
    memory = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=recorder,
                           policy=_policy(max_lag_tokens=400))
    _, late = _fold_then_late_turns(memory, recorder, late=4)
    recorder.opened.set()  # every later call goes through at once
    memory.drain(TIMEOUT)
    assert recorder.calls <= 2, f"{recorder.calls} summarizer calls: the late turns were not " \
                                "coalesced into one fold"
    sent = [text for _, texts in recorder.inputs for text in texts]
    twice = sorted({t for t in sent if sent.count(t) > 1})
    assert not twice, f"sent to the summarizer twice: {twice[:3]}"
    view = memory.load("t")
    assert memory.active_policy.count(view.messages) <= 150
    kept = {m.text for m in view.messages}
    for human, ai in late:  # each late message is folded exactly once, or still in the window
        assert (human in kept) != (human in sent) and (ai in kept) != (ai in sent)
    memory.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", STORES)
def test_background_folds_cost_at_most_inline_calls_and_input(kind: str, backend: str,
                                                              fresh_store: Any) -> None:
    """The same conversation, the same policy: turns land while folds are in flight (each call
    waits for the next save to be made), and the summarizer is asked no more than inline."""
    costs = {}
    for fold in ("inline", "background"):
        recorder = Recorder()
        memory = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=recorder,
                               policy=MemoryPolicy(max_tokens=150, keep_tokens=80, fold=fold,
                                                   max_lag_tokens=400))
        for i in range(30):
            memory.save("t", *filler_turn("t", i, 12))
            if fold == "background" and i % 3 == 2:
                memory.drain(TIMEOUT)  # three turns per fold in flight, then it lands
        memory.drain(TIMEOUT)
        costs[fold] = (recorder.calls, recorder.chars())
        assert len(memory.transcript("t")) == 60
        memory.close()
    (inline_calls, inline_chars), (calls, chars) = costs["inline"], costs["background"]
    assert inline_calls > 3
    assert calls <= inline_calls, f"background made {calls} calls, inline {inline_calls}"
    assert chars <= inline_chars, f"background sent {chars} chars, inline {inline_chars}"


@pytest.fixture
def short_lag(monkeypatch: pytest.MonkeyPatch) -> float:
    """The time bound of a save past the token bound, short for the tests."""
    import adapters.fold_slots as fold_slots

    monkeypatch.setattr(fold_slots, "LAG_SECONDS", 0.3)
    return 0.3


def _lag_records(memory: SummaryMemory, tid: str) -> list[dict[str, Any]]:
    return [r for r in admin.summary_history(memory, tid) if r.get("lag")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", [*STORES, "postgres"])
def test_a_hung_summarizer_never_holds_a_save_past_the_lag_bound(
        kind: str, backend: str, fresh_store: Any, recorders: list[Recorder],
        short_lag: float) -> None:
    recorder = _gated(recorders)  # never let through while the test runs: a hung provider
    memory = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=recorder,
                           policy=_policy(max_lag_tokens=60))  # summary_timeout: 120 s
    turns = _until_fold_in_flight(memory, recorder, "t")
    assert _lag_records(memory, "t") == []  # within the bound: nothing to say
    late = _late("t", 8)  # the window passes 150 + 60 tokens a few turns in
    assert _saves_in_a_thread(memory, "t", late), \
        "a save past the lag bound waited for the hung summarizer (its summary_timeout)"
    assert recorder.calls == 1 and not recorder.opened.is_set()
    assert len(memory.transcript("t")) == 2 * (turns + len(late))  # nothing lost
    lagging = _lag_records(memory, "t")
    assert len(lagging) == 1, "the lag bound exceeded is said once per fold in flight"
    record = lagging[0]
    assert record["error"].startswith("lag bound exceeded") and record["folded"] == 0
    assert record["lag"]["landed"] is False
    assert record["lag"]["window"] > record["lag"]["bound"] == 150 + 60
    recorder.opened.set()  # the provider answers at last: the fold lands, the window shrinks
    memory.drain(TIMEOUT)
    assert memory.active_policy.count(memory.load("t").messages) <= 150
    memory.close()


def test_an_async_save_past_the_lag_bound_returns_and_says_so(
        fresh_store: Any, recorders: list[Recorder], short_lag: float) -> None:
    recorder = _gated(recorders)

    async def run() -> None:
        async with SummaryMemory(store=fresh_store("sqlite"), backend="classic",
                                 summarizer=recorder, policy=_policy(max_lag_tokens=60)) as memory:
            for i in range(40):
                await memory.asave("t", *filler_turn("t", i, 12))
                await asyncio.sleep(0.01)  # the loop runs the background task
                if recorder.entered.acquire(blocking=False):
                    break
            assert recorder.calls == 1
            for human, ai in _late("t", 8):
                await asyncio.wait_for(memory.asave("t", human, ai), TIMEOUT)
            assert recorder.calls == 1 and not recorder.opened.is_set()
            assert len(_lag_records(memory, "t")) == 1
            recorder.opened.set()
            await memory.adrain()
            assert memory.active_policy.count((await memory.aload("t")).messages) <= 150
    asyncio.run(run())


@pytest.mark.parametrize("kind", STORES)
def test_a_save_that_waited_past_the_bound_is_named_in_the_fold_it_waited_for(
        kind: str, fresh_store: Any, recorders: list[Recorder]) -> None:
    """Past the token bound a save waits (bounded) for the fold in flight; when that fold
    lands, its record says a save waited for it."""
    recorder = _gated(recorders)
    memory = SummaryMemory(store=fresh_store(kind), backend="classic", summarizer=recorder,
                           policy=_policy(max_lag_tokens=60))
    _until_fold_in_flight(memory, recorder, "t")
    finished = threading.Event()

    def talk() -> None:
        for human, ai in _late("t", 8):
            memory.save("t", human, ai)
        finished.set()

    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    engine = memory.backend_impl.leaves()[0]  # the classic engine it serves on
    for _ in range(int(TIMEOUT / 0.01)):  # until a save is waiting past the bound
        if engine.slots.lagging("t") or finished.is_set():
            break
        finished.wait(0.01)
    assert not finished.is_set(), "no save waited past the lag bound"
    recorder.opened.set()
    talker.join(TIMEOUT)
    assert finished.is_set()
    memory.drain(TIMEOUT)
    first = admin.summary_history(memory, "t")[0]
    assert first["error"] is None and first["folded"] > 0
    assert first["lag"] is not None and first["lag"]["landed"] is True
    assert first["lag"]["window"] > first["lag"]["bound"]
    memory.close()
