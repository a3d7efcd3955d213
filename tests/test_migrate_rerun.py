"""A re-run of a finished migration skips each thread by a cheap fingerprint (the source's
message count and newest id, the state the migration wrote) instead of rebuilding its summary
— and never skips one whose source or target changed since."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_community.chat_message_histories import SQLChatMessageHistory
from sqlalchemy import create_engine

from adapters import MemoryPolicy
from adapters.extractive import ExtractiveSummarizer
from compat import SummaryMemory
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
