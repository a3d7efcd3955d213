"""save+load per second, statements per save+load and RSS growth, as ratios in one run.

Contenders (``_variants.py``): memshift classic and middleware (``SummaryMemory``), the stock
classic class (over ``SQLChatMessageHistory``, or its own in-memory history), the stock
middleware in a one-node graph on InMemorySaver / SqliteSaver / PostgresSaver, and a raw
driver floor (one insert + one select). Same deterministic summarizer and counter for all.

Each rate is the median of ``--reps`` repetitions, interleaved (rep 1 of every contender,
then rep 2, ...) so that machine noise hits all of them alike. Stores: memory, SQLite (WAL,
``synchronous=NORMAL`` on both sides), PostgreSQL when ``MEMSHIFT_BENCH_PG_DSN`` is set.
Concurrency: 1, 8 and 32 threads, and 4 processes x 8 threads (SQL stores).

    python benchmarks/bench_throughput.py [--turns 20] [--reps 3] [--rss-threads 10000]
    MEMSHIFT_BENCH_PG_DSN=postgresql://... python benchmarks/bench_throughput.py
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from _variants import (  # noqa: E402
    CONTENDERS, PAIRS, WORKLOADS, Workload, memshift, run_workers, statements_per_op,
    stock_classic,
)
from bench_storage import drop_pg_db, new_pg_db  # noqa: E402

PROCS = 4  # processes in the multi-process column, 8 threads each


FAILED: list[str] = []  # save+loads that raised, by error (counted, not in the rate)


def rate(op: Callable[[str, int], None], threads: int, turns: int) -> float:
    """Completed save+loads per second with ``threads`` workers, each on its own
    conversation. A save+load that raises is counted in ``FAILED`` (as a client would log it
    and go on), not in the rate."""
    tag = uuid.uuid4().hex[:6]
    failed: list[str] = []

    def work(w: int) -> None:
        for i in range(turns):
            try:
                op(f"{tag}-{w}", i)
            except Exception as exc:  # noqa: BLE001 - the stock classes' own failures
                failed.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}")
    seconds = run_workers(work, threads)
    FAILED.extend(failed)
    return (threads * turns - len(failed)) / seconds


def _proc(name: str, url: str, work: str, turns: int, go: Any, out: Any) -> None:
    op, close = CONTENDERS[name](url, WORKLOADS[work])
    op(f"warm-{os.getpid()}", 0)
    go.wait()
    start = time.time()
    rate(op, 8, turns)
    out.put((start, time.time()))
    close()


def proc_rate(name: str, url: str, work: str, turns: int) -> float:
    """``PROCS`` processes x 8 threads on one store: all ops / (last end - first start)."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_proc, args=(name, url, work, turns, go, out))
             for _ in range(PROCS)]
    for p in procs:
        p.start()
    time.sleep(3.0)  # imports and connections, outside the measurement
    go.set()
    spans = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return PROCS * 8 * turns / (max(e for _, e in spans) - min(s for s, _ in spans))


def bench(kind: str, fresh: Callable[[], tuple[str, Callable[[], None]]], work: Workload,
          columns: list[str], turns: int, reps: int) -> dict[str, list[float]]:
    """One table: statements and median rates per contender, then the ratios."""
    names = [n for n in CONTENDERS if not (kind == "memory" and n == "raw driver")]
    urls = {n: fresh() for n in names}
    try:
        stmts = {n: statements_per_op(CONTENDERS[n], urls[n][0], work) for n in names}
        made = {n: CONTENDERS[n](urls[n][0], work) for n in names}
        samples: dict[str, dict[str, list[float]]] = {n: {c: [] for c in columns} for n in names}
        failures: dict[str, dict[str, int]] = {n: {} for n in names}
        for _ in range(reps):
            for column in columns:
                for n in names:
                    if column.startswith("4x"):
                        made[n][1]()
                        samples[n][column].append(proc_rate(n, urls[n][0], work.key, turns))
                        made[n] = CONTENDERS[n](urls[n][0], work)
                    else:
                        del FAILED[:]
                        samples[n][column].append(rate(made[n][0], int(column), turns))
                        for error in FAILED:
                            failures[n][error] = failures[n].get(error, 0) + 1
        for n in names:
            made[n][1]()
    finally:
        for _, drop in urls.values():
            drop()
    medians = {n: [statistics.median(samples[n][c]) for c in columns] for n in names}
    print(f"\n{kind}, {work.name}: save+load per second (median of {reps}, {turns} turns per "
          "worker); statements and round trips per save+load")
    print(f"{'contender':<24}{'stmts':>7}{'trips':>7}" + "".join(f"{c:>10}" for c in columns))
    for n in names:
        trips = f"{stmts[n][1]:>7.1f}" if kind == "PostgreSQL" else f"{'-':>7}"
        print(f"{n:<24}{stmts[n][0]:>7.1f}{trips}" + "".join(f"{r:>10.1f}" for r in medians[n]))
    for n in names:
        for error, count in failures[n].items():
            print(f"  {n}: {count} save+loads failed in the threaded columns ({error})")
    for ours, theirs in PAIRS:
        if ours in medians and theirs in medians:
            ratios = [a / b for a, b in zip(medians[ours], medians[theirs], strict=True)]
            print(f"{'ratio ' + ours + ' / ' + theirs:<48}"[:48] + " "
                  + "".join(f"{r:>10.2f}" for r in ratios))
    return medians


def facade_overhead(turns: int, reps: int, conversations: int = 20) -> None:
    """In memory, no folds: microseconds per save+load, memshift vs the bare stock class.
    A sample is ``conversations`` fresh conversations of ``turns`` turns in this thread (no
    thread start in the timing); contenders alternate within each repetition."""
    work = WORKLOADS["rare"]
    made = {n: CONTENDERS[n]("memory", work) for n in
            ("memshift classic", "stock classic", "memshift middleware", "stock middleware")}
    made["memshift classic, messages"] = memshift("classic", messages=True)("memory", work)
    made["stock classic, messages"] = stock_classic("memory", work, messages=True)
    us: dict[str, list[float]] = {n: [] for n in made}
    for rep in range(reps):
        for n, (op, _close) in made.items():
            many = conversations if "middleware" not in n else max(1, conversations // 10)
            start = time.perf_counter()
            for c in range(many):
                for i in range(turns):
                    op(f"facade-{rep}-{c}", i)
            us[n].append((time.perf_counter() - start) * 1e6 / (many * turns))
    med = {n: statistics.median(v) for n, v in us.items()}
    print(f"\nfacade overhead in memory (us per save+load, median of {reps}, no folds, "
          f"{turns} turns per conversation)")
    for ours, theirs in (("memshift classic", "stock classic"),
                         ("memshift classic, messages", "stock classic, messages"),
                         ("memshift middleware", "stock middleware")):
        print(f"{ours:<28}{med[ours]:>7.0f}  vs {theirs:<25}{med[theirs]:>7.0f}   "
              f"ratio {med[ours] / med[theirs]:.2f}")


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def rss_child(backend: str, url: str, threads: int) -> None:
    """Touch ``threads`` threads (one save + one load each) in this process; print MB."""
    op, close = CONTENDERS[f"memshift {backend}"](url, WORKLOADS["folding"])
    for i in range(200):
        op(f"warm-{i}", 0)
    before = _rss_kb()
    for i in range(threads):
        op(f"rss-{i}", 0)
    print(f"{(_rss_kb() - before) / 1024:.1f}")
    close()


def rss(stores: dict[str, Callable[[], tuple[str, Callable[[], None]]]], threads: int) -> None:
    print(f"\nRSS growth over {threads:,} threads touched in one process (MB, after 200 warm-up)")
    for kind, fresh in stores.items():
        for backend in ("classic", "middleware"):
            url, drop = fresh()
            try:
                mb = subprocess.run([sys.executable, __file__, "--rss-child", backend, url,
                                     str(threads)], check=True, capture_output=True,
                                    text=True).stdout.strip().splitlines()[-1]
            finally:
                drop()
            print(f"{kind:<12}{backend:<12}{mb:>8} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", nargs="+", default=["1", "8", "32"])
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS),
                        help="none: only the RSS check")
    parser.add_argument("--stores", nargs="+", default=["memory", "sqlite", "postgresql"])
    parser.add_argument("--no-procs", action="store_true", help="skip the 4-process column")
    parser.add_argument("--rss-threads", type=int, default=10_000, help="0 skips the RSS check")
    parser.add_argument("--rss-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        backend, url, n = args.rss_child
        rss_child(backend, url, int(n))
        return
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    tmp = Path(tempfile.mkdtemp(prefix="memshift-bench-"))
    stores: dict[str, Callable[[], tuple[str, Callable[[], None]]]] = {}
    if "memory" in args.stores:
        stores["memory"] = lambda: ("memory", lambda: None)
    if "sqlite" in args.stores:
        stores["SQLite"] = lambda: (f"sqlite:///{tmp}/{uuid.uuid4().hex[:8]}.db", lambda: None)
    dsn = os.environ.get("MEMSHIFT_BENCH_PG_DSN")
    if "postgresql" in args.stores and dsn:
        def fresh_pg() -> tuple[str, Callable[[], None]]:
            url = new_pg_db(dsn)
            return url, lambda: drop_pg_db(dsn, url)
        stores["PostgreSQL"] = fresh_pg
    elif "postgresql" in args.stores:
        print("(no PostgreSQL: set MEMSHIFT_BENCH_PG_DSN)")
    if "memory" in stores:
        facade_overhead(max(args.turns, 30), args.reps)
    for key in args.workloads:
        for kind, fresh in stores.items():
            columns = list(args.threads)
            if kind != "memory" and not args.no_procs:
                columns.append("4x8")
            bench(kind, fresh, WORKLOADS[key], columns, args.turns, args.reps)
    if args.rss_threads:
        rss({k: v for k, v in stores.items() if k != "memory"}, args.rss_threads)


if __name__ == "__main__":
    main()
