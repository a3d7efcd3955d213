"""Erasure: ``forget`` removes a thread, or the messages holding a text, from every place
memshift keeps it — checked by scanning the store's bytes (the SQLite file and its WAL, every
column of every PostgreSQL table) — while other threads stay exactly as they were."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory, admin, cli
from compat.erasure import NothingToForget, thread_hash
from compat.testing import filler_turn

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)
SECRET, OTHER = "ZEBRA-7731-PASSPORT", "OTHER-4411-KEEP"


def _talk(memory: SummaryMemory, thread: str, marker: str, turns: int = 10,
          at: int = 3) -> None:
    for i in range(turns):
        human, ai = filler_turn(thread, i, 8)
        memory.save(thread, f"{human} {marker}" if i == at else human, ai)


def _found(url: str, marker: str) -> bool:
    """Whether ``marker`` is anywhere in the store's bytes."""
    needle = marker.encode()
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
        return any(needle in p.read_bytes() for p in files)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public'").fetchall()
        for table, column, kind in columns:
            test = (f'position(%s::bytea in "{column}") > 0' if kind == "bytea"
                    else f'"{column}"::text LIKE %s')
            arg = needle if kind == "bytea" else f"%{marker}%"
            hit = conn.execute(f'SELECT count(*) FROM "{table}" WHERE {test}', (arg,)).fetchone()
            if hit[0]:
                return True
    return False


def _state(memory: SummaryMemory, thread: str) -> tuple:
    view = memory.load(thread)
    return (view.summary, view.folds, [(m.type, m.content) for m in view.messages],
            [m.content for m in memory.transcript(thread)])


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, fresh_store) -> str:
    return fresh_store(request.param)


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_matching_messages_are_gone_everywhere_and_the_summary_is_rebuilt(
        url: str, backend: str) -> None:
    with SummaryMemory(backend=backend, store=url, policy=POLICY) as memory:
        _talk(memory, "alice", SECRET)
        _talk(memory, "bob", OTHER)
        assert SECRET in memory.load("alice").summary  # folded into the summary already
        before = len(memory.transcript("alice"))
        bob = _state(memory, "bob")
        report = admin.forget(memory, "alice", SECRET)
        assert (report.messages_removed, report.messages_kept) == (1, before - 1)
        view = memory.load("alice")
        assert SECRET not in view.summary and view.folds == report.rebuilt_folds >= 1
        assert all(SECRET not in str(m.content) for m in memory.transcript("alice"))
        assert len(memory.transcript("alice")) == before - 1
        assert _state(memory, "bob") == bob
        records = admin.summary_history(memory, "alice")
        assert [r["trigger"] for r in records] == ["forget"]
        assert SECRET not in json.dumps(records)
        memory.save("alice", "and now?", "we go on")  # the thread lives on
        assert memory.load("alice").messages[-1].content == "we go on"
    assert not _found(url, SECRET) and _found(url, OTHER)


def test_a_whole_thread_is_gone_from_both_backends_and_the_shadow(url: str,
                                                                  tmp_path: Path) -> None:
    """Staged store with threads on both backends, a shadow log quoting the text: after
    forget no byte of the thread is left; the other threads read exactly as before."""
    log = tmp_path / "shadow.jsonl"
    with SummaryMemory(backend="shadow", store=url, policy=POLICY, shadow_log=str(log)) as shadow:
        candidate = shadow.backend_impl.candidate_backend
        real = candidate.load
        candidate.load = lambda t, *a, **k: replace(  # type: ignore[method-assign]
            v := real(t, *a, **k), summary=f"{SECRET if t == 'alice' else OTHER} {v.summary}")
        _talk(shadow, "alice", SECRET)
        _talk(shadow, "bob", OTHER)
        for thread in ("alice", "bob"):
            shadow.load(thread)
        shadow.drain(30)
    assert SECRET in log.read_text() and OTHER in log.read_text()
    with SummaryMemory(backend="staged", store=url, policy=POLICY) as memory:
        admin.pin(memory, "bob", "middleware")
        bob = _state(memory, "bob")
        report = admin.forget(memory, "alice", shadow_logs=[str(log)])
        assert report.whole and report.messages_removed == 20 and report.shadow_lines_removed
        assert memory.transcript("alice") == [] and admin.placement(memory, "alice") is None
        assert admin.summary_history(memory, "alice") == []
        assert _state(memory, "bob") == bob
        with pytest.raises(NothingToForget):
            admin.forget(memory, "alice")
    assert not _found(url, SECRET) and _found(url, OTHER)
    assert SECRET not in log.read_text() and OTHER in log.read_text()


def test_in_memory_and_a_live_shadow_forget_too() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY,
                           candidate_policy=MemoryPolicy(max_tokens=60, keep_tokens=30))
    _talk(memory, "alice", SECRET)
    for i in range(4):
        memory.load("alice")
    memory.drain(30)
    assert any(m.thread_id == "alice" for m in memory.mismatches)
    report = admin.forget(memory, "alice", SECRET)
    assert report.mismatches_removed and not any(m.thread_id == "alice"
                                                 for m in memory.mismatches)
    assert SECRET not in memory.load("alice").summary
    store = memory.backend_impl.primary.leaves()[0].store
    assert all(SECRET not in str(m.content) for m in store.transcript("alice"))
    memory.close()


def test_dry_run_changes_nothing_and_a_turn_meanwhile_is_kept(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    with SummaryMemory(store=url, policy=POLICY) as memory:
        _talk(memory, "alice", SECRET)
        before = _state(memory, "alice")
        dry = admin.forget(memory, "alice", SECRET, dry_run=True)
        assert dry.dry_run and dry.messages_removed == 1 and _state(memory, "alice") == before

        import compat._rebuild as rebuild

        real, calls = rebuild.rebuild_record, []

        def racing(*args: Any, **kwargs: Any) -> Any:
            record = real(*args, **kwargs)
            if not calls:  # the first rebuild: a user turn lands before it is written
                memory.save("alice", "a late question", "a late answer")
            calls.append(1)
            return record

        monkeypatch.setattr(rebuild, "rebuild_record", racing)
        admin.forget(memory, "alice", SECRET)
        assert len(calls) == 2  # rebuilt again, with the late turn
        assert memory.transcript("alice")[-1].content == "a late answer"
        assert all(SECRET not in str(m.content) for m in memory.transcript("alice"))
    assert not _found(url, SECRET)


def test_a_failing_summarizer_erases_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"

    class Down:
        def summarize(self, summary: str, messages: list) -> str:
            raise RuntimeError("the model is down")

    with SummaryMemory(store=url, policy=POLICY) as memory:
        _talk(memory, "alice", SECRET)
        before = _state(memory, "alice")
    with SummaryMemory(store=url, policy=POLICY, summarizer=Down()) as memory:
        with pytest.raises(Exception):
            admin.forget(memory, "alice", SECRET)
        assert _state(memory, "alice") == before  # nothing lost, nothing half-erased


def test_cli_forget_and_its_audit_row(url: str, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with SummaryMemory(store=url, policy=POLICY) as memory:
        _talk(memory, "alice", SECRET)
        _talk(memory, "bob", OTHER)
    monkeypatch.setenv("ERASE_TEXT", SECRET)
    assert cli.main(["forget", "--store", url, "--thread", "alice", "--match-env",
                     "ERASE_TEXT", "--quiet"]) == 2  # which summarizer rebuilds? say it
    capsys.readouterr()
    code = cli.main(["forget", "--store", url, "--thread", "alice", "--match-env",
                     "ERASE_TEXT", "--offline-summarizer", "--json", "--quiet"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["messages_removed"] == 1 and result["thread"] == thread_hash("alice")
    assert cli.main(["forget", "--store", url, "--thread", "nobody", "--quiet"]) == 2
    capsys.readouterr()
    assert cli.main(["history", "--store", url, "--json", "--quiet"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    audit = [r for r in runs if r["command"].startswith("forget")]
    assert len(audit) == 1 and thread_hash("alice") in audit[0]["command"]
    assert "alice" not in json.dumps(audit) and SECRET not in json.dumps(audit)
    assert cli.main(["forget", "--store", url, "--thread", "bob", "--quiet"]) == 0
    assert not _found(url, SECRET) and not _found(url, OTHER)


def _stock_history(url: str, thread: str) -> Any:
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    return SQLChatMessageHistory(session_id=thread, connection=url)


@pytest.mark.parametrize("whole", [True, False])
def test_a_stock_history_adopted_by_memshift_is_erased_too(tmp_path: Path, whole: bool) -> None:
    """The stock ``message_store`` rows of the thread go as well: a new memory never adopts
    the erased turns again, and with ``match`` the rest of the stock history stays."""
    url = f"sqlite:///{tmp_path}/app.db"
    history = _stock_history(url, "t1")
    history.add_user_message(f"my number is {SECRET}")
    history.add_ai_message("noted")
    history.add_user_message("and the weather?")
    history.add_ai_message("sunny")
    _stock_history(url, "t2").add_user_message(OTHER)
    with SummaryMemory(store=url, policy=POLICY) as memory:
        memory.load("t1")  # the first touch adopts the stock history
        assert len(memory.transcript("t1")) == 4
        report = admin.forget(memory, "t1", None if whole else SECRET)
        assert report.legacy_messages == (4 if whole else 1)
    with SummaryMemory(store=url, policy=POLICY) as fresh:  # a new process: adopts again?
        seen = [m.content for m in fresh.load("t1").messages] + \
            [m.content for m in fresh.transcript("t1")]
        assert all(SECRET not in str(c) for c in seen)
        if whole:
            assert seen == [] and _stock_history(url, "t1").messages == []
            with pytest.raises(NothingToForget):
                admin.forget(fresh, "t1")
        else:
            assert [m.content for m in fresh.transcript("t1")] == ["noted", "and the weather?",
                                                                    "sunny"]
            assert [m.content for m in _stock_history(url, "t1").messages] == \
                ["noted", "and the weather?", "sunny"]
    assert not _found(url, SECRET) and _found(url, OTHER)


def test_a_thread_only_in_the_stock_table_is_found_and_erased(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    _stock_history(url, "t1").add_user_message(f"my number is {SECRET}")
    with SummaryMemory(store=url, policy=POLICY) as memory:
        memory.save("t2", "q", "a")  # memshift's tables exist; t1 was never touched
        report = admin.forget(memory, "t1")
        assert report.legacy_messages == 1
    assert not _found(url, SECRET)


def test_a_tool_call_goes_with_its_result() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    memory = SummaryMemory(policy=MemoryPolicy(max_tokens=2000))
    memory.save_messages("t", [HumanMessage("look me up"),
                               AIMessage("", tool_calls=[{"name": "lookup", "id": "c1",
                                                          "args": {"passport": SECRET}}]),
                               ToolMessage("found: a record", tool_call_id="c1"),
                               AIMessage("done")])
    memory.save("t", "next", "ok")
    report = admin.forget(memory, "t", SECRET)
    assert report.messages_removed == 2  # the call and its result
    kinds = [(m.type, m.content) for m in memory.load("t").messages]
    assert kinds == [("human", "look me up"), ("ai", "done"), ("human", "next"), ("ai", "ok")]


@pytest.mark.parametrize("compact", [False, True])
def test_compaction_reaches_what_earlier_deletes_left_in_free_pages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact: bool) -> None:
    """Where SQLite is built with ``secure_delete`` off (Debian's is on), the checkpoints that
    retention deleted long before the erasure leave their bytes in free pages: only the
    compaction (``VACUUM``) removes them."""
    from adapters.stores import sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_PRAGMAS", (*sqlite_store._PRAGMAS,
                                                   "PRAGMA secure_delete = OFF"))
    url = f"sqlite:///{tmp_path}/app.db"
    with SummaryMemory(backend="middleware", store=url, policy=POLICY) as memory:
        memory.save("alice", f"hello {SECRET}", "hi")
        for i in range(40):
            memory.save("alice", *filler_turn("alice", i, 8))
            memory.save("bob", *filler_turn("bob", i, 8))
        admin.forget(memory, "alice", SECRET, compact=compact)
    assert _found(url, SECRET) is not compact
    assert _found(url, "FACT-bob-39")


def test_a_chat_memory_history_is_rewritten_without_the_text() -> None:
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.messages import AIMessage, HumanMessage

    history = InMemoryChatMessageHistory()
    history.add_messages([HumanMessage(f"call me at {SECRET}"), AIMessage("sure"),
                          HumanMessage("thanks"), AIMessage("bye")])
    memory = SummaryMemory(chat_memory=history, policy=MemoryPolicy(max_tokens=2000))
    memory.load_memory_variables({})  # the first touch adopts the history
    (tid,) = admin.thread_ids(memory)
    report = admin.forget(memory, tid, SECRET)
    assert report.legacy_messages == 1 and report.messages_removed == 1
    assert [m.content for m in history.messages] == ["sure", "thanks", "bye"]
    assert all(SECRET not in str(m.content) for m in memory.transcript(tid))
