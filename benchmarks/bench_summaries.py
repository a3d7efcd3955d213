"""Summarizer calls and prompt tokens on the bundled long conversation, in one run.

Variants (same offline summarizer, same counter, limit = --max-tokens):
  stock-classic     ConversationSummaryBufferMemory, stock prune() (message pops)
  stock-middleware  SummarizationMiddleware(trigger=keep=("tokens", limit)), stock defaults
  memshift keep=max memshift policy, keep_tokens = max_tokens (classic rule)
  memshift keep=max/2  hysteresis
Ratios are against stock-classic measured in the same run.

    python benchmarks/bench_summaries.py [--max-tokens 400]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from langchain.agents.middleware import SummarizationMiddleware
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.chat_history import InMemoryChatMessageHistory
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from adapters import DeterministicSummarizer, MemoryPolicy, SummarizerChatModel, count_tokens_cjk  # noqa: E402
from adapters.backends.middleware import split_summary  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.conversations import iter_turns, read_messages  # noqa: E402

CONVERSATION = ROOT / "examples" / "conversations" / "long_multithread.jsonl"


class Meter:
    """Counts summarizer calls and the tokens sent to the summarizer."""

    def __init__(self) -> None:
        self.inner = DeterministicSummarizer()
        self.calls = 0
        self.input_tokens = 0

    def summarize(self, summary: str, messages: list) -> str:
        self.calls += 1
        self.input_tokens += count_tokens_cjk(messages) + len(summary) // 4
        return self.inner.summarize(summary, messages)


def run_stock_classic(turns: list, limit: int) -> tuple[Meter, int]:
    meter = Meter()

    class Stock(ConversationSummaryBufferMemory):
        def predict_new_summary(self, messages: list, existing_summary: str) -> str:
            return meter.summarize(existing_summary, messages)

    llm = SummarizerChatModel(summarizer=meter, token_counter=count_tokens_cjk)
    memories: dict[str, Stock] = {}
    prompt = 0
    for turn in turns:
        mem = memories.setdefault(turn.thread_id, Stock(
            llm=llm, max_token_limit=limit, return_messages=True,
            chat_memory=InMemoryChatMessageHistory()))
        prompt += count_tokens_cjk(mem.load_memory_variables({})["history"] + turn.messages[:1])
        mem.chat_memory.add_messages(turn.messages)
        mem.prune()
    return meter, prompt


def run_stock_middleware(turns: list, limit: int) -> tuple[Meter, int]:
    meter = Meter()

    def summarize(messages: list) -> str:
        _, summary, rest = split_summary(messages)
        return meter.summarize(summary, rest)

    mw = SummarizationMiddleware(
        SummarizerChatModel(summarizer=meter), trigger=("tokens", limit), keep=("tokens", limit),
        token_counter=count_tokens_cjk, summarizer=summarize)
    builder = StateGraph(MessagesState)
    builder.add_node("fold", lambda state: mw.before_model(state, None) or {})
    builder.add_edge(START, "fold")
    builder.add_edge("fold", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    prompt = 0
    for turn in turns:
        cfg = {"configurable": {"thread_id": turn.thread_id}}
        prompt += count_tokens_cjk(graph.get_state(cfg).values.get("messages", []) + turn.messages[:1])
        graph.invoke({"messages": turn.messages}, cfg)
    return meter, prompt


def run_memshift(turns: list, limit: int, keep: int) -> tuple[Meter, int]:
    meter = Meter()
    memory = SummaryMemory(backend="classic", policy=MemoryPolicy(max_tokens=limit, keep_tokens=keep),
                           summarizer=meter)
    prompt = 0
    for turn in turns:
        prompt += count_tokens_cjk(memory.load(turn.thread_id).as_messages() + turn.messages[:1])
        memory.save_messages(turn.thread_id, turn.messages)
    return meter, prompt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args()
    turns = list(iter_turns(read_messages(CONVERSATION)))
    limit = args.max_tokens
    full = 0
    seen: dict[str, list] = {}
    for turn in turns:
        full += count_tokens_cjk(seen.get(turn.thread_id, []) + turn.messages[:1])
        seen.setdefault(turn.thread_id, []).extend(turn.messages)
    rows = [
        ("stock-classic", *run_stock_classic(turns, limit)),
        ("stock-middleware", *run_stock_middleware(turns, limit)),
        ("memshift keep=max", *run_memshift(turns, limit, limit)),
        ("memshift keep=max/2", *run_memshift(turns, limit, limit // 2)),
    ]
    base_meter, base_prompt = rows[0][1], rows[0][2]
    print(f"{CONVERSATION.name}: {len(turns)} turns, {len(seen)} threads, limit {limit} tokens")
    print(f"full history prompt tokens: {full}")
    print(f"{'variant':<22}{'calls':>7}{'x':>7}{'summ.in tok':>13}{'x':>7}{'prompt tok':>12}{'x':>7}")
    for name, meter, prompt in rows:
        print(f"{name:<22}{meter.calls:>7}{meter.calls / base_meter.calls:>7.2f}"
              f"{meter.input_tokens:>13}{meter.input_tokens / base_meter.input_tokens:>7.2f}"
              f"{prompt:>12}{prompt / base_prompt:>7.2f}")


if __name__ == "__main__":
    main()
