"""Migrations at tenant scale: one ``memshift migrate`` worker over many threads (100,000 by
default), its resident memory sampled as the target fills, then a re-run of the finished
migration.

The worker's RSS (``VmRSS``) and peak (``VmHWM``) are read from ``/proc`` every few seconds
beside the number of threads the target holds (``memshift_placement`` rows), so one run
gives the growth from 10,000 threads to the end; each process's own peak comes from
``wait4``. Source: a stock classic SQLite store (8 turns per thread); target: PostgreSQL
when ``MEMSHIFT_BENCH_PG_DSN`` is set (a fresh database, dropped afterwards), else SQLite.

    python benchmarks/bench_migrate_scale.py [--threads 100000] [--shards 1] [--at 10000]
        [--samples FILE.csv]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_migrate import legacy_store, new_target  # noqa: E402


def held(target: str) -> int:
    """Threads the target holds (one placement row each)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(target.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM memshift_placement")).scalar()
                       or 0)
    except Exception:  # the schema is not there yet
        return 0
    finally:
        engine.dispose()


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process, in MB."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def run(source: str, target: str, shards: int, every: float) -> dict[str, Any]:
    """One migration in ``shards`` workers: seconds, samples and each worker's peak RSS."""
    base = [sys.executable, "-m", "compat", "migrate", "--from", "classic", "--from-store",
            source, "--to", "middleware", "--to-store", target, "--max-tokens", "200",
            "--keep-tokens", "100", "--quiet", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    errors = tempfile.TemporaryFile()  # a pipe could fill and stall the worker
    start = time.perf_counter()
    procs = [subprocess.Popen(base + (["--shard", f"{k}/{shards}"] if shards > 1 else []),
                              env=env, stdout=subprocess.DEVNULL, stderr=errors)
             for k in range(1, shards + 1)]
    samples: list[tuple[float, int, list[tuple[float, float]]]] = []
    peaks: dict[int, float] = {}
    while len(peaks) < len(procs):
        time.sleep(every)
        for proc in procs:
            if proc.pid in peaks:
                continue
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                if os.waitstatus_to_exitcode(status) != 0:
                    errors.seek(0)
                    raise SystemExit(f"migrate failed: {errors.read()[-500:]!r}")
                peaks[proc.pid] = usage.ru_maxrss / 1024
        live = [p for p in procs if p.pid not in peaks]
        try:
            rss = [memory_mb(p.pid) for p in live]
        except FileNotFoundError:
            continue
        if live:
            samples.append((time.perf_counter() - start, held(target), rss))
    return {"seconds": time.perf_counter() - start, "samples": samples,
            "peaks": [peaks[p.pid] for p in procs]}


def write_samples(path: Path, samples: list[tuple[float, int, list[tuple[float, float]]]]
                  ) -> None:
    """seconds, threads held, then RSS and peak MB of each live worker, one row a sample."""
    with path.open("w", encoding="ascii") as out:
        out.write("seconds,threads_held,worker_rss_and_peak_mb\n")
        for seconds, count, rss in samples:
            cells = ",".join(f"{r:.1f},{h:.1f}" for r, h in rss)
            out.write(f"{seconds:.1f},{count},{cells}\n")


def at(samples: list[tuple[float, int, list[tuple[float, float]]]], threads: int) -> Any:
    """The first sample taken when the target held at least ``threads`` threads."""
    return next((s for s in samples if s[1] >= threads), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--at", type=int, default=10_000, help="compare memory from here")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--samples", type=Path, metavar="CSV",
                        help="write every sample of the first run here (for a plot)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        made = time.perf_counter()
        source = legacy_store(tmp / "legacy.db", args.threads, args.turns)
        kind = "PostgreSQL" if os.environ.get("MEMSHIFT_BENCH_PG_DSN") else "SQLite"
        print(f"# bench_migrate_scale: {args.threads} threads x {args.turns} turns, SQLite -> "
              f"{kind}, {args.shards} shard(s); {os.cpu_count()} CPUs, python "
              f"{platform.python_version()}; source built in {time.perf_counter() - made:.0f} s",
              flush=True)
        target = new_target(tmp, "scale")
        try:
            first = run(source, target, args.shards, args.every)
            done = held(target)
            rerun = run(source, target, args.shards, min(args.every, 1.0))
        finally:
            if dsn := os.environ.get("MEMSHIFT_BENCH_PG_DSN"):
                from bench_storage import drop_pg_db

                drop_pg_db(dsn, target)
    if args.samples:
        write_samples(args.samples, first["samples"])
    print(f"first run: {first['seconds']:.0f} s, {60 * args.threads / first['seconds']:.0f} "
          f"threads/min, target holds {done} threads")
    print(f"{'threads held':>13}{'seconds':>9}  worker RSS / peak MB")
    step = max(1, len(first["samples"]) // 12)
    for seconds, count, rss in first["samples"][::step] + first["samples"][-1:]:
        print(f"{count:>13}{seconds:>9.0f}  " + ", ".join(f"{r:.1f} / {h:.1f}" for r, h in rss))
    mark, end = at(first["samples"], args.at), first["samples"][-1]
    if mark is not None:
        for k, ((r0, h0), (r1, h1)) in enumerate(zip(mark[2], end[2]), 1):
            print(f"worker {k}: from {mark[1]} to {end[1]} threads held, RSS {r0:.1f} -> "
                  f"{r1:.1f} MB ({r1 - r0:+.1f}), peak {h0:.1f} -> {h1:.1f} MB ({h1 - h0:+.1f})")
    print("first run, each worker's peak RSS (wait4): " +
          ", ".join(f"{p:.1f} MB" for p in first["peaks"]))
    last = rerun["samples"][-1][2] if rerun["samples"] else []
    print(f"re-run of the finished migration: {rerun['seconds']:.1f} s "
          f"({first['seconds'] / rerun['seconds']:.1f}x faster), peak RSS (wait4) " +
          ", ".join(f"{p:.1f} MB" for p in rerun["peaks"]) + "; last sample RSS / peak " +
          ", ".join(f"{r:.1f} / {h:.1f} MB" for r, h in last))


if __name__ == "__main__":
    main()
