"""Shadow mode: write both, serve the primary, compare at read, never fail on the candidate."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from adapters import MemoryPolicy, compare_views
from compat import ConfigError, SummaryMemory
from compat.testing import RecordingSummarizer, filler_turn
from compat import admin

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)


def _talk(memory: SummaryMemory, thread: str, turns: int) -> list:
    views = []
    for i in range(turns):
        memory.save(thread, *filler_turn(thread, i, 8))
        views.append(memory.load(thread))
    return views


@pytest.mark.parametrize("store_kind", ["memory", "sqlite", "postgres"])
def test_same_policy_gives_zero_mismatches(store_kind: str, fresh_store) -> None:
    summarizer = RecordingSummarizer()
    with SummaryMemory(backend="shadow", policy=POLICY, summarizer=summarizer,
                       store=fresh_store(store_kind)) as memory:
        _talk(memory, "t", 12)
        memory.backend_impl.drain(30)  # comparisons run on the candidate's worker
        assert memory.backend_name == "shadow"
        assert memory.mismatches == []
        assert memory.backend_impl.compared == 12
        folds = memory.load("t").folds
        assert folds >= 2 and len(summarizer.calls) == folds  # one call per fold, not two


def test_different_candidate_policy_is_recorded_and_primary_unaffected(tmp_path: Path) -> None:
    log = tmp_path / "shadow.jsonl"
    seen = []
    shadow = SummaryMemory(backend="shadow", policy=POLICY, shadow_log=str(log),
                           candidate_policy=MemoryPolicy(max_tokens=60), on_mismatch=seen.append)
    plain = SummaryMemory(backend="classic", policy=POLICY)
    served = _talk(shadow, "t", 12)
    expected = _talk(plain, "t", 12)
    assert all(not compare_views(a, b) for a, b in zip(served, expected)), "primary answers changed"
    assert served[-1].backend == "classic"
    shadow.backend_impl.drain(30)  # comparisons run on the candidate's worker
    assert shadow.mismatches and seen == shadow.mismatches
    first = shadow.mismatches[0]
    assert first.thread_id == "t" and first.kind == "view" and first.turn >= 1 and first.diff
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == len(shadow.mismatches) and lines[0]["thread_id"] == "t"


def test_candidate_errors_and_slowness_never_reach_the_caller() -> None:
    calls = []

    def broken_callback(mismatch: object) -> None:
        calls.append(mismatch)
        raise RuntimeError("publisher is broken")

    memory = SummaryMemory(backend="shadow", policy=POLICY, shadow_timeout=0.2,
                           on_mismatch=broken_callback)
    candidate = memory.backend_impl.candidate_backend

    def explode(*args: object) -> None:
        raise OSError("candidate database is gone")

    candidate.save = explode  # type: ignore[method-assign]
    memory.save("t", "q", "a")
    assert memory.load("t").messages[-1].content == "a"
    memory.backend_impl.drain(30)
    kinds = {m.kind for m in memory.mismatches}
    assert "candidate_error" in kinds and calls

    entered, release = threading.Event(), threading.Event()

    def blocked_load(thread_id: str) -> object:
        entered.set()
        release.wait(30)
        raise AssertionError("the caller never waits for this")

    candidate.load = blocked_load  # type: ignore[method-assign]
    view = memory.load("t")  # at once: the comparison waits on the candidate's worker
    assert entered.wait(10) and not release.is_set()
    assert view.messages[-1].content == "a"
    release.set()
    memory.backend_impl.drain(30)
    assert any(m.kind == "candidate_error" and "load" in m.diff[0] for m in memory.mismatches)


def test_raise_on_mismatch_makes_a_divergence_an_error_in_tests() -> None:
    from compat import MismatchError

    memory = SummaryMemory(backend="shadow", policy=POLICY, raise_on_mismatch=True,
                           candidate_policy=MemoryPolicy(max_tokens=60))
    with pytest.raises(MismatchError, match="differs"):
        for i in range(12):
            memory.save("t", *filler_turn("t", i, 8))
            memory.load("t")
    same = SummaryMemory(backend="shadow", policy=POLICY, raise_on_mismatch=True)
    for i in range(12):
        same.save("t", *filler_turn("t", i, 8))
        same.load("t")  # waits for the verdict: equal


def test_sampling_is_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSHIFT_SHADOW_SAMPLE", "0.3")
    memory = SummaryMemory(backend="shadow", policy=POLICY)
    threads = [f"t{n}" for n in range(200)]
    for t in threads:
        memory.save(t, "q", "a")
    memory.backend_impl.drain(30)
    mirrored = [t for t in threads if memory.backend_impl.candidate_backend.load(t).messages]
    assert 30 <= len(mirrored) <= 90, len(mirrored)
    assert all(memory.backend_impl.sampled(t) for t in mirrored)


@pytest.mark.parametrize("raw", ["1.5", "-0.1", "lots"])
def test_bad_sample_rates_are_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("MEMSHIFT_SHADOW_SAMPLE", raw)
    with pytest.raises(ConfigError):
        SummaryMemory(backend="shadow", policy=POLICY)


def test_shadow_from_the_environment_and_cutover_handles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSHIFT_BACKEND", "shadow")
    memory = SummaryMemory(policy=POLICY)
    assert memory.backend_name == "shadow"
    assert memory.middleware is memory.backend_impl.middleware_engine().middleware
    with pytest.raises(ConfigError, match="two different backends"):
        SummaryMemory(backend="shadow", primary="classic", candidate="classic")


def test_mismatch_diffs_are_redacted_when_the_policy_redacts(tmp_path: Path) -> None:
    log = tmp_path / "shadow.jsonl"
    policy = MemoryPolicy(max_tokens=60, keep_tokens=30, redact=True)
    memory = SummaryMemory(backend="shadow", policy=policy, shadow_log=str(log),
                           candidate_policy=MemoryPolicy(max_tokens=200, redact=True))
    for i in range(4):
        memory.save("t", f"my mail is li.wei@example.com, question {i}", f"answer {i}")
        memory.load("t")
    memory.backend_impl.drain(30)
    assert memory.mismatches
    text = log.read_text()
    assert "li.wei@example.com" not in text and "[EMAIL]" in text


def test_candidate_queue_is_bounded_and_overflow_counted() -> None:
    from adapters.shadow import ShadowEngine

    memory = SummaryMemory(backend="shadow", policy=POLICY, shadow_timeout=0.2)
    engine = memory.backend_impl
    assert isinstance(engine, ShadowEngine)
    gate = threading.Event()
    engine._submit("t", "block", lambda: gate.wait(30))  # occupy the worker
    engine._queue.maxsize = 3  # a tiny queue for the test
    for i in range(6):
        memory.save("t", f"q{i}", f"a{i}")  # the primary never waits for the candidate
    assert engine.dropped >= 2
    assert any(m.kind == "candidate_dropped" for m in memory.mismatches)
    assert [m.content for m in memory.load("t").messages][-1] == "a5"
    gate.set()
    engine.close(drain=True)


def test_breaker_disables_a_failing_candidate_for_a_cooldown() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY)
    engine = memory.backend_impl
    engine.breaker_failures, engine.breaker_cooldown = 3, 3600
    calls = []

    def explode(*args: object) -> None:
        calls.append(args)
        raise OSError("candidate database is gone")

    engine.candidate_backend.save = explode  # type: ignore[method-assign]
    for i in range(8):
        memory.save("t", f"q{i}", f"a{i}")
        engine.drain(10)  # let the worker catch up
    assert len(calls) == 3 and not engine.enabled
    kinds = [m.kind for m in memory.mismatches]
    assert kinds.count("candidate_error") == 3 and kinds.count("candidate_disabled") == 1
    assert memory.load("t").messages[-1].content == "a7"  # the primary served throughout
    memory.close()


def test_close_drains_queued_candidate_writes_only_when_asked() -> None:
    for drain in (True, False):
        memory = SummaryMemory(backend="shadow", policy=POLICY)
        engine = memory.backend_impl
        gate = threading.Event()
        engine._submit("t", "block", lambda: gate.wait(30))
        for i in range(3):
            memory.save("t", f"q{i}", f"a{i}")
        threading.Timer(0.05, gate.set).start()
        engine.close(drain=drain)
        written = len(engine.candidate_backend.load("t").messages)
        assert written == (6 if drain else 0)


def test_published_mismatches_carry_both_timings() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY,
                           candidate_policy=MemoryPolicy(max_tokens=60, keep_tokens=10))
    for i in range(8):
        memory.save("t", *filler_turn("t", i, 12))
        memory.load("t")
    memory.backend_impl.drain(30)  # comparisons run on the candidate's worker
    views = [m for m in memory.mismatches if m.kind == "view"]
    assert views and all({"primary_ms", "candidate_ms"} <= set(m.timings) for m in views)
    memory.close()


def test_resummarize_waits_for_queued_candidate_saves() -> None:
    """The candidate's rebuild goes through its queue: a save still queued when the primary
    is rebuilt must not land on top of the candidate's rebuilt state (a false mismatch)."""
    memory = SummaryMemory(backend="shadow", policy=POLICY, shadow_timeout=10)
    engine = memory.backend_impl
    real_save, gate = engine.candidate_backend.save, threading.Event()

    def slow_save(*args, **kwargs):
        gate.wait(10)
        return real_save(*args, **kwargs)
    engine.candidate_backend.save = slow_save
    for i in range(6):
        memory.save("t", *filler_turn("t", i, 8))
    threading.Timer(0.3, gate.set).start()  # the candidate catches up during the rebuild
    admin.resummarize(memory, "t")
    memory.load("t")
    engine.drain(10)
    memory.load("t")
    assert memory.mismatches == []
