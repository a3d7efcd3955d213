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

from sqlalchemy import (
    bindparam, column, func, literal_column, select, table, text, union_all, update,
)

from adapters.stores.base import Tx
from adapters.stores.schema import (
    READ_CLASSIC, READ_PLACEMENT, classic_table, folds_table, load_record, placement_table,
    transcript_table, window_table,
)

__all__ = ["PAGE", "SqlMarks", "ThreadMark", "stamp_backend"]

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
_PAGE_FOLDS = select(_f.thread_id, _f.record, _f.id).where(_f.id.in_(
    select(func.max(_f.id)).where(_f.thread_id.in_(_ids())).group_by(_f.thread_id)
    .scalar_subquery()))
_CONFIRM = update(folds_table).where(_f.id == bindparam("row"), _f.record == bindparam("old")) \
    .values(record=bindparam("new"))
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
# Per listed thread, one statement: its newest transcript id and, with the state, its newest
# fold record, its placement and its newest root checkpoint — each an index probe, driven by
# the page's ids as one array parameter (PostgreSQL) or one JSON parameter (SQLite).
_PER_THREAD = ("SELECT x.tid, (SELECT message_id FROM memshift_transcript WHERE thread_id = x.tid "
               "ORDER BY id DESC LIMIT 1){state} FROM {ids}")
_STATE = (", (SELECT id FROM memshift_folds WHERE thread_id = x.tid ORDER BY id DESC LIMIT 1), "
          "(SELECT record FROM memshift_folds WHERE thread_id = x.tid ORDER BY id DESC LIMIT 1), "
          "(SELECT backend FROM memshift_placement WHERE thread_id = x.tid), "
          "(SELECT version FROM memshift_placement WHERE thread_id = x.tid), "
          "(SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = x.tid "
          "AND checkpoint_ns = '')")
_IDS = {"postgresql": "unnest(CAST(:ids AS text[])) AS x(tid)",
        "sqlite": "(SELECT value AS tid FROM json_each(:ids)) AS x"}
_PAGE_READS = {(dialect, state): text(_PER_THREAD.format(state=_STATE if state else "", ids=ids))
               for dialect, ids in _IDS.items() for state in (False, True)}


def _stamp(backend: str, placement: tuple[str, int] | None, state: Any) -> str:
    """``backend:digest`` of (backend, placement, state): equal exactly when all three are."""
    body = json.dumps([backend, list(placement) if placement else None, state],
                      ensure_ascii=False, default=str)
    return f"{backend}:{hashlib.sha256(body.encode()).hexdigest()[:32]}"


def stamp_backend(stamp: Any) -> str:
    """The backend a stamp was taken for (``classic`` or ``middleware``)."""
    return str(stamp).partition(":")[0]


def _classic_state(rows: Sequence[Any]) -> list[Any]:
    """The summary row and the window rows, in order, as plain values."""
    return sorted([int(r[0]), str(r[1]), int(r[2])] for r in rows)


@dataclass
class ThreadMark:
    """One thread as a page read sees it: its transcript's size and newest id, its newest
    fold record, and what its state stamp is for each backend."""

    last_id: str | None = None
    fold: dict[str, Any] | None = None
    fold_row: int | None = None
    placement: tuple[str, int] | None = None
    classic: list[Any] | None = None
    checkpoint: str | None = None

    def stamped(self) -> str:
        """The backend the newest fold record's stamp names ("" for none)."""
        mark = (self.fold or {}).get("source")
        return stamp_backend(mark.get("stamp")) if isinstance(mark, dict) and \
            mark.get("stamp") else ""

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
        """Every listed thread that has a transcript, read in one connection: one statement
        per page of ``PAGE`` threads (and one more for the pages' classic-stamped threads).
        ``state=False``: the transcripts' newest ids only."""
        marks: dict[str, ThreadMark] = {}
        ids = list(dict.fromkeys(thread_ids))
        dialect = self.engine.dialect.name
        read = _PAGE_READS[(dialect, state)]
        with self.guard("read a page of threads"), self.engine.connect() as conn:
            for start in range(0, len(ids), PAGE):
                page = ids[start:start + PAGE]
                param = page if dialect == "postgresql" else json.dumps(page)
                for row in conn.execute(read, {"ids": param}):
                    if row[1] is None:  # no transcript: not on this store
                        continue
                    mark = marks[row[0]] = ThreadMark(last_id=row[1])
                    if state:
                        mark.fold_row = int(row[2]) if row[2] is not None else None
                        mark.fold = load_record(row[3], row[0], row[2]) if row[3] else None
                        mark.placement = (str(row[4]), int(row[5])) if row[4] else None
                        mark.checkpoint = row[6]
                if state:
                    self._classic_states(conn, page, marks)
        return marks

    def _classic_states(self, conn: Any, page: list[str], marks: dict[str, ThreadMark]) -> None:
        """Summary and window rows of the page's threads whose mark is a classic stamp."""
        wanted = [t for t in page if t in marks and marks[t].stamped() == "classic"]
        if not wanted:
            return
        rows: dict[str, list[Any]] = {t: [] for t in wanted}
        for tid, kind, body, n in conn.execute(_PAGE_CLASSIC, {"ids": wanted, "ids2": wanted}):
            rows[tid].append((kind, body, n))
        for tid, found in rows.items():
            marks[tid].classic = _classic_state(found)

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
