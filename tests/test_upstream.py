"""Spy tests on every private upstream hook memshift overrides: if LangChain renames or
stops calling one, these fail (without PostgreSQL), before the contract suite drifts."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import SummarizationMiddleware
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.messages import AIMessage, HumanMessage

import adapters._upstream as upstream
from adapters import ConfigError, MemoryPolicy
from adapters.backends import (
    ClassicBackend,
    MemshiftSummarizationMiddleware,
    PolicySummaryBufferMemory,
)
from adapters.backends.classic import ClassicWrites
from adapters.stores import ClassicSnapshot, MemoryStore
from adapters.summarizer import SummarizerChatModel

POLICY = MemoryPolicy(max_messages=4, keep_messages=2)
ROOT = Path(__file__).resolve().parents[1]


def _turns(n: int) -> list:
    out: list = []
    for i in range(n):
        out += [HumanMessage(f"q{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")]
    return out


def test_stock_before_model_calls_every_middleware_override(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    for hook in ("_should_summarize", "_determine_cutoff_index", "_write_summary"):
        assert hook in MemshiftSummarizationMiddleware.__dict__, f"memshift no longer overrides {hook}"
        real = getattr(MemshiftSummarizationMiddleware, hook)

        def spy(self, *args, _real=real, _hook=hook):  # type: ignore[no-untyped-def]
            called.append(_hook)
            return _real(self, *args)
        monkeypatch.setattr(MemshiftSummarizationMiddleware, hook, spy)
    middleware = MemshiftSummarizationMiddleware(POLICY, SummarizerChatModel(summarizer=None))
    folds: list = []

    def fold(summary, count, window, plan):  # type: ignore[no-untyped-def]
        folds.append((summary, count, len(window), plan.cutoff))
        return "S"
    # stock triggers at >= max_messages; the policy at >: four messages do not fold
    assert middleware.fold_update({"messages": _turns(2)}, fold) is None and folds == []
    called.clear()
    update = middleware.fold_update({"messages": _turns(3)}, fold)
    # the summary comes through upstream's public summarizer= hook, not an override
    assert called == ["_should_summarize", "_determine_cutoff_index", "_write_summary"]
    assert "_create_summary" not in MemshiftSummarizationMiddleware.__dict__
    assert folds == [("", 0, 6, 4)]
    assert update is not None and update["memshift_folds"] == 1
    kept = [m for m in update["messages"][1:] if m.type != "remove"]
    assert [m.content for m in kept][1:] == ["q2", "a2"]  # summary message, then the newest turn


def test_stock_save_context_calls_the_classic_prune_override() -> None:
    assert "prune" in PolicySummaryBufferMemory.__dict__, "memshift no longer overrides prune"
    backend = ClassicBackend(policy=POLICY, store=MemoryStore())
    asked: list = []

    def fold(summary, count, window, plan):  # type: ignore[no-untyped-def]
        asked.append((count, len(window), plan.cutoff))
        return "S"
    snapshot, writes = ClassicSnapshot(), ClassicWrites()
    memory = backend.memory_for(snapshot, writes, fold)
    for i in range(3):  # stock BaseChatMemory.save_context -> add_messages, then prune()
        memory.save_context({"input": f"q{i}"}, {"output": f"a{i}"})
    assert asked == [(0, 6, 4)]
    assert memory.moving_summary_buffer == "S" and writes.folded
    assert writes.replace is not None and writes.replace[:2] == ("S", 1)
    assert [m.content for m in writes.replace[2]] == ["q2", "a2"]


def test_the_middleware_summary_message_is_built_by_stock() -> None:
    message = SummarizationMiddleware._build_new_messages("S")[0]
    assert isinstance(message, HumanMessage)
    assert message.additional_kwargs.get("lc_source") == "summarization"


def test_a_missing_hook_fails_at_construction_naming_the_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    from compat import SummaryMemory

    monkeypatch.setattr(upstream, "_checked_classic", False)
    monkeypatch.delattr(ConversationSummaryBufferMemory, "prune")
    for backend in ("classic", "staged", "shadow"):  # each builds a classic backend
        with pytest.raises(ConfigError, match=r"\.prune.*langchain-classic==1\."):
            SummaryMemory(backend=backend, max_token_limit=100)
    monkeypatch.undo()
    upstream._checked_classic = False
    SummaryMemory(backend="classic", max_token_limit=100).close()


def test_a_missing_middleware_hook_fails_before_the_first_fold_naming_the_versions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The middleware's hooks are checked when a memory first builds its middleware (its
    first save, or ``memory.middleware``): loud, before anything is written."""
    from compat import SummaryMemory

    monkeypatch.setattr(upstream, "_checked_middleware", False)
    monkeypatch.delattr(SummarizationMiddleware, "_determine_cutoff_index")
    for first_use in ("save", "middleware"):
        memory = SummaryMemory(backend="middleware", max_token_limit=100)
        with pytest.raises(ConfigError, match=r"_determine_cutoff_index.*langchain==1\."):
            if first_use == "save":
                memory.save("t", "q", "a")
            else:
                memory.middleware  # noqa: B018
        assert memory.load("t").messages == []
        memory.close()
    monkeypatch.undo()
    upstream._checked_middleware = False
    memory = SummaryMemory(backend="middleware", max_token_limit=100)
    memory.save("t", "q", "a")
    memory.close()


def test_the_copied_remove_all_marker_is_langgraphs() -> None:
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    assert upstream.REMOVE_ALL_MESSAGES == REMOVE_ALL_MESSAGES


# langchain.agents (~1.5 s of imports) and LangChain's runnables, which a chat model or a
# prompt template brings (~1 s): a command that builds neither must not pay for them
_AGENT_MODULES = ("print(sorted(n for n in sys.modules if n.startswith('langchain.agents') or n "
                  "in ('langchain_core.runnables.base', 'langchain_core.prompts.base')))")


def _modules_after(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\n{_AGENT_MODULES}", *args],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_importing_memshift_and_a_finished_migration_do_not_import_langchain_agents(
        tmp_path: Path) -> None:
    """``langchain.agents`` costs about 1.5 s to import, LangChain's runnables about 1 s:
    ``import compat`` and a re-run of a finished migration whose threads the fingerprints
    skip import neither (a first run does: it writes checkpoints and summarizes)."""
    assert _modules_after("import compat, compat.cli, adapters") == "[]"

    legacy = sqlite3.connect(tmp_path / "legacy.db")
    legacy.execute("CREATE TABLE message_store (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                   "session_id TEXT, message TEXT)")
    for t in range(3):
        for i, kind in enumerate(("human", "ai") * 3):
            legacy.execute("INSERT INTO message_store (session_id, message) VALUES (?, ?)",
                           (f"t{t}", json.dumps({"type": kind, "data": {"content": f"m{i}"}})))
    legacy.commit()
    legacy.close()
    migrate = ("import runpy\nsys.argv = ['memshift', *sys.argv[1:]]\n"
               "try:\n    runpy.run_module('compat', run_name='__main__')\n"
               "except SystemExit as exc:\n    assert exc.code == 0, exc.code")
    argv = ["migrate", "--from", "classic", "--from-store", f"sqlite:///{tmp_path}/legacy.db",
            "--to", "middleware", "--to-store", f"sqlite:///{tmp_path}/t.db",
            "--max-tokens", "20", "--keep-tokens", "10", "--quiet"]
    assert "'langchain.agents'" in _modules_after(migrate, *argv)  # the first run writes
    assert _modules_after(migrate, *argv) == "[]"  # the re-run skips every thread


def test_stock_create_summary_called_on_its_own_summarizes_as_stock_does() -> None:
    """LangChain's tests (and users) call ``_create_summary``: it answers with a summary of the
    messages handed in, through memshift's summarizer, as stock's does with a summarizer."""
    import asyncio

    from compat import SummaryMemory

    memory = SummaryMemory(backend="middleware", policy=MemoryPolicy(max_tokens=100))
    middleware = memory.middleware
    messages = [HumanMessage("my name is Ada and I live in Lyon"), AIMessage("noted")]
    summary = middleware._create_summary(messages)
    assert "Ada" in summary and "Lyon" in summary
    assert asyncio.run(middleware._acreate_summary(messages)) == summary
    assert middleware._create_summary([]) == "No previous conversation history."  # stock's own


def test_aiosqlite_connections_run_on_a_daemon_thread(tmp_path) -> None:
    """``daemon_aiosqlite`` reaches ``aiosqlite.Connection._thread`` (as SQLAlchemy's dialect
    does): if aiosqlite renames it, this fails instead of scripts hanging at exit."""
    import asyncio

    import aiosqlite

    from adapters._upstream import daemon_aiosqlite

    async def open_and_check() -> bool:
        conn = daemon_aiosqlite(aiosqlite.connect(str(tmp_path / "d.db")))
        await conn
        try:
            return conn._thread.daemon and conn._thread.is_alive()
        finally:
            await conn.close()

    assert asyncio.run(open_and_check())


def test_checkpoint_table_columns_are_the_installed_savers(tmp_path, pg_url) -> None:
    """``adapters.stores.checkpoint_sql`` copies rows column by column: the lists must be the
    tables the installed ``SqliteSaver`` / ``PostgresSaver`` create."""
    import sqlite3

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    from adapters.stores.checkpoint_sql import COLUMNS

    conn = sqlite3.connect(str(tmp_path / "c.db"), check_same_thread=False)
    SqliteSaver(conn).setup()
    for table, cols in COLUMNS["sqlite"]:
        found = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        assert sorted(found) == sorted(["thread_id", *cols.split(", ")]), table
    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
    with psycopg.connect(pg_url) as pg:
        for table, cols in COLUMNS["postgresql"]:
            found = [r[0] for r in pg.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                (table,))]
            assert sorted(found) == sorted(["thread_id", *cols.split(", ")]), table


def test_policy_forms_are_read_by_stocks_own_parser() -> None:
    """``MemoryPolicy(trigger=...)`` calls stock's private parser (``_upstream``): spy on it."""
    from adapters import MemoryPolicy

    calls: list[object] = []
    real = SummarizationMiddleware._normalize_trigger

    def spy(self: object, trigger: object) -> object:
        calls.append(trigger)
        return real(self, trigger)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SummarizationMiddleware, "_normalize_trigger", spy)
        policy = MemoryPolicy(trigger=[("tokens", 10), {"messages": 3, "tokens": 5}],
                              keep=("messages", 2))
    assert calls == [[("tokens", 10), {"messages": 3, "tokens": 5}]]
    assert policy.trigger_clauses == ({"tokens": 10}, {"messages": 3, "tokens": 5})
    assert upstream.validate_context_size(("fraction", 0.5), "keep") == ("fraction", 0.5)


def test_the_savers_setup_statements_memshift_prints_are_the_ones_setup_runs(tmp_path: Path) -> None:
    """``memshift schema upgrade --sql`` prints LangGraph's DDL from two hooks: the SQLite
    saver's recorded ``setup()`` and ``PostgresSaver.MIGRATIONS``. Applied by hand, the SQLite
    statements leave ``setup()`` nothing to change; the PostgreSQL list starts with the table
    that records its own versions."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    statements = upstream.sqlite_saver_setup_sql()
    assert any("CREATE TABLE IF NOT EXISTS checkpoints" in s for s in statements)
    by_hand = sqlite3.connect(tmp_path / "hand.db")
    by_hand.executescript(";\n".join(s for s in statements if not s.startswith("ALTER")))
    schema = by_hand.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    SqliteSaver(by_hand).setup()
    assert by_hand.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == schema
    migrations = upstream.postgres_saver_migrations()
    assert "checkpoint_migrations" in migrations[0] and len(migrations) >= 10


def test_the_otel_api_stand_ins_memshift_recognises_are_the_installed_ones() -> None:
    """Before an application installs an SDK the API hands out proxies: memshift knows
    them by class (the meter's is private) and records nothing then."""
    from opentelemetry import metrics, trace
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    from adapters._upstream import otel_sdk_installed

    assert isinstance(metrics.get_meter_provider(), _ProxyMeterProvider)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert otel_sdk_installed() is False


def test_a_run_carries_its_checkpointer_where_memshift_reads_it() -> None:
    """``run_checkpointer`` reads Pregel's ``CONFIG_KEY_CHECKPOINTER`` from the run's config:
    inside a node of a graph compiled with a saver it is that saver, outside a run ``None``
    (if LangGraph moves it, runs on ``memory.checkpointer`` would record turns twice)."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        n: int

    seen: list = []

    def node(state: State) -> State:
        seen.append(upstream.run_checkpointer())
        return {"n": state["n"] + 1}

    saver = InMemorySaver()
    graph = StateGraph(State).add_node("node", node).add_edge(START, "node") \
        .add_edge("node", END).compile(checkpointer=saver)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert seen == [saver]
    assert upstream.run_checkpointer() is None


def test_the_one_statement_sqlite_read_answers_what_get_tuple_answers(tmp_path: Path) -> None:
    """``sqlite_get_tuple_with`` is ``SqliteSaver.get_tuple`` (its SQL and deserialization)
    in one statement: the latest checkpoint, one by id, pending writes in their order, a
    missing thread, and the extra rows it reads in the same statement."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "c.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    config: dict = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ids = []
    for step in range(3):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [f"m{step}"]}
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {})
        saver.put_writes(config, [("messages", f"w{step}"), ("other", {"x": step})], "task-b")
        saver.put_writes(config, [("messages", f"v{step}")], "task-a")
        ids.append(config["configurable"]["checkpoint_id"])
    extra = "SELECT 'a', 2, 3.5, NULL, x'00', 'f' WHERE ? = 't'"
    for asked in ({"configurable": {"thread_id": "t"}},
                  {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": ids[1]}},
                  {"configurable": {"thread_id": "none"}}):
        found, rows = upstream.sqlite_get_tuple_with(conn, asked, extra, ("t",))
        assert found == saver.get_tuple(asked)
        assert rows == [("a", 2, 3.5, None, b"\x00", "f")]
    conn.close()


def _pg_checkpoints(saver: Any) -> list[str]:
    """Three checkpoints with blobs, primitives and pending writes; the third of format 3
    with a parent whose pending sends ``get_tuple`` migrates."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.constants import TASKS

    config: dict = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ids = []
    for step in range(3):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [f"m{step}"], "count": step}
        checkpoint["channel_versions"] = {"messages": f"{step + 1}", "count": f"{step + 1}"}
        checkpoint["v"] = 3 if step == 2 else 4
        config = saver.put(config, checkpoint, {"source": "loop", "step": step},
                           {"messages": f"{step + 1}", "count": f"{step + 1}"})
        saver.put_writes(config, [("messages", f"w{step}"), ("other", {"x": step})], "task-b")
        saver.put_writes(config, [(TASKS, f"send{step}")], "task-a")
        ids.append(config["configurable"]["checkpoint_id"])
    return ids


def test_the_one_statement_postgres_read_answers_what_get_tuple_answers(pg_url: str) -> None:
    """``postgres_get_tuple_with`` is ``PostgresSaver.get_tuple`` (its SQL and
    deserialization, the pending sends of a format-3 checkpoint) in one statement beside
    another query's row: the latest checkpoint, one by id, a missing thread."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_url) as saver, \
            psycopg.connect(pg_url, autocommit=True) as conn:
        saver.setup()
        ids = _pg_checkpoints(saver)
        cursor = psycopg.ClientCursor(conn)  # the text protocol, as memshift's batch sends
        sent: list[str] = []

        def run(sql: str, params: Any) -> list:
            sent.append(sql)
            return cursor.execute(sql, params).fetchall()
        also = "SELECT 'a' AS x, 2 AS y WHERE %(who)s = 't'"
        for asked, extra in (
                ({"configurable": {"thread_id": "t"}}, ("a", 2)),
                ({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                   "checkpoint_id": ids[1]}}, ("a", 2)),
                ({"configurable": {"thread_id": "none"}}, ("a", 2))):
            sent.clear()
            found, row = upstream.postgres_get_tuple_with(run, asked, also, {"who": "t"})
            assert found == saver.get_tuple(asked)
            assert row == extra
            assert len(sent) == (2 if asked["configurable"]["thread_id"] == "t"
                                 and "checkpoint_id" not in asked["configurable"] else 1)
        found, row = upstream.postgres_get_tuple_with(run, {"configurable": {"thread_id": "t"}},
                                                      also, {"who": "other"})
        assert row == (None, None) and found is not None
        assert found.pending_writes and found.checkpoint["channel_values"]["count"] == 2


def test_the_put_statements_are_the_ones_put_sends(pg_url: str, monkeypatch: Any) -> None:
    """``postgres_put_statements`` gives what ``PostgresSaver.put`` returns and the very
    statements it sends (spied on psycopg's cursor), and sent they store what ``put`` does."""
    import psycopg
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.types.json import Jsonb

    def plain(params: Any) -> Any:
        return tuple(p.obj if isinstance(p, Jsonb) else p for p in params)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": ["m"], "count": 1, "none": None}
    args = ({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint,
            {"source": "input", "step": -1}, {"messages": "1", "count": "1", "none": "1"})
    stored, statements = upstream.postgres_put_statements(*args)
    assert [sql for sql, _ in statements].count(PostgresSaver.UPSERT_CHECKPOINTS_SQL) == 1
    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
        seen: list[tuple[str, Any]] = []
        with monkeypatch.context() as patch:
            real, many = psycopg.Cursor.execute, psycopg.Cursor.executemany

            def execute(self: Any, sql: Any, params: Any = None, **kw: Any) -> Any:
                seen.append((sql, plain(params or ())))
                return real(self, sql, params, **kw)

            def executemany(self: Any, sql: Any, rows: Any, **kw: Any) -> Any:
                rows = list(rows)
                seen.extend((sql, plain(r)) for r in rows)
                return many(self, sql, rows, **kw)
            patch.setattr(psycopg.Cursor, "execute", execute)
            patch.setattr(psycopg.Cursor, "executemany", executemany)
            assert saver.put(*args) == stored
        assert [(sql, plain(p)) for sql, p in statements] == seen
        expected = saver.get_tuple(stored)
        saver.delete_thread("t")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            cursor = psycopg.ClientCursor(conn)
            cursor.execute("; ".join(cursor.mogrify(sql, p) for sql, p in statements))
        assert saver.get_tuple(stored) == expected
