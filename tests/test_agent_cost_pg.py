"""Issue 38 item 3 on PostgreSQL: one ``create_agent`` turn on ``memory.checkpointer`` with
``memory.middleware`` against stock ``SummarizationMiddleware`` on a stock ``PostgresSaver``,
measured in the same run (``tests/test_agent_claim.py`` measures SQLite).

Counted in psycopg, on every connection both sides open: each SQL statement sent (a row of an
``executemany`` is one, as sqlite3's trace counts it; a message of several statements — how
memshift's batch sends ``BEGIN; lock; …; COMMIT`` — counts each), and each transaction: an
explicit ``BEGIN``, or outside one a pipeline's sync point with statements behind it (how
``PostgresSaver`` writes atomically on its autocommit connections) or a message of several
statements (PostgreSQL runs one as an implicit transaction: how memshift sends a checkpoint
with what commits with it). Round trips are what the turn waits for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware

from adapters import DeterministicSummarizer, SummarizerChatModel
from compat import SummaryMemory
from tests.test_agent_claim import POLICY, TURNS, WARMUP, ask, model

# one statement of a simple-protocol message: quoted text and identifiers may hold ";"
_STATEMENT = re.compile(r"""(?:'(?:[^']|'')*'|"(?:[^"]|"")*"|[^;'"])+""")


def statements_in(query: Any) -> list[str]:
    text = query.decode() if isinstance(query, bytes) else query
    if not isinstance(text, str):  # a psycopg.sql.Composed: one statement
        return ["?"]
    return [s.strip() for s in _STATEMENT.findall(text) if s.strip()]


class Count:
    """Statements, transactions and round trips of every psycopg connection while active."""

    def __init__(self) -> None:
        self.statements = self.transactions = self.trips = 0
        self.piped: dict[int, int] = {}  # connection -> statements queued since its last sync
        self.open: set[int] = set()  # connections inside an explicit transaction

    def sent(self, conn: Any, texts: list[str], *, trip: bool = True) -> None:
        self.statements += len(texts)
        self.trips += int(trip)
        if trip and len(texts) > 1 and id(conn) not in self.open and \
                texts[0].split(None, 1)[0].upper() != "BEGIN":
            self.transactions += 1  # one message of several statements: one transaction
        for text in texts:
            word = text.split(None, 1)[0].upper() if text.split() else ""
            if word == "BEGIN":
                self.transactions += 1
                self.open.add(id(conn))
            elif word in ("COMMIT", "ROLLBACK"):
                self.open.discard(id(conn))

    def reset(self) -> None:
        self.statements = self.transactions = self.trips = 0
        self.piped.clear()


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Count]:
    count = Count()

    def piped(cursor: Any) -> bool:
        return cursor.connection._pipeline is not None  # noqa: SLF001 - measurement only

    def execute(real: Any) -> Any:
        def run(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            texts = statements_in(query)
            if piped(self):
                key = id(self.connection)
                count.piped[key] = count.piped.get(key, 0) + len(texts)
            count.sent(self.connection, texts, trip=not piped(self))
            return real(self, query, *args, **kwargs)
        return run

    def executemany(real: Any) -> Any:
        def run(self: Any, query: Any, params_seq: Any, *args: Any, **kwargs: Any) -> Any:
            rows = list(params_seq)
            texts = statements_in(query) * len(rows)
            if piped(self):
                key = id(self.connection)
                count.piped[key] = count.piped.get(key, 0) + len(texts)
            count.sent(self.connection, texts, trip=not piped(self))
            return real(self, query, rows, *args, **kwargs)
        return run

    def command(real: Any) -> Any:  # BEGIN / COMMIT / ROLLBACK psycopg sends itself
        def run(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            count.sent(self, statements_in(command), trip=self._pipeline is None)  # noqa: SLF001
            return real(self, command, *args, **kwargs)
        return run

    def sync(real: Any) -> Any:  # a pipeline's sync point: what was queued commits together
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            key = id(self._conn)  # noqa: SLF001 - measurement only
            if count.piped.pop(key, 0):
                count.trips += 1
                count.transactions += int(key not in count.open)
            return real(self, *args, **kwargs)
        return run

    with monkeypatch.context() as patch:
        for cls in (psycopg.Cursor, psycopg.AsyncCursor):
            patch.setattr(cls, "execute", execute(cls.execute))
            patch.setattr(cls, "executemany", executemany(cls.executemany))
        from psycopg._connection_base import BaseConnection

        patch.setattr(BaseConnection, "_exec_command", command(BaseConnection._exec_command))  # noqa: SLF001
        from psycopg._pipeline_base import BasePipeline

        patch.setattr(BasePipeline, "_enqueue_sync", sync(BasePipeline._enqueue_sync))  # noqa: SLF001
        yield count


def per_turn(count: Count, agent: Any) -> tuple[float, float, float]:
    for i in range(WARMUP):
        ask(agent, i)
    count.reset()
    for i in range(WARMUP, WARMUP + TURNS):
        ask(agent, i)
    return count.statements / TURNS, count.transactions / TURNS, count.trips / TURNS


def stock_turn(monkeypatch: pytest.MonkeyPatch, url: str) -> tuple[float, float, float]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with counted(monkeypatch) as count, PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        middleware = SummarizationMiddleware(
            SummarizerChatModel(summarizer=DeterministicSummarizer()),
            trigger=("tokens", POLICY.max_tokens), keep=("tokens", POLICY.keep_tokens))
        agent = create_agent(model(), middleware=[middleware], checkpointer=saver)
        return per_turn(count, agent)


def memshift_turn(monkeypatch: pytest.MonkeyPatch, url: str) -> tuple[float, float, float]:
    with counted(monkeypatch) as count:
        memory = SummaryMemory(backend="middleware", store=url, policy=POLICY,
                               summarizer=DeterministicSummarizer())
        agent = create_agent(model(), middleware=[memory.middleware],
                             checkpointer=memory.checkpointer)
        try:
            return per_turn(count, agent)
        finally:
            memory.close()


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch, fresh_store: Callable[[str], str]
             ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """(memshift, stock) per turn: statements, transactions, round trips."""
    stock = stock_turn(monkeypatch, fresh_store("postgres"))
    return memshift_turn(monkeypatch, fresh_store("postgres")), stock


def test_an_agent_turn_on_postgres_costs_at_most_one_transaction_more(measured: Any) -> None:
    """No transaction of its own for the transcript, no node of its own (it was 10 to 7)."""
    ours, stock = measured
    assert ours[1] <= stock[1] + 1, (ours, stock)


def test_an_agent_turn_on_postgres_costs_what_stock_costs(measured: Any) -> None:
    """At most 1.25x stock's statements (15 to 12): stock's, the thread's lock and one
    statement that guards the placement and retains (the input's message), and the
    transcript's INSERT (the answer's message); the placement rides in the checkpoint read."""
    ours, stock = measured
    assert ours[0] <= 1.25 * stock[0], (ours, stock)
    assert ours[1] <= stock[1] + 1, (ours, stock)
