"""A re-run of a finished migration skips each thread by a cheap fingerprint (the source's
message count and newest id, the state the migration wrote) instead of rebuilding its summary
— and never skips one whose source or target changed since."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_community.chat_message_histories import SQLChatMessageHistory
from sqlalchemy import create_engine, event

from adapters import MemoryPolicy, ThreadRecord, compare_views
from adapters.extractive import ExtractiveSummarizer
from compat import SummaryMemory
from compat.admin import restore_thread
from compat.migration import TARGET_NEWER, migrate
from compat.sources import ClassicHistorySource
from compat.testing.conversations import filler_turn

POLICY = MemoryPolicy(max_tokens=200, keep_tokens=100)


class Counting(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def summarize(self, summary: str, messages: Any) -> str:
        self.calls += 1
        return super().summarize(summary, messages)


def _legacy(tmp_path: Path, threads: int = 4, turns: int = 8) -> str:
    url = f"sqlite:///{tmp_path}/legacy.db"
    engine = create_engine(url)
    for t in range(threads):
        history = SQLChatMessageHistory(session_id=f"t{t}", connection=engine)
        for i in range(turns):
            human, ai = filler_turn(f"t{t}", i, 12)
            history.add_user_message(human)
            history.add_ai_message(ai)
    engine.dispose()
    return url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_rerun_skips_unchanged_threads_without_the_summarizer(kind: str, tmp_path: Path,
                                                                fresh_store: Any) -> None:
    legacy = _legacy(tmp_path)
    counting = Counting()
    target = SummaryMemory(store=fresh_store(kind), backend="middleware", policy=POLICY,
                           summarizer=counting)
    first = migrate(ClassicHistorySource(legacy), target)
    assert first.ok and len(first.migrated) == 4 and counting.calls > 0
    counting.calls = 0
    again = migrate(ClassicHistorySource(legacy), target)
    assert again.ok and sorted(again.fingerprinted) == ["t0", "t1", "t2", "t3"]
    assert sorted(again.verified) == ["t0", "t1", "t2", "t3"] and counting.calls == 0
    target.close()


def test_a_thread_that_changed_on_either_side_is_compared_again(tmp_path: Path) -> None:
    legacy = _legacy(tmp_path)
    target = SummaryMemory(store=f"sqlite:///{tmp_path}/new.db", backend="middleware",
                           policy=POLICY)
    assert migrate(ClassicHistorySource(legacy), target).ok
    engine = create_engine(legacy)  # the source moved on: t0 has one more turn
    SQLChatMessageHistory(session_id="t0", connection=engine).add_user_message("one more")
    engine.dispose()
    target.save("t1", "the target moved on", "so it is newer")  # the target moved on: t1
    rerun = migrate(ClassicHistorySource(legacy), target)
    assert sorted(rerun.fingerprinted) == ["t2", "t3"]
    assert "t0" in rerun.migrated and ("t1", TARGET_NEWER) in rerun.skipped
    target.close()


def test_a_target_whose_state_differs_from_what_was_written_is_not_skipped(
        tmp_path: Path) -> None:
    """The fingerprint includes the state written: a target changed under the record (here:
    its summary rewritten by hand) is compared again, and fixed, never waved through."""
    legacy = _legacy(tmp_path, threads=1)
    target = SummaryMemory(store=f"sqlite:///{tmp_path}/new.db", backend="classic",
                           policy=POLICY)
    assert migrate(ClassicHistorySource(legacy), target).ok
    conn = sqlite3.connect(tmp_path / "new.db")
    conn.execute("UPDATE memshift_classic SET summary = 'tampered' WHERE thread_id = 't0'")
    conn.commit()
    conn.close()
    rerun = migrate(ClassicHistorySource(legacy), target)
    assert rerun.fingerprinted == [] and rerun.migrated == ["t0"]
    assert "tampered" not in target.load("t0").summary
    target.close()


def _count_checkouts(*engines: Any) -> Counter[str]:
    """Connections taken from each engine's pool from now on (one per round-trip group: every
    per-thread read opens one)."""
    counts: Counter[str] = Counter()
    for number, engine in enumerate(engines):
        event.listen(engine, "checkout", lambda *_a, n=number: counts.update([str(n)]))
    return counts


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_rerun_reads_verified_threads_a_page_at_a_time(kind: str, tmp_path: Path,
                                                         fresh_store: Any) -> None:
    """Per page of threads, not per thread: 40 verified, unchanged threads cost a handful of
    connections on the source and the target together (the page reads and the listing)."""
    legacy = _legacy(tmp_path, threads=40, turns=2)
    target = SummaryMemory(store=fresh_store(kind), backend="middleware", policy=POLICY)
    source = ClassicHistorySource(legacy)
    assert migrate(source, target).ok
    (store,) = target.backend_impl.homes()
    counts = _count_checkouts(source.engine, store.engine)
    again = migrate(source, target)
    assert again.ok and len(again.fingerprinted) == 40 and len(again.verified) == 40
    assert sum(counts.values()) <= 8, dict(counts)
    target.close()


def test_a_target_changed_without_a_new_turn_is_not_skipped(tmp_path: Path) -> None:
    """Cleared (checkpoints gone, transcript kept) or rewritten without a fold record: the
    transcript and the newest fold record are unchanged, the state is not: compared again."""
    legacy = _legacy(tmp_path)
    target = SummaryMemory(store=f"sqlite:///{tmp_path}/new.db", backend="middleware",
                           policy=POLICY)
    assert migrate(ClassicHistorySource(legacy), target).ok
    expected = target.load("t1")
    target.clear("t0")
    restore_thread(target, ThreadRecord("t1", "rewritten by hand", [], 0, []))
    rerun = migrate(ClassicHistorySource(legacy), target)
    assert rerun.ok and sorted(rerun.fingerprinted) == ["t2", "t3"]
    assert sorted(rerun.migrated) == ["t0", "t1"]
    assert target.load("t0").messages and compare_views(expected, target.load("t1")) == []
    target.close()


def test_an_unverified_or_failed_thread_is_compared_again_then_trusted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration record only counts once its thread was verified: a run without
    verification, or whose verification failed, leaves threads a re-run compares in full
    (and, found identical, trusts from then on)."""
    import compat.migration as migration

    legacy = _legacy(tmp_path)
    target = SummaryMemory(store=f"sqlite:///{tmp_path}/new.db", backend="middleware",
                           policy=POLICY)
    real = migration._differences
    calls: Counter[str] = Counter()

    def flaky(memory: Any, record: ThreadRecord, have: Any = None) -> list[str]:
        calls[record.thread_id] += 1
        if record.thread_id == "t1" and have is None:  # the check after the write
            return ["made up for the test"]
        return real(memory, record, have)

    monkeypatch.setattr(migration, "_differences", flaky)
    first = migrate(ClassicHistorySource(legacy), target, ["t0", "t1"])
    assert [t for t, _ in first.failed] == ["t1"]
    unverified = migrate(ClassicHistorySource(legacy), target, ["t2", "t3"], verify=False)
    assert unverified.ok and unverified.verified == []
    monkeypatch.setattr(migration, "_differences", real)
    rerun = migrate(ClassicHistorySource(legacy), target)
    assert rerun.ok and rerun.fingerprinted == ["t0"]
    assert sorted(rerun.verified) == ["t0", "t1", "t2", "t3"]
    third = migrate(ClassicHistorySource(legacy), target)
    assert sorted(third.fingerprinted) == ["t0", "t1", "t2", "t3"]
    target.close()


def test_a_page_read_of_the_source_is_what_reading_each_thread_gives(tmp_path: Path) -> None:
    """``read_many`` decodes rows as ``SQLChatMessageHistory`` does (ids kept, stable ids
    given), and one row that does not decode fails only its own thread."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from adapters.view import message_signature

    legacy = _legacy(tmp_path, threads=3, turns=2)
    engine = create_engine(legacy)
    history = SQLChatMessageHistory(session_id="t1", connection=engine)
    history.add_messages([HumanMessage("with an id", id="h-1"),
                          AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
                          ToolMessage("42", tool_call_id="c1")])
    engine.dispose()
    source = ClassicHistorySource(legacy)
    page = source.read_many(["t0", "t1", "t2", "nobody"])
    assert sorted(page) == ["t0", "t1", "t2"]
    for tid in ("t0", "t1", "t2"):
        one = source.read(tid)
        assert one is not None
        assert [(m.id, *message_signature(m)) for m in page[tid].record.transcript] == \
            [(m.id, *message_signature(m)) for m in one.record.transcript]
    conn = sqlite3.connect(tmp_path / "legacy.db")
    conn.execute("UPDATE message_store SET message = 'not json' WHERE session_id = 't2'")
    conn.commit()
    conn.close()
    target = SummaryMemory(store=f"sqlite:///{tmp_path}/new.db", backend="middleware",
                           policy=POLICY)
    report = migrate(source, target)
    assert sorted(report.migrated) == ["t0", "t1"] and [t for t, _ in report.failed] == ["t2"]
    target.close()
    source.close()


def test_forgetting_caught_up_threads_drops_exactly_their_outcomes() -> None:
    """The delta pass forgets every caught-up thread in one pass per list (a thread id or
    many); the other threads' outcomes stay in order."""
    from compat.migration import ALREADY, MigrationReport

    report = MigrationReport("s", "t")
    ids = [f"t{i}" for i in range(2_000)]
    report.migrated = ids[:1_000]
    report.verified = list(ids)
    report.rebuilt = ids[:500]
    report.fingerprinted = ids[1_000:]
    report.skipped = [(t, ALREADY) for t in ids[1_000:]]
    report.failed = [("bad", "boom")]
    report.forget(ids[::2])
    report.forget("bad")
    report.forget([])
    odd = ids[1::2]
    assert report.verified == odd
    assert report.migrated == odd[:500] and report.rebuilt == odd[:250]
    assert report.fingerprinted == odd[500:]
    assert report.skipped == [(t, ALREADY) for t in odd[500:]] and report.failed == []
    assert report.total == 1_000


class _Source:
    """A source that records its reads; ``bad`` threads make any read naming them fail."""

    def __init__(self, threads: list[str], bad: tuple[str, ...] = ()) -> None:
        self.threads, self.bad = set(threads), set(bad)
        self.many: list[list[str]] = []
        self.single: list[str] = []

    def read_many(self, ids: list[str]) -> dict[str, str]:
        self.many.append(list(ids))
        if self.bad & set(ids):
            raise ValueError("a row that does not decode")
        return {t: f"record {t}" for t in ids if t in self.threads}

    def read(self, thread_id: str) -> str | None:
        self.single.append(thread_id)
        if thread_id in self.bad:
            raise ValueError("a row that does not decode")
        return f"record {thread_id}" if thread_id in self.threads else None


def test_a_page_is_read_a_chunk_at_a_time_as_the_run_reaches_it() -> None:
    """A page's source threads are decoded a chunk per query, not all at once (the burst of
    a whole page's messages fragments the worker's memory); each thread is handed out once,
    a thread the source lacks is None, and nothing is read twice."""
    from compat.migrating.pages import read_page

    page = [f"t{i}" for i in range(23)]
    src = _Source(page[:-1])  # the last thread is not in the source
    read = read_page(src, page, chunk=10)
    assert src.many == []  # nothing read before the run asks
    assert read("t0") == "record t0" and src.many == [page[:10]]
    assert [read(t) for t in page[1:]] == [f"record {t}" for t in page[1:-1]] + [None]
    assert src.many == [page[:10], page[10:20], page[20:]] and src.single == []
    assert read("t3") == "record t3" and src.single == ["t3"]  # asked again: read afresh
    again = read_page(src, page, chunk=10)
    assert again("t0") == "record t0" and again("t0") == "record t0"
    assert src.many[3:] == [page[:10]]  # asked twice: not a read of the rest of the page
    assert read("elsewhere") is None and src.single == ["t3", "t0", "elsewhere"]


def test_a_chunk_that_fails_to_read_is_read_thread_by_thread() -> None:
    """One row that does not decode fails only its own thread: its chunk is read thread by
    thread, the other chunks still a chunk at a time."""
    from compat.migrating.pages import read_page

    page = [f"t{i}" for i in range(6)]
    src = _Source(page, bad=("t4",))
    read = read_page(src, page, chunk=3)
    assert [read(t) for t in page[:3]] == [f"record {t}" for t in page[:3]]
    assert read("t3") == "record t3"
    with pytest.raises(ValueError, match="does not decode"):
        read("t4")
    assert read("t5") == "record t5"
    assert src.many == [page[:3], page[3:]] and src.single == ["t3", "t4", "t5"]
