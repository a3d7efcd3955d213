"""Where a PostgreSQL save+load's time goes: each layer as a ratio to the raw-driver floor, in one run.

The raw floor (``_variants.raw``: one autocommit insert, one select) does none of what a
memshift turn must: no transaction, no lock, no placement record, no summary. This script
puts the layers between the two side by side, each measured in the same run, interleaved:

classic
  raw driver         the floor (2 round trips)
  memshift SQL       memshift classic's own statements for a save+load, captured from a warm
                     thread and replayed through bare psycopg (prepared, autocommit): the
                     contract's SQL with none of memshift's Python (2 round trips: the save's
                     compare-and-set with its writes, the load)
  memshift classic   ``save_context`` + ``load_memory_variables`` (the history as a string)
  ... messages       the same with ``return_messages=True`` (LangChain message objects)
middleware
  raw driver
  saver put+get      ``PostgresSaver.put`` + ``get_tuple`` of a growing 40-message checkpoint
  graph update+get   the calls memshift's middleware backend makes on the real graph
                     (``get_state``, ``update_state``, ``get_state``) on a bare PostgresSaver
  memshift middleware ``save`` + ``load``

    MEMSHIFT_BENCH_PG_DSN=postgresql://... python benchmarks/bench_pg_floor.py [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from _variants import (  # noqa: E402
    CONTENDERS, WORDS, WORKLOADS, Made, Workload, memshift, postgres_saver, statements_per_op,
)
from bench_storage import drop_pg_db, new_pg_db  # noqa: E402

from adapters.stores.url import lock_key  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PLACEHOLDER = "capturedthread00"  # as long as the benchmark's thread ids


def captured_sql(url: str, work: Workload) -> list[tuple[str, dict[str, Any]]]:
    """The statements memshift classic sends for one steady-state save+load (turn 6 of a
    thread), with their parameters."""
    import psycopg

    sent: list[tuple[str, dict[str, Any]]] = []
    real = psycopg.Cursor.execute

    def execute(cur: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
        sent.append((query, dict(params or {})))
        return real(cur, query, params, *args, **kwargs)
    op, close = CONTENDERS["memshift classic"](url, work)
    try:
        for i in range(5):
            op(_PLACEHOLDER, i)
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        try:
            op(_PLACEHOLDER, 5)
        finally:
            psycopg.Cursor.execute = real  # type: ignore[method-assign]
    finally:
        close()
    return sent


# a replayed thread starts as memshift leaves a classic thread: placed, with a state row
_SEED = ("INSERT INTO memshift_placement (thread_id, backend, version, since, pinned) "
         "VALUES (%(t)s, 'classic', 1, 0, false)",
         "INSERT INTO memshift_classic (thread_id, summary, folds) VALUES (%(t)s, '', 0) "
         "RETURNING xmin::text")


def replay(url: str, work: Workload) -> Made:
    """A contender that sends memshift's captured statements for ``thread``: its own thread
    id, lock key, fresh message ids, the version its previous statement returned (the
    compare-and-set passes, as it does in a memshift loop) and the window rows it already
    holds (their text is not sent again, as memshift keeps them). A thread's first call seeds
    its placement and state row (two more statements, once in ``turns``)."""
    import psycopg

    (save, save_params), (load, load_params) = captured_sql(url, work)
    key = lock_key(_PLACEHOLDER)
    holes = re.compile(f"({_PLACEHOLDER}|{_UUID.pattern})")
    # each text parameter (an array, or an array literal) cut at its thread ids and message
    # ids, once
    cut = {name: [holes.split(v) for v in value] if isinstance(value, list) else
           holes.split(value) for name, value in save_params.items() if name in ("mids", "tm", "wm")}
    literal = isinstance(load_params["known"], str)  # the known rows as an array literal
    conn = psycopg.connect(url, autocommit=True)
    versions: dict[str, str] = {}
    rows: dict[str, list[int]] = {}

    def op(thread: str, i: int) -> None:
        tid = thread.ljust(len(_PLACEHOLDER), "_")[:len(_PLACEHOLDER)]
        if tid not in versions:
            conn.execute(_SEED[0], {"t": tid})
            versions[tid] = conn.execute(_SEED[1], {"t": tid}).fetchall()[0][0]
            rows[tid] = []
        ids: dict[str, str] = {}
        params = {**save_params, "t": tid, "k": lock_key(tid), "v": versions[tid]}

        def filled(pieces: list[str]) -> str:
            return "".join(p if n % 2 == 0 else (
                tid if p == _PLACEHOLDER else ids.setdefault(p, str(uuid.uuid4())))
                for n, p in enumerate(pieces))
        for name, texts in cut.items():
            params[name] = filled(texts) if isinstance(save_params[name], str) else \
                [filled(pieces) for pieces in texts]
        (versions[tid], new), = conn.execute(save, params, prepare=True).fetchall()
        known = rows[tid] + new
        row, = conn.execute(load, {**load_params, "t": tid, "known": "{%s}" % ",".join(
            map(str, known)) if literal else known}, prepare=True).fetchall()
        versions[tid], rows[tid] = row[4], row[7]
    assert save_params["k"] == key
    return op, conn.close


def saver_put_get(url: str, work: Workload) -> Made:
    """The checkpointer alone: ``put`` of the thread's messages, then ``get_tuple``."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    saver, close = postgres_saver(url)
    threads: dict[str, list[Any]] = {}

    def op(thread: str, i: int) -> None:
        human, ai = filler_turn(thread, i, WORDS)
        messages = threads.setdefault(thread, [])
        messages += [HumanMessage(human), AIMessage(ai)]
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        version = f"{i + 1:032}.0"
        checkpoint["channel_values"] = {"messages": list(messages)}
        checkpoint["channel_versions"] = {"messages": version}
        saver.put(config, checkpoint, {"step": i}, {"messages": version})  # type: ignore[typeddict-item]
        saver.get_tuple(config)
    return op, close


def graph_update_get(url: str, work: Workload) -> Made:
    """memshift middleware's LangGraph calls on a bare PostgresSaver: no placement, lock,
    transaction or middleware of memshift's."""
    from langchain_core.messages import AIMessage, HumanMessage

    from adapters.backends.agent_middleware import FOLD_NODE, fold_graph

    saver, close = postgres_saver(url)
    graph = fold_graph().copy({"checkpointer": saver})

    def op(thread: str, i: int) -> None:
        config: Any = {"configurable": {"thread_id": thread}}
        human, ai = filler_turn(thread, i, WORDS)
        graph.get_state(config)
        graph.update_state(config, {"messages": [HumanMessage(human), AIMessage(ai)]},
                           as_node=FOLD_NODE)
        graph.get_state(config)
    return op, close


# layer -> (make, round trips per save+load: by construction for a replay, else None: counted
# on the client as bench_throughput counts them)
TABLES: dict[str, dict[str, tuple[Callable[[str, Workload], Made], int | None]]] = {
    "classic": {
        "raw driver": (CONTENDERS["raw driver"], 2),
        "memshift SQL": (replay, 2),
        "memshift classic": (CONTENDERS["memshift classic"], None),
        "... messages": (memshift("classic", messages=True), None),
    },
    "middleware": {
        "raw driver": (CONTENDERS["raw driver"], 2),
        "saver put+get": (saver_put_get, None),
        "graph update+get": (graph_update_get, None),
        "memshift middleware": (CONTENDERS["memshift middleware"], None),
    },
}


def run(dsn: str, table: str, reps: int, conversations: int, turns: int) -> None:
    """One table: wall and client CPU per save+load, medians of ``reps`` interleaved reps."""
    work = WORKLOADS["rare"]  # the replay does not fold, so neither may the real contender
    contenders = TABLES[table]
    urls = {name: new_pg_db(dsn) for name in contenders}
    trips = {name: known if known is not None else statements_per_op(make, urls[name], work)[1]
             for name, (make, known) in contenders.items()}
    made = {name: make(urls[name], work) for name, (make, _) in contenders.items()}
    wall: dict[str, list[float]] = {n: [] for n in contenders}
    cpu: dict[str, list[float]] = {n: [] for n in contenders}
    try:
        for rep in range(reps):
            for name, (op, _close) in made.items():
                r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                for c in range(conversations):
                    for i in range(turns):
                        op(f"r{rep}c{c}", i)
                seconds, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
                n = conversations * turns
                wall[name].append(seconds / n * 1e6)
                cpu[name].append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1e6)
    finally:
        for _op, close in made.values():
            close()
        for url in urls.values():
            drop_pg_db(dsn, url)
    floor = statistics.median(wall["raw driver"])
    print(f"\n{table}: µs per save+load (median of {reps}, {conversations} conversations of "
          f"{turns} turns, 1 thread); client CPU is this process's")
    print(f"{'layer':<24}{'trips':>7}{'wall':>9}{'cpu':>9}{'raw/this':>10}")
    for name in contenders:
        w = statistics.median(wall[name])
        print(f"{name:<24}{trips[name]:>7.1f}{w:>9.0f}{statistics.median(cpu[name]):>9.0f}{floor / w:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    args = parser.parse_args()
    dsn = os.environ.get("MEMSHIFT_BENCH_PG_DSN")
    if not dsn:
        sys.exit("set MEMSHIFT_BENCH_PG_DSN to a PostgreSQL server (a database per layer is "
                 "created and dropped)")
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    for table in args.tables:
        run(dsn, table, args.reps, args.conversations, args.turns)


if __name__ == "__main__":
    main()
