"""Clean shutdown: SIGTERM to a long ``memshift`` command finishes the thread in hand, records
the run ``interrupted``, exits 143, and the next run resumes where it stopped."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compat import MemoryPolicy, SummaryMemory
from tests.conftest import ROOT

THREADS = 300


def _seed(url: str) -> None:
    with SummaryMemory(backend="classic", store=url,
                       policy=MemoryPolicy(max_tokens=200, keep_tokens=100)) as memory:
        for n in range(THREADS):
            for i in range(3):
                memory.save(f"t{n}", f"question {i} of thread {n}", f"answer {i}")


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:  # the table is not there yet
        return 0


def _migrate(source: str, target: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "compat", "migrate", "--from", "classic", "--from-store", source,
         "--to", "middleware", "--to-store", target, "--quiet"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_stops_migrate_between_threads_and_the_next_run_resumes(tmp_path: Path) -> None:
    source, target_db = f"sqlite:///{tmp_path}/src.db", tmp_path / "dst.db"
    target = f"sqlite:///{target_db}"
    _seed(source)
    threads_sql = "SELECT count(DISTINCT thread_id) FROM memshift_transcript"
    run = _migrate(source, target)
    deadline = time.monotonic() + 120
    while _count(target_db, threads_sql) < 3 and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.02)
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 143, (out[-1000:], err[-2000:])
    assert "stopped by SIGTERM" in err
    done = _count(target_db, threads_sql)
    assert 3 <= done < THREADS  # stopped early, after whole threads
    status = _count(target_db, "SELECT count(*) FROM memshift_runs WHERE status = 'interrupted'")
    assert status == 1
    # every migrated thread is whole: its 6 messages, not a part
    assert _count(target_db, "SELECT count(*) FROM (SELECT thread_id FROM memshift_transcript "
                             "GROUP BY thread_id HAVING count(*) <> 6)") == 0
    again = _migrate(source, target)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, (out[-1000:], err[-2000:])
    assert _count(target_db, threads_sql) == THREADS
    assert _count(target_db, "SELECT count(*) FROM memshift_runs WHERE status = 'ok'") == 1


def test_a_tick_after_sigterm_raises_stopped_in_every_command() -> None:
    from compat.cli._common import Output
    from compat.cli._stop import Stopped, on_sigterm

    out = Output(False, None, True)
    with on_sigterm(), out.progress(3, "threads", "test") as tick:
        tick()
        os.kill(os.getpid(), signal.SIGTERM)  # handled: the process lives on
        with pytest.raises(Stopped):
            tick()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(
        signal.getsignal(signal.SIGTERM))
