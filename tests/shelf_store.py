"""A memshift store written outside the package, on the standard library's ``shelve``: what a
third party writes to keep memory in its own storage. It implements the core, ``classic``
state, ``placements`` and ``reads`` — not ``checkpoints``, so it hosts the classic backend only
— and ``compat.testing.StoreContract`` checks it (tests/test_store_contract.py).

One process: a thread's record is read at ``begin``, changed in the transaction, and written
back at ``commit`` (a writer holds the thread's lock until then); ``rollback`` drops it.
"""

from __future__ import annotations

import copy
import shelve
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from adapters.stores.base import (
    ClassicSnapshot, ClassicState, Placement, Placements, Reads, Store, Tx,
)

_EMPTY: dict[str, Any] = {"transcript": [], "folds": [], "summary": "", "count": 0,
                          "window": [], "rows": 0, "placement": None}


class _ShelfTx(Tx):
    def __init__(self, thread_id: str, data: dict[str, Any], lock: threading.Lock | None) -> None:
        super().__init__(thread_id)
        self.data, self.lock = data, lock


def _load(raw: list[dict[str, Any]]) -> list[BaseMessage]:
    return messages_from_dict(raw)


class _ShelfClassic(ClassicState):
    def read(self, tx: Tx) -> ClassicSnapshot:
        data = tx.data  # type: ignore[attr-defined]
        return ClassicSnapshot(data["summary"], data["count"],
                               _load([m for _, m in data["window"]]),
                               [r for r, _ in data["window"]])

    def append(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        data = tx.data  # type: ignore[attr-defined]
        for message in messages:
            data["rows"] += 1
            data["window"].append((data["rows"], message_to_dict(message)))

    def fold(self, tx: Tx, summary: str, folds: int, drop: Sequence[Any]) -> None:
        data = tx.data  # type: ignore[attr-defined]
        doomed = set(drop)
        data["window"] = [(r, m) for r, m in data["window"] if r not in doomed]
        data["summary"], data["count"] = summary, folds

    def replace(self, tx: Tx, summary: str, folds: int, window: Sequence[BaseMessage]) -> None:
        data = tx.data  # type: ignore[attr-defined]
        data["window"] = []
        self.append(tx, window)
        data["summary"], data["count"] = summary, folds

    def clear(self, tx: Tx) -> None:
        data = tx.data  # type: ignore[attr-defined]
        data["window"], data["summary"], data["count"] = [], "", 0


class ShelfStore(Store, Placements, Reads):
    """Memory kept in a ``shelve`` file (``path``)."""

    persistent = True

    def __init__(self, path: str) -> None:
        super().__init__()
        self.url = f"shelf:{path}"
        self._shelf = shelve.open(path, writeback=False)
        self._guard = threading.RLock()
        self._locks: dict[str, threading.Lock] = {}
        self.classic = _ShelfClassic()

    def _record(self, thread_id: str) -> dict[str, Any]:
        with self._guard:
            return copy.deepcopy(self._shelf.get("t:" + thread_id, _EMPTY))

    # -- transactions -----------------------------------------------------------------------
    def begin(self, thread_id: str, write: bool = True) -> Tx:
        lock = None
        if write:
            with self._guard:
                lock = self._locks.setdefault(thread_id, threading.Lock())
            lock.acquire()
        return _ShelfTx(thread_id, self._record(thread_id), lock)

    def commit(self, tx: Tx) -> None:
        assert isinstance(tx, _ShelfTx)
        try:
            if tx.lock is not None:
                with self._guard:
                    key = "t:" + tx.thread_id
                    if key not in self._shelf and tx.data["transcript"]:
                        self._shelf["threads"] = [*self._shelf.get("threads", []), tx.thread_id]
                    self._shelf[key] = tx.data
                    self._shelf.sync()
        finally:
            self.rollback(tx)

    def rollback(self, tx: Tx) -> None:
        assert isinstance(tx, _ShelfTx)
        if tx.lock is not None:
            tx.lock.release()
            tx.lock = None

    # -- the thread log -----------------------------------------------------------------------
    def append_transcript(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        log = tx.data["transcript"]  # type: ignore[attr-defined]
        have = {m["data"].get("id") for m in log}
        log.extend(message_to_dict(m) for m in messages if m.id is not None and m.id not in have)

    def known_ids(self, tx: Tx, ids: Sequence[str]) -> set[str]:
        return set(ids) & {m["data"].get("id") for m in tx.data["transcript"]}  # type: ignore[attr-defined]

    def last_ids(self, tx: Tx, n: int) -> list[str]:
        return [m["data"].get("id") or "" for m in tx.data["transcript"][-n:]]  # type: ignore[attr-defined]

    def append_fold(self, tx: Tx, record: dict[str, Any]) -> None:
        tx.data["folds"].append(dict(record))  # type: ignore[attr-defined]

    def transcript_in(self, tx: Tx) -> list[BaseMessage]:
        return _load(tx.data["transcript"])  # type: ignore[attr-defined]

    # -- placements -------------------------------------------------------------------------
    def placement(self, tx: Tx) -> Placement | None:
        raw = tx.data["placement"]  # type: ignore[attr-defined]
        return Placement(*raw) if raw else None

    def set_placement(self, tx: Tx, placement: Placement) -> None:
        tx.data["placement"] = (placement.backend, placement.version, placement.since,  # type: ignore[attr-defined]
                                placement.pinned)

    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        counts: dict[tuple[str, bool], list[int]] = {}
        with self._guard:
            for key in self._shelf:
                raw = self._shelf[key]["placement"] if key.startswith("t:") else None
                if raw:
                    row = counts.setdefault((raw[0], raw[3]), [0, 0])
                    row[0] += 1
                    row[1] += raw[1] > 1
        return [(b, p, n, m) for (b, p), (n, m) in sorted(counts.items())]

    # -- reads -----------------------------------------------------------------------------
    def transcript(self, thread_id: str) -> list[BaseMessage]:
        return _load(self._record(thread_id)["transcript"])

    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        return self._record(thread_id)["folds"]

    def thread_ids(self) -> list[str]:
        with self._guard:
            return list(self._shelf.get("threads", []))

    def close(self) -> None:
        with self._guard:
            self._shelf.close()
