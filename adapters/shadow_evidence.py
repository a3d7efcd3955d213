"""A shadow's evidence in the store the fleet shares (``adapters.stores.evidence``).

Why a module of its own: the JSONL log (``adapters.shadow_record``) stays on the server that
wrote it; a rollout guard runs elsewhere and needs every server's findings. ``EvidenceSink``
keeps the rows a shadow produces — each mismatch and candidate failure, and one coverage row
the first time this process compares a thread — in a bounded buffer, and the candidate's
worker writes them after each piece of work (``flush``): a served request never waits for a
statement, and a matching comparison of a thread already covered costs none.

A write that fails is logged and its rows are dropped (counted in ``lost``): evidence never
holds up the candidate, and the JSONL, when configured, still has every mismatch.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from datetime import datetime, timezone

from adapters.shadow_record import Mismatch
from adapters.stores.evidence import COMPARED, EvidenceLog, EvidenceRow

__all__ = ["EvidenceSink"]

logger = logging.getLogger("memshift.shadow")


class EvidenceSink:
    """Rows for ``store``, buffered (at most ``max_pending``; beyond, the oldest are dropped
    and counted) until the candidate's worker flushes them."""

    covered_size = 100_000  # threads this process remembers having recorded as compared

    def __init__(self, store: EvidenceLog, max_pending: int = 10_000) -> None:
        self.store = store
        self.pending: deque[EvidenceRow] = deque(maxlen=max_pending)
        self.lost = 0
        self.covered: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()
        self.warned = False

    def add(self, mismatch: Mismatch) -> None:
        """A mismatch or failure, as its log line minus the diff (no I/O here)."""
        self._push(EvidenceRow(mismatch.thread_id, mismatch.kind, mismatch.cls,
                               mismatch.ignored, mismatch.turn, mismatch.at))

    def compared(self, thread_id: str, turn: int) -> None:
        """The shadow compared this thread: recorded once per thread per process."""
        with self.lock:
            if thread_id in self.covered:
                return
            self.covered[thread_id] = None
            if len(self.covered) > self.covered_size:
                self.covered.popitem(last=False)
        self._push(EvidenceRow(thread_id, COMPARED, COMPARED, False, turn,
                               datetime.now(timezone.utc).isoformat()))

    def _push(self, row: EvidenceRow) -> None:
        with self.lock:
            if len(self.pending) == self.pending.maxlen:
                self.lost += 1
            self.pending.append(row)

    def flush(self) -> None:
        """Write what is pending in one transaction (on the candidate's worker); never raises."""
        with self.lock:
            if not self.pending:
                return
            rows = list(self.pending)
            self.pending.clear()
        try:
            self.store.record_evidence(rows)
        except Exception as exc:  # noqa: BLE001 - evidence never breaks the candidate
            with self.lock:
                self.lost += len(rows)
            if not self.warned:
                self.warned = True
                logger.warning("cannot record shadow evidence in the store (%s); rows dropped "
                               "and counted", type(exc).__name__)

    def forget(self, thread_id: str) -> None:
        """Erasure: the thread's rows still pending go, and it is no longer covered."""
        with self.lock:
            kept = [r for r in self.pending if r.thread_id != thread_id]
            self.pending.clear()
            self.pending.extend(kept)
            self.covered.pop(thread_id, None)
