"""The default token counter against o200k_base and against LangChain's stock approximation.

1. Accuracy: ``count_tokens_cjk`` / o200k_base on each seed document (whole, and one message
   per paragraph) and each bundled conversation (whole, and the spread per message), next to
   the previous 4-chars-per-token formula.
2. Speed: ``count_tokens_approximately`` time / ours on the same message lists (> 1: we are
   faster), median of interleaved repetitions; warm (the memo has seen the texts, as when a
   window is recounted every turn) and cold (memo cleared before every call); then cold first
   counts of fresh strings (never hashed, never counted) by size: short chat messages (20-300
   characters), paragraphs of the seeds and conversations, and a 12 KB document.
3. ``MemoryPolicy.plan_fold`` for windows of 100/200/400/800 messages: the built-in counter
   (each message counted once) vs the same counter unmarked (the plain scan, one count per
   candidate tail, as before); the ratio per doubling is ~2 when linear, ~4 when quadratic.

    python benchmarks/bench_tokens.py [--reps 15] [--seeds DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from langchain_core.messages import BaseMessage, HumanMessage  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402

from adapters import tokens  # noqa: E402
from adapters.policy import MemoryPolicy  # noqa: E402
from adapters.tokens import count_tokens_cjk, message_text, tiktoken_counter  # noqa: E402
from compat.conversations import read_messages  # noqa: E402

__all__ = ["main"]

Counter = Callable[[Sequence[BaseMessage]], int]
_OLD_CJK = re.compile(
    r"[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def old_counter(messages: Sequence[BaseMessage]) -> int:
    """The previous default (one token per CJK character, 4 characters per token otherwise)."""
    total = 0.0
    for message in messages:
        text = message_text(message)
        cjk = len(_OLD_CJK.findall(text))
        total += cjk + (len(text) - cjk) / 4 + 3 + 85 * tokens.non_text_blocks(message)
    return math.ceil(total)


def seed_dir(given: str | None) -> Path | None:
    for candidate in (given, os.environ.get("MEMSHIFT_SEEDS"), ROOT.parent / "shared" / "seeds",
                      "/work/shared/seeds"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def corpora(seeds: Path | None) -> dict[str, list[BaseMessage]]:
    """Message lists by name: each seed whole and by paragraph, each conversation."""
    out: dict[str, list[BaseMessage]] = {}
    for path in sorted(seeds.glob("*.txt")) if seeds else []:
        text = path.read_text(encoding="utf-8")
        out[f"seed {path.name[:3]} whole"] = [HumanMessage(text)]
        out[f"seed {path.name[:3]} paragraphs"] = [
            HumanMessage(line) for line in text.split("\n") if line.strip()]
    for path in sorted((ROOT / "examples" / "conversations").glob("*.jsonl")):
        out[path.stem] = [m for _, _, m in read_messages(path)]
    return out


def accuracy(lists: dict[str, list[BaseMessage]]) -> None:
    o200k = tiktoken_counter("o200k_base")
    print("accuracy: counter / o200k_base (target 0.9-1.2)")
    print(f"  {'message list':<30}{'msgs':>6}{'before':>9}{'after':>8}   after, per message")
    for name, messages in lists.items():
        exact = o200k(messages)
        per = [count_tokens_cjk([m]) / o200k([m]) for m in messages]
        spread = f"{min(per):.2f}-{max(per):.2f}, {sum(0.9 <= r <= 1.2 for r in per)}/{len(per)} in band"
        print(f"  {name:<30}{len(messages):>6}{old_counter(messages) / exact:>9.3f}"
              f"{count_tokens_cjk(messages) / exact:>8.3f}   {spread}")


def _timed(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return time.perf_counter() - start


def speed_ratio(ours: Callable[[], object], stock: Callable[[], object], reps: int) -> float:
    """Median over interleaved repetitions of stock time / our time."""
    number = max(1, int(0.002 / max(_timed(stock, 1), 1e-7)))  # ~2 ms a sample
    ratios = []
    for _ in range(reps):
        ratios.append(_timed(stock, number) / _timed(ours, number))
    return statistics.median(ratios)


def speed(lists: dict[str, list[BaseMessage]], reps: int) -> None:
    print("\nspeed: count_tokens_approximately time / counter time (target >= 0.5)")
    print(f"  {'message list':<30}{'before':>9}{'warm':>8}{'cold':>8}")
    for name, messages in lists.items():
        def cold(ms: list[BaseMessage] = messages) -> int:
            tokens._MEMO.clear()
            return count_tokens_cjk(ms)

        def stock(ms: list[BaseMessage] = messages) -> int:
            return count_tokens_approximately(ms)

        count_tokens_cjk(messages)
        before = speed_ratio(lambda: old_counter(messages), stock, reps)
        warm = speed_ratio(lambda: count_tokens_cjk(messages), stock, reps)
        print(f"  {name:<30}{before:>9.3f}{warm:>8.2f}{speed_ratio(cold, stock, reps):>8.3f}")


def _fresh(texts: Sequence[str], copies: int) -> list[list[BaseMessage]]:
    """``copies`` lists of messages whose strings are new objects (no cached hash, no memo)."""
    return [[HumanMessage((t + " ")[:-1]) for t in texts] for _ in range(copies)]


def cold_buckets(lists: dict[str, list[BaseMessage]], reps: int) -> None:
    """First counts of never-seen strings: the memo and the str hash cache cannot help."""
    print("\ncold first count of fresh strings: count_tokens_approximately time / ours (>= 0.5)")
    texts = [message_text(m) for ms in lists.values() for m in ms]
    buckets = {
        "short chat (20-300 chars)": [t for t in texts if 20 <= len(t) <= 300][:400],
        "paragraphs (all lines)": [t for name, ms in lists.items() if "paragraphs" in name
                                   for t in (message_text(m) for m in ms)][:400],
        "12 KB document": [max((message_text(ms[0]) for name, ms in lists.items()
                                if name.endswith("whole")), key=lambda t: len(t.encode()),
                               default="x " * 6000)],
    }
    for label, bucket in buckets.items():
        if not bucket:
            continue
        ratios = []
        for _ in range(reps):
            ours_lists, stock_lists = _fresh(bucket, 4), _fresh(bucket, 4)
            tokens._MEMO.clear()
            start = time.perf_counter()
            for ms in stock_lists:
                count_tokens_approximately(ms)
            stock = time.perf_counter() - start
            start = time.perf_counter()
            for ms in ours_lists:
                tokens._MEMO.clear()
                count_tokens_cjk(ms)
            ratios.append(stock / (time.perf_counter() - start))
        chars = sum(map(len, bucket)) / len(bucket)
        print(f"  {label:<30}{len(bucket):>5} texts, {chars:>7.0f} chars avg: "
              f"{statistics.median(ratios):.3f}")


def plan_fold_scaling(lists: dict[str, list[BaseMessage]], reps: int) -> None:
    print("\nplan_fold: milliseconds per plan, and growth per doubling of the window")
    source = [m for ms in lists.values() if len(ms) > 1 for m in ms]

    def unmarked(ms: Sequence[BaseMessage]) -> int:  # same counts, no additive marker
        return count_tokens_cjk(ms)

    for label, counter in (("built-in (additive)", count_tokens_cjk),
                           ("unmarked (plain scan)", unmarked)):
        previous = None
        cells = []
        for size in (100, 200, 400, 800):
            window = [source[i % len(source)] for i in range(size)]
            total = count_tokens_cjk(window)
            policy = MemoryPolicy(max_tokens=total - 1, keep_tokens=200, token_counter=counter)
            policy.plan_fold(window)  # warm the memo
            seconds = statistics.median(_timed(lambda: policy.plan_fold(window), 1)
                                        for _ in range(max(3, reps // 3)))
            growth = f" (x{seconds / previous:.1f})" if previous else ""
            cells.append(f"n={size}: {seconds * 1e3:.2f}{growth}")
            previous = seconds
        print(f"  {label:<24}" + "  ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15, help="interleaved repetitions per ratio")
    parser.add_argument("--seeds", help="folder of seed .txt documents (default: shared/seeds)")
    args = parser.parse_args(argv)
    lists = corpora(seed_dir(args.seeds))
    accuracy(lists)
    speed(lists, args.reps)
    cold_buckets(lists, args.reps)
    plan_fold_scaling(lists, args.reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
