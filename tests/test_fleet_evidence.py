"""Fleet evidence (issue 39 #7): every app server's shadow records its mismatches and candidate
failures in the store the fleet shares, and ``rollout advance`` — run elsewhere, with no shadow
log — reads them there and halts; a guard with nothing to judge says so and halts; a step waits
for traffic by default; every candidate failure is counted and the breaker trips after its run."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters import DeterministicSummarizer, MemoryPolicy
from adapters.staged import share_of
from adapters.stores import open_store
from adapters.stores.evidence import PER_THREAD, EvidenceRow
from compat import SummaryMemory, admin, cli
from compat.rollout import DEFAULT_INTERVAL, advance, gather, parse_guards
from compat.testing import filler_turn

ROOT = Path(__file__).resolve().parents[1]
POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)
THREADS = [f"fleet-{n}" for n in range(40)]
ORDERED = sorted(THREADS, key=share_of)
DIVERGING = {ORDERED[0], ORDERED[1]}  # the two lowest shares: one served by each process


def _fleet(url: str, diverging: set[str] = DIVERGING) -> None:
    """Two app servers at once, each serving half of the threads in shadow on ``url``; no
    file is shared between them (no shadow log at all)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSHIFT_SHADOW")}
    children = [subprocess.Popen(
        [sys.executable, "-m", "tests._fleet_workers", "shadow", url, ",".join(half),
         ",".join(sorted(diverging))], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for half in (ORDERED[0::2], ORDERED[1::2])]
    for child in children:
        out, err = child.communicate(timeout=240)
        assert child.returncode == 0, err[-3000:]
        assert out.startswith("served 20")


def _staged(url: str) -> Any:
    return lambda share: SummaryMemory(store=url, policy=POLICY, backend="staged",
                                       rollout=share)


def _cli_advance(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["rollout", "advance", "--store", url, "--to", "1.0", "--step", "0.5",
                     "--json", "--quiet", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_advance_halts_on_mismatches_two_processes_recorded_with_no_shared_file(
        kind: str, fresh_store: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_store(kind)
    _fleet(url)
    assert not list(tmp_path.rglob("*.jsonl"))
    cohort = {t for t in THREADS if share_of(t) < 0.5}
    assert DIVERGING <= cohort

    # the library: both processes' mismatches reach the guard; the step moves back
    steps = advance(_staged(url), admin.iter_thread_ids, start=0.0, target=1.0, step=0.5,
                    guards=parse_guards("mismatch_rate<0.01"), interval=0,
                    rollback_on_trip=True)
    assert len(steps) == 1 and steps[0].decision == "rolled_back"
    evidence = steps[0].evidence
    assert evidence["mismatching_threads"] == 2 and evidence["compared"] == len(cohort)
    assert evidence["sources"] == ["store"] and evidence["mismatch_rate"] == pytest.approx(2 / len(cohort), abs=1e-6)

    # the CLI, in another process's place: halts at the first step, exit 1
    code, result = _cli_advance(url, capsys, "--guard", "mismatch_rate<0.01,mismatches<1",
                                "--interval", "0")
    assert code == 1 and result["reached"] == 0.5 and len(result["steps"]) == 1
    step = result["steps"][0]
    assert step["decision"] == "halted" and step["tripped"] == ["mismatch_rate<0.01"]
    assert step["no_evidence"] == [] and step["evidence"]["mismatching_threads"] == 2


def _plain(url: str) -> str:
    with SummaryMemory(store=url, policy=POLICY) as memory:  # no shadow ever ran
        for thread in THREADS:
            memory.save(thread, "q", "a")
    return url


def test_no_evidence_halts_and_never_prints_a_measured_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "shadow.jsonl"
    empty.touch()
    for n, extra in enumerate(((), ("--shadow-log", str(empty)))):
        url = _plain(f"sqlite:///{tmp_path}/app{n}.db")
        capsys.readouterr()
        code = cli.main(["rollout", "advance", "--store", url, "--to", "1.0", "--step", "0.5",
                         "--guard", "mismatch_rate<0.01", "--interval", "0", *extra])
        text = capsys.readouterr().out
        assert code == 1, text
        assert "no evidence" in text and "0.0000" not in text
    url = _plain(f"sqlite:///{tmp_path}/app.db")
    code, result = _cli_advance(url, capsys, "--guard", "mismatch_rate<0.01,fold_failures<1",
                                "--interval", "0")
    step = result["steps"][0]
    assert code == 1 and step["decision"] == "halted" and len(result["steps"]) == 1
    assert step["no_evidence"] == ["mismatch_rate<0.01", "fold_failures<1"]
    assert step["evidence"]["mismatch_rate"] is None and step["evidence"]["compared"] == 0
    assert all("no evidence" in t for t in step["tripped"])


def test_a_step_waits_for_traffic_by_default(tmp_path: Path) -> None:
    from compat.cli.rollout import advance as command

    assert DEFAULT_INTERVAL >= 60
    assert inspect.signature(advance).parameters["interval"].default == DEFAULT_INTERVAL
    option = next(p for p in command.params if p.name == "interval")
    assert option.default == DEFAULT_INTERVAL
    url = f"sqlite:///{tmp_path}/app.db"
    with SummaryMemory(store=url, policy=POLICY) as memory:
        memory.save("t", "q", "a")
    waited: list[float] = []  # the library's wait, recorded instead of slept
    advance(_staged(url), admin.iter_thread_ids, start=0.0, target=1.0, step=1.0,
            guards=parse_guards("fold_failures<1"), sleep=waited.append)
    assert waited == [DEFAULT_INTERVAL]


def _failing_candidate(url: str, breaker: int) -> tuple[SummaryMemory, list[int]]:
    """A shadow whose candidate's every fold fails (its summarizer is down); the backoff's
    clock is the test's, so every save's fold is tried."""
    memory = SummaryMemory(backend="shadow", store=url, policy=POLICY,
                           summarizer=DeterministicSummarizer())
    engine = memory.backend_impl
    engine.breaker_failures, engine.breaker_cooldown = breaker, 3600
    calls: list[int] = []

    class Down:
        def summarize(self, summary: str, messages: list) -> str:
            calls.append(1)
            raise RuntimeError("the candidate's model is down")

    engine.candidate_backend.summarizer = Down()
    return memory, calls


def _talk(memory: SummaryMemory, turns: int) -> None:
    now = [0.0]
    memory.backend_impl.clock = lambda: now[0]
    for i in range(turns):
        memory.save("t", *filler_turn("t", i, 8))
        memory.load("t")  # a load that works says nothing about the writes
        memory.backend_impl.drain(30)
        now[0] += 10_000  # past any backoff: the next fold is tried again


def test_every_failed_candidate_fold_is_counted_in_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    memory, calls = _failing_candidate(url, breaker=1000)
    _talk(memory, 60)
    failed_folds = len(calls) // (POLICY.summary_retries + 1)
    errors = [m for m in memory.mismatches if m.kind == "candidate_error"]
    assert failed_folds >= 20 and len(errors) == failed_folds
    assert memory.backend_impl.enabled
    memory.close()
    store = open_store(url)
    try:
        rows = [r for r in store.evidence_of(["t"]) if r.kind == "candidate_error"]
    finally:
        store.close()
    assert len(rows) == failed_folds and all(r.counted for r in rows)


def test_the_breaker_trips_after_its_run_of_failed_folds() -> None:
    memory, calls = _failing_candidate("memory", breaker=5)
    _talk(memory, 30)
    engine = memory.backend_impl
    kinds = [m.kind for m in memory.mismatches]
    assert not engine.enabled
    assert kinds.count("candidate_error") == 5 and kinds.count("candidate_disabled") == 1
    assert len(calls) == 5 * (POLICY.summary_retries + 1)  # off after the run: no more calls
    assert memory.load("t").messages  # the primary served throughout
    memory.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_evidence_is_bounded_per_thread_and_erased_by_forget(kind: str,
                                                             fresh_store: Any) -> None:
    from compat.erasure import forget

    url = fresh_store(kind)
    with SummaryMemory(backend="shadow", store=url, policy=POLICY) as memory:
        memory.save("t", "q", "a")
        memory.save("u", "q", "a")
        store = memory.backend_impl.store
        at = "2030-01-01T00:00:00+00:00"
        store.record_evidence([EvidenceRow("t", "view", "window", False, n, at)
                               for n in range(PER_THREAD + 30)])
        store.record_evidence([EvidenceRow("u", "view", "window", False, 1, at)])
        kept = store.evidence_of(["t"])
        assert len(kept) == PER_THREAD and kept[0].turn == 30  # the newest kept
        assert len(store.evidence_since(at)) == PER_THREAD + 1
        forget(memory, "t")
        assert store.evidence_of(["t"]) == [] and len(store.evidence_of(["u"])) == 1


def test_a_log_and_the_store_holding_one_mismatch_count_it_once(
        tmp_path: Path) -> None:
    from dataclasses import replace

    url, log = f"sqlite:///{tmp_path}/app.db", tmp_path / "shadow.jsonl"
    with SummaryMemory(backend="shadow", store=url, policy=POLICY, shadow_log=str(log)) as memory:
        candidate = memory.backend_impl.candidate_backend
        real = candidate.load
        candidate.load = lambda tid, *a, **k: replace(  # type: ignore[method-assign]
            real(tid, *a, **k), summary="different")
        memory.save("t", "q", "a")
        memory.load("t")
        memory.drain(30)
    assert len(log.read_text().splitlines()) == 1
    store = open_store(url)
    try:  # the run began before the mismatch: it counts in `mismatches`, once
        evidence = gather({"t"}, "2000-01-01", str(log), lambda tid: [], [store])
    finally:
        store.close()
    assert evidence.sources == ["store", "log"] and evidence.mismatches == 1
    assert evidence.compared == 1 and evidence.mismatching_threads == 1
