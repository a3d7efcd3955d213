"""``admin.open_read_only(url)``: a memory that loads, lists and reads transcripts of a
store and cannot write to it (reports, dashboards, audits next to the live app)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters import MemoryPolicy
from adapters.errors import ConfigError, StoreError
from compat import SummaryMemory
from compat.testing import filler_turn
from compat import admin

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_reads_everything_and_writes_nothing(kind: str, backend: str, fresh_store: Any) -> None:
    url = fresh_store(kind)
    with SummaryMemory(backend=backend, store=url, policy=POLICY) as live:
        for i in range(8):
            live.save("user-1:chat", *filler_turn("user-1:chat", i, 10))
        expected = live.load("user-1:chat")
        transcript = live.transcript("user-1:chat")
        folds = admin.summary_history(live, "user-1:chat")
    with admin.open_read_only(url, backend=backend, policy=POLICY) as reader:
        view = reader.load("user-1:chat")
        assert (view.summary, [m.content for m in view.messages], view.folds) == (
            expected.summary, [m.content for m in expected.messages], expected.folds)
        assert [m.id for m in reader.transcript("user-1:chat")] == [m.id for m in transcript]
        assert admin.summary_history(reader, "user-1:chat") == folds and folds
        assert admin.thread_ids(reader) == ["user-1:chat"]
        assert "FACT-user-1:chat-7" in reader.load_memory_variables(
            {"thread_id": "user-1:chat"})["history"]
        for write in (lambda: reader.save("user-1:chat", "q", "a"),
                      lambda: reader.save_context({"input": "q", "thread_id": "new"}, {"output": "a"}),
                      lambda: reader.clear("user-1:chat")):
            with pytest.raises(StoreError, match="read-only"):
                write()
    with SummaryMemory(backend=backend, store=url, policy=POLICY) as live:
        assert len(live.transcript("user-1:chat")) == len(transcript)  # nothing was written
        assert admin.thread_ids(live) == ["user-1:chat"]


def test_a_missing_or_empty_store_is_an_error_and_nothing_is_created(tmp_path: Path,
                                                                     fresh_store: Any) -> None:
    missing = tmp_path / "nowhere.db"
    with pytest.raises(StoreError, match="nothing to read"):
        admin.open_read_only(f"sqlite:///{missing}")
    assert not missing.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(StoreError, match="nothing to read"):
        admin.open_read_only(fresh_store("postgres"))
    with pytest.raises(ConfigError, match="memory"):
        admin.open_read_only("memory")


def test_the_password_never_shows(fresh_store: Any) -> None:
    url = fresh_store("postgres").replace("@", "x@", 1)  # a wrong password
    with pytest.raises(StoreError) as err:
        admin.open_read_only(url)
    secret = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert secret not in str(err.value) and secret not in repr(err.value.__cause__)
