"""``memshift export --store URL``: a live store's conversations as a replay file, read-only.

Differential: conversations saved through ``SummaryMemory`` (both backends, a thread moved
between them, agent turns with tool calls) come back message for message through
``memshift export`` and the replay reader, on SQLite and PostgreSQL; the store is not changed
by an export; a listed thread the store does not hold is an error, never an empty thread."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from compat import SummaryMemory, admin
from compat.conversations import iter_turns, read_messages
from compat.testing.conversations import agent_turn, filler_turn
from tests._cli import run_memshift

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)
KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def save_conversations(url: str) -> dict[str, list[list[BaseMessage]]]:
    """Turns saved per thread: classic threads, middleware agent threads, a moved thread."""
    saved: dict[str, list[list[BaseMessage]]] = {}

    def save(memory: SummaryMemory, tid: str, human: str, ai: str | list[BaseMessage]) -> None:
        memory.save(tid, human, ai)
        saved.setdefault(tid, []).append([HumanMessage(human),
                                          *([AIMessage(ai)] if isinstance(ai, str) else ai)])

    with SummaryMemory(backend="classic", store=url, policy=POLICY) as classic:
        for i in range(6):
            for tid in ("tenant-1:user-1:chat-1", "c2", "moved", "claimed"):
                save(classic, tid, *filler_turn(tid, i, 12))
        save(classic, "c2", "ünïcode \"quoted\"\nsecond line\ttab", "答え: 日本語 ✓")
        blocks: Any = [{"type": "text", "text": "content blocks FACT-c2-b"}]
        classic.save("c2", blocks, "blocks answered")
        saved["c2"].append([HumanMessage(blocks), AIMessage("blocks answered")])
    with SummaryMemory(backend="middleware", store=url, policy=POLICY) as middleware:
        for i in range(5):
            save(middleware, "agent", *agent_turn("agent", i))
        for i in range(6, 9):  # moves to the middleware at its first touch
            save(middleware, "moved", *agent_turn("moved", i))
        run_agent(middleware, "claimed")  # create_agent's checkpointer claims the thread
        saved["claimed"].append(AGENT_TURN)
        where = {t: admin.placement(middleware, t) for t in saved}
    assert where["moved"] is not None and where["moved"].backend == "middleware"
    assert where["agent"] is not None and where["agent"].backend == "middleware"
    assert where["claimed"] is not None and where["claimed"].backend == "middleware"
    assert where["c2"] is not None and where["c2"].backend == "classic"
    return saved


CALL = {"name": "lookup", "args": {"q": "x"}, "id": "call-live"}
AGENT_TURN: list[BaseMessage] = [
    HumanMessage("use the tool"), AIMessage("", tool_calls=[CALL]),
    ToolMessage("result for x", tool_call_id="call-live"), AIMessage("final answer")]


def run_agent(memory: SummaryMemory, tid: str) -> None:
    """One turn of a real ``create_agent`` on the memory's middleware and checkpointer."""
    from langchain.agents import create_agent

    from tests.test_cutover_agent import RecordingFake, lookup

    model = RecordingFake(messages=iter([AIMessage("", tool_calls=[CALL]),
                                         AIMessage("final answer")]))
    agent = create_agent(model, tools=[lookup], middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    agent.invoke({"messages": [HumanMessage("use the tool")]},
                 {"configurable": {"thread_id": tid}})


def key(message: BaseMessage) -> tuple[Any, ...]:
    calls = [(c["name"], c["args"], c["id"]) for c in getattr(message, "tool_calls", None) or []]
    return message.type, message.content, calls, getattr(message, "tool_call_id", None)


def exported(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    done = run_memshift("export", *args, env=env, check=0)
    path = tmp_path / f"export-{hashlib.sha1(repr(args).encode()).hexdigest()[:8]}.jsonl"
    path.write_text(done.stdout, encoding="utf-8")
    return path


def by_thread(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    threads: dict[str, list[tuple[Any, ...]]] = {}
    for _n, tid, message in read_messages(path):
        threads.setdefault(tid, []).append(key(message))
    return threads


def tables(url: str) -> dict[str, int]:
    from sqlalchemy import create_engine, inspect, text

    from adapters.stores.url import sqlalchemy_url

    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            return {name: conn.execute(text(f'SELECT count(*) FROM "{name}"')).scalar_one()
                    for name in sorted(inspect(engine).get_table_names())}
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", KINDS)
def test_an_export_replays_as_the_conversations_that_were_saved(kind: str, fresh_store: Any,
                                                                tmp_path: Path) -> None:
    url = fresh_store(kind)
    saved = save_conversations(url)
    rows = tables(url)
    path = exported(tmp_path, "--store", url)
    assert tables(url) == rows  # nothing was written
    threads = by_thread(path)
    assert sorted(threads) == sorted(saved)
    for tid, turns in saved.items():  # message for message: the whole transcript, in order
        assert threads[tid] == [key(m) for turn in turns for m in turn], tid
    replayed: dict[str, list[list[tuple[Any, ...]]]] = {}
    for turn in iter_turns(read_messages(path)):
        replayed.setdefault(turn.thread_id, []).append([key(m) for m in turn.messages])
    assert replayed == {tid: [[key(m) for m in t] for t in turns] for tid, turns in saved.items()}
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert {tuple(sorted(line)) for line in lines} <= {
        ("content", "role", "thread_id"), ("content", "role", "thread_id", "tool_calls"),
        ("content", "role", "thread_id", "tool_call_id")}
    assert run_memshift("replay", "--quiet", str(path), check=0).stdout.count("EQUIVALENT") == 1


def test_export_leaves_a_sqlite_store_byte_identical(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    url = f"sqlite:///{folder}/app.db"
    save_conversations(url)

    def state() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}

    before = state()
    exported(tmp_path, "--store", url)
    exported(tmp_path, "--store", url, "--sample", "2", "--seed", "3")
    assert state() == before  # no byte changed, no -wal/-shm appeared


def test_threads_file_and_a_missing_thread(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    saved = save_conversations(url)
    listed = tmp_path / "threads.txt"
    listed.write_text("agent\n\n  c2  \nagent\n", encoding="utf-8")
    threads = by_thread(exported(tmp_path, "--store", url, "--threads", str(listed)))
    assert list(threads) == ["agent", "c2"]  # the file's order, each once
    assert threads["c2"] == [key(m) for turn in saved["c2"] for m in turn]

    with SummaryMemory(backend="classic", store=url, policy=POLICY) as memory:
        admin.pin(memory, "ghost", "middleware")  # a placement, and nothing ever saved
    for missing, line in (("nope", 2), ("ghost", 2)):
        listed.write_text(f"agent\n{missing}\nc2\n", encoding="utf-8")
        done = run_memshift("export", "--store", url, "--threads", str(listed), check=2)
        assert done.stdout == ""  # nothing half-written before the error
        errors = [e for e in done.stderr.splitlines() if e.startswith("memshift: error:")]
        assert len(errors) == 1 and repr(missing) in errors[0], done.stderr
        assert f"threads.txt:{line}" in errors[0] and "Traceback" not in done.stderr
    listed.write_text("", encoding="utf-8")
    assert "lists no thread" in run_memshift("export", "--store", url, "--threads",
                                             str(listed), check=2).stderr


def test_a_sample_is_deterministic_per_seed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    saved = save_conversations(url)
    picks = {}
    for seed in range(6):
        first = by_thread(exported(tmp_path, "--store", url, "--sample", "2", "--seed", str(seed)))
        again = by_thread(exported(tmp_path, "--store", url, "--seed", str(seed), "--sample", "2"))
        assert first == again and len(first) == 2
        for tid, messages in first.items():  # sampled threads are whole
            assert messages == [key(m) for turn in saved[tid] for m in turn]
        picks[seed] = tuple(first)
    assert len(set(picks.values())) > 1  # the seed chooses
    everything = by_thread(exported(tmp_path, "--store", url, "--sample", "99"))
    assert sorted(everything) == sorted(saved)
    listed = tmp_path / "threads.txt"
    listed.write_text("agent\nc2\nmoved\n", encoding="utf-8")
    some = by_thread(exported(tmp_path, "--store", url, "--threads", str(listed), "--sample", "2"))
    assert len(some) == 2 and set(some) <= {"agent", "c2", "moved"}


def test_the_library_function_is_what_the_command_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    saved = save_conversations(url)
    with admin.open_read_only(url) as memory:
        lines = list(admin.export_conversations(memory, ["moved"]))
        assert [line["thread_id"] for line in lines] == ["moved"] * len(lines)
        assert len(lines) == sum(len(t) for t in saved["moved"])
        with pytest.raises(ConfigError, match="'nope'"):
            list(admin.export_conversations(memory, ["moved", "nope"]))


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:/app.db", "write sqlite:///app.db"),
    ("app.db", "is a file path, not a store URL"),
    ("sqlite:///missing.db", "no such SQLite file"),
    ("mysql://app:hunter2@db/app", "unsupported store scheme 'mysql'"),
    ("memory", "nothing to export"),
])
def test_bad_urls_get_one_line(tmp_path: Path, url: str, expected: str) -> None:
    done = run_memshift("export", "--store", url, cwd=tmp_path, check=2)
    errors = [e for e in done.stderr.splitlines() if e.startswith("memshift: error:")]
    assert len(errors) == 1 and expected in errors[0], done.stderr
    assert done.stdout == "" and "hunter2" not in done.stderr and list(tmp_path.iterdir()) == []


def test_a_store_without_memshift_tables_is_an_error(tmp_path: Path) -> None:
    import sqlite3

    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE x (y)").connection.close()
    done = run_memshift("export", "--store", f"sqlite:///{tmp_path}/other.db", check=2)
    assert "holds no memshift tables" in done.stderr and done.stdout == ""


@pytest.mark.postgres
def test_postgres_password_never_shows(fresh_store: Any, tmp_path: Path) -> None:
    from urllib.parse import urlsplit

    url = fresh_store("postgres")
    save_conversations(url)
    secret = urlsplit(url).password
    assert secret
    ok = run_memshift("export", "--store-env", "APP_DSN", "--sample", "1",
                      env={"APP_DSN": url}, check=0)
    assert secret not in ok.stderr and len(by_thread(_file(tmp_path, ok.stdout))) == 1
    (tmp_path / "dsn").write_text(url + "\n", encoding="utf-8")
    assert run_memshift("export", "--store-file", str(tmp_path / "dsn"), check=0).stdout \
        == run_memshift("export", env={"MEMSHIFT_STORE": url}, check=0).stdout
    wrong = url.replace(secret, secret + "-wrong")
    for args, env in ((("--store", wrong), None), (("--store-env", "BAD"), {"BAD": wrong}),
                      (("--store", wrong.rsplit("/", 1)[0] + "/no_such_db"), None)):
        done = run_memshift("export", *args, env=env, check=2)
        assert secret not in done.stdout + done.stderr and "Traceback" not in done.stderr
        assert len([e for e in done.stderr.splitlines() if e.startswith("memshift: error:")]) == 1


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "out.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_help_names_the_options() -> None:
    from click.testing import CliRunner

    from compat.cli import root

    runner = CliRunner()
    text = runner.invoke(root, ["export", "--help"], prog_name="memshift").output
    assert "``" not in text and ":class:" not in text
    for option in ("--store-env", "--store-file", "--threads", "--sample", "--seed"):
        assert option in text
    assert "export" in runner.invoke(root, ["--help"], prog_name="memshift").output


def test_stock_sessions_not_adopted_yet_are_named_not_skipped_in_silence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    from compat import SummaryMemory, cli

    url = f"sqlite:///{tmp_path}/app.db"
    SQLChatMessageHistory(session_id="old-1", connection=url).add_user_message("hello")
    with SummaryMemory(store=url) as memory:
        memory.save("new-1", "q", "a")
    assert cli.main(["export", "--store", url]) == 0
    captured = capsys.readouterr()
    assert '"new-1"' in captured.out and '"old-1"' not in captured.out
    assert "1 session(s) of the stock table message_store are not adopted yet" in captured.err
