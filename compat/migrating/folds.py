"""What a migration cannot carry of a thread besides its state: fold records that do not decode.

A memshift source's thread has a fold history (``memshift_folds``); the policy it records is
what the thread's ``migrated`` record carries to the target. A record that does not decode
(``CorruptDataError``) must not pass in silence: the thread's state, which is intact, still
moves, and the run reports the thread *incomplete* — naming it, the table and what was not
carried — and exits 1. Every run that reads the thread finds it again, so a re-run never
reports it carried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from adapters import MemoryPolicy
from adapters.errors import CorruptDataError
from compat.sources import MemorySource

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["Gaps", "gap_of", "history_gaps", "policy_or_gap", "split_gap"]

Gaps = Callable[[str], "str | None"]  # thread -> what its run could not carry, or None


def gap_of(exc: CorruptDataError) -> str:
    """``"<table>: <what was not carried>"`` for a record that does not decode."""
    if exc.table == "memshift_folds":
        return (f"{exc.table}: fold history not carried: record row {exc.row!r} does not "
                "decode, so the folds and the policy it records were not read")
    return f"{exc.table}: row {exc.row!r} does not decode: not carried"


def split_gap(gap: str) -> tuple[str, str]:
    """``(table, what was not carried)`` of a gap ``gap_of`` wrote."""
    table, _, what = gap.partition(": ")
    return table, what


def history_gaps(source: object) -> Gaps | None:
    """A check of each thread's fold history, for sources that keep one (memshift stores);
    ``None`` for the others (stock histories and graphs have no fold records)."""
    if not isinstance(source, MemorySource):
        return None
    memory = source.memory

    def check(thread_id: str) -> str | None:
        from compat.admin import summary_history

        try:
            summary_history(memory, thread_id)
        except CorruptDataError as exc:
            return gap_of(exc)
        return None

    return check


def policy_or_gap(policy_for: Callable[[str], MemoryPolicy | None], thread_id: str,
                  target: SummaryMemory | None) -> tuple[MemoryPolicy | None, str | None]:
    """The thread's policy, or — when the record naming it does not decode — the target's
    (the run's) policy and the gap: the state still moves, and the run says so."""
    try:
        return policy_for(thread_id), None
    except CorruptDataError as exc:
        return (target.active_policy if target is not None else None), gap_of(exc)
