"""Persistence across restarts, processes, crashes and server restarts (SQLite, PostgreSQL)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters import MemoryPolicy
from compat import StoreError, SummaryMemory
from compat.testing.conversations import filler_turn
from tests._workers import open_memory, talk
from tests.conftest import BACKENDS, ROOT

KINDS = ["sqlite", "postgres"]


def _text(memory: SummaryMemory, thread: str) -> str:
    view = memory.load(thread)
    return view.summary + "\n" + "\n".join(str(m.content) for m in view.messages)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_four_processes_three_threads_each(backend: str, kind: str, fresh_store) -> None:
    url = fresh_store(kind)
    open_memory(backend, url).close()  # create tables once, like a deploy step would
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=talk, args=(backend, url, [f"p{p}-t{t}" for t in range(3)] + ["shared"],
                                             6, f"p{p}")) for p in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    with open_memory(backend, url) as memory:
        own = [f"p{p}-t{t}" for p in range(4) for t in range(3)]
        for thread in own:
            text = _text(memory, thread)
            for i in range(6):
                assert f"FACT-{thread}-{thread.split('-')[0]}-{i} " in text, f"{thread} lost turn {i}"
            others = [o for o in own if o != thread]
            assert not any(f"FACT-{o}-" in text for o in others), f"leak into {thread}"
            assert len(memory.transcript(thread)) == 12
        shared = _text(memory, "shared")
        for p in range(4):  # concurrent writers to one thread: no lost turn, no lost summary update
            for i in range(6):
                assert f"FACT-shared-p{p}-{i} " in shared
        assert len(memory.transcript("shared")) == 48


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_middleware_checkpoints_stay_bounded(kind: str, fresh_store) -> None:
    with SummaryMemory(backend="middleware", store=fresh_store(kind),
                       policy=MemoryPolicy(max_tokens=150, keep_tokens=80)) as memory:
        for i in range(150):
            memory.save("t", *filler_turn("t", i, 8))
        checkpoints = list(memory.checkpointer.list({"configurable": {"thread_id": "t"}}))
        assert 1 <= len(checkpoints) <= 20, len(checkpoints)
        assert len(memory.transcript("t")) == 300
        assert memory.load("t").folds > 10


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_killed_mid_save_loses_no_completed_turn(backend: str, kind: str, fresh_store,
                                                 tmp_path: Path) -> None:
    url = fresh_store(kind)
    open_memory(backend, url).close()
    progress = tmp_path / "progress.log"
    proc = subprocess.Popen([sys.executable, "-m", "tests._workers", backend, url, str(progress)],
                            cwd=ROOT, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and (not progress.exists() or len(progress.read_text().split()) < 12):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    completed = [int(x) for x in progress.read_text().split()]
    assert len(completed) >= 12
    with open_memory(backend, url) as memory:
        text = _text(memory, "victim")
        for i in completed:
            assert f"FACT-victim-{i} " in text, f"completed turn {i} lost"
        window = memory.load("victim").messages
        assert window and window[0].type == "human"
        memory.save("victim", "after the crash", "still works")
        assert memory.load("victim").messages[-1].content == "still works"


@pytest.mark.parametrize("backend", BACKENDS)
def test_postgres_restart_between_saves(backend: str, pg_server, pg_url: str) -> None:
    if pg_server.restart is None:
        pytest.skip("no restart command for this server (MEMSHIFT_TEST_PG_RESTART)")
    with open_memory(backend, pg_url) as memory:
        for i in range(4):
            memory.save("t", *filler_turn("t", i, 8))
        pg_server.restart()
        try:
            memory.save("t", *filler_turn("t", 4, 8))
        except StoreError as exc:  # failing clearly is allowed once; the password never shows
            assert "memshift-test-secret" not in str(exc)
        memory.save("t", *filler_turn("t", 5, 8))
        text = _text(memory, "t")
        assert all(f"FACT-t-{i} " in text for i in (0, 1, 2, 3, 5))


def test_unreachable_database_error_hides_the_password() -> None:
    url = "postgresql://admin:s3cr3t-pw@127.0.0.1:1/memshift"
    with pytest.raises(StoreError) as info:
        SummaryMemory(store=url)
    assert "s3cr3t-pw" not in str(info.value) and "admin:***@" in str(info.value)


@pytest.mark.parametrize("url", ["mysql://u:pw-123@h/db", "sqlite://", "memory?keep_checkpoints=0",
                                 "sqlite:///x.db?retain=3"])
def test_bad_store_urls_get_clear_errors(url: str) -> None:
    from compat import ConfigError

    with pytest.raises(ConfigError) as info:
        SummaryMemory(store=url)
    assert "pw-123" not in str(info.value)


def test_store_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/env.db"
    monkeypatch.setenv("MEMSHIFT_STORE", url)
    with SummaryMemory(backend="classic") as memory:
        memory.save("t", "q", "a")
        assert memory.store_url == url
    assert (tmp_path / "env.db").exists()


def test_repr_and_store_url_never_show_the_password(pg_url: str) -> None:
    with SummaryMemory(store=pg_url) as memory:
        assert "memshift-test-secret" not in repr(memory) + str(memory) + memory.store_url
        assert "***@" in memory.store_url
