"""What a user waits for: save+load latency with a slow summarizer, p50 and p99, as ratios
against the stock classic class measured in the same run.

A summarizer that sleeps ``--delay`` seconds per call (1 s: a real model's summary), 30-turn
conversations with ``--think`` seconds between a conversation's turns (a user reading and
typing), 1 and 8 conversations at once. Contenders:

- stock ``ConversationSummaryBufferMemory`` (its own in-memory history: no storage cost at
  all) — it summarizes inside ``save_context`` on every turn past its limit;
- memshift ``fold="inline"`` on SQLite (keep below the trigger: a fold every few turns, the
  user who sends that turn waits for it);
- memshift ``fold="background"`` on SQLite (the fold runs after ``save`` returns).

Printed: p50/p99 per contender, ratios to stock, and summarizer calls (background must make
as many as inline). ``--quick``: 0.2 s summarizer, 0.25 s think time, 15 turns.

    python benchmarks/bench_latency.py [--quick] [--delay 1.0] [--think 1.2] [--turns 30]
"""

from __future__ import annotations

import argparse
import platform
import warnings
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel, count_tokens_cjk  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402

TRIGGER, KEEP, WORDS = 400, 200, 12


class Slow(DeterministicSummarizer):
    """The deterministic summarizer, taking ``delay`` seconds like a model would."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay, self.calls, self._lock = delay, 0, threading.Lock()

    def summarize(self, summary: str, messages: Any) -> str:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return super().summarize(summary, messages)


Op = Callable[[str, int], None]


def stock(summarizer: Slow, _tmp: str) -> tuple[Op, Callable[[], None]]:
    from langchain_classic.memory import ConversationSummaryBufferMemory

    llm = SummarizerChatModel(summarizer=summarizer, token_counter=count_tokens_cjk)
    memories: dict[str, Any] = {}

    def op(thread: str, i: int) -> None:
        memory = memories.get(thread)
        if memory is None:
            memory = memories[thread] = ConversationSummaryBufferMemory(
                llm=llm, max_token_limit=TRIGGER)
        human, ai = filler_turn(thread, i, WORDS)
        memory.save_context({"input": human}, {"output": ai})
        memory.load_memory_variables({})
    return op, memories.clear


def memshift(fold: str) -> Callable[[Slow, str], tuple[Op, Callable[[], None]]]:
    def make(summarizer: Slow, tmp: str) -> tuple[Op, Callable[[], None]]:
        memory = SummaryMemory(store=f"sqlite:///{tmp}/{fold}.db", backend="classic",
                               summarizer=summarizer,
                               policy=MemoryPolicy(max_tokens=TRIGGER, keep_tokens=KEEP,
                                                   token_counter=count_tokens_cjk, fold=fold,
                                                   summary_timeout=60))

        def op(thread: str, i: int) -> None:
            memory.save(thread, *filler_turn(thread, i, WORDS))
            memory.load(thread)

        def close() -> None:
            memory.drain()
            memory.close()
        return op, close
    return make


def measure(make: Callable[[Slow, str], tuple[Op, Callable[[], None]]], threads: int,
            turns: int, delay: float, think: float) -> tuple[list[float], int]:
    summarizer = Slow(delay)
    with tempfile.TemporaryDirectory() as tmp:
        op, close = make(summarizer, tmp)
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

        workers = [threading.Thread(target=user, args=(u,)) for u in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        close()
    return latencies, summarizer.calls


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--delay", type=float, default=None)
    parser.add_argument("--think", type=float, default=None)
    parser.add_argument("--turns", type=int, default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*ConversationSummaryBufferMemory.*deprecated")
    delay = args.delay if args.delay is not None else (0.2 if args.quick else 1.0)
    think = args.think if args.think is not None else (0.25 if args.quick else 1.2)
    turns = args.turns if args.turns is not None else (15 if args.quick else 30)
    print(f"# bench_latency: summarizer {delay:g} s, think {think:g} s, {turns} turns, "
          f"trigger {TRIGGER} keep {KEEP} tokens; {platform.machine()}, "
          f"python {platform.python_version()}")
    contenders = {"stock classic": stock, "memshift inline": memshift("inline"),
                  "memshift background": memshift("background")}
    for threads in (1, 8):
        results = {name: measure(make, threads, turns, delay, think)
                   for name, make in contenders.items()}
        base = results["stock classic"][0]
        b50, b99 = pct(base, 0.5), pct(base, 0.99)
        print(f"\n## {threads} conversation(s) at once")
        print(f"{'contender':<22}{'p50 ms':>10}{'p99 ms':>10}{'p50/stock':>11}{'p99/stock':>11}"
              f"{'calls':>7}")
        for name, (lat, calls) in results.items():
            p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
            print(f"{name:<22}{p50 * 1e3:>10.1f}{p99 * 1e3:>10.1f}{p50 / b50:>11.3f}"
                  f"{p99 / b99:>11.3f}{calls:>7}")
        print(f"(mean of all save+loads: stock {statistics.mean(base) * 1e3:.1f} ms)")
    print("\nThe agent's turn (create_agent + before_model) still folds inline: not measured.")


if __name__ == "__main__":
    main()
