"""Shadow evidence the fleet shares: a store concern.

Why in the store: every app server runs its own shadow, and ``memshift rollout advance`` runs
somewhere else; a JSONL file per server never reaches it. The store is what they all share, so
each shadow writes what it found there (off the request path: ``adapters.shadow_evidence``),
and the rollout reads it back.

A row holds what a shadow log line holds minus its text: the thread (as the stores keep it,
like every other memshift table, so ``forget`` deletes it with the rest of the thread), the
kind (``"compared"``: the shadow compared the thread at least once, the evidence that a
mismatch rate has a denominator; or a mismatch kind: ``view``, ``candidate_error``, ...), the
class of difference, whether it is ignored, the turn and the time. Never a diff (diffs quote
conversation text).

The bound: a thread keeps its newest ``PER_THREAD`` rows; writing more deletes its oldest
(in the same transaction), so the table holds at most ``PER_THREAD`` rows per thread and a
thread's count in a rollout's ``mismatches`` is at most that. A thread's rows go with it
(``Store.erase``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["COMPARED", "EvidenceLog", "EvidenceRow", "PER_THREAD"]

PER_THREAD = 100  # rows a thread keeps (the newest)
COMPARED = "compared"  # the kind of a coverage row: the shadow compared this thread


@dataclass(frozen=True)
class EvidenceRow:
    """One thing a shadow found (or that it compared a thread at all)."""

    thread_id: str
    kind: str
    cls: str = ""
    ignored: bool = False
    turn: int = 0
    at: str = ""  # ISO 8601 in UTC, as the shadow log writes it

    @property
    def counted(self) -> bool:
        """A mismatch a rollout guard counts: not a coverage row, not an ignored class."""
        return self.kind != COMPARED and not self.ignored


class EvidenceLog(ABC):
    """A concern: shadow evidence, written by every shadow of the fleet, read by rollouts.
    Each call is its own short transaction: never a thread's, never its lock."""

    @abstractmethod
    def record_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        """Append ``rows`` (then trim each of their threads to its newest ``PER_THREAD``)."""

    @abstractmethod
    def evidence_of(self, thread_ids: Sequence[str]) -> list[EvidenceRow]:
        """Every row of these threads, oldest first."""

    @abstractmethod
    def evidence_since(self, since: str) -> list[EvidenceRow]:
        """Every mismatch row (not coverage) recorded at or after ``since`` (ISO 8601)."""
