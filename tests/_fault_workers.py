"""Child processes for the fault-injection tests (run as ``python -m tests._fault_workers``)."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

from langchain_core.messages import AIMessage, HumanMessage

from adapters import DeterministicSummarizer, MemoryPolicy, StoreError
from compat import SummaryMemory
from compat.testing.conversations import filler_turn

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)


def _memory(backend: str, url: str, retries: int = 0) -> SummaryMemory:
    warnings.filterwarnings("ignore")
    for attempt in range(retries + 1):  # the parent may be terminating connections right now
        try:
            return SummaryMemory(backend=backend, store=url, policy=POLICY,
                                 summarizer=DeterministicSummarizer(max_chars=1_000_000))
        except StoreError:
            if attempt == retries:
                raise
            time.sleep(0.1 * (attempt + 1))
    raise AssertionError("unreachable")


def talk_with_retries(backend: str, url: str, thread: str, tag: str, turns: int, log: str) -> None:
    """Save turns with stable message ids; a ``StoreError`` is retried with the same ids
    (a retry of a committed turn is a no-op). Each returned save is logged, fsync'd."""
    with _memory(backend, url, retries=50) as memory, open(log, "a") as out:
        open(log + ".ready", "w").close()  # opened: the parent may start cutting connections
        for i in range(turns):
            human, ai = filler_turn(f"{tag}", i, 8)
            turn = [HumanMessage(human, id=f"{tag}-{i}-h"), AIMessage(ai, id=f"{tag}-{i}-a")]
            for attempt in range(200):
                try:
                    memory.save_messages(thread, turn)
                    break
                except StoreError:
                    time.sleep(0.01 * min(attempt + 1, 20))
            else:
                raise SystemExit(f"turn {i} never saved")
            out.write(f"{i}\n")
            out.flush()
            os.fsync(out.fileno())


def open_and_save(backend: str, url: str, thread: str) -> None:
    """Open a (possibly fresh) store and save one turn: the concurrent-start test."""
    with _memory(backend, url) as memory:
        memory.save(thread, "hello", "hi")
        print(json.dumps({"messages": len(memory.load(thread).messages)}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "talk":
        talk_with_retries(args[0], args[1], args[2], args[3], int(args[4]), args[5])
    elif command == "open":
        open_and_save(args[0], args[1], args[2])
    else:
        raise SystemExit(f"unknown command {command!r}")
