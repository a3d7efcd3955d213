"""Process entry points for the multi-process tests (importable by spawned children)."""

from __future__ import annotations

import os
import sys
import warnings

from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)


def open_memory(backend: str, url: str) -> SummaryMemory:
    warnings.filterwarnings("ignore")
    return SummaryMemory(backend=backend, store=url, policy=POLICY,
                         summarizer=DeterministicSummarizer(max_chars=1_000_000))


def talk(backend: str, url: str, threads: list[str], turns: int, tag: str) -> None:
    """Save ``turns`` turns on each thread, interleaved; facts are tagged by process."""
    with open_memory(backend, url) as memory:
        for i in range(turns):
            for t in threads:
                memory.save(t, *filler_turn(f"{t}-{tag}", i, 8))


def talk_until_killed(backend: str, url: str, progress: str) -> None:
    """Save turns forever, recording each completed one (fsync'd) for the parent."""
    with open_memory(backend, url) as memory, open(progress, "a") as log:
        i = 0
        while True:
            memory.save("victim", *filler_turn("victim", i, 8))
            log.write(f"{i}\n")
            log.flush()
            os.fsync(log.fileno())
            i += 1


if __name__ == "__main__":  # python -m tests._workers backend url progress
    talk_until_killed(sys.argv[1], sys.argv[2], sys.argv[3])
