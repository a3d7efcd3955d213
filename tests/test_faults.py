"""Fault injection: dead connections, concurrent start, hung summarizers, crashes between
fold and commit, retried saves. Failures show up as lost turns or timeouts, never as
wall-clock assertions."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from adapters import DeterministicSummarizer, MemoryPolicy, StoreError
from compat import SummaryMemory
from compat.testing.conversations import filler_turn
from compat import admin

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ["classic", "middleware"]
STORES = ["memory", "sqlite", "postgres"]
POLICY = MemoryPolicy(max_tokens=120, keep_tokens=80)  # 8-word turns (~37 tokens): a fold on the 4th


def _child(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tests._fault_workers", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _text(memory: SummaryMemory, thread: str) -> str:
    view = memory.load(thread)
    return view.summary + " " + " ".join(str(m.content) for m in view.messages)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", BACKENDS)
def test_terminated_connections_lose_no_returned_turn(backend: str, fresh_store, pg_server,
                                                      tmp_path: Path) -> None:
    """Two processes write one thread while every other connection to the database is
    terminated again and again: each save that returned is stored exactly once."""
    url = fresh_store("postgres")
    SummaryMemory(backend=backend, store=url, policy=POLICY).close()  # schema first
    dbname = url.rsplit("/", 1)[-1]
    logs = [tmp_path / f"p{n}.log" for n in range(2)]
    children = [_child("talk", backend, url, "shared", f"p{n}", "25", str(logs[n]))
                for n in range(2)]
    killed = 0
    deadline = time.monotonic() + 120  # both stores open first: a loaded machine opens slowly
    while not all(Path(f"{log}.ready").exists() for log in logs) and \
            time.monotonic() < deadline and all(c.poll() is None for c in children):
        time.sleep(0.02)
    with pg_server.admin() as admin:
        while any(c.poll() is None for c in children):
            killed += len(admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)).fetchall())
            time.sleep(0.1)  # often enough to cut saves mid-transaction, rarely enough to finish
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err[-2000:]
    assert killed > 0, "no connection was terminated: the test proved nothing"
    with SummaryMemory(backend=backend, store=url, policy=POLICY,
                       summarizer=DeterministicSummarizer(max_chars=1_000_000)) as memory:
        ids = [m.id for m in memory.transcript("shared")]
        assert len(ids) == len(set(ids)), "a retried turn was stored twice"
        text = _text(memory, "shared")
        for n, log in enumerate(logs):
            done = [int(line) for line in log.read_text().split()]
            assert done == list(range(25))
            for i in done:
                assert ids.count(f"p{n}-{i}-h") == 1 and ids.count(f"p{n}-{i}-a") == 1
                assert f"FACT-p{n}-{i} " in text, f"turn {i} of process {n} vanished"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_four_processes_open_a_fresh_database_at_once(kind: str, fresh_store) -> None:
    url = fresh_store(kind)
    children = [_child("open", backend, url, f"t{n}")
                for n, backend in enumerate(["classic", "middleware"] * 2)]
    for child in children:  # a hang fails here, by timeout
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err[-2000:]
        assert '"messages": 2' in out


class _Gate:
    """A summarizer that blocks on an event whenever it sees thread A's facts."""

    def __init__(self) -> None:
        self.inner = DeterministicSummarizer(max_chars=1_000_000)
        self.entered, self.release = threading.Event(), threading.Event()

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        if any("FACT-A-" in str(m.content) for m in messages):
            self.entered.set()
            assert self.release.wait(60), "never released"
        return self.inner.summarize(summary, messages)


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hung_summarizer_delays_no_other_thread(backend: str, kind: str, fresh_store) -> None:
    url = fresh_store(kind)
    gate = _Gate()
    memory = SummaryMemory(backend=backend, store=url, policy=POLICY, summarizer=gate)
    try:
        saved = threading.Event()

        def save_a() -> None:
            for i in range(4):
                memory.save("A", *filler_turn("A", i, 8))
            saved.set()
        writer = threading.Thread(target=save_a)
        writer.start()
        assert gate.entered.wait(30), "thread A never folded"
        for i in range(6):  # same process, other thread: neither saves nor loads wait
            memory.save("B", *filler_turn("B", i, 8))
            assert f"FACT-B-{i} " in _text(memory, "B")
        assert f"FACT-A-{3 if saved.is_set() else 1} " in _text(memory, "A")  # A's turn is stored
        if kind != "memory":  # another process on the same store
            child = _child("open", backend, url, "C")
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, err[-2000:]
        assert not saved.is_set() and not gate.release.is_set(), "the gate opened too early"
        gate.release.set()
        writer.join(60)
        assert saved.is_set()
        view = memory.load("A")
        assert view.folds >= 1 and "FACT-A-0 " in view.summary
        assert all(f"FACT-A-{i} " in _text(memory, "A") for i in range(4))
    finally:
        gate.release.set()
        memory.close()


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_failure_between_fold_and_commit_leaves_no_record(backend: str, kind: str, fresh_store,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with SummaryMemory(backend=backend, store=fresh_store(kind), policy=POLICY) as memory:
        store = type(memory.backend_impl.store)
        real = store.append_fold

        hits = []

        def dying(self: object, tx: object, record: dict) -> None:
            hits.append(record["version"])
            real(self, tx, record)  # written in the transaction, which then fails
            raise StoreError("injected: connection lost before commit")

        monkeypatch.setattr(store, "append_fold", dying)
        for i in range(8):
            memory.save("t", *filler_turn("t", i, 8))  # every fold fails to commit; turns stay
        assert hits, "no fold was attempted: the test proved nothing"
        view = memory.load("t")
        assert view.folds == 0 and view.summary == "" and admin.summary_history(memory, "t") == []
        assert all(f"FACT-t-{k} " in _text(memory, "t") for k in range(8))
        monkeypatch.setattr(store, "append_fold", real)
        memory.save("t", *filler_turn("t", 99, 8))
        records = admin.summary_history(memory, "t")
        assert [r["version"] for r in records] == [1] and memory.load("t").folds == 1


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_retried_turn_is_stored_once(backend: str, kind: str, fresh_store) -> None:
    with SummaryMemory(backend=backend, store=fresh_store(kind), policy=POLICY) as memory:
        first = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1")]
        second = [HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")]
        memory.save_messages("t", first)
        memory.save_messages("t", first)  # a client retrying after a lost reply
        assert [m.id for m in memory.transcript("t")] == ["h1", "a1"]
        memory.save_messages("t", second)
        memory.save_messages("t", first)  # ids of an older turn: a new turn with fresh ids
        ids = [m.id for m in memory.transcript("t")]
        assert ids[:4] == ["h1", "a1", "h2", "a2"] and len(ids) == 6 and len(set(ids)) == 6
        assert [m.content for m in memory.load("t").messages] == ["q1", "a1", "q2", "a2", "q1", "a1"]


def test_a_hung_summarizer_times_out_and_the_fold_is_retried_later() -> None:
    gate = _Gate()
    policy = MemoryPolicy(max_tokens=120, keep_tokens=80, summary_timeout=0.2, summary_retries=0,
                          retry_backoff=0)  # the timeout is tested here, not the backoff
    with SummaryMemory(backend="middleware", policy=policy, summarizer=gate) as memory:
        for i in range(4):
            memory.save("A", *filler_turn("A", i, 8))  # each fold attempt times out
        records = admin.summary_history(memory, "A")
        assert records and all("TimeoutError" in (r["error"] or "") for r in records)
        assert memory.load("A").folds == 0
        gate.release.set()
        memory.save("A", *filler_turn("A", 4, 8))
        assert memory.load("A").folds == 1


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "5", True])
def test_summary_timeout_is_validated(value: object) -> None:
    from adapters import ConfigError

    with pytest.raises(ConfigError, match="summary_timeout"):
        MemoryPolicy(max_tokens=100, summary_timeout=value)  # type: ignore[arg-type]


class _Narrow:
    """A summarizer with a context window: input over ``limit`` characters is refused the way
    OpenAI refuses it."""

    def __init__(self, limit: int) -> None:
        self.limit, self.inner, self.sizes = limit, DeterministicSummarizer(max_chars=600), []

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        size = len(summary) + sum(len(str(m.content)) for m in messages)
        self.sizes.append(size)
        if size > self.limit:
            raise ValueError("Error code: 400 - {'error': {'code': 'context_length_exceeded'}}")
        return self.inner.summarize(summary, messages)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_summarizer_that_overflows_is_fed_in_chunks(backend: str) -> None:
    narrow = _Narrow(limit=1500)
    policy = MemoryPolicy(max_tokens=400, keep_tokens=60, summary_retries=1)
    with SummaryMemory(backend=backend, policy=policy, summarizer=narrow) as memory:
        for i in range(30):
            memory.save("t", *filler_turn("t", i, 25))
            view = memory.load("t")
            newest = view.messages[-2:]
            assert policy.count(view.messages) <= policy.max_tokens + policy.count(newest)
        assert view.folds >= 3
        assert any(size > narrow.limit for size in narrow.sizes), "never overflowed: proved nothing"
        huge = "word " * 2000  # one message larger than the summarizer's window
        memory.save("t", huge, "noted")
        memory.save("t", *filler_turn("t", 99, 25))
        memory.save("t", *filler_turn("t", 100, 25))
        assert huge in [m.content for m in memory.transcript("t")]  # stored untouched
        assert policy.count(memory.load("t").messages) <= policy.max_tokens + 200


def test_max_summary_input_tokens_bounds_every_summarizer_call() -> None:
    from compat.testing import RecordingSummarizer

    recorder = RecordingSummarizer(DeterministicSummarizer(max_chars=600))
    policy = MemoryPolicy(max_tokens=500, keep_tokens=50, max_summary_input_tokens=200)
    with SummaryMemory(policy=policy, summarizer=recorder) as memory:
        for i in range(12):
            memory.save("t", *filler_turn("t", i, 30))
        memory.save("t", "x " * 3000, "ok")
        memory.save("t", *filler_turn("t", 12, 30))
    assert len(recorder.calls) > memory.load("t").folds  # folds went in several calls
    for summary, messages in recorder.calls:
        sent = [HumanMessage(summary)] if summary else []
        sent += [HumanMessage(content) for _, content in messages]
        assert policy.count(sent) <= 200 + policy.count([HumanMessage(summary)]) + 10
