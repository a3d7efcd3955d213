"""Background folds against inline folds of the same conversations: what a user waits for
(save+load p50/p99) and what the summarizer is asked (calls, input tokens), in one run.

A summarizer that sleeps ``--delay`` seconds per call (1 s: a real model's summary) and
counts its calls and the tokens it is sent (previous summary + folded messages, the policy's
counter); ``--turns`` turns per conversation with ``--think`` seconds between a conversation's
turns (0.25 s: a brisk pace, several turns land while a fold is in flight; 1.2 s: a user
reading and typing), 1 and 8 conversations at once (threads). Contenders, each on its own
SQLite file, same conversations:

- memshift ``fold="inline"`` with a stock-style policy (``MemoryPolicy.stock``: past the limit
  every turn folds, as ``ConversationSummaryBufferMemory`` does) — the base of the ratios;
- memshift ``fold="background"``, same policy;
- with ``--stock``: the stock ``ConversationSummaryBufferMemory`` itself (in-memory history),
  for reference (its calls are counted; its input tokens too).

Printed per pace and concurrency: p50/p99/mean ms, p50 and p99 as a ratio to inline, summarizer
calls and input tokens and their ratio to inline. Targets (issue 38 #4): background p50 <= 0.05x
and p99 <= 0.3x inline; calls and input tokens <= inline's.

    python benchmarks/bench_background_folds.py [--turns 24] [--delay 1.0] [--think 0.25 1.2]
        [--threads 1 8] [--stock] [--policy stock|hysteresis]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from langchain_core.messages import HumanMessage  # noqa: E402

from adapters import (  # noqa: E402
    DeterministicSummarizer,
    MemoryPolicy,
    count_tokens_cjk,
)
from compat import SummaryMemory  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402
from _variants import paced_latencies, pct, stock_per_thread  # noqa: E402

TRIGGER, KEEP, WORDS = 400, 200, 12


class Slow(DeterministicSummarizer):
    """The deterministic summarizer, taking ``delay`` seconds like a model would; counts its
    calls and the tokens it is sent."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay, self.calls, self.tokens = delay, 0, 0
        self._lock = threading.Lock()

    def summarize(self, summary: str, messages: Any) -> str:
        sent = count_tokens_cjk([HumanMessage(summary), *messages]) if summary else \
            count_tokens_cjk(list(messages))
        with self._lock:
            self.calls += 1
            self.tokens += sent
        time.sleep(self.delay)
        return super().summarize(summary, messages)


Op = Callable[[str, int], None]
Make = Callable[[Slow, str], tuple[Op, Callable[[], None]]]


def stock(summarizer: Slow, _tmp: str, policy_name: str) -> tuple[Op, Callable[[], None]]:
    return stock_per_thread(summarizer, TRIGGER, WORDS)


def policy_for(name: str, fold: str) -> MemoryPolicy:
    if name == "stock":  # past the limit every turn folds (keep = trigger), as stock does
        return MemoryPolicy.stock(max_token_limit=TRIGGER, token_counter=count_tokens_cjk,
                                  fold=fold, summary_timeout=60)
    return MemoryPolicy(max_tokens=TRIGGER, keep_tokens=KEEP, token_counter=count_tokens_cjk,
                        fold=fold, summary_timeout=60)


def memshift(fold: str) -> Callable[[Slow, str, str], tuple[Op, Callable[[], None]]]:
    def make(summarizer: Slow, tmp: str, policy_name: str) -> tuple[Op, Callable[[], None]]:
        memory = SummaryMemory(store=f"sqlite:///{tmp}/{fold}.db", backend="classic",
                               summarizer=summarizer, policy=policy_for(policy_name, fold))

        def op(thread: str, i: int) -> None:
            memory.save(thread, *filler_turn(thread, i, WORDS))
            memory.load(thread)

        def close() -> None:  # every background fold lands (and is counted) before the figures
            memory.drain()
            memory.close()
        return op, close
    return make


def measure(make: Any, policy_name: str, threads: int, turns: int, delay: float,
            think: float) -> tuple[list[float], int, int]:
    summarizer = Slow(delay)
    with tempfile.TemporaryDirectory() as tmp:
        op, close = make(summarizer, tmp, policy_name)
        latencies = paced_latencies(op, threads, turns, think)
        close()
    return latencies, summarizer.calls, summarizer.tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--think", type=float, nargs="+", default=[0.25, 1.2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--policy", choices=("stock", "hysteresis"), default="stock")
    parser.add_argument("--stock", action="store_true", help="also the stock classic class")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*ConversationSummaryBufferMemory.*deprecated")
    print(f"# bench_background_folds: summarizer {args.delay:g} s, {args.turns} turns, policy "
          f"{args.policy} (trigger {TRIGGER}"
          f"{'' if args.policy == 'stock' else f', keep {KEEP}'} tokens), SQLite; "
          f"{platform.machine()}, python {platform.python_version()}")
    contenders: dict[str, Any] = {"memshift inline": memshift("inline"),
                                  "memshift background": memshift("background")}
    if args.stock:
        contenders["stock classic"] = stock
    started = time.perf_counter()
    for think in args.think:
        for threads in args.threads:
            results = {name: measure(make, args.policy, threads, args.turns, args.delay, think)
                       for name, make in contenders.items()}
            base, bcalls, btokens = results["memshift inline"]
            b50, b99 = pct(base, 0.5), pct(base, 0.99)
            print(f"\n## {think:g} s between turns, {threads} conversation(s) at once")
            print(f"{'contender':<22}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}{'p50/in':>8}"
                  f"{'p99/in':>8}{'calls':>7}{'calls/in':>9}{'tokens':>9}{'tok/in':>8}")
            for name, (lat, calls, tokens) in results.items():
                p50, p99, mean = pct(lat, 0.5), pct(lat, 0.99), statistics.mean(lat)
                print(f"{name:<22}{p50 * 1e3:>9.1f}{p99 * 1e3:>9.1f}{mean * 1e3:>9.1f}"
                      f"{p50 / b50:>8.3f}{p99 / b99:>8.3f}{calls:>7}{calls / max(bcalls, 1):>9.2f}"
                      f"{tokens:>9}{tokens / max(btokens, 1):>8.2f}")
            sys.stdout.flush()
    print(f"\n# total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
