"""An erasure is finished by whoever comes next: a ``forget`` killed at any point (no cleanup
runs, as with kill -9) is completed by a re-run — the text gone from every byte of the store,
an audit row that says the erasure finished — and a ``forget`` beside another process writing
the same SQLite file completes, audit row and compaction included."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters import DeterministicSummarizer
from compat import SummaryMemory, admin
from compat.erasure import NothingToForget, thread_hash
from compat.runlog import read_runs
from tests.conftest import ROOT
from tests.test_forget import OTHER, POLICY, SECRET, _found, _talk


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests._erasure_workers", *args], cwd=ROOT,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _forget_runs(memory: SummaryMemory, thread: str) -> list:
    engine = memory.backend_impl.stores()[0].engine
    return [r for r in read_runs(engine) if r.command.startswith("forget")
            and r.command.endswith(thread_hash(thread))]


def _seed(url: str) -> None:
    with SummaryMemory(backend="staged", store=url, policy=POLICY,
                       summarizer=DeterministicSummarizer()) as memory:
        _talk(memory, "alice", SECRET)
        _talk(memory, "bob", OTHER)


POINTS = ["before_erase", "after_erase", "after_compact"]


def _interrupted_then_rerun(url: str, whole: bool, point: str) -> None:
    _seed(url)
    match = "" if whole else SECRET
    child = _child("forget_killed", url, "alice", match, point)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 9, err[-2000:]  # killed at the point, no cleanup ran
    with SummaryMemory(backend="staged", store=url, policy=POLICY,
                       summarizer=DeterministicSummarizer()) as memory:
        interrupted = _forget_runs(memory, "alice")
        assert [r.status for r in interrupted] == ["running"]  # the kill left its record
        report = admin.forget(memory, "alice", match or None)  # the re-run finishes it
        assert report.completed_interrupted == 1
        runs = _forget_runs(memory, "alice")
        assert sorted(r.status for r in runs) == ["interrupted", "ok"], runs
        ok = next(r for r in runs if r.status == "ok")
        cut = next(r for r in runs if r.status == "interrupted")
        assert ok.counts["completed_interrupted"] == 1
        assert cut.counts == {"completed_by": ok.run_id}
        if whole:
            with pytest.raises(NothingToForget):  # now it is truly done: nothing to finish
                admin.forget(memory, "alice")
        else:
            assert SECRET not in str([m.content for m in memory.transcript("alice")])
        assert len(memory.transcript("bob")) == 20
    assert not _found(url, SECRET)
    assert _found(url, OTHER)


@pytest.mark.parametrize("whole", [True, False], ids=["thread", "match"])
@pytest.mark.parametrize("point", POINTS)
def test_a_killed_forget_is_finished_by_the_rerun_sqlite(tmp_path: Path, whole: bool,
                                                         point: str) -> None:
    _interrupted_then_rerun(f"sqlite:///{tmp_path}/app.db", whole, point)


@pytest.mark.parametrize("whole", [True, False], ids=["thread", "match"])
@pytest.mark.parametrize("point", ["after_erase", "after_compact"])
def test_a_killed_forget_is_finished_by_the_rerun_postgres(fresh_store, whole: bool,
                                                           point: str) -> None:
    _interrupted_then_rerun(fresh_store("postgres"), whole, point)


def test_forget_beside_a_concurrent_writer_completes(tmp_path: Path) -> None:
    """Five erasures while another process saves turns of another thread of the same file:
    each one finishes with its audit row and leaves no byte of the text."""
    for round_ in range(5):
        url = f"sqlite:///{tmp_path}/app{round_}.db"
        _seed(url)
        stop = str(tmp_path / f"stop{round_}")
        writer = _child("keep_writing", url, "bob", stop)
        deadline = time.monotonic() + 60
        while not Path(stop + ".ready").exists():
            assert writer.poll() is None and time.monotonic() < deadline, writer.stderr.read()
            time.sleep(0.05)
        time.sleep(0.2)
        try:
            with SummaryMemory(backend="staged", store=url, policy=POLICY,
                               summarizer=DeterministicSummarizer()) as memory:
                admin.forget(memory, "alice", SECRET if round_ % 2 else None)
                assert [r.status for r in _forget_runs(memory, "alice")] == ["ok"]
        finally:
            Path(stop).touch()
            _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err[-2000:]
        assert not _found(url, SECRET)
