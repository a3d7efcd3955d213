"""Split one migration between N worker processes: ``memshift migrate --shard I/N``.

    python examples/shard_migrate.py [TARGET_STORE_URL] [--threads 200] [--turns 6] [--shards 4]

Seeds a classic SQLite store, runs N ``memshift migrate --shard i/N --json`` processes in
parallel against one target (default ``$MEMSHIFT_EXAMPLE_PG_DSN``, else a SQLite file), then
checks that the shards' union is exactly the source: every thread migrated by one shard only,
and identical on the target (summary, window, folds, transcript). Prints each shard's time,
rate and peak memory. The target URL reaches the workers through ``MEMSHIFT_TO_STORE``, never
their command line (``ps`` would show a password).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from adapters import MemoryPolicy, compare_views  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402

POLICY = MemoryPolicy(max_tokens=200, keep_tokens=100)


def seed(url: str, threads: int, turns: int) -> list[str]:
    """A classic store as the app left it (fresh thread ids on every run of the example)."""
    run = uuid.uuid4().hex[:6]
    ids = [f"tenant-{run}:user-{n}:chat" for n in range(threads)]
    with SummaryMemory(backend="classic", store=url, policy=POLICY) as memory:
        for tid in ids:
            for i in range(turns):
                memory.save(tid, *filler_turn(tid, i, 12))
    return ids


def run_shards(source: str, target: str, shards: int) -> tuple[list[dict], float]:
    env = {**os.environ, "MEMSHIFT_TO_STORE": target}
    start = time.perf_counter()
    workers = [subprocess.Popen(
        [sys.executable, "-m", "compat", "migrate", "--from", "classic", "--from-store", source,
         "--to", "middleware", "--shard", f"{i}/{shards}", "--json", "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(1, shards + 1)]
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=1800)
        if worker.returncode != 0:
            raise SystemExit(f"shard failed (exit {worker.returncode}): {err.strip()[-500:]}")
        results.append(json.loads(out))
    return results, time.perf_counter() - start


def verify(source: str, target: str, ids: list[str], results: list[dict]) -> list[str]:
    """Problems found; ``[]`` when the union of the shards is exactly the source."""
    problems = []
    seen: dict[str, str] = {}
    for result in results:
        for tid in result["threads"]["migrated"]:
            if tid in seen:
                problems.append(f"{tid} migrated by shards {seen[tid]} and {result['shard']}")
            seen[tid] = result["shard"]
    missing = set(ids) - set(seen)
    if missing:
        problems.append(f"{len(missing)} thread(s) migrated by no shard")
    with SummaryMemory(backend="classic", store=source, policy=POLICY) as src, \
            SummaryMemory(backend="middleware", store=target, policy=POLICY) as dst:
        for tid in ids:
            diffs = compare_views(src.load(tid), dst.load(tid))
            if diffs or len(src.transcript(tid)) != len(dst.transcript(tid)):
                problems.append(f"{tid}: {diffs or 'transcript differs'}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", default=os.environ.get("MEMSHIFT_EXAMPLE_PG_DSN"))
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="memshift-shards-")
    source = f"sqlite:///{workdir}/classic.db"
    target = args.target or f"sqlite:///{workdir}/agent.db"
    ids = seed(source, args.threads, args.turns)
    print(f"seeded {len(ids)} threads x {args.turns} turns; migrating with {args.shards} shards")
    results, seconds = run_shards(source, target, args.shards)
    for r in sorted(results, key=lambda r: r["shard"]):
        c, s = r["counts"], r["stats"]
        print(f"shard {r['shard']}: migrated {c['migrated']}, skipped {c['skipped']}, failed "
              f"{c['failed']} in {s['elapsed_s']:.1f} s ({s['per_s']:.1f} threads/s, peak RSS "
              f"{s['max_rss_mb']:.0f} MB)")
    print(f"wall time {seconds:.1f} s: {len(ids) / seconds:.1f} threads/s overall")
    problems = verify(source, target, ids, results)
    for problem in problems[:20]:
        print("PROBLEM:", problem)
    if problems:
        return 1
    print(f"the union of the {args.shards} shards equals the source: {len(ids)} threads, each "
          "migrated once and identical on the target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
