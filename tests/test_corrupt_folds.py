"""A corrupt fold record is reported, never dropped in silence: ``migrate`` carries every
thread it can (the corrupt thread's state too, which is intact), and names the thread, the
table and what it did not carry, in the text, the JSON and the run log, and exits 1 — on
every run, the re-runs and dry runs included, in both directions, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._cli import run_memshift

from compat import MemoryPolicy, SummaryMemory
from compat.migration import migrate

POLICY = MemoryPolicy(max_tokens=60, keep_tokens=30)
THREADS = ("good-1", "bad", "good-2")
DIRECTIONS = [("classic", "middleware"), ("middleware", "classic")]


def _seed(url: str, backend: str, policy: MemoryPolicy = POLICY,
          threads: tuple[str, ...] = THREADS) -> None:
    with SummaryMemory(backend=backend, store=url, policy=policy) as memory:
        for tid in threads:
            for i in range(4):
                memory.save(tid, f"question {i} about {tid} " + "w " * 8, f"answer {i}")


def _corrupt(url: str, thread_id: str = "bad") -> None:
    """Every fold record of the thread no longer decodes (as a bad disk or hand edit does)."""
    statement = "UPDATE memshift_folds SET record = 'oops' WHERE thread_id = '%s'" % thread_id
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            assert conn.execute(statement).rowcount >= 1
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(statement).rowcount >= 1


def _migrate(source: tuple[str, str], target: tuple[str, str], *extra: str):
    return run_memshift("migrate", "--from", source[0], "--from-store", source[1],
                        "--to", target[0], "--to-store", target[1], *extra)


def _the_gap(document: dict) -> None:
    """The JSON names the thread, the table and what was not carried; nothing else."""
    assert document["exit_code"] == 1 and document["ok"] is False
    gaps = document["threads"]["incomplete"]
    assert [g["thread_id"] for g in gaps] == ["bad"], gaps
    assert gaps[0]["table"] == "memshift_folds"
    assert "fold history" in gaps[0]["not_carried"] and "not carried" in gaps[0]["not_carried"]
    assert document["counts"]["incomplete"] == 1 and document["counts"]["failed"] == 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("direction", DIRECTIONS, ids=lambda d: "-to-".join(d))
def test_a_corrupt_fold_record_fails_the_run_naming_the_thread(
        fresh_store: Callable[[str], str], kind: str, direction: tuple[str, str]) -> None:
    frm, to = direction
    source, target = (frm, fresh_store(kind)), (to, fresh_store(kind))
    _seed(source[1], frm)
    _corrupt(source[1])
    done = _migrate(source, target, "--json")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(done.stdout)
    _the_gap(document)
    assert sorted(document["threads"]["migrated"]) == sorted(THREADS)  # the state is intact
    with SummaryMemory(backend=to, store=target[1]) as moved:
        assert all(len(moved.transcript(t)) == 8 for t in THREADS)
    runs = json.loads(run_memshift("history", "--store", target[1], "--json",
                                   check=0).stdout)["runs"]
    assert [(r["status"], r["counts"]["incomplete"]) for r in runs] == [("failed", 1)]

    text = _migrate(source, target)  # a re-run, as text: the thread is named again
    assert text.returncode == 1, text.stdout[-2000:] + text.stderr[-2000:]
    assert "INCOMPLETE 'bad'" in text.stdout and "memshift_folds" in text.stdout
    assert "not carried" in text.stdout and "RESULT: FAILED" in text.stdout
    assert "good-1" not in text.stdout  # only the thread that lost something is named


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_every_path_reports_it_again(fresh_store: Callable[[str], str], kind: str) -> None:
    """Dry run, --no-verify and a re-run after a clean first pass: never exit 0."""
    source, target = ("classic", fresh_store(kind)), ("middleware", fresh_store(kind))
    _seed(source[1], "classic")
    _corrupt(source[1])
    dry = _migrate(source, target, "--dry-run", "--json")
    assert dry.returncode == 1, dry.stdout[-2000:] + dry.stderr[-2000:]
    _the_gap(json.loads(dry.stdout))
    for extra in (["--no-verify"], ["--verify"], ["--verify"]):  # the last two: re-runs
        done = _migrate(source, target, "--json", *extra)
        assert done.returncode == 1, (extra, done.stdout[-2000:] + done.stderr[-2000:])
        _the_gap(json.loads(done.stdout))


def test_the_library_report_names_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    _seed(url, "classic")
    _corrupt(url)
    with SummaryMemory(backend="classic", store=url, policy=POLICY) as source, \
            SummaryMemory(backend="middleware", store=f"sqlite:///{tmp_path}/t.db",
                          policy=POLICY) as target:
        report = migrate(source, target)
        assert not report.ok and report.failed == [] and len(report.migrated) == 3
        assert [t for t, _ in report.incomplete] == ["bad"]
        assert report.counts()["incomplete"] == 1
        again = migrate(source, target)
        assert not again.ok and [t for t, _ in again.incomplete] == ["bad"]
        assert len(again.skipped) == 3  # nothing rewritten: the state is identical


def test_a_corrupt_newest_record_of_a_mixed_store_still_moves_the_state(tmp_path: Path) -> None:
    """With several recorded policies each thread's own is read from its newest record: a
    record that does not decode leaves the thread on the run's policy, reported."""
    url = f"sqlite:///{tmp_path}/s.db"
    _seed(url, "classic", threads=("good-1", "bad"))
    _seed(url, "classic", MemoryPolicy(max_tokens=50, keep_tokens=20), threads=("good-2",))
    _corrupt(url)
    target = f"sqlite:///{tmp_path}/t.db"
    done = _migrate(("classic", url), ("middleware", target), "--json")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(done.stdout)
    _the_gap(document)
    assert sorted(document["threads"]["migrated"]) == sorted(THREADS)
