"""Blocking summarizer calls run on reused daemon threads: still bounded by their timeout, a
hung call never blocks the next one, nothing of a call is held after it, and a forked child
starts with workers of its own."""

from __future__ import annotations

import gc
import multiprocessing as mp
import threading
import weakref
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from adapters import DeterministicSummarizer
from adapters.summarizer import summarize_steps
from adapters.io import run_sync
from adapters.workers import IDLE, _WORKERS, call_with_timeout


def _workers() -> int:
    return sum(t.name == "memshift-summarizer" and t.is_alive() for t in threading.enumerate())


def test_calls_reuse_waiting_workers() -> None:
    call_with_timeout(lambda: None, timeout=5)
    before = _workers()
    for i in range(50):
        assert call_with_timeout(lambda x: x * 2, i, timeout=5) == i * 2
    assert _workers() <= max(before, 1) + 1  # not one thread per call
    assert 1 <= _WORKERS.waiting() <= IDLE


def test_errors_are_raised_in_the_caller() -> None:
    def boom() -> None:
        raise ValueError("provider said no")
    with pytest.raises(ValueError, match="provider said no"):
        call_with_timeout(boom, timeout=5)
    assert call_with_timeout(lambda: "next", timeout=5) == "next"


def test_a_hung_call_times_out_and_the_next_call_takes_another_worker() -> None:
    release = threading.Event()
    with pytest.raises(TimeoutError, match="gave no answer within 0.2 s"):
        call_with_timeout(release.wait, 30, timeout=0.2)
    try:
        assert call_with_timeout(lambda: "served", timeout=5) == "served"
    finally:
        release.set()


def test_a_worker_holds_nothing_of_a_finished_call() -> None:
    message = HumanMessage("secret of thread A")
    ref = weakref.ref(message)
    call_with_timeout(lambda m: len(m.content), message, timeout=5)
    del message
    for _ in range(3):
        gc.collect()
    assert ref() is None


def test_more_concurrent_calls_than_idle_workers_all_finish() -> None:
    gate = threading.Barrier(IDLE + 3)
    results: list[int] = []

    def caller(i: int) -> None:
        results.append(call_with_timeout(lambda: (gate.wait(10), i)[1], timeout=20))
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(IDLE + 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == list(range(IDLE + 3))
    assert _WORKERS.waiting() <= IDLE


def _child(out: Any) -> None:
    out.put(call_with_timeout(lambda: "child ok", timeout=5))


def test_a_forked_child_gets_workers_of_its_own() -> None:
    call_with_timeout(lambda: None, timeout=5)  # the parent has a waiting worker
    assert _WORKERS.waiting() >= 1
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(out,))
    child.start()
    assert out.get(timeout=20) == "child ok"
    child.join(20)
    assert child.exitcode == 0


def test_the_summarizer_routine_still_enforces_its_timeout() -> None:
    class Hung:
        def __init__(self) -> None:
            self.release = threading.Event()

        def summarize(self, summary: str, messages: Any) -> str:
            self.release.wait(30)
            return "late"
    hung = Hung()
    try:
        with pytest.raises(Exception, match="no answer within 0.2 s"):
            run_sync(summarize_steps(hung, "", [HumanMessage("x")], retries=0, timeout=0.2))
    finally:
        hung.release.set()
    messages = [HumanMessage("Remember FACT-1: the launch is on Friday.")]
    text = run_sync(summarize_steps(DeterministicSummarizer(), "", messages, retries=0, timeout=5))
    assert text == DeterministicSummarizer().summarize("", messages) and "FACT-1" in text
