"""What a shadow engine records: ``Mismatch``, the JSONL log it appends, and reading it back.

Why a module of its own: ``adapters.shadow`` runs the experiment (primary serves, candidate
mirrors); publishing what differed (a bounded list, counts per class, the log file, the
``on_mismatch`` callback) is a job of its own, and ``read_log`` is what ``memshift rollout``
and ``doctor`` read without building an engine. A publisher that fails is logged, never
raised into a request.
"""

from __future__ import annotations

import fcntl
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from adapters.telemetry import TELEMETRY

__all__ = ["Mismatch", "MismatchLog", "read_log"]

logger = logging.getLogger("memshift.shadow")


@dataclass(frozen=True)
class Mismatch:
    thread_id: str
    turn: int  # saves seen on the thread by this process
    kind: str  # "view" | "candidate_error" | "candidate_timeout" | "candidate_dropped" | "candidate_disabled"
    diff: list[str]
    timings: dict[str, float] = field(default_factory=dict)  # primary_ms, candidate_ms
    at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    cls: str = ""  # the class of difference (``adapters.diff_classes``); failures: their kind
    ignored: bool = False  # an expected class (``ignore=``): recorded, never counted by a guard


def read_log(path: str) -> Iterator[Mismatch | None]:
    """The records of a shadow log (``log_path``), oldest first; ``None`` for a line that is
    not one (a torn write, an edit). Lines from before classes existed take their kind."""
    with open(path, encoding="utf-8") as log:
        for line in log:
            try:
                entry = json.loads(line)
                thread_id, kind = entry["thread_id"], entry["kind"]
                record = Mismatch(thread_id, int(entry.get("turn", 0)), kind,
                                  list(entry.get("diff", [])), dict(entry.get("timings", {})),
                                  str(entry.get("at", "")), str(entry.get("cls") or kind),
                                  bool(entry.get("ignored")))
            except (ValueError, KeyError, TypeError, AttributeError):
                yield None
                continue
            yield record if isinstance(thread_id, str) and isinstance(kind, str) else None


class MismatchLog:
    """One shadow engine's mismatches: the first ``max_recorded`` kept, every one counted by
    (class, ignored), appended to ``log_path`` (JSONL), handed to ``store`` (buffered for the
    store the fleet shares: ``adapters.shadow_evidence``) and to ``on_mismatch``. Also the
    number of saves seen per thread (a mismatch names the turn it was found at)."""

    def __init__(self, *, on_mismatch: Callable[[Mismatch], None] | None = None,
                 log_path: str | None = None, max_recorded: int = 10_000,
                 store: Callable[[Mismatch], None] | None = None) -> None:
        self.on_mismatch, self.log_path, self.max_recorded = on_mismatch, log_path, max_recorded
        self.store = store
        self.mismatches: list[Mismatch] = []
        self.classes: Counter[tuple[str, bool]] = Counter()  # (class, ignored) -> mismatches
        self.turns: dict[str, int] = {}
        self.lock = threading.Lock()

    def saw_turn(self, thread_id: str) -> None:
        """One more save seen on the thread."""
        with self.lock:
            self.turns[thread_id] = self.turns.get(thread_id, 0) + 1

    def record(self, thread_id: str, kind: str, diff: list[str],
               timings: dict[str, float] | None = None, cls: str = "", ignored: bool = False,
               redactor: Callable[[str], str] | None = None) -> Mismatch:
        """Publish one mismatch (``redactor``: diffs quote conversation text, scrubbed like
        the rest)."""
        if redactor is not None:
            diff = [redactor(d) for d in diff]
        mismatch = Mismatch(thread_id, self.turns.get(thread_id, 0), kind, diff, timings or {},
                            cls=cls or kind, ignored=ignored)
        TELEMETRY.mismatch(kind, mismatch.cls, ignored)
        with self.lock:
            self.classes[(mismatch.cls, ignored)] += 1
            if len(self.mismatches) < self.max_recorded:
                self.mismatches.append(mismatch)
        logger.info("shadow mismatch (%s, class %s%s) on a thread at turn %d", kind,
                    mismatch.cls, ", ignored" if ignored else "", mismatch.turn)
        if self.log_path:
            try:
                with open(self.log_path, "a", encoding="utf-8") as log:
                    fcntl.flock(log, fcntl.LOCK_EX)  # erasure rewrites the log under this lock
                    log.write(json.dumps(asdict(mismatch), ensure_ascii=False) + "\n")
            except OSError:
                logger.exception("cannot write the shadow log")
        if self.store is not None:  # buffered: written by the candidate's worker
            self.store(mismatch)
        if self.on_mismatch is not None:
            try:
                self.on_mismatch(mismatch)
            except Exception:  # a broken publisher never breaks a request
                logger.exception("on_mismatch callback failed")
        return mismatch

    def forget(self, thread_id: str) -> int:
        """Drop the thread's recorded mismatches and its turn count; how many were dropped."""
        with self.lock:
            kept = [m for m in self.mismatches if m.thread_id != thread_id]
            removed = len(self.mismatches) - len(kept)
            self.mismatches[:] = kept
            self.turns.pop(thread_id, None)
        return removed
