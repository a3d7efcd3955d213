"""Corrupt rows are one thread's problem: a row that does not decode raises
``CorruptDataError`` naming the thread, the table and the row; other threads keep working;
migrate, rollout move and resummarize count the thread as failed and carry on (exit 1); a
corrupt fold record lets migrate carry the thread's state and name what it did not carry
(exit 1)."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests._cli import run_memshift

from compat import CorruptDataError, MemoryPolicy, StoreError, SummaryMemory, admin

POLICY = MemoryPolicy(max_tokens=60, keep_tokens=30)


def _seed(url: str, backend: str) -> None:
    with SummaryMemory(backend=backend, store=url, policy=POLICY) as memory:
        for tid in ("good-1", "bad", "good-2"):
            for i in range(4):
                memory.save(tid, f"question {i} about {tid} " + "w " * 8, f"answer {i}")


def _sql(db: Path, statement: str) -> None:
    with sqlite3.connect(db) as conn:
        assert conn.execute(statement).rowcount >= 1, statement


CORRUPTIONS = {  # table -> (backend that reads it, the corruption)
    "memshift_window": ("classic", "UPDATE memshift_window SET message = '{not json' "
                                   "WHERE session_id = 'bad'"),
    "memshift_transcript": ("classic", "UPDATE memshift_transcript SET message = '[1, 2]' "
                                       "WHERE thread_id = 'bad'"),
    "memshift_folds": ("classic", "UPDATE memshift_folds SET record = 'oops' "
                                  "WHERE thread_id = 'bad'"),
    "memshift_placement": ("classic", "UPDATE memshift_placement SET backend = 'mystery' "
                                      "WHERE thread_id = 'bad'"),
    "checkpoints": ("middleware", "UPDATE checkpoints SET checkpoint = X'C1' "
                                  "WHERE thread_id = 'bad'"),
}


def _read(memory: SummaryMemory, table: str, tid: str) -> object:
    if table == "memshift_transcript":
        return memory.transcript(tid)
    if table == "memshift_folds":
        return admin.summary_history(memory, tid)
    return memory.load(tid)


@pytest.mark.parametrize("table", list(CORRUPTIONS))
def test_a_corrupt_row_names_its_thread_and_table(tmp_path: Path, table: str) -> None:
    backend, statement = CORRUPTIONS[table]
    db = tmp_path / "s.db"
    _seed(f"sqlite:///{db}", backend)
    _sql(db, statement)
    with SummaryMemory(backend=backend, store=f"sqlite:///{db}", policy=POLICY) as memory:
        with pytest.raises(CorruptDataError) as caught:
            _read(memory, table, "bad")
        assert caught.value.thread_id == "bad" and caught.value.table == table
        assert "'bad'" in str(caught.value) and table in str(caught.value)
        assert isinstance(caught.value, StoreError)
        for tid in ("good-1", "good-2"):  # every other thread keeps working
            assert len(memory.transcript(tid)) == 8
            memory.save(tid, "still", "fine")
            assert memory.load(tid).messages[-1].text == "fine"


def _memshift(*args: str) -> subprocess.CompletedProcess:
    return run_memshift(*args)


@pytest.mark.parametrize("table", ["memshift_window", "memshift_transcript"])
def test_migrate_counts_the_corrupt_thread_failed_and_carries_on(tmp_path: Path,
                                                                 table: str) -> None:
    db = tmp_path / "s.db"
    _seed(f"sqlite:///{db}", "classic")
    _sql(db, CORRUPTIONS[table][1])
    done = _memshift("migrate", "--from", "classic", "--from-store", f"sqlite:///{db}",
                     "--to", "middleware", "--to-store", f"sqlite:///{tmp_path}/t.db", "--json")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "CorruptDataError" in done.stdout and "'bad'" in done.stdout
    with SummaryMemory(backend="middleware", store=f"sqlite:///{tmp_path}/t.db") as target:
        assert len(target.transcript("good-1")) == 8 and len(target.transcript("good-2")) == 8


def test_a_corrupt_fold_record_never_stops_migrate_but_is_named(tmp_path: Path) -> None:
    """The recorded-policy scan reads every thread's newest record: a malformed one made the
    whole run exit 3. The thread's state is intact, so it migrates with every other thread;
    what it could not carry is named (thread, table) and the run exits 1, never 0
    (``tests/test_corrupt_folds.py`` covers both directions and PostgreSQL)."""
    db = tmp_path / "s.db"
    _seed(f"sqlite:///{db}", "classic")
    _sql(db, CORRUPTIONS["memshift_folds"][1])
    done = _memshift("migrate", "--from", "classic", "--from-store", f"sqlite:///{db}",
                     "--to", "middleware", "--to-store", f"sqlite:///{tmp_path}/t.db")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "INCOMPLETE 'bad': memshift_folds: fold history not carried" in done.stdout
    with SummaryMemory(backend="middleware", store=f"sqlite:///{tmp_path}/t.db") as target:
        assert all(len(target.transcript(t)) == 8 for t in ("good-1", "bad", "good-2"))


def test_rollout_move_and_resummarize_count_it_failed(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    _seed(url, "classic")
    _sql(db, CORRUPTIONS["memshift_window"][1])
    moved = _memshift("rollout", "move", "--store", url, "--to", "middleware", "--share", "1.0")
    assert moved.returncode == 1, moved.stderr[-2000:]
    assert "CorruptDataError" in moved.stderr
    again = _memshift("resummarize", "--store", url, "--backend", "classic", "--all")
    assert again.returncode == 1, again.stdout[-1500:] + again.stderr[-1500:]
