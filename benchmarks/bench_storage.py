"""Per-thread storage and PostgreSQL throughput, each against a baseline in the same run.

Part 1 (storage): one thread, N turns, middleware backend with retention vs the stock
setup (SqliteSaver / InMemorySaver / PostgresSaver + stock SummarizationMiddleware, no
retention). Prints checkpoints and bytes per thread, and the ratio.
Part 2 (throughput, needs PostgreSQL): save+load per second with 1, 8 and 32 concurrent
conversation threads, vs a raw psycopg insert+select loop (the practical limit).

    MEMSHIFT_BENCH_PG_DSN=postgresql://... python benchmarks/bench_storage.py [--turns 100 1000]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sqlite3
import sys
import tempfile
import uuid
import warnings
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from _variants import WORKLOADS, run_workers, stock_graph  # noqa: E402

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel, count_tokens_cjk  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402
from compat import admin  # noqa: E402

POLICY = MemoryPolicy(max_tokens=400, keep_tokens=200)


def sqlite_bytes(path: str) -> int:
    """Bytes of checkpoint data (checkpoints + writes rows), not the file's free pages."""
    conn = sqlite3.connect(path)
    try:
        a = conn.execute("SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) "
                         "FROM checkpoints").fetchone()[0]
        b = conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()[0]
        return a + b
    finally:
        conn.close()


def pg_bytes(dsn: str) -> int:
    """Bytes of live checkpoint rows (dead tuples are autovacuum's, not retention's)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        queries = (
            "SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) "
            "FROM checkpoints",
            "SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs",
            "SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes",
        )
        return sum(conn.execute(q).fetchone()[0] for q in queries)


def new_pg_db(dsn: str) -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlsplit(dsn)._replace(path=f"/{name}").geturl()


def drop_pg_db(dsn: str, url: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{urlsplit(url).path[1:]}" WITH (FORCE)')


def storage(kind: str, turns: int, pg_dsn: str | None) -> tuple[tuple[int, int], tuple[int, int]]:
    """((checkpoints, bytes) memshift, (checkpoints, bytes) stock) for one thread."""
    results = []
    for variant in ("memshift", "stock"):
        tmp = tempfile.mkdtemp()
        url = {"memory": "memory", "sqlite": f"sqlite:///{tmp}/{variant}.db"}.get(kind) or new_pg_db(pg_dsn)
        cfg = {"configurable": {"thread_id": "t"}}
        if variant == "memshift":
            memory = SummaryMemory(backend="middleware", store=url, policy=POLICY)
            for i in range(turns):
                memory.save("t", *filler_turn("t", i, 30))
            saver = memory.checkpointer
        else:
            if kind == "memory":
                from langgraph.checkpoint.memory import InMemorySaver
                saver = InMemorySaver()
            elif kind == "sqlite":
                from langgraph.checkpoint.sqlite import SqliteSaver
                saver = SqliteSaver(sqlite3.connect(f"{tmp}/stock.db", check_same_thread=False))
            else:
                from langgraph.checkpoint.postgres import PostgresSaver
                from psycopg import Connection
                from psycopg.rows import dict_row
                conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
                saver = PostgresSaver(conn)
                saver.setup()
            graph = stock_graph(saver, WORKLOADS["folding"])  # trigger 400, keep 200
            for i in range(turns):
                human, ai = filler_turn("t", i, 30)
                from langchain_core.messages import AIMessage, HumanMessage
                graph.invoke({"messages": [HumanMessage(human), AIMessage(ai)]}, cfg)
        count = len(list(saver.list(cfg)))
        if kind == "memory":
            size = len(pickle.dumps((dict(saver.storage), dict(saver.writes), dict(saver.blobs))))
        elif kind == "sqlite":
            size = sqlite_bytes(url.removeprefix("sqlite:///") if variant == "memshift" else f"{tmp}/stock.db")
        else:
            size = pg_bytes(url)
            if variant == "memshift":
                memory.close()
            drop_pg_db(pg_dsn, url)
        results.append((count, size))
    return results[0], results[1]


def classic_persistence(turns: int = 40) -> None:
    """Stock ConversationSummaryBufferMemory on a SQL history vs memshift's classic backend."""
    from langchain_classic.memory import ConversationSummaryBufferMemory
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    tmp = tempfile.mkdtemp()
    summarizer = DeterministicSummarizer()
    llm = SummarizerChatModel(summarizer=summarizer, token_counter=count_tokens_cjk)
    calls = {"stock": 0, "memshift": 0}
    prompt_chars = {"stock": 0, "memshift": 0}

    class Stock(ConversationSummaryBufferMemory):
        def predict_new_summary(self, messages, existing_summary):
            calls["stock"] += 1
            prompt_chars["stock"] += sum(len(str(m.content)) for m in messages)
            return summarizer.summarize(existing_summary, messages)

    history = SQLChatMessageHistory(session_id="t", connection=f"sqlite:///{tmp}/stock.db")
    stock = Stock(llm=llm, chat_memory=history, max_token_limit=200, return_messages=True)

    class Counting:
        def summarize(self, summary, messages):
            calls["memshift"] += 1
            prompt_chars["memshift"] += sum(len(str(m.content)) for m in messages)
            return summarizer.summarize(summary, messages)

    ours = SummaryMemory(backend="classic", store=f"sqlite:///{tmp}/ours.db", summarizer=Counting(),
                         policy=MemoryPolicy(max_tokens=200))
    for i in range(turns):
        human, ai = filler_turn("t", i, 30)
        stock.save_context({"input": human}, {"output": ai})
        ours.save("t", human, ai)
    stock_loaded = stock.load_memory_variables({})["history"]
    restarted = Stock(llm=llm, chat_memory=SQLChatMessageHistory(
        session_id="t", connection=f"sqlite:///{tmp}/stock.db"), max_token_limit=200)
    print(f"\nclassic on a SQL history, {turns} turns, limit 200 tokens: stock vs memshift")
    print(f"{'':<34}{'stock':>10}{'memshift':>10}")
    print(f"{'messages stored in the window':<34}{len(history.messages):>10}{len(ours.load('t').messages):>10}")
    print(f"{'tokens returned by load':<34}{count_tokens_cjk(stock_loaded):>10}"
          f"{count_tokens_cjk(ours.load('t').as_messages()):>10}")
    print(f"{'summarizer calls':<34}{calls['stock']:>10}{calls['memshift']:>10}")
    print(f"{'chars sent to the summarizer':<34}{prompt_chars['stock']:>10}{prompt_chars['memshift']:>10}")
    print(f"{'summary after a restart (chars)':<34}{len(restarted.moving_summary_buffer):>10}"
          f"{len(admin.reopen(ours).load('t').summary):>10}")


def throughput(dsn: str, workers: int, turns: int) -> tuple[float, float]:
    """(memshift ops/s, raw psycopg ops/s); one op = one save + one load."""
    import psycopg

    url = new_pg_db(dsn)
    memory = SummaryMemory(backend="classic", store=url, policy=POLICY)

    def run(fn) -> float:
        return workers * turns / run_workers(fn, workers)

    def ours(w: int) -> None:
        for i in range(turns):
            memory.save(f"w{w}", *filler_turn(f"w{w}", i, 30))
            memory.load(f"w{w}")

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE raw (id bigserial PRIMARY KEY, thread text, message text)")
        conn.execute("CREATE INDEX ON raw (thread, id)")

    def raw(w: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(turns):
                human, ai = filler_turn(f"w{w}", i, 30)
                with conn.transaction():
                    conn.execute("INSERT INTO raw (thread, message) VALUES (%s, %s), (%s, %s)",
                                 (f"w{w}", human, f"w{w}", ai))
                conn.execute("SELECT message FROM raw WHERE thread = %s ORDER BY id DESC LIMIT 20",
                             (f"w{w}",)).fetchall()

    try:
        return run(ours), run(raw)
    finally:
        memory.close()
        drop_pg_db(dsn, url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--throughput-turns", type=int, default=20)
    args = parser.parse_args()
    dsn = os.environ.get("MEMSHIFT_BENCH_PG_DSN") or os.environ.get("MEMSHIFT_TEST_PG_DSN")
    kinds = ["memory", "sqlite"] + (["postgres"] if dsn else [])
    print("per-thread checkpoint storage, middleware backend: memshift (retention) vs stock saver")
    print("(bytes: checkpoint data only; memshift also keeps the append-only transcript, linear by design)")
    print(f"{'store':<9}{'turns':>6}{'ckpts':>8}{'stock':>8}{'bytes':>12}{'stock':>12}{'ratio':>8}")
    for kind in kinds:
        for turns in args.turns:
            (c1, b1), (c2, b2) = storage(kind, turns, dsn)
            print(f"{kind:<9}{turns:>6}{c1:>8}{c2:>8}{b1:>12}{b2:>12}{b1 / b2:>8.2f}")
    classic_persistence()
    if not dsn:
        print("\n(no PostgreSQL: set MEMSHIFT_BENCH_PG_DSN for the throughput part)")
        return
    print("\nPostgreSQL save+load per second (classic backend) vs raw psycopg insert+select")
    print(f"{'workers':>8}{'memshift':>11}{'raw':>9}{'ratio':>8}")
    for workers in (1, 8, 32):
        ours, raw = throughput(dsn, workers, args.throughput_turns)
        print(f"{workers:>8}{ours:>11.1f}{raw:>9.1f}{ours / raw:>8.2f}")


if __name__ == "__main__":
    main()
