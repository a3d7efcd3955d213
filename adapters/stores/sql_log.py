"""A SQL store's thread log: the transcript, the fold records, the placement record and a
long id's original (``adapters.thread_keys``).

Why a module of its own: ``adapters.stores.sql`` is the store's machinery (connections,
transactions, batching, errors, schema); this is what it keeps about every thread whatever
the backend, as the ``Store``/``Placements``/``Reads`` contracts ask. ``SqlStore`` mixes it
in; every statement goes through the store's ``send``/``fetch`` (queued when it batches),
and a placement read can travel in the batch with the transaction's first read
(``defer_placement``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

from langchain_core.messages import BaseMessage
from sqlalchemy import Integer, bindparam, func, select

from adapters.stores.base import Placement, Tx
from adapters.stores.schema import (
    INSERT_FOLD, LAST_IDS, READ_FOLDS, READ_LONG_IDS, READ_PLACEMENT, dump_message,
    load_message, load_placement, load_record, long_ids_table, placement_table, transcript_table,
)
from adapters.stores.sql_tx import SqlTx, _conn
from adapters.thread_keys import is_key, original_of

__all__ = ["SqlThreadLog"]


class SqlThreadLog:
    """Transcript, fold records and placements over the host store's ``send``/``fetch``,
    ``guard``, ``engine`` and dialect (``SqlStore``)."""

    engine: Any
    send: Any
    fetch: Any
    guard: Any
    _sql: Any
    _dialect_insert: Any

    @cached_property
    def _insert_transcript(self) -> Any:
        return self._dialect_insert(transcript_table).values(
            thread_id=bindparam("tid"), message_id=bindparam("mid"),
            message=bindparam("message")).on_conflict_do_nothing()

    @cached_property
    def _insert_long_id(self) -> Any:
        return self._dialect_insert(long_ids_table).values(
            thread_id=bindparam("tid"), original=bindparam("original")).on_conflict_do_nothing()

    @cached_property
    def _upsert_placement(self) -> Any:
        c = placement_table.c
        stmt = self._dialect_insert(placement_table).values(
            thread_id=bindparam("tid"), backend=bindparam("backend"),
            version=bindparam("version"), since=bindparam("since"), pinned=bindparam("pinned"))
        return stmt.on_conflict_do_update(index_elements=[c.thread_id], set_={
            name: getattr(stmt.excluded, name) for name in ("backend", "version", "since", "pinned")})

    def append_transcript(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        rows = [{"tid": tx.thread_id, "mid": m.id, "message": dump_message(m)}
                for m in messages if m.id is not None]
        if rows:
            self.send(tx, self._insert_transcript, rows)
            if (original := original_of(tx.thread_id)) is not None:  # a long id: its name
                self.send(tx, self._insert_long_id,
                          {"tid": tx.thread_id, "original": original})

    def known_ids(self, tx: Tx, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        rows = _conn(tx).execute(select(transcript_table.c.message_id).where(
            transcript_table.c.thread_id == tx.thread_id,
            transcript_table.c.message_id.in_(list(ids)))).scalars()
        return set(rows)

    def last_ids(self, tx: Tx, n: int) -> list[str]:
        rows = _conn(tx).execute(LAST_IDS, {"tid": tx.thread_id, "n": n}).scalars()
        return list(reversed(list(rows)))

    def append_fold(self, tx: Tx, record: dict[str, Any]) -> None:
        self.send(tx, INSERT_FOLD, {"tid": tx.thread_id,
                                      "record": json.dumps(record, ensure_ascii=False)})

    def placement(self, tx: Tx) -> Placement | None:
        return _placement(self.fetch(tx, READ_PLACEMENT, {"tid": tx.thread_id}), tx.thread_id)

    def defer_placement(self, tx: Tx) -> Any:
        batch = tx.batch if isinstance(tx, SqlTx) else None
        if batch is None:
            return self.placement(tx)
        return _Slot(batch.add_read(self._sql(READ_PLACEMENT), {"tid": tx.thread_id}))

    def deferred_placement(self, tx: Tx, token: Any) -> Placement | None:
        if not isinstance(token, _Slot):
            return token
        assert isinstance(tx, SqlTx) and tx.batch is not None
        return _placement(tx.batch.result(token.slot), tx.thread_id)

    def set_placement(self, tx: Tx, placement: Placement) -> None:
        self.send(tx, self._upsert_placement, {
            "tid": tx.thread_id, "backend": placement.backend, "version": placement.version,
            "since": placement.since, "pinned": placement.pinned})

    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        c = placement_table.c
        moved = func.sum(func.cast(c.version > 1, Integer))
        with self.guard("read placements"), self.engine.connect() as conn:
            rows = conn.execute(select(c.backend, c.pinned, func.count(), moved)
                                .group_by(c.backend, c.pinned).order_by(c.backend, c.pinned))
            return [(r[0], bool(r[1]), int(r[2]), int(r[3] or 0)) for r in rows]

    def transcript_in(self, tx: Tx) -> list[BaseMessage]:
        rows = _conn(tx).execute(select(transcript_table.c.message, transcript_table.c.id)
                                 .where(transcript_table.c.thread_id == tx.thread_id)
                                 .order_by(transcript_table.c.id))
        return [load_message(r[0], tx.thread_id, "memshift_transcript", r[1]) for r in rows]

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        with self.guard("read transcript"), self.engine.connect() as conn:
            return self.transcript_in(SqlTx(thread_id, conn))

    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        with self.guard("read fold records"), self.engine.connect() as conn:
            rows = conn.execute(READ_FOLDS, {"tid": thread_id})
            return [load_record(r[0], thread_id, r[1]) for r in rows]

    def thread_ids(self) -> list[str]:
        with self.guard("list threads"), self.engine.connect() as conn:
            first = func.min(transcript_table.c.id)
            rows = conn.execute(select(transcript_table.c.thread_id, first)
                                .group_by(transcript_table.c.thread_id).order_by(first))
            return [r[0] for r in rows]

    def original_ids(self, thread_ids: Sequence[str]) -> dict[str, str]:
        keys = list(dict.fromkeys(t for t in thread_ids if is_key(t)))
        if not keys:  # the common case: no long id, no query
            return {}
        found: dict[str, str] = {}
        with self.guard("read long thread ids"), self.engine.connect() as conn:
            for start in range(0, len(keys), 500):
                found.update((r[0], r[1]) for r in conn.execute(
                    READ_LONG_IDS, {"tids": keys[start:start + 500]}))
        return found

    def iter_thread_ids(self, batch: int = 1000) -> Iterator[str]:
        """Thread ids in id order, a page at a time (flat memory for any number of threads)."""
        last: str | None = None
        while True:
            query = (select(transcript_table.c.thread_id).distinct()
                     .order_by(transcript_table.c.thread_id).limit(batch))
            if last is not None:
                query = query.where(transcript_table.c.thread_id > last)
            with self.guard("list threads"), self.engine.connect() as conn:
                page = [r[0] for r in conn.execute(query)]
            yield from page
            if len(page) < batch:
                return
            last = page[-1]


class _Slot:
    """A placement read queued in a batch (``defer_placement``)."""

    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot


def _placement(rows: Sequence[Any], thread_id: str | None = None) -> Placement | None:
    return load_placement(rows[0] if rows else None, thread_id)
