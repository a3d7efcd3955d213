"""What an application pays when it starts: ``import compat``, the first
``SummaryMemory().save(None, "hi", "there")`` after it (construction included: in-memory store,
backend ``classic``, the offline summarizer), and a save once warm — each in a fresh process,
the median of ``--runs`` runs. Also printed: the memshift modules the import loads.

``--root DIR`` (repeatable) measures other checkouts in the same run, interleaved run by run so
a busy machine slows every tree alike (e.g. a copy of the tree before a change, then ``.``).
``--breakdown`` splits the import (``import compat``, then ``from compat import
SummaryMemory``, which brings the real ``ConversationSummaryBufferMemory``'s module as the
stock import it replaces does) and attributes the first save to what that tree's first save
imports (found by the plain runs), in the order it imports them: the real class's module
(``langchain_classic.memory``, where the name does not bring it), the stand-in model the
classic class is given, the classic backend's subclass, and the middleware's fold graph
(where the first save's placement check built it to ask the middleware side whether it holds
the thread; a saver lookup answers that now).

    python benchmarks/bench_first_save.py [--runs 5] [--root /tmp/before --root .] [--breakdown]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys, time
sys.path.insert(0, {root!r})
t0, c0 = time.perf_counter(), time.process_time()
import compat
tp = time.perf_counter()
from compat import SummaryMemory
t1, c1 = time.perf_counter(), time.process_time()
modules = sorted(m for m in sys.modules if m.split(".")[0] in ("compat", "adapters"))
total = len(sys.modules)
parts = {{"import compat": tp - t0, "from compat import SummaryMemory": t1 - tp}}
for label, name in {parts!r}:
    start = time.perf_counter()
    __import__(name)
    if name == {graph!r}:
        sys.modules[name].fold_graph()
    parts[label] = time.perf_counter() - start
stages = [name for name in {stages!r} if name not in sys.modules]
t2, c2 = time.perf_counter(), time.process_time()
memory = SummaryMemory()
memory.save(None, "hi", "there")
t3, c3 = time.perf_counter(), time.process_time()
loaded = [name for name in stages if name in sys.modules]  # what the first save imported
steady = []
for i in range({turns}):
    start = time.perf_counter()
    memory.save(None, f"question {{i}}", f"answer {{i}}")
    steady.append(time.perf_counter() - start)
steady.sort()
import json
print(json.dumps({{"import": t1 - t0, "first": t3 - t2, "import_cpu": c1 - c0,
                  "first_cpu": c3 - c2, "steady": steady[len(steady) // 2],
                  "ours": modules, "total": total, "parts": parts, "loaded": loaded}}))
"""

GRAPH = "adapters.backends.agent_middleware"
# what a first save may import, in the order it does (the graph: imported and built)
BREAKDOWN = [("langchain_classic.memory (the real classic class)", "langchain_classic.memory"),
             ("adapters.summarizer_model (the classic llm stand-in)", "adapters.summarizer_model"),
             ("adapters.backends.classic_memory", "adapters.backends.classic_memory"),
             ("middleware fold graph (built)", GRAPH)]


def probe(root: Path, turns: int, stages: list[str] | None = None) -> dict[str, Any]:
    """One fresh process; ``stages``: import (and time) these first (the breakdown)."""
    parts = [(label, name) for label, name in BREAKDOWN if name in (stages or [])]
    code = PROBE.format(root=str(root), parts=parts, graph=GRAPH,
                        stages=[name for _, name in BREAKDOWN], turns=turns)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"probe failed in {root}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def stock_import() -> float:
    """Importing the stock class alone in a fresh process: the floor the real class sets."""
    code = ("import time; t = time.perf_counter()\n"
            "from langchain_classic.memory import ConversationSummaryBufferMemory\n"
            "print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200, help="warm saves per run")
    parser.add_argument("--root", action="append", type=Path,
                        help="a checkout to measure (repeatable); default: this one")
    parser.add_argument("--breakdown", action="store_true")
    args = parser.parse_args()
    roots = [r.resolve() for r in (args.root or [ROOT])]
    runs: dict[Path, list[dict[str, Any]]] = {r: [] for r in roots}
    stock: list[float] = []
    for _ in range(args.runs):  # interleaved: a busy machine slows every tree alike
        for root in roots:
            runs[root].append(probe(root, args.turns))
        stock.append(stock_import())
    print("seconds, median of runs (wall, and this process's CPU: steadier on a busy machine)")
    print(f"{'tree':<24} {'import':>7} {'cpu':>6} {'first save':>11} {'cpu':>6} "
          f"{'warm save us':>13} {'memshift mods':>14} {'all mods':>9}")
    for root, results in runs.items():
        med = {k: statistics.median(r[k] for r in results)
               for k in ("import", "import_cpu", "first", "first_cpu", "steady")}
        print(f"{str(root)[-24:]:<24} {med['import']:>7.3f} {med['import_cpu']:>6.3f} "
              f"{med['first']:>11.3f} {med['first_cpu']:>6.3f} {med['steady'] * 1e6:>13.1f} "
              f"{len(results[-1]['ours']):>14} {results[-1]['total']:>9}")
    print(f"stock: import ConversationSummaryBufferMemory alone (fresh process): "
          f"{statistics.median(stock):.3f} s (median of {len(stock)})")
    if len(roots) > 1:
        imports, saves = ([statistics.median(r[k] for r in runs[root]) for root in roots]
                          for k in ("import_cpu", "first_cpu"))
        print(f"ratio last/first tree (CPU): import {imports[-1] / imports[0]:.2f}x, "
              f"first save {saves[-1] / saves[0]:.2f}x, import + first save "
              f"{(imports[-1] + saves[-1]) / (imports[0] + saves[0]):.2f}x")
    if args.breakdown:
        for root in roots:
            stages = runs[root][-1]["loaded"]
            parts = [probe(root, args.turns, stages) for _ in range(args.runs)]
            print(f"\n{root}: the import, then what its first save imports (median of "
                  f"{len(parts)}, each after the previous):")
            for label in parts[0]["parts"]:
                print(f"  {label:<55} {statistics.median(p['parts'][label] for p in parts):.3f} s")
            print(f"  {'the rest: SummaryMemory() + save':<55} "
                  f"{statistics.median(p['first'] for p in parts):.3f} s")
            print(f"  memshift modules after import: {', '.join(parts[0]['ours'])}")


if __name__ == "__main__":
    main()
