"""Child processes for the fleet-evidence tests (``python -m tests._fleet_workers``): one app
server running a shadow memory on a shared store, with no shadow log. Its candidate's view of
the ``diverging`` threads comes back with padded whitespace (a counted mismatch class)."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import replace
from collections.abc import Iterable
from typing import Any

from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)


def shadow(url: str, served: list[str], diverging: set[str]) -> None:
    """Serve ``served`` (two turns and a load each) in shadow, then close (the evidence the
    candidate's worker has not written yet is written at close)."""
    assert not os.environ.get("MEMSHIFT_SHADOW_LOG"), "no shared file in this fleet"
    warnings.filterwarnings("ignore")
    with SummaryMemory(backend="shadow", store=url, policy=POLICY,
                       summarizer=DeterministicSummarizer()) as memory:
        serve_diverging(memory, served, diverging)
    print(f"served {len(served)}", flush=True)


def serve_diverging(memory: SummaryMemory, served: Iterable[str], diverging: set[str]) -> None:
    """Two turns and a load of each ``served`` thread through a shadow memory whose
    candidate's view of the ``diverging`` threads comes back with padded whitespace; then the
    shadow's queue drains (its records are written)."""
    candidate = memory.backend_impl.candidate_backend
    real = candidate.load

    def load(thread_id: str, *args: Any, **kwargs: Any) -> Any:
        view = real(thread_id, *args, **kwargs)
        return replace(view, summary=view.summary + "  ") if thread_id in diverging else view

    candidate.load = load  # type: ignore[method-assign]
    for thread in served:
        for i in range(2):
            memory.save(thread, *filler_turn(thread, i, 8))
        memory.load(thread)
    memory.drain(60)


if __name__ == "__main__":
    command, url, served, diverging = sys.argv[1:5]
    assert command == "shadow"
    shadow(url, served.split(","), set(filter(None, diverging.split(","))))
