"""Migrations at tenant scale: threads per minute for a first run (1 and 2 shards) and for a
re-run of the finished migration (fingerprint skips), measured in one run, beside the
command's start-up (a run over no thread: interpreter, imports, opening both stores).

Source: a stock classic SQLite store (``SQLChatMessageHistory`` rows, 8 turns per thread);
target: PostgreSQL when ``MEMSHIFT_BENCH_PG_DSN`` is set (a fresh database per run), else
SQLite. Each run is the real ``memshift migrate`` command in its own process(es).

    python benchmarks/bench_migrate.py [--threads 1500] [--turns 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from langchain_core.messages import AIMessage, HumanMessage, message_to_dict  # noqa: E402

from compat.testing.conversations import filler_turn  # noqa: E402


def legacy_store(path: Path, threads: int, turns: int) -> str:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE message_store (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                 "session_id TEXT, message TEXT)")
    conn.execute("CREATE INDEX ix_message_store_session_id ON message_store (session_id)")

    def rows() -> Iterator[tuple[str, str]]:  # streamed: the benchmark stays small, so a
        for t in range(threads):  # worker it starts does not inherit a large peak RSS
            for i in range(turns):
                human, ai = filler_turn(f"t{t}", i, 12)
                yield f"t{t}", json.dumps(message_to_dict(HumanMessage(human)))
                yield f"t{t}", json.dumps(message_to_dict(AIMessage(ai)))

    conn.executemany("INSERT INTO message_store (session_id, message) VALUES (?, ?)", rows())
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


def new_target(tmp: Path, name: str) -> str:
    dsn = os.environ.get("MEMSHIFT_BENCH_PG_DSN")
    if not dsn:
        return f"sqlite:///{tmp}/{name}.db"
    from bench_storage import new_pg_db

    return new_pg_db(dsn)


def run(source: str, target: str, shards: int, threads_file: Path | None = None) -> float:
    """Seconds for ``memshift migrate`` over every thread (or those ``threads_file`` lists),
    in ``shards`` processes at once."""
    base = [sys.executable, "-m", "compat", "migrate", "--from", "classic", "--from-store",
            source, "--to", "middleware", "--to-store", target, "--max-tokens", "200",
            "--keep-tokens", "100", "--quiet", "--json"]
    if threads_file is not None:
        base += ["--threads", str(threads_file)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    procs = [subprocess.Popen(base + (["--shard", f"{k}/{shards}"] if shards > 1 else []),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(1, shards + 1)]
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"migrate failed ({proc.returncode}): {err[-500:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1500)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        source = legacy_store(tmp / "legacy.db", args.threads, args.turns)
        kind = "PostgreSQL" if os.environ.get("MEMSHIFT_BENCH_PG_DSN") else "SQLite"
        print(f"# bench_migrate: {args.threads} threads x {args.turns} turns, SQLite -> {kind}; "
              f"{os.cpu_count()} CPUs, python {platform.python_version()}")
        target, other = new_target(tmp, "one"), new_target(tmp, "two")
        (tmp / "none.txt").write_text("")
        try:
            first = run(source, target, 1)
            rerun = run(source, target, 1)
            sharded = run(source, other, 2)
            start = min(run(source, target, 1, tmp / "none.txt") for _ in range(3))
        finally:
            if dsn := os.environ.get("MEMSHIFT_BENCH_PG_DSN"):
                from bench_storage import drop_pg_db

                for url in (target, other):
                    drop_pg_db(dsn, url)
        rate = 60 * args.threads
        print(f"{'run':<28}{'seconds':>9}{'threads/min':>13}{'ratio':>8}")
        print(f"{'first run, 1 shard':<28}{first:>9.1f}{rate / first:>13.0f}{1.0:>8.2f}")
        print(f"{'first run, 2 shards':<28}{sharded:>9.1f}{rate / sharded:>13.0f}"
              f"{first / sharded:>8.2f}")
        print(f"{'re-run (fingerprints)':<28}{rerun:>9.1f}{rate / rerun:>13.0f}"
              f"{first / rerun:>8.2f}")
        print(f"{'start-up (no thread)':<28}{start:>9.1f}")
        if rerun - start < 0.1:
            print(f"re-run vs first run: {first / rerun:.2f}x as the user waits; the re-run is "
                  f"its {start:.1f} s start-up (the threads cost less than the noise)")
        else:
            net = (first - start) / (rerun - start)
            print(f"re-run vs first run: {first / rerun:.2f}x as the user waits; {net:.1f}x "
                  f"net of the {start:.1f} s start-up both pay")


if __name__ == "__main__":
    main()
