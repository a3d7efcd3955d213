"""save+load per second and statements per save+load, as ratios measured in one run.

Variants, each on a fresh database, same deterministic summarizer and counter, rare folds:
- memshift classic / memshift middleware (``SummaryMemory``);
- stock classic: ``ConversationSummaryBufferMemory`` over ``SQLChatMessageHistory``;
- stock middleware: ``SummarizationMiddleware`` in a one-node graph on ``SqliteSaver`` /
  ``PostgresSaver`` (``invoke`` per save, ``get_state`` per load);
- raw driver: one insert of the turn + one select of the newest 20 rows.
Both SQLite sides use ``synchronous=NORMAL`` and WAL. Statements are counted on the client
(sqlite3 trace callback; psycopg ``execute``/``executemany`` + commits) at steady state.

    python benchmarks/bench_throughput.py [--turns 30] [--threads 1 8 32]
    MEMSHIFT_BENCH_PG_DSN=postgresql://... adds PostgreSQL
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from bench_storage import drop_pg_db, new_pg_db, stock_graph  # noqa: E402

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel, count_tokens_cjk  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402

POLICY = MemoryPolicy(max_tokens=100_000)  # rare folds: the save/load path itself
Op = Callable[[str, int], None]  # (thread, turn index) -> one save + one load


def memshift(backend: str, url: str) -> tuple[Op, Callable[[], None]]:
    memory = SummaryMemory(backend=backend, store=url, policy=POLICY,
                           summarizer=DeterministicSummarizer())

    def op(thread: str, i: int) -> None:
        memory.save(thread, *filler_turn(thread, i, 12))
        memory.load(thread)
    return op, memory.close


def stock_classic(url: str) -> tuple[Op, Callable[[], None]]:
    from langchain_classic.memory import ConversationSummaryBufferMemory
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from sqlalchemy import create_engine

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    llm = SummarizerChatModel(summarizer=DeterministicSummarizer(), token_counter=count_tokens_cjk)

    def op(thread: str, i: int) -> None:
        memory = ConversationSummaryBufferMemory(
            llm=llm, max_token_limit=POLICY.max_tokens, chat_memory=SQLChatMessageHistory(
                session_id=thread, connection=engine))
        human, ai = filler_turn(thread, i, 12)
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({})
    return op, engine.dispose


def stock_middleware(url: str) -> tuple[Op, Callable[[], None]]:
    if url.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        saver: Any = SqliteSaver(conn)
        close = conn.close
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(url, max_size=8, kwargs={"autocommit": True, "prepare_threshold": 0,
                                                       "row_factory": dict_row})
        saver = PostgresSaver(pool)  # type: ignore[arg-type]
        close = pool.close
    saver.setup()
    graph = stock_graph(saver)

    def op(thread: str, i: int) -> None:
        config = {"configurable": {"thread_id": thread}}
        human, ai = filler_turn(thread, i, 12)
        graph.invoke({"messages": [("user", human), ("ai", ai)]}, config)
        graph.get_state(config)
    return op, close


def raw(url: str) -> tuple[Op, Callable[[], None]]:
    if url.startswith("sqlite"):
        local = threading.local()
        path = url.removeprefix("sqlite:///")

        def conn() -> Any:
            if not hasattr(local, "conn"):
                local.conn = sqlite3.connect(path, isolation_level=None)
                local.conn.execute("PRAGMA journal_mode=WAL")
                local.conn.execute("PRAGMA synchronous=NORMAL")
                local.conn.execute("CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, "
                                   "thread TEXT, message TEXT)")
            return local.conn

        def op(thread: str, i: int) -> None:
            c = conn()
            human, ai = filler_turn(thread, i, 12)
            c.execute("INSERT INTO raw (thread, message) VALUES (?, ?), (?, ?)", (thread, human, thread, ai))
            c.execute("SELECT message FROM raw WHERE thread = ? ORDER BY id DESC LIMIT 20", (thread,)).fetchall()
        return op, lambda: None
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, max_size=8, kwargs={"autocommit": True})
    with pool.connection() as c:
        c.execute("CREATE TABLE IF NOT EXISTS raw (id bigserial PRIMARY KEY, thread text, message text)")
        c.execute("CREATE INDEX IF NOT EXISTS raw_thread ON raw (thread, id)")

    def pg_op(thread: str, i: int) -> None:
        human, ai = filler_turn(thread, i, 12)
        with pool.connection() as c:
            c.execute("INSERT INTO raw (thread, message) VALUES (%s, %s), (%s, %s)", (thread, human, thread, ai))
            c.execute("SELECT message FROM raw WHERE thread = %s ORDER BY id DESC LIMIT 20", (thread,)).fetchall()
    return pg_op, pool.close


def rate(op: Op, threads: int, turns: int) -> float:
    """save+load per second with ``threads`` workers, each on its own conversation."""
    tag = uuid.uuid4().hex[:6]

    def work(w: int) -> None:
        for i in range(turns):
            op(f"{tag}-{w}", i)
    workers = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    start = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return threads * turns / (time.perf_counter() - start)


class Statements:
    """Counts statements the drivers send (sqlite3 trace; psycopg execute + commit)."""

    def __init__(self) -> None:
        self.n = 0
        self._patched: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Statements:
        import psycopg

        real_connect = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = real_connect(*args, **kwargs)
            conn.set_trace_callback(self._one)
            return conn
        self._patch(sqlite3, "connect", connect)
        self._patch(sqlite3.dbapi2, "connect", connect)
        for cls, name in ((psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany"),
                          (psycopg.Connection, "commit")):
            real = getattr(cls, name)
            self._patch(cls, name, self._counting(real))
        return self

    def _one(self, _statement: str) -> None:
        self.n += 1

    def _counting(self, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return real(*args, **kwargs)
        return wrapper

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def __exit__(self, *exc: object) -> None:
        for owner, name, value in reversed(self._patched):
            setattr(owner, name, value)


def statements_per_op(make: Callable[[str], tuple[Op, Callable[[], None]]], url: str) -> float:
    """Steady state: warm up one thread, then count 10 save+loads (connections opened
    inside the counter, so sqlite3's trace sees them)."""
    with Statements() as counter:
        op, close = make(url)
        for i in range(5):
            op("warm", i)
        counter.n = 0
        for i in range(5, 15):
            op("warm", i)
        close()
        return counter.n / 10


VARIANTS: dict[str, Callable[[str], tuple[Op, Callable[[], None]]]] = {
    "memshift classic": lambda url: memshift("classic", url),
    "memshift middleware": lambda url: memshift("middleware", url),
    "stock classic (SQLChatMessageHistory)": stock_classic,
    "stock middleware + saver": stock_middleware,
    "raw driver (insert + select)": raw,
}


def bench(kind: str, fresh: Callable[[], tuple[str, Callable[[], None]]], threads: list[int],
          turns: int) -> None:
    print(f"\n{kind}: save+load per second ({turns} turns per worker), statements per save+load")
    print(f"{'variant':<40}{'stmts':>7}" + "".join(f"{n:>9}" for n in threads))
    results: dict[str, list[float]] = {}
    for name, make in VARIANTS.items():
        url, drop = fresh()
        try:
            stmts = statements_per_op(make, url)
            op, close = make(url)
            results[name] = [rate(op, n, turns) for n in threads]
            close()
        finally:
            drop()
        print(f"{name:<40}{stmts:>7.1f}" + "".join(f"{r:>9.1f}" for r in results[name]))
    for ours, theirs in (("memshift classic", "stock classic (SQLChatMessageHistory)"),
                         ("memshift middleware", "stock middleware + saver"),
                         ("memshift classic", "raw driver (insert + select)")):
        ratios = [a / b for a, b in zip(results[ours], results[theirs], strict=True)]
        print(f"ratio {ours} / {theirs.split(' (')[0]:<28}" + "".join(f"{r:>9.2f}" for r in ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memshift-bench-"))

    def fresh_sqlite() -> tuple[str, Callable[[], None]]:
        return f"sqlite:///{tmp}/{uuid.uuid4().hex[:8]}.db", lambda: None
    bench("SQLite", fresh_sqlite, args.threads, args.turns)
    dsn = os.environ.get("MEMSHIFT_BENCH_PG_DSN")
    if dsn:
        def fresh_pg() -> tuple[str, Callable[[], None]]:
            url = new_pg_db(dsn)
            return url, lambda: drop_pg_db(dsn, url)
        bench("PostgreSQL", fresh_pg, args.threads, args.turns)
    else:
        print("\n(no PostgreSQL: set MEMSHIFT_BENCH_PG_DSN)")


if __name__ == "__main__":
    main()
