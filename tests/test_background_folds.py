"""``MemoryPolicy(fold="background")``: ``save`` returns once the turn is committed and the
fold lands later (``drain``); after ``drain`` the state equals inline mode's, turn for turn;
a window past the lag bound waits; one fold in flight per thread serves concurrent saves; a
process killed with a fold pending loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from adapters import MemoryPolicy
from adapters.extractive import ExtractiveSummarizer
from compat import SummaryMemory, admin
from compat.testing.conversations import filler_turn
from tests.conftest import ROOT

STORES = ["memory", "sqlite", "postgres"]
BACKENDS = ["classic", "middleware"]


def _policy(**kw: Any) -> MemoryPolicy:
    return MemoryPolicy(max_tokens=150, keep_tokens=80, **kw)


class Gated(ExtractiveSummarizer):
    """The offline summarizer behind a gate: ``entered`` when a call starts, it returns
    only once ``gate`` is set; ``calls`` counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.entered, self.calls = threading.Event(), threading.Event(), 0

    def summarize(self, summary: str, messages: Any) -> str:
        self.calls += 1
        self.entered.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return super().summarize(summary, messages)

    async def asummarize(self, summary: str, messages: Any) -> str:
        self.calls += 1
        self.entered.set()
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        return super().summarize(summary, messages)


class Counting(ExtractiveSummarizer):
    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.calls, self.delay = 0, delay

    def summarize(self, summary: str, messages: Any) -> str:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return super().summarize(summary, messages)


def _state(memory: SummaryMemory, tid: str) -> tuple[str, list[str], int]:
    view = memory.load(tid)
    return view.summary, [m.text for m in view.messages], view.folds


def _fold_due(memory: SummaryMemory, tid: str) -> int:
    """Save turns until one asks for a fold (the summarizer is entered); how many."""
    summarizer = memory.summarizer
    for i in range(40):
        memory.save(tid, *filler_turn(tid, i, 12))
        if summarizer.entered.wait(0.05):
            return i + 1
    raise AssertionError("no fold was ever due")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", STORES)
def test_save_returns_before_the_summarizer_and_drain_lands_the_fold(
        kind: str, backend: str, fresh_store: Any) -> None:
    gated = Gated()
    memory = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=gated,
                           policy=_policy(fold="background"))
    turns = _fold_due(memory, "t")
    assert not gated.gate.is_set()  # the save returned while the summarizer was held
    summary, messages, folds = _state(memory, "t")
    assert folds == 0 and len(messages) == 2 * turns  # nothing folded yet, nothing lost
    memory.save("t", "one more", "answer")  # the thread is not locked by the pending fold
    gated.gate.set()
    memory.drain()
    summary, messages, folds = _state(memory, "t")
    assert folds == 1 and summary and messages[-2:] == ["one more", "answer"]
    assert len(memory.transcript("t")) == 2 * turns + 2
    memory.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", STORES)
def test_after_drain_every_turn_equals_inline_mode(kind: str, backend: str,
                                                   fresh_store: Any) -> None:
    inline = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=Counting(),
                           policy=_policy())
    background = SummaryMemory(store=fresh_store(kind), backend=backend, summarizer=Counting(),
                               policy=_policy(fold="background"))
    for i in range(24):
        for tid in ("a", "b"):
            turn = filler_turn(tid, i, 10)
            inline.save(tid, *turn)
            background.save(tid, *turn)
            background.drain()
            assert _state(background, tid) == _state(inline, tid), (tid, i)
    assert background.summarizer.calls == inline.summarizer.calls > 3
    inline.close()
    background.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_async_saves_return_before_the_fold_and_adrain_lands_it(kind: str,
                                                                fresh_store: Any) -> None:
    url = fresh_store(kind)

    async def run() -> None:
        gated = Gated()
        async with SummaryMemory(store=url, backend="classic", summarizer=gated,
                                 policy=_policy(fold="background")) as memory:
            for i in range(40):
                await memory.asave("t", *filler_turn("t", i, 12))
                await asyncio.sleep(0.01)  # the loop runs the background task
                if gated.entered.is_set():
                    break
            assert gated.entered.is_set() and (await memory.aload("t")).folds == 0
            gated.gate.set()
            await memory.adrain()
            assert (await memory.aload("t")).folds == 1
    asyncio.run(run())


def test_a_window_past_the_lag_bound_waits_for_the_fold_but_only_so_long(tmp_path: Path) -> None:
    """Past the lag bound a save waits for the fold in flight, at most ``max_lag_seconds`` from
    the fold's start; then the saves go on without it (a hung provider never holds them), a
    ``lag`` record says so, and the fold catches up once the provider answers."""
    gated = Gated()
    memory = SummaryMemory(store=f"sqlite:///{tmp_path}/m.db", backend="classic",
                           summarizer=gated, policy=_policy(fold="background", max_lag_tokens=60,
                                                            max_lag_seconds=3))
    before = _fold_due(memory, "t")
    finished = threading.Event()

    def keep_talking() -> None:
        for i in range(100, 120):
            memory.save("t", *filler_turn("t", i, 12))
        finished.set()

    talker = threading.Thread(target=keep_talking)
    talker.start()
    assert not finished.wait(1.0)  # a save past the bound is waiting for the fold in flight
    window = memory.load("t").messages
    assert memory.active_policy.count(window) <= 150 + 60 + 2 * 40  # bounded (+ one turn)
    assert finished.wait(60)  # the provider still hangs: the saves went on after the bound
    assert not gated.gate.is_set()
    late = [r for r in admin.summary_history(memory, "t") if r.get("trigger") == "lag"]
    assert len(late) == 1 and late[0]["lag"]["landed"] is False
    assert len(memory.transcript("t")) == 2 * (before + 20)  # every turn stored
    gated.gate.set()
    talker.join(60)
    memory.drain()
    memory.save("t", *filler_turn("t", 200, 12))  # the next save plans what is still due
    memory.drain()
    assert memory.active_policy.count(memory.load("t").messages) <= 150 + 2 * 40
    memory.close()


@pytest.mark.parametrize("fold", ["inline", "background"])
def test_concurrent_saves_of_one_thread_share_the_fold_in_flight(fold: str,
                                                                 tmp_path: Path) -> None:
    """Eight writers on one thread, a summarizer that takes 0.2 s: one fold in flight serves
    them all (it plans again once committed) instead of eight summarizing the same turns."""
    slow = Counting(delay=0.2)
    memory = SummaryMemory(store=f"sqlite:///{tmp_path}/m.db", backend="classic",
                           summarizer=slow, policy=_policy(fold=fold))

    def writer(w: int) -> None:
        for i in range(6):
            memory.save("shared", *filler_turn(f"w{w}", i, 12))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    memory.drain()
    assert len(memory.transcript("shared")) == 96
    records = admin.summary_history(memory, "shared")
    # one summarizer call per fold, plus one for each fold the writers outran (the
    # compare-and-set refuses a cut the grown window no longer asks for): never one per save
    assert 1 <= len(records) <= slow.calls < 24
    assert memory.active_policy.count(memory.load("shared").messages) <= 150
    memory.close()


CHILD = """
import sys, time
from adapters import MemoryPolicy
from adapters.extractive import ExtractiveSummarizer
from compat import SummaryMemory, admin
from compat.testing.conversations import filler_turn

import threading
entered = threading.Event()

class Hangs(ExtractiveSummarizer):
    def summarize(self, summary, messages):
        entered.set()
        time.sleep(600)

memory = SummaryMemory(store=sys.argv[1], backend="classic", summarizer=Hangs(),
                       policy=MemoryPolicy(max_tokens=150, keep_tokens=80, fold="background",
                                           max_lag_tokens=10**6))
for i in range(40):
    memory.save("t", *filler_turn("t", i, 12))
    if entered.wait(0.05):
        break
print("summarizing" if entered.is_set() else "no fold", i + 1, flush=True)
print("saved", flush=True)
time.sleep(600)
"""


def test_a_process_killed_with_a_fold_pending_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, url], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if line.strip() == "saved":
            break
    assert lines[0].startswith("summarizing")  # a fold was pending when the last save returned
    saved = int(lines[0].split()[1])
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    counting = Counting()
    with SummaryMemory(store=url, backend="classic", summarizer=counting,
                       policy=_policy()) as memory:
        assert len(memory.transcript("t")) == 2 * saved and memory.load("t").folds == 0
        memory.save("t", "after the restart", "the fold is planned again")
        assert memory.load("t").folds == 1 and counting.calls == 1
        assert memory.active_policy.count(memory.load("t").messages) <= 150


def test_fold_must_be_inline_or_background() -> None:
    from adapters import ConfigError

    with pytest.raises(ConfigError, match="fold must be 'inline' or 'background'"):
        MemoryPolicy(max_tokens=100, fold="later")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_lag_tokens must be greater than 0"):
        MemoryPolicy(max_tokens=100, fold="background", max_lag_tokens=0)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_shadow_compares_settled_states_in_background_mode(kind: str, fresh_store: Any) -> None:
    """A shadow's comparison waits for both sides' folds of the thread: background folds
    never show up as mismatches."""
    memory = SummaryMemory(store=fresh_store(kind), backend="shadow",
                           policy=_policy(fold="background"),
                           shadow={"candidate": "middleware", "raise_on_mismatch": True})
    for i in range(20):
        memory.save("t", *filler_turn("t", i, 10))
        memory.load("t")
    memory.drain()
    assert memory.mismatches == [] and memory.load("t").folds >= 2
    memory.close()


def test_close_never_waits_past_one_summary_timeout_for_a_hung_fold(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gated = Gated()
    memory = SummaryMemory(store=f"sqlite:///{tmp_path}/m.db", backend="classic",
                           summarizer=gated,
                           policy=_policy(fold="background", summary_timeout=0.3,
                                          summary_retries=0))
    turns = _fold_due(memory, "t")
    with caplog.at_level("WARNING", logger="memshift"):
        memory.close()  # the fold is still at the gate: close waits one timeout, then says so
    assert any("still in flight" in r.getMessage() or "summarizer" in r.getMessage()
               for r in caplog.records)
    gated.gate.set()
    with SummaryMemory(store=f"sqlite:///{tmp_path}/m.db", backend="classic",
                       policy=_policy()) as again:
        assert len(again.transcript("t")) == 2 * turns
