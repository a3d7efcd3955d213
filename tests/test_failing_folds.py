"""Failing folds stay bounded: after ``max_failed_folds`` failed folds in a row a thread's window
is held at the policy's size by an offline fallback fold (marked, recorded, warned, shown by
doctor); every message stays in the transcript; the real summarizer is used again once it
works."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests._cli import run_memshift

from compat import MemoryPolicy, SummaryMemory, admin


class Flaky:
    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    def summarize(self, summary: str, messages: list) -> str:
        self.calls += 1
        if self.down:
            raise RuntimeError("provider down")
        return "real summary"


def _policy(**kw: object) -> MemoryPolicy:
    return MemoryPolicy(max_tokens=150, keep_tokens=60, summary_retries=0, retry_backoff=0,
                        **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_the_window_stays_bounded_while_the_summarizer_fails(
        backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="memshift")
    flaky = Flaky()
    memory = SummaryMemory(backend=backend, store=f"sqlite:///{tmp_path}/m.db", summarizer=flaky,
                           policy=_policy(max_failed_folds=3))
    for i in range(40):
        memory.save("t", f"question {i} " + "w " * 20, f"answer {i} " + "w " * 20)
        view = memory.load("t")
        if i >= 6:  # three failed folds, then the fallback holds the window
            assert memory.active_policy.count(view.messages) <= 150 + 60
    view = memory.load("t")
    assert "folded without the summarizer" in view.summary
    assert len(memory.transcript("t")) == 80  # nothing dropped
    records = admin.summary_history(memory, "t")
    assert [r["summarizer"] for r in records[:3]] != ["fallback"] * 3  # the real one first
    assert any(r["summarizer"] == "fallback" for r in records)
    assert any("offline fallback" in r.message for r in caplog.records)
    flaky.down = False  # the provider recovers: the real summarizer folds again
    for i in range(40, 46):
        memory.save("t", f"question {i} " + "w " * 20, f"answer {i} " + "w " * 20)
    assert admin.summary_history(memory, "t")[-1]["summarizer"] != "fallback"
    memory.close()


def test_without_a_limit_the_window_grows_as_before() -> None:
    memory = SummaryMemory(summarizer=Flaky(), policy=_policy(max_failed_folds=None))
    for i in range(20):
        memory.save("t", f"question {i} " + "w " * 20, f"answer {i} " + "w " * 20)
    assert len(memory.load("t").messages) == 40 and memory.load("t").summary == ""


def test_doctor_shows_threads_held_by_the_fallback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    with SummaryMemory(store=url, summarizer=Flaky(), policy=_policy(max_failed_folds=2)) as m:
        for i in range(12):
            m.save("held", f"question {i} " + "w " * 20, f"answer {i} " + "w " * 20)
        m.save("fine", "hello", "there")
    done = run_memshift("doctor", "--store", url, "--json")
    assert done.returncode == 1, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["fallback"] == ["held"]
    assert [p["thread"] for p in doc["problems"]] == ["held"]
    assert "resummarize" in doc["problems"][0]["fix"]
