"""What a user waits for: save+load latency with a slow summarizer, p50 and p99, as ratios
against the stock classic class measured in the same run.

A summarizer that sleeps ``--delay`` seconds per call (1 s: a real model's summary), 30-turn
conversations with ``--think`` seconds between a conversation's turns (a user reading and
typing), 1 and 8 conversations at once. Contenders:

- stock ``ConversationSummaryBufferMemory`` (its own in-memory history: no storage cost at
  all) — it summarizes inside ``save_context`` on every turn past its limit;
- memshift ``fold="inline"`` on SQLite (keep below the trigger: a fold every few turns, the
  user who sends that turn waits for it);
- memshift ``fold="background"`` on SQLite (the fold runs after ``save`` returns);

and the agent's turn (``create_agent(...).invoke``, a model that answers at once):

- stock ``create_agent`` + ``SummarizationMiddleware`` on LangGraph's ``InMemorySaver`` — it
  summarizes inside ``before_model``, before the model answers;
- memshift ``memory.middleware`` + ``memory.checkpointer`` on SQLite, inline and background
  (background: ``before_model`` hands the fold over; it lands at the next model call).

Printed: p50/p99/mean per contender, ratios to stock, and summarizer calls (background must
make as many as inline). ``--quick``: 0.2 s summarizer, 0.25 s think time, 15 turns.

    python benchmarks/bench_latency.py [--quick] [--delay 1.0] [--think 1.2] [--turns 30] [--only save|agent]
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

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel, count_tokens_cjk  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.testing.conversations import filler_turn  # noqa: E402
from _variants import paced_latencies, pct, stock_per_thread  # noqa: E402

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
    return stock_per_thread(summarizer, TRIGGER, WORDS)


def memshift(fold: str) -> Callable[[Slow, str], tuple[Op, Callable[[], None]]]:
    def make(summarizer: Slow, tmp: str) -> tuple[Op, Callable[[], None]]:
        memory = _memory(summarizer, f"{tmp}/{fold}.db", "classic", fold)

        def op(thread: str, i: int) -> None:
            memory.save(thread, *filler_turn(thread, i, WORDS))
            memory.load(thread)
        return op, _closer(memory)
    return make


def _memory(summarizer: Slow, path: str, backend: str, fold: str) -> SummaryMemory:
    """memshift on SQLite with the benchmark's policy (both measured paths share it)."""
    return SummaryMemory(store=f"sqlite:///{path}", backend=backend, summarizer=summarizer,
                         policy=MemoryPolicy(max_tokens=TRIGGER, keep_tokens=KEEP,
                                             token_counter=count_tokens_cjk, fold=fold,
                                             summary_timeout=60))


def _closer(memory: SummaryMemory) -> Callable[[], None]:
    def close() -> None:  # every background fold lands (and is counted) before the figures
        memory.drain()
        memory.close()
    return close


class Instant(BaseChatModel):
    """The agent's model: answers at once (the latency measured is memory's, not a model's)."""

    @property
    def _llm_type(self) -> str:
        return "instant"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Instant:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        answer = f"answer to: {str(messages[-1].content)[:60]}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(answer))])


def _asker(agent: Any) -> Op:
    def op(thread: str, i: int) -> None:
        human, _ = filler_turn(thread, i, WORDS)
        agent.invoke({"messages": [HumanMessage(human)]},
                     {"configurable": {"thread_id": thread}})
    return op


def stock_agent(summarizer: Slow, _tmp: str) -> tuple[Op, Callable[[], None]]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    llm = SummarizerChatModel(summarizer=summarizer, token_counter=count_tokens_cjk)
    middleware = SummarizationMiddleware(llm, trigger=("tokens", TRIGGER), keep=("tokens", KEEP),
                                         token_counter=count_tokens_cjk)
    agent = create_agent(Instant(), middleware=[middleware], checkpointer=InMemorySaver())
    return _asker(agent), lambda: None


def memshift_agent(fold: str) -> Callable[[Slow, str], tuple[Op, Callable[[], None]]]:
    def make(summarizer: Slow, tmp: str) -> tuple[Op, Callable[[], None]]:
        from langchain.agents import create_agent

        memory = _memory(summarizer, f"{tmp}/agent-{fold}.db", "middleware", fold)
        agent = create_agent(Instant(), middleware=[memory.middleware],
                             checkpointer=memory.checkpointer)
        return _asker(agent), _closer(memory)
    return make


def measure(make: Callable[[Slow, str], tuple[Op, Callable[[], None]]], threads: int,
            turns: int, delay: float, think: float) -> tuple[list[float], int]:
    summarizer = Slow(delay)
    with tempfile.TemporaryDirectory() as tmp:
        op, close = make(summarizer, tmp)
        latencies = paced_latencies(op, threads, turns, think)
        close()
    return latencies, summarizer.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--delay", type=float, default=None)
    parser.add_argument("--think", type=float, default=None)
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--only", choices=("save", "agent"), default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*ConversationSummaryBufferMemory.*deprecated")
    delay = args.delay if args.delay is not None else (0.2 if args.quick else 1.0)
    think = args.think if args.think is not None else (0.25 if args.quick else 1.2)
    turns = args.turns if args.turns is not None else (15 if args.quick else 30)
    print(f"# bench_latency: summarizer {delay:g} s, think {think:g} s, {turns} turns, "
          f"trigger {TRIGGER} keep {KEEP} tokens; {platform.machine()}, "
          f"python {platform.python_version()}")
    groups = {
        "save_context + load_memory_variables": {
            "stock classic": stock, "memshift inline": memshift("inline"),
            "memshift background": memshift("background")},
        "the agent's turn (invoke)": {
            "stock agent": stock_agent, "memshift agent inline": memshift_agent("inline"),
            "memshift agent background": memshift_agent("background")},
    }
    if args.only is not None:
        groups = dict([list(groups.items())[args.only == "agent"]])
    for title, contenders in groups.items():
        for threads in (1, 8):
            results = {name: measure(make, threads, turns, delay, think)
                       for name, make in contenders.items()}
            base = next(iter(results.values()))[0]
            b50, b99, bmean = pct(base, 0.5), pct(base, 0.99), statistics.mean(base)
            print(f"\n## {title}: {threads} conversation(s) at once")
            print(f"{'contender':<27}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}{'p50/st':>8}"
                  f"{'p99/st':>8}{'mean/st':>8}{'calls':>6}")
            for name, (lat, calls) in results.items():
                p50, p99, mean = pct(lat, 0.5), pct(lat, 0.99), statistics.mean(lat)
                print(f"{name:<27}{p50 * 1e3:>9.1f}{p99 * 1e3:>9.1f}{mean * 1e3:>9.1f}"
                      f"{p50 / b50:>8.3f}{p99 / b99:>8.3f}{mean / bmean:>8.3f}{calls:>6}")

if __name__ == "__main__":
    main()
