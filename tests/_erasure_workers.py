"""Child processes for the interrupted-erasure tests (``python -m tests._erasure_workers``):
a ``forget`` killed with ``os._exit`` at a chosen point (no cleanup runs, as with kill -9),
and a writer that keeps saving another thread of the same store."""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any

from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory, admin
from compat.testing.conversations import filler_turn

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)
KILLED = 9


def _die_after(owner: Any, name: str) -> None:
    real = getattr(owner, name)

    def dying(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        os._exit(KILLED)

    setattr(owner, name, dying)


def _die_before(owner: Any, name: str) -> None:
    setattr(owner, name, lambda *a, **k: os._exit(KILLED))


def forget_killed(url: str, thread: str, match: str, point: str) -> None:
    """``point``: ``before_erase`` (the audit row is started, nothing erased), ``after_erase``
    (the erase committed, nothing compacted, no audit finished), ``after_compact`` (the file
    compacted, the audit row not finished)."""
    import compat.erasure as erasure
    from adapters.stores.sqlite import SqliteStore
    from compat.runlog import RunLog

    warnings.filterwarnings("ignore")
    if point == "before_erase":
        _die_before(erasure, "_erase")
        _die_before(erasure, "_rewrite")
    elif point == "after_erase":
        _die_after(erasure, "_erase")
        _die_after(erasure, "_rewrite")
    elif point == "after_compact":
        _die_after(SqliteStore, "compact")
        _die_before(RunLog, "finish")
    with SummaryMemory(backend="staged", store=url, policy=POLICY,
                       summarizer=DeterministicSummarizer()) as memory:
        admin.forget(memory, thread, match or None)
    sys.exit(0)  # the kill point was never reached


def keep_writing(url: str, thread: str, stop_file: str) -> None:
    """Save turns of ``thread`` until ``stop_file`` exists."""
    warnings.filterwarnings("ignore")
    with SummaryMemory(backend="staged", store=url, policy=POLICY,
                       summarizer=DeterministicSummarizer()) as memory:
        open(stop_file + ".ready", "w").close()
        i = 0
        while not os.path.exists(stop_file):
            memory.save(thread, *filler_turn(thread, i, 8))
            i += 1
            time.sleep(0.002)


if __name__ == "__main__":
    {"forget_killed": forget_killed, "keep_writing": keep_writing}[sys.argv[1]](*sys.argv[2:])
