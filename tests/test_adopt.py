"""Existing stores and histories work with no migration step: adopted at first touch."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage

from adapters import ConfigError, MemoryPolicy
from compat import SummaryMemory, cli
from compat.testing.conversations import filler_turn
from compat import admin

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)
BACKENDS = ["classic", "middleware"]


def _stock_store(url: str, users: int, turns: int) -> None:
    """What stock apps leave behind: SQLChatMessageHistory rows in ``message_store``."""
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from sqlalchemy import create_engine

    from adapters.stores import sqlalchemy_url

    engine = create_engine(sqlalchemy_url(url))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for u in range(users):
            history = SQLChatMessageHistory(session_id=f"user-{u}", connection=engine)
            for i in range(turns):
                q, a = filler_turn(f"user-{u}", i, 8)
                history.add_messages([HumanMessage(q), AIMessage(a)])
    engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stock_message_store_is_adopted_at_first_touch(backend: str, kind: str, fresh_store) -> None:
    url = fresh_store(kind)
    _stock_store(url, users=12, turns=6)
    with SummaryMemory(backend=backend, store=url, policy=POLICY) as memory:
        for u in range(12):
            tid = f"user-{u}"
            view = memory.load(tid)
            text = view.summary + " ".join(str(m.content) for m in view.messages)
            assert view.messages, f"{tid}: existing history invisible"
            assert f"FACT-{tid}-5 " in text
            # adopted as the stock class showed it: the whole history, no summarizer call yet
            # (the thread's first fold summarizes it at once: tests/test_adopt_cost.py)
            assert view.folds == 0 and len(view.messages) == 12
            assert len(memory.transcript(tid)) == 12
            assert admin.summary_history(memory, tid)[-1]["trigger"].startswith("adopted")
        memory.save("user-0", *filler_turn("user-0", 6, 8))
        assert len(memory.transcript("user-0")) == 14
    with SummaryMemory(backend=backend, store=url, policy=POLICY) as again:  # adopted once
        assert len(again.transcript("user-3")) == 12 and again.load("user-3").messages


def test_adopt_legacy_false_refuses_naming_the_migration(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    _stock_store(url, users=2, turns=2)
    with pytest.raises(ConfigError, match="memshift migrate --from classic"):
        SummaryMemory(store=url, policy=POLICY, adopt_legacy=False)


def test_migrate_table_always_reads_that_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    _stock_store(url, users=3, turns=4)
    SummaryMemory(store=url, policy=POLICY).close()  # memshift's tables now exist beside it
    code = cli.main(["migrate", "--from", "classic", "--from-store", url, "--table", "message_store",
                     "--to", "middleware", "--to-store", f"sqlite:///{tmp_path}/new.db",
                     "--max-tokens", "150", "--keep-tokens", "80"])
    out = capsys.readouterr().out
    assert code == 0 and "stock classic history" in out
    with SummaryMemory(backend="middleware", store=f"sqlite:///{tmp_path}/new.db", policy=POLICY) as new:
        assert sorted(admin.thread_ids(new)) == ["user-0", "user-1", "user-2"]


def _histories(tmp_path: Path) -> dict:
    from langchain_community.chat_message_histories import FileChatMessageHistory, SQLChatMessageHistory

    return {
        "memory": lambda: InMemoryChatMessageHistory(),
        "file": lambda: FileChatMessageHistory(str(tmp_path / "h.json")),
        "sql": lambda: SQLChatMessageHistory(session_id="s-1",
                                             connection=f"sqlite:///{tmp_path}/legacy.db"),
    }


@pytest.mark.parametrize("shape", ["memory", "file", "sql"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_chat_memory_history_is_the_threads_history(backend: str, shape: str, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = _histories(tmp_path)[shape]()
    for i in range(5):
        q, a = filler_turn("old", i, 8)
        history.add_messages([HumanMessage(q), AIMessage(a)])
    store = {"file": f"sqlite:///{tmp_path}/memshift.db"}.get(shape)  # sql: its own database
    memory = SummaryMemory(backend=backend, policy=POLICY, chat_memory=history, legacy_write=True,
                           **({"store": store} if store else {}))
    view = memory.load()
    assert "FACT-old-4 " in " ".join(str(m.content) for m in view.messages)
    assert view.folds == 0 and len(view.messages) == 10  # as stock showed it
    memory.save_context({"input": "new question"}, {"output": "new answer"})
    view = memory.load()  # the first fold summarized what lies beyond the window, at once
    assert view.folds == 1 and "FACT-old-0" in view.summary
    assert [m.content for m in history.messages][-2:] == ["new question", "new answer"]
    assert memory.load().messages[-1].content == "new answer"
    if shape == "sql":
        assert memory.thread_id == "s-1"  # keyed by the history's session id
