"""The contenders of ``bench_throughput.py``: memshift and the stock classes it replaces, on
one store URL, each as ``make(url, workload) -> (op, close)`` where ``op(thread, i)`` is one
save + one load. Every contender gets the same deterministic summarizer and counter.

Also the client-side statement counter (sqlite3 trace callback; psycopg ``execute`` /
``executemany`` / ``commit``), so statements per save+load are counted the same way for all.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langgraph.graph import END, START, MessagesState, StateGraph

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel, count_tokens_cjk
from adapters.backends.middleware import split_summary
from compat import SummaryMemory
from compat.testing.conversations import filler_turn

__all__ = ["CONTENDERS", "PAIRS", "WORKLOADS", "Statements", "Workload", "memshift",
           "paced_latencies", "pct", "postgres_saver", "run_workers", "stock_classic",
           "stock_graph"]

warnings.filterwarnings("ignore")
Op = Callable[[str, int], None]
Made = tuple[Op, Callable[[], None]]
WORDS = 12  # words per message of a filler turn: ~45 tokens per turn


@dataclass(frozen=True)
class Workload:
    """When folds happen: ``max_tokens`` triggers, ``keep_tokens`` stays (the same numbers
    for memshift's policy and the stock middleware's trigger/keep; the stock classic class
    has only ``max_token_limit``, so it folds whenever it is over, as it does in the field)."""

    key: str
    name: str
    max_tokens: int
    keep_tokens: int

    @property
    def policy(self) -> MemoryPolicy:
        return MemoryPolicy(max_tokens=self.max_tokens, keep_tokens=self.keep_tokens)


WORKLOADS = {
    "rare": Workload("rare", "rare folds", 100_000, 100_000),
    "folding": Workload("folding", "a fold every ~5 turns", 400, 200),
}


def run_workers(fn: Callable[[int], None], workers: int) -> float:
    """Seconds for ``workers`` threads each running ``fn(worker_index)`` to finish."""
    threads = [threading.Thread(target=fn, args=(w,)) for w in range(workers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def paced_latencies(op: Op, threads: int, turns: int, think: float) -> list[float]:
    """Seconds of each ``op`` call: ``threads`` users, each ``turns`` calls ``think`` seconds
    apart (a user's pace, not a tight loop)."""
    latencies: list[float] = []
    lock = threading.Lock()

    def user(u: int) -> None:
        for i in range(turns):
            start = time.perf_counter()
            op(f"user-{u}", i)
            took = time.perf_counter() - start
            with lock:
                latencies.append(took)
            time.sleep(think)

    run_workers(user, threads)
    return latencies


def stock_per_thread(summarizer: Any, trigger: int, words: int) -> tuple[Op, Callable[[], None]]:
    """Stock ``ConversationSummaryBufferMemory``, one object per conversation on its own
    in-process history, summarizing through ``summarizer`` (as a chat model): an ``Op`` that
    saves a turn and loads, and what forgets the objects."""
    from langchain_classic.memory import ConversationSummaryBufferMemory

    llm = SummarizerChatModel(summarizer=summarizer, token_counter=count_tokens_cjk)
    memories: dict[str, Any] = {}
    lock = threading.Lock()

    def op(thread: str, i: int) -> None:
        with lock:
            memory = memories.get(thread)
            if memory is None:
                memory = memories[thread] = ConversationSummaryBufferMemory(
                    llm=llm, max_token_limit=trigger)
        human, ai = filler_turn(thread, i, words)
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({})
    return op, memories.clear


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def memshift(backend: str, messages: bool = False) -> Callable[[str, Workload], Made]:
    """Classic: the drop-in calls, as the stock class is called (``save_context`` and
    ``load_memory_variables``, the history as a string, or as messages with ``messages``);
    middleware: ``save`` and ``load`` (the view), against a graph's invoke + get_state."""
    def make(url: str, work: Workload) -> Made:
        memory = SummaryMemory(backend=backend, store=url, policy=work.policy,
                               summarizer=DeterministicSummarizer(), return_messages=messages)

        def op(thread: str, i: int) -> None:
            human, ai = filler_turn(thread, i, WORDS)
            if backend == "classic":
                memory.save_context({"input": human, "thread_id": thread}, {"output": ai})
                memory.load_memory_variables({"thread_id": thread})
            else:
                memory.save(thread, human, ai)
                memory.load(thread)
        return op, memory.close
    return make


def stock_classic(url: str, work: Workload, messages: bool = False) -> Made:
    from langchain_classic.memory import ConversationSummaryBufferMemory

    llm = SummarizerChatModel(summarizer=DeterministicSummarizer(), token_counter=count_tokens_cjk)
    if url == "memory":  # the bare class: one per conversation, its own in-memory history
        memories: dict[str, Any] = {}

        def mem_op(thread: str, i: int) -> None:
            memory = memories.get(thread)
            if memory is None:
                memory = memories[thread] = ConversationSummaryBufferMemory(
                    llm=llm, max_token_limit=work.max_tokens, return_messages=messages)
            human, ai = filler_turn(thread, i, WORDS)
            memory.save_context({"input": human}, {"output": ai})
            memory.load_memory_variables({})
        return mem_op, memories.clear
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from sqlalchemy import create_engine

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))

    def op(thread: str, i: int) -> None:  # per request, as RunnableWithMessageHistory does
        memory = ConversationSummaryBufferMemory(
            llm=llm, max_token_limit=work.max_tokens,
            chat_memory=SQLChatMessageHistory(session_id=thread, connection=engine))
        human, ai = filler_turn(thread, i, WORDS)
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({})
    return op, engine.dispose


def stock_graph(saver: Any, work: Workload) -> Any:
    """``SummarizationMiddleware.before_model`` as the one node of a graph on ``saver``."""
    summarizer = DeterministicSummarizer()

    def summarize(messages: Any) -> str:
        _, summary, rest = split_summary(messages)
        return summarizer.summarize(summary, rest)

    mw = SummarizationMiddleware(SummarizerChatModel(summarizer=summarizer),
                                 trigger=("tokens", work.max_tokens),
                                 keep=("tokens", work.keep_tokens),
                                 token_counter=count_tokens_cjk, summarizer=summarize)
    builder = StateGraph(MessagesState)
    builder.add_node("fold", lambda state: mw.before_model(state, None) or {})
    builder.add_edge(START, "fold")
    builder.add_edge("fold", END)
    return builder.compile(checkpointer=saver)


def postgres_saver(url: str) -> tuple[Any, Callable[[], None]]:
    """A ``PostgresSaver`` on a connection pool, set up as LangGraph's docs build one, and
    what closes it."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, max_size=8, kwargs={"autocommit": True, "prepare_threshold": 0,
                                                   "row_factory": dict_row})
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    return saver, pool.close


def stock_middleware(url: str, work: Workload) -> Made:
    close: Callable[[], None]
    if url == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        saver: Any = InMemorySaver()
        close = saver.storage.clear
    elif url.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        saver = SqliteSaver(conn)
        saver.setup()
        close = conn.close
    else:
        saver, close = postgres_saver(url)
    graph = stock_graph(saver, work)

    def op(thread: str, i: int) -> None:
        config = {"configurable": {"thread_id": thread}}
        human, ai = filler_turn(thread, i, WORDS)
        graph.invoke({"messages": [("user", human), ("ai", ai)]}, config)
        graph.get_state(config)
    return op, close


def raw(url: str, work: Workload) -> Made:
    """The floor: one insert of the turn and one select of the newest 20 rows."""
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
            human, ai = filler_turn(thread, i, WORDS)
            c.execute("INSERT INTO raw (thread, message) VALUES (?, ?), (?, ?)",
                      (thread, human, thread, ai))
            c.execute("SELECT message FROM raw WHERE thread = ? ORDER BY id DESC LIMIT 20",
                      (thread,)).fetchall()
        return op, lambda: None
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, max_size=8, kwargs={"autocommit": True})
    with pool.connection() as c:
        c.execute("CREATE TABLE IF NOT EXISTS raw (id bigserial PRIMARY KEY, thread text, "
                  "message text)")
        c.execute("CREATE INDEX IF NOT EXISTS raw_thread ON raw (thread, id)")

    def pg_op(thread: str, i: int) -> None:
        human, ai = filler_turn(thread, i, WORDS)
        with pool.connection() as c:
            c.execute("INSERT INTO raw (thread, message) VALUES (%s, %s), (%s, %s)",
                      (thread, human, thread, ai))
            c.execute("SELECT message FROM raw WHERE thread = %s ORDER BY id DESC LIMIT 20",
                      (thread,)).fetchall()
    return pg_op, pool.close


CONTENDERS: dict[str, Callable[[str, Workload], Made]] = {
    "memshift classic": memshift("classic"),
    "memshift middleware": memshift("middleware"),
    "stock classic": stock_classic,
    "stock middleware": stock_middleware,
    "raw driver": raw,
}
PAIRS = [("memshift classic", "stock classic"), ("memshift middleware", "stock middleware"),
         ("memshift classic", "raw driver")]


class Statements:
    """Counts what the drivers send: ``n`` statements (sqlite3's trace; psycopg's execute,
    executemany rows, the BEGIN psycopg sends by itself before a COMMIT, and every statement
    of a memshift batch) and, for PostgreSQL, ``trips``: round trips to the server. In
    psycopg's pipeline mode (``PostgresSaver.put`` and ``put_writes`` use it) the statements
    travel together: their trip is the pipeline's sync. Checked against a proxy that delays
    every packet (BENCHMARKS.md, 2026-12-03 evening)."""

    def __init__(self) -> None:
        self.n = 0
        self.trips = 0
        self._piped = False  # pipeline-mode statements sent since the pipeline's last sync
        self._patched: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Statements:
        import psycopg

        from adapters.stores.batch import Batch

        real_connect = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = real_connect(*args, **kwargs)
            conn.set_trace_callback(self._one)
            return conn
        self._patch(sqlite3, "connect", connect)
        self._patch(sqlite3.dbapi2, "connect", connect)

        def execute(real: Any, cur: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(cur, psycopg.ClientCursor):  # a batch counts its own
                self.n += 1
                self._trip(cur)
            return real(cur, *args, **kwargs)

        def executemany(real: Any, cur: Any, query: Any, rows: Any, **kwargs: Any) -> Any:
            rows = list(rows)
            self.n += len(rows)
            self._trip(cur)  # the rows are pipelined by psycopg: one trip
            return real(cur, query, rows, **kwargs)

        def sync(real: Any, pipeline: Any, *args: Any) -> Any:
            self.trips, self._piped = self.trips + self._piped, False
            return real(pipeline, *args)

        def commit(real: Any, conn: Any) -> Any:
            if conn.info.transaction_status != 0:  # IDLE: nothing is sent
                sent = 1 if conn.autocommit else 2  # psycopg sent a BEGIN of its own first
                self.n, self.trips = self.n + sent, self.trips + sent
            return real(conn)

        def flush(real: Any, batch: Any, sql: Any = None, params: Any = None) -> Any:
            count = len(batch._pending) + (sql is not None)
            if count:
                self.n, self.trips = self.n + count, self.trips + 1
            return real(batch, sql, params)

        for owner, name, hook in ((psycopg.Cursor, "execute", execute),
                                  (psycopg.Cursor, "executemany", executemany),
                                  (psycopg.Connection, "commit", commit),
                                  (Batch, "flush", flush),
                                  (psycopg.Pipeline, "sync", sync),
                                  (psycopg.Pipeline, "__exit__", sync)):
            self._patch(owner, name, self._hooked(getattr(owner, name), hook))
        return self

    def _trip(self, cur: Any) -> None:
        """A round trip now, or (pipeline mode) at the pipeline's next sync."""
        if cur.connection.pgconn.pipeline_status:
            self._piped = True
        else:
            self.trips += 1

    def _one(self, _statement: str) -> None:
        self.n += 1

    @staticmethod
    def _hooked(real: Any, hook: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return hook(real, *args, **kwargs)
        return wrapper

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def __exit__(self, *exc: object) -> None:
        for owner, name, value in reversed(self._patched):
            setattr(owner, name, value)


def statements_per_op(make: Callable[[str, Workload], Made], url: str,
                      work: Workload) -> tuple[float, float]:
    """Statements and round trips per save+load in the steady state: warm up one thread,
    then count 20 save+loads (connections are opened inside the counter, so sqlite3's
    trace sees them)."""
    with Statements() as counter:
        op, close = make(url, work)
        for i in range(5):
            op("warm", i)
        counter.n = counter.trips = 0
        for i in range(5, 25):
            op("warm", i)
        close()
        return counter.n / 20, counter.trips / 20
