"""What one ``create_agent`` turn costs the database: memshift's ``memory.checkpointer`` +
``memory.middleware`` against stock ``SummarizationMiddleware`` on LangGraph's own saver of the
same kind of store, counted in the same run.

Both agents get the same offline chat model (it answers at once) and the same deterministic
summarizer; the policy folds rarely (the steady state: a fold every ~12 turns on both sides).
After a warm-up on one thread, every later turn is counted:

statements
  what the drivers send (``_variants.Statements``: sqlite3's trace; psycopg's statements, each
  row of an ``executemany``, every statement of a memshift batch)
transactions
  SQLite: the ``BEGIN`` statements in the trace (a read outside one is sqlite3's autocommit).
  PostgreSQL: the server's own count (``pg_stat_database.xact_commit + xact_rollback``, so an
  autocommit statement or pipeline is one, as the server sees it): the same turns are run
  twice, with and without the counted ones, each on a fresh database whose connections are
  closed before the count is read, and the difference is taken
round trips
  PostgreSQL only (``_variants.Statements.trips``; a pipeline is one)

A third row runs ``memory.middleware`` on LangGraph's own saver (no placement, no retention):
the difference to the memshift row is what ``memory.checkpointer`` adds, the difference to
stock is what memshift's middleware adds (on a saver that is not ``memory.checkpointer``, the
transcript written after the model call, in a transaction of its own; it adds no node).

    python benchmarks/bench_agent_turn.py [--turns 20] [--pg postgresql://...]

``--pg`` (or ``MEMSHIFT_BENCH_PG_DSN``) names a server where the script may create and drop
databases; without it PostgreSQL is skipped.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from _variants import Statements, postgres_saver  # noqa: E402
from bench_storage import drop_pg_db, new_pg_db  # noqa: E402

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel  # noqa: E402

warnings.filterwarnings("ignore")

MAX_TOKENS, KEEP_TOKENS = 600, 300  # ~50 tokens a turn: a fold every ~6 turns past the first
WARMUP = 5
BARE = "memshift middleware, stock saver"
WORDS = 18


class Instant(GenericFakeChatModel):
    """Answers at once, accepts tools (``create_agent`` binds none here)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Instant:
        return self


def answers() -> Any:
    return iter([AIMessage(f"answer {i} " + "word " * WORDS) for i in range(10_000)])


def question(i: int) -> HumanMessage:
    return HumanMessage(f"question {i} " + "word " * WORDS)


Turn = Callable[[int], None]


def stock_saver(url: str, name: str = "") -> tuple[Any, Callable[[], None]]:
    """LangGraph's own saver on the store (``name``: another SQLite file beside it)."""
    if url.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = url.removeprefix("sqlite:///")
        conn = sqlite3.connect(path.replace(".db", f"{name}.db"), check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # as memshift's store: the same durability
        saver: Any = SqliteSaver(conn)
        saver.setup()
        return saver, conn.close
    return postgres_saver(url)


def stock(url: str) -> tuple[Turn, Callable[[], None]]:
    """``create_agent`` + ``SummarizationMiddleware`` on ``SqliteSaver`` / ``PostgresSaver``."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    saver, close = stock_saver(url)
    middleware = SummarizationMiddleware(
        SummarizerChatModel(summarizer=DeterministicSummarizer()),
        trigger=("tokens", MAX_TOKENS), keep=("tokens", KEEP_TOKENS))
    agent = create_agent(Instant(messages=answers()), middleware=[middleware],
                         checkpointer=saver)
    return _turn(agent), close


def memshift(url: str) -> tuple[Turn, Callable[[], None]]:
    """``create_agent(model, middleware=[memory.middleware], checkpointer=memory.checkpointer)``."""
    from langchain.agents import create_agent

    memory = _memory(url)
    agent = create_agent(Instant(messages=answers()), middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    return _turn(agent), memory.close


def memshift_bare_saver(url: str) -> tuple[Turn, Callable[[], None]]:
    """``memory.middleware`` on LangGraph's own saver (no placement, no retention): what
    memshift's middleware costs by itself, to tell it from what its checkpointer adds."""
    from langchain.agents import create_agent

    memory = _memory(url)
    saver, close = stock_saver(url, "-checkpoints")
    agent = create_agent(Instant(messages=answers()), middleware=[memory.middleware],
                         checkpointer=saver)

    def both() -> None:
        memory.close()
        close()
    return _turn(agent), both


def _memory(url: str) -> Any:
    from compat import SummaryMemory

    return SummaryMemory(backend="middleware", store=url, summarizer=DeterministicSummarizer(),
                         policy=MemoryPolicy(max_tokens=MAX_TOKENS, keep_tokens=KEEP_TOKENS))


def _turn(agent: Any) -> Turn:
    config = {"configurable": {"thread_id": "bench-thread"}}

    def turn(i: int) -> None:
        agent.invoke({"messages": [question(i)]}, config)
    return turn


class Counted(Statements):
    """``Statements`` that also counts SQLite's ``BEGIN``s (transactions)."""

    begins = 0

    def _one(self, statement: str) -> None:
        super()._one(statement)
        if statement.lstrip()[:5].upper() == "BEGIN":
            self.begins += 1


@dataclass
class Figures:
    statements: float
    transactions: float
    trips: float | None


def sqlite_turn(make: Callable[[str], tuple[Turn, Callable[[], None]]], turns: int) -> Figures:
    with tempfile.TemporaryDirectory() as tmp, Counted() as counter:
        turn, close = make(f"sqlite:///{tmp}/bench.db")  # connections opened inside the counter
        for i in range(WARMUP):
            turn(i)
        counter.n = counter.begins = 0
        for i in range(WARMUP, WARMUP + turns):
            turn(i)
        figures = Figures(counter.n / turns, counter.begins / turns, None)
        close()
    return figures


def _pg_transactions(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


def _pg_run(dsn: str, make: Callable[[str], tuple[Turn, Callable[[], None]]], counted: int,
            counter: Statements | None = None) -> int:
    """Transactions the server counted for setup + warm-up + ``counted`` turns (fresh
    database; every connection closed, so every backend has reported, before reading)."""
    url = new_pg_db(dsn)
    try:
        turn, close = make(url)
        for i in range(WARMUP):
            turn(i)
        if counter is not None:
            counter.n = counter.trips = 0
        for i in range(WARMUP, WARMUP + counted):
            turn(i)
        if counter is not None:
            counter.result = (counter.n, counter.trips)  # type: ignore[attr-defined]
        close()
        time.sleep(1.0)  # a backend reports its statistics as it exits
        return _pg_transactions(url)
    finally:
        drop_pg_db(dsn, url)


def pg_turn(dsn: str, make: Callable[[str], tuple[Turn, Callable[[], None]]],
            turns: int) -> Figures:
    base = _pg_run(dsn, make, 0)
    with Statements() as counter:
        total = _pg_run(dsn, make, turns, counter)
    n, trips = counter.result  # type: ignore[attr-defined]
    return Figures(n / turns, (total - base) / turns, trips / turns)


def table(store: str, rows: dict[str, Figures]) -> None:
    ref = rows["stock"]
    print(f"\n{store}: one create_agent turn (steady state, rare folds)")
    print(f"{'':<34}{'statements':>11}{'transactions':>14}{'round trips':>13}"
          f"{'stmts/stock':>13}{'tx - stock':>12}")
    for name, f in rows.items():
        trips = f"{f.trips:.1f}" if f.trips is not None else "-"
        print(f"{name:<34}{f.statements:>11.1f}{f.transactions:>14.1f}{trips:>13}"
              f"{f.statements / ref.statements:>12.2f}x{f.transactions - ref.transactions:>+12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--pg", default=os.environ.get("MEMSHIFT_BENCH_PG_DSN"))
    args = parser.parse_args()
    table("SQLite", {"stock": sqlite_turn(stock, args.turns),
                     "memshift": sqlite_turn(memshift, args.turns),
                     BARE: sqlite_turn(memshift_bare_saver, args.turns)})
    if args.pg:
        table("PostgreSQL", {"stock": pg_turn(args.pg, stock, args.turns),
                             "memshift": pg_turn(args.pg, memshift, args.turns),
                             BARE: pg_turn(args.pg, memshift_bare_saver, args.turns)})
    else:
        print("\nPostgreSQL: skipped (pass --pg DSN or set MEMSHIFT_BENCH_PG_DSN)")


if __name__ == "__main__":
    main()
