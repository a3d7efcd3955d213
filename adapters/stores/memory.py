"""In-process store: dicts, an ``InMemorySaver``, and an undo log per transaction.

A transaction holds the thread's lock stripe; each write registers its undo, so an error
anywhere in the unit leaves the thread as it was (the checkpoint write comes last).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from adapters import _upstream as _up
from adapters.errors import DeltaStateError
from adapters.thread_keys import original_of
from adapters.view import detach
from adapters.stores.base import (
    Checkpoints, ClassicSnapshot, ClassicState, Placement, Placements, Reads, Store, Tx,
)
from adapters.stores.evidence import COMPARED, PER_THREAD, EvidenceLog, EvidenceRow

__all__ = ["MemoryStore"]


_copy = detach  # stored objects are never handed out: readers get them only to read


class MemoryTx(Tx):
    def __init__(self, thread_id: str, lock: threading.Lock | None) -> None:
        super().__init__(thread_id)
        self.lock = lock
        self.undo: list[Callable[[], None]] = []
        # id(message handed in) -> (that message, the store's copy of it): a turn is copied
        # once for the transcript and the window (the store never edits what it holds)
        self.copies: dict[int, tuple[BaseMessage, BaseMessage]] = {}

    def copy(self, message: BaseMessage) -> BaseMessage:
        """The store's own copy of ``message``, made once per transaction."""
        known = self.copies.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        self.copies[id(message)] = (message, copy := _copy(message))
        return copy


class _Window:
    """A classic thread's window: row keys and messages side by side (no tuple per row).
    Appends extend in place; a fold, a replacement or a clear installs new lists, so the
    undo of an append is a truncation and the others restore the previous lists."""

    __slots__ = ("rows", "messages")

    def __init__(self, rows: list[int], messages: list[BaseMessage]) -> None:
        self.rows, self.messages = rows, messages


class _MemoryClassic(ClassicState):
    def __init__(self, guard: threading.RLock) -> None:
        self._guard = guard
        self._rows = itertools.count(1)
        self._state: dict[str, tuple[str, int]] = {}
        self._windows: dict[str, _Window] = {}

    def _remember(self, tx: Tx) -> None:
        """Undo for a write that installs a new window and state."""
        tid = tx.thread_id
        state, window = self._state.get(tid), self._windows.get(tid)

        def undo() -> None:
            if state is None:
                self._state.pop(tid, None)
            else:
                self._state[tid] = state
            if window is None:
                self._windows.pop(tid, None)
            else:
                self._windows[tid] = window
        assert isinstance(tx, MemoryTx)
        tx.undo.append(undo)

    def read(self, tx: Tx) -> ClassicSnapshot:
        with self._guard:
            summary, folds = self._state.get(tx.thread_id, ("", 0))
            window = self._windows.get(tx.thread_id)
            if window is None:
                return ClassicSnapshot(summary, folds, [], [])
            return ClassicSnapshot(summary, folds, list(window.messages), list(window.rows))

    def append(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        assert isinstance(tx, MemoryTx)
        with self._guard:
            window = self._windows.get(tx.thread_id)
            if window is None:
                window = self._windows[tx.thread_id] = _Window([], [])
            size, rows = len(window.rows), [next(self._rows) for _ in messages]

            def undo() -> None:
                del window.rows[size:], window.messages[size:]
                if not window.rows and self._windows.get(tx.thread_id) is window:
                    del self._windows[tx.thread_id]
            tx.undo.append(undo)
            window.rows.extend(rows)
            window.messages.extend([tx.copy(m) for m in messages])

    def fold(self, tx: Tx, summary: str, folds: int, drop: Sequence[Any]) -> None:
        with self._guard:
            self._remember(tx)
            doomed, window = set(drop), self._windows.get(tx.thread_id)
            kept = [] if window is None else [
                (r, m) for r, m in zip(window.rows, window.messages) if r not in doomed]
            self._windows[tx.thread_id] = _Window([r for r, _ in kept], [m for _, m in kept])
            self._state[tx.thread_id] = (summary, folds)

    def replace(self, tx: Tx, summary: str, folds: int, window: Sequence[BaseMessage]) -> None:
        assert isinstance(tx, MemoryTx)
        with self._guard:
            self._remember(tx)
            self._windows[tx.thread_id] = _Window([next(self._rows) for _ in window],
                                                  [tx.copy(m) for m in window])
            self._state[tx.thread_id] = (summary, folds)

    def clear(self, tx: Tx) -> None:
        with self._guard:
            self._remember(tx)
            self._windows.pop(tx.thread_id, None)
            self._state.pop(tx.thread_id, None)


class _MemoryCheckpoints(Checkpoints):
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._saver = InMemorySaver()

    def saver(self, tx: Tx) -> BaseCheckpointSaver:
        """The shared saver; checkpoints the transaction adds are removed if it fails."""
        from adapters._upstream import inmemory_undo

        assert isinstance(tx, MemoryTx)
        tx.undo.append(inmemory_undo(self._saver, tx.thread_id))
        return self._saver

    @property
    def checkpointer(self) -> BaseCheckpointSaver:
        return self._saver

    def retain(self, tx: Tx) -> None:
        """Whole turns back from the newest ``keep`` root checkpoints (see
        ``adapters.stores.checkpoint_sql``), their writes and their blobs."""
        _up.inmemory_retain(self._saver, tx.thread_id, self.keep)

    operations = frozenset({"copy_thread", "delete_for_runs", "prune"})

    def uses_delta(self, tx: Tx) -> bool:
        return _up.inmemory_uses_delta(self._saver, tx.thread_id)

    def prune_latest(self, tx: Tx) -> None:
        if self.uses_delta(tx):
            raise DeltaStateError.for_prune(tx.thread_id)
        _up.inmemory_prune_latest(self._saver, tx.thread_id)

    def delete_runs(self, tx: Tx, run_ids: Sequence[str]) -> None:
        _up.inmemory_delete_runs(self._saver, tx.thread_id, set(run_ids))

    def run_threads(self, tx: Tx, run_ids: Sequence[str]) -> list[str]:
        return sorted(_up.inmemory_run_threads(self._saver, set(run_ids)))

    def copy_from(self, tx: Tx, source: str) -> None:
        _up.inmemory_copy(self._saver, source, tx.thread_id)

    def erase(self, tx: Tx) -> None:
        assert isinstance(tx, MemoryTx)
        tx.undo.append(_up.inmemory_erase(self._saver, tx.thread_id))


class MemoryStore(Store, Placements, Reads, EvidenceLog):
    """Everything in this process; gone when it exits."""

    url = "memory"
    persistent = False
    shares_messages = True

    def __init__(self, *, keep_checkpoints: int = 4) -> None:
        super().__init__()
        self._guard = threading.RLock()
        self._transcripts: dict[str, list[BaseMessage]] = {}
        self._transcript_ids: dict[str, set[str]] = {}
        self._folds: dict[str, list[dict[str, Any]]] = {}
        self._placements: dict[str, Placement] = {}
        self._long_ids: dict[str, str] = {}  # a long id's key -> the id the application passed
        self._evidence: dict[str, list[EvidenceRow]] = {}  # shadow evidence, per thread
        self.classic = _MemoryClassic(self._guard)
        self.checkpoints = _MemoryCheckpoints(keep_checkpoints)

    @property
    def keep_checkpoints(self) -> int:
        return self.checkpoints.keep

    def begin(self, thread_id: str, write: bool = True) -> Tx:
        # the stripe by Python's (cached) string hash: this process is the whole store
        lock = self._stripes[hash(thread_id) % self.lock_stripes] if write else None
        if lock is not None:
            lock.acquire()
        return MemoryTx(thread_id, lock)

    def commit(self, tx: Tx) -> None:
        assert isinstance(tx, MemoryTx)
        # the undo closures hold ``tx``: clearing them frees the transaction by reference
        # counting, not by the cycle collector (~40% of a save+load's time when it ran)
        tx.undo.clear()
        tx.copies.clear()
        if tx.lock is not None:
            tx.lock.release()
            tx.lock = None

    def adopt(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        assert isinstance(tx, MemoryTx)
        copies = tx.copies
        for message in messages:
            copies[id(message)] = (message, message)

    def rollback(self, tx: Tx) -> None:
        assert isinstance(tx, MemoryTx)
        with self._guard:
            for undo in reversed(tx.undo):
                undo()
        self.commit(tx)

    # -- thread log ----------------------------------------------------------------------
    def append_transcript(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        tid = tx.thread_id
        with self._guard:
            log = self._transcripts.setdefault(tid, [])
            ids = self._transcript_ids.setdefault(tid, set())
            size, added = len(log), [m.id for m in messages if m.id is not None and m.id not in ids]

            def undo() -> None:
                del log[size:]
                ids.difference_update(added)
                if not log:
                    self._transcripts.pop(tid, None)
            assert isinstance(tx, MemoryTx)
            tx.undo.append(undo)
            for message in messages:
                if message.id is not None and message.id in ids:
                    continue
                log.append(tx.copy(message))
                if message.id is not None:
                    ids.add(message.id)
            if (original := original_of(tid)) is not None and tid not in self._long_ids:
                self._long_ids[tid] = original  # a long id: its name, beside the key
                tx.undo.append(lambda: self._long_ids.pop(tid, None))

    def known_ids(self, tx: Tx, ids: Sequence[str]) -> set[str]:
        with self._guard:
            return set(ids) & self._transcript_ids.get(tx.thread_id, set())

    def last_ids(self, tx: Tx, n: int) -> list[str]:
        with self._guard:
            return [m.id or "" for m in self._transcripts.get(tx.thread_id, [])[-n:]]

    def append_fold(self, tx: Tx, record: dict[str, Any]) -> None:
        with self._guard:
            records = self._folds.setdefault(tx.thread_id, [])
            records.append(dict(record))
            assert isinstance(tx, MemoryTx)
            tx.undo.append(lambda: records.__delitem__(-1))

    def erase(self, tx: Tx, placement: bool) -> int:
        assert isinstance(tx, MemoryTx)
        tid = tx.thread_id
        with self._guard:
            kept = (self._transcripts.pop(tid, None), self._transcript_ids.pop(tid, None),
                    self._folds.pop(tid, None),
                    self._placements.pop(tid, None) if placement else None,
                    self._long_ids.pop(tid, None) if placement else None,
                    self._evidence.pop(tid, None) if placement else None)

            def undo() -> None:
                for table, value in zip((self._transcripts, self._transcript_ids, self._folds,
                                         self._placements, self._long_ids, self._evidence),
                                        kept):
                    if value is not None:
                        table[tid] = value  # type: ignore[index]
            tx.undo.append(undo)
            self.classic.clear(tx)
            self.checkpoints.erase(tx)
        return len(kept[0] or ())

    def placement(self, tx: Tx) -> Placement | None:
        with self._guard:
            return self._placements.get(tx.thread_id)

    def set_placement(self, tx: Tx, placement: Placement) -> None:
        with self._guard:
            before = self._placements.get(tx.thread_id)
            self._placements[tx.thread_id] = placement

            def undo() -> None:
                if before is None:
                    self._placements.pop(tx.thread_id, None)
                else:
                    self._placements[tx.thread_id] = before
            assert isinstance(tx, MemoryTx)
            tx.undo.append(undo)

    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        counts: dict[tuple[str, bool], list[int]] = {}
        with self._guard:
            for p in self._placements.values():
                row = counts.setdefault((p.backend, p.pinned), [0, 0])
                row[0] += 1
                row[1] += p.version > 1
        return [(b, pinned, n, moved) for (b, pinned), (n, moved) in sorted(counts.items())]

    def transcript_in(self, tx: Tx) -> list[BaseMessage]:
        return self.transcript(tx.thread_id)

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        with self._guard:
            return [_copy(m) for m in self._transcripts.get(thread_id, [])]

    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        with self._guard:
            return [dict(r) for r in self._folds.get(thread_id, [])]

    def thread_ids(self) -> list[str]:
        with self._guard:
            return list(self._transcripts)

    def original_ids(self, thread_ids: Sequence[str]) -> dict[str, str]:
        with self._guard:
            return {t: self._long_ids[t] for t in thread_ids if t in self._long_ids}

    # -- shadow evidence (``adapters.stores.evidence``) ---------------------------------------
    def record_evidence(self, rows: Sequence[EvidenceRow]) -> None:
        with self._guard:
            for row in rows:
                kept = self._evidence.setdefault(row.thread_id, [])
                kept.append(row)
                del kept[:-PER_THREAD]

    def evidence_of(self, thread_ids: Sequence[str]) -> list[EvidenceRow]:
        with self._guard:
            return [r for t in dict.fromkeys(thread_ids) for r in self._evidence.get(t, ())]

    def evidence_since(self, since: str) -> list[EvidenceRow]:
        with self._guard:
            return sorted((r for rows in self._evidence.values() for r in rows
                           if r.kind != COMPARED and r.at >= since), key=lambda r: r.at)
