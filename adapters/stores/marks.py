"""What a re-run of a migration reads instead of every thread: a page of threads at a time.

A migration's fold record carries a mark (the source's size and newest id, set by
``compat.migration``); the transaction that writes it also stamps it (``stamp_in``) with the
thread's *state version* as that transaction leaves it: which backend serves the thread (the
placement and its version) and the backend's newest state — the newest root checkpoint id
for middleware, a digest of the summary row and the window rows for classic. Any write to
the thread's state afterwards (a turn, a fold, a clear, a restore, an agent's checkpoint, a
move) changes the stamp. ``thread_marks`` reads the same facts for a whole page of threads
in one connection (a few statements, whatever the page size), so a re-run can tell which
threads are exactly as the migration left them without a round trip per thread.
``confirm_marks`` records that the thread was verified after the write (a mark that was never
verified is never trusted).

SQL stores only (``SqlStore`` mixes this in); every statement is parameterised.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, column, func, literal_column, select, table, union_all, update

from adapters.stores.base import Tx
from adapters.stores.schema import (
    READ_CLASSIC, READ_PLACEMENT, classic_table, folds_table, load_record, placement_table,
    transcript_table, window_table,
)

__all__ = ["PAGE", "SqlMarks", "ThreadMark"]

PAGE = 500  # threads per page read (well under every driver's parameter limit)

_checkpoints = table("checkpoints", column("thread_id"), column("checkpoint_ns"),
                     column("checkpoint_id"))
_ROOT_NS: Any = literal_column("''")  # a literal: the batch sends compiled SQL, no extra parameters
_NEWEST_CHECKPOINT = select(func.max(_checkpoints.c.checkpoint_id)).where(
    _checkpoints.c.thread_id == bindparam("tid"), _checkpoints.c.checkpoint_ns == _ROOT_NS)


def _ids(name: str = "ids") -> Any:
    return bindparam(name, expanding=True)


_t, _f, _c, _w, _p = (transcript_table.c, folds_table.c, classic_table.c, window_table.c,
                      placement_table.c)
_stats = (select(_t.thread_id, func.count().label("n"), func.max(_t.id).label("top"))
          .where(_t.thread_id.in_(_ids())).group_by(_t.thread_id).subquery())
_PAGE_TAILS = select(_stats.c.thread_id, _stats.c.n, _t.message_id).join_from(
    _stats, transcript_table, _t.id == _stats.c.top)
_PAGE_FOLDS = select(_f.thread_id, _f.record, _f.id).where(_f.id.in_(
    select(func.max(_f.id)).where(_f.thread_id.in_(_ids())).group_by(_f.thread_id)
    .scalar_subquery()))
_CONFIRM = update(folds_table).where(_f.id == bindparam("row"), _f.record == bindparam("old")) \
    .values(record=bindparam("new"))
_PAGE_PLACEMENTS = select(_p.thread_id, _p.backend, _p.version).where(_p.thread_id.in_(_ids()))
_PAGE_CLASSIC = union_all(
    select(_c.thread_id.label("tid"), literal_column("0").label("kind"),
           _c.summary.label("text"), _c.folds.label("n")).where(_c.thread_id.in_(_ids())),
    select(_w.session_id, literal_column("1"), _w.message, _w.id)
    .where(_w.session_id.in_(_ids("ids2"))),
)
# the middleware stamp's facts in one statement: placement and newest root checkpoint
_STAMP_MIDDLEWARE = select(
    select(_p.backend).where(_p.thread_id == bindparam("tid")).scalar_subquery(),
    select(_p.version).where(_p.thread_id == bindparam("tid")).scalar_subquery(),
    _NEWEST_CHECKPOINT.scalar_subquery())
_PAGE_CHECKPOINTS = (select(_checkpoints.c.thread_id, func.max(_checkpoints.c.checkpoint_id))
                     .where(_checkpoints.c.thread_id.in_(_ids()),
                            _checkpoints.c.checkpoint_ns == _ROOT_NS)
                     .group_by(_checkpoints.c.thread_id))


def _stamp(backend: str, placement: tuple[str, int] | None, state: Any) -> str:
    """One string for (backend, placement, state): equal exactly when all three are."""
    text = json.dumps([backend, list(placement) if placement else None, state],
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _classic_state(rows: Sequence[Any]) -> list[Any]:
    """The summary row and the window rows, in order, as plain values."""
    return sorted([int(r[0]), str(r[1]), int(r[2])] for r in rows)


@dataclass
class ThreadMark:
    """One thread as a page read sees it: its transcript's size and newest id, its newest
    fold record, and what its state stamp is for each backend."""

    count: int = 0
    last_id: str | None = None
    fold: dict[str, Any] | None = None
    fold_row: int | None = None
    placement: tuple[str, int] | None = None
    classic: list[Any] | None = None
    checkpoint: str | None = None

    def stamp(self, backend: str) -> str:
        state = self.checkpoint if backend == "middleware" else (self.classic or [])
        return _stamp(backend, self.placement, state)


class SqlMarks:
    """``stamp_in``, ``thread_marks`` and ``confirm_marks`` for ``SqlStore``."""

    engine: Any
    fetch: Any  # SqlStore's: a statement's rows inside a transaction (its batch flushed)
    guard: Any  # SqlStore's: driver errors as StoreError

    def stamp_in(self, tx: Tx, backend: str) -> str:
        """The thread's state stamp inside ``tx`` (after its writes), for ``backend``."""
        tid = {"tid": tx.thread_id}
        if backend == "middleware":
            placed, version, newest = self.fetch(tx, _STAMP_MIDDLEWARE, tid)[0]
            return _stamp(backend, (str(placed), int(version)) if placed is not None else None,
                          newest)
        placed = self.fetch(tx, READ_PLACEMENT, tid)
        placement = (str(placed[0][0]), int(placed[0][1])) if placed else None
        return _stamp(backend, placement, _classic_state(self.fetch(tx, READ_CLASSIC, tid)))

    def thread_marks(self, thread_ids: Sequence[str],
                     state: bool = True) -> dict[str, ThreadMark]:
        """Every listed thread that has a transcript, read in one connection: a few statements
        per page of ``PAGE`` threads. ``state=False``: the transcripts' tails only."""
        marks: dict[str, ThreadMark] = {}
        ids = list(dict.fromkeys(thread_ids))
        with self.guard("read a page of threads"), self.engine.connect() as conn:
            for start in range(0, len(ids), PAGE):
                page = ids[start:start + PAGE]
                for tid, n, last in conn.execute(_PAGE_TAILS, {"ids": page}):
                    marks[tid] = ThreadMark(count=int(n), last_id=last)
                if state:
                    self._page_state(conn, page, marks)
        return marks

    def _page_state(self, conn: Any, page: list[str], marks: dict[str, ThreadMark]) -> None:
        for tid, raw, row in conn.execute(_PAGE_FOLDS, {"ids": page}):
            if tid in marks:
                marks[tid].fold, marks[tid].fold_row = load_record(raw, tid, row), int(row)
        for tid, backend, version in conn.execute(_PAGE_PLACEMENTS, {"ids": page}):
            if tid in marks:
                marks[tid].placement = (str(backend), int(version))
        classic: dict[str, list[Any]] = {}
        for tid, kind, text, n in conn.execute(_PAGE_CLASSIC, {"ids": page, "ids2": page}):
            classic.setdefault(tid, []).append((kind, text, n))
        for tid, rows in classic.items():
            if tid in marks:
                marks[tid].classic = _classic_state(rows)
        for tid, newest in conn.execute(_PAGE_CHECKPOINTS, {"ids": page}):
            if tid in marks:
                marks[tid].checkpoint = newest

    def confirm_marks(self, tokens: dict[str, str]) -> set[str]:
        """Record on each thread's migration mark that it was verified, for a page of threads
        in one transaction: only where the thread's newest fold record is still the mark the
        token names (each update a compare-and-set on the record's text). Gives the threads whose
        mark it found."""
        done: set[str] = set()
        ids = list(tokens)
        with self.guard("confirm migration records"), self.engine.connect() as conn:
            conn.execution_options(memshift_write=True)
            with conn.begin():
                for start in range(0, len(ids), PAGE):
                    updates = []
                    for tid, raw, row in conn.execute(_PAGE_FOLDS,
                                                      {"ids": ids[start:start + PAGE]}):
                        record = load_record(raw, tid, row)
                        mark = record.get("source")
                        if not isinstance(mark, dict) or mark.get("token") != tokens.get(tid):
                            continue
                        mark["verified"] = True
                        updates.append({"row": row, "old": raw,
                                        "new": json.dumps(record, ensure_ascii=False)})
                        done.add(tid)
                    if updates:
                        conn.execute(_CONFIRM, updates)
        return done
