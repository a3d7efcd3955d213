"""Classic state on PostgreSQL, with the load and the save of one statement each
(``adapters.stores.quick``: issue 38, 1 + 1 round trips for a steady-state save + load).

Why a module of its own: ``adapters.stores.postgres`` is the store (connections, locks, the
checkpointer, schema setup); this is the classic concern it hosts, its two statements and
what this process last saw of each thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from adapters.stores.base import ClassicSnapshot, Placement, Tx
from adapters.stores.quick import ClassicSeen, QuickClassic
from adapters.stores.schema import dump_message, load_message, load_placement
from adapters.stores.sql_classic import SqlClassic
from adapters.stores.url import lock_key
from adapters.thread_keys import original_of
from adapters.view import detach

if TYPE_CHECKING:
    from adapters.stores.postgres import PostgresStore

__all__ = ["SEEN_CHARS", "PostgresClassic"]

# The classic load and save of one statement each (``adapters.stores.quick``). The version of
# a thread's classic state is its ``memshift_classic`` row's xmin: every write of the row makes
# a new one (no schema change), and every write of the classic state writes the row
# (``PostgresClassic.append``; folds, restores and clears already do). xmin is 32 bits: an
# entry kept here could match a newer row only 2**32 transactions later, and every load
# renews it. The load reads placement, version and window in one snapshot: every row id, and
# the text of the rows not kept here (window rows never change: a kept one is decoded).
# Array parameters travel as array literals (``_array``; the known rows' one kept with them):
# psycopg's binary array dumper costs ~5 us for two texts, ~12 us for 40 row ids, in Python.
_QUICK_READ = """SELECT p.backend, p.version, p.since, p.pinned, c.xmin::text, c.summary,
c.folds, w.ids, w.msgs FROM memshift_placement p
LEFT JOIN memshift_classic c ON c.thread_id = p.thread_id
LEFT JOIN LATERAL (SELECT array_agg(x.id ORDER BY x.id) AS ids,
  array_agg(x.message ORDER BY x.id) FILTER (WHERE x.id <> ALL(%(known)s::bigint[])) AS msgs
  FROM memshift_window x WHERE x.session_id = %(t)s) w ON true
WHERE p.thread_id = %(t)s"""
# The save takes the thread's lock first (a one-time filter: before any row is read), so it
# queues behind every transaction of the thread, as they queue behind each other. Its
# snapshot may predate the lock, but the rows it checks are the ones it locks (FOR SHARE,
# UPDATE): PostgreSQL re-checks a row changed meanwhile on its newest version. The transcript
# and window rows are written only if placement and version are as seen.
_QUICK_APPEND = """WITH p AS (SELECT 1 FROM memshift_placement
  WHERE (SELECT pg_advisory_xact_lock(%(k)s)::text) IS NOT NULL AND thread_id = %(t)s
  AND backend = 'classic' AND version = %(pv)s FOR SHARE),
c AS (UPDATE memshift_classic c SET folds = c.folds WHERE EXISTS (SELECT FROM p)
  AND c.thread_id = %(t)s AND c.xmin = %(v)s::xid RETURNING c.xmin::text AS v),
tr AS (INSERT INTO memshift_transcript (thread_id, message_id, message)
  SELECT %(t)s, m.mid, m.msg FROM c, unnest(%(mids)s::text[], %(tm)s::text[])
  WITH ORDINALITY AS m(mid, msg, n) ORDER BY m.n ON CONFLICT DO NOTHING),
w AS (INSERT INTO memshift_window (session_id, message)
  SELECT %(t)s, m.msg FROM c, unnest(%(wm)s::text[]) WITH ORDINALITY AS m(msg, n)
  ORDER BY m.n RETURNING id)
SELECT c.v, (SELECT array_agg(id ORDER BY id) FROM w) FROM c"""
_TOUCH = """INSERT INTO memshift_classic (thread_id, summary, folds) VALUES (%(tid)s, '', 0)
ON CONFLICT (thread_id) DO UPDATE SET folds = memshift_classic.folds"""
_lock_key = functools.lru_cache(maxsize=4096)(lock_key)  # a hash per save, of a few ids
SEEN_CHARS = 2_000_000  # window text kept of the classic threads last seen here, at most


class _Seen:
    """What a quick read or write saw of a classic thread (never edited: replaced whole)."""

    __slots__ = ("placement", "version", "summary", "folds", "window", "rows", "sizes",
                 "chars", "placed", "known")

    def __init__(self, placement: Placement, version: str | None, summary: str, folds: int,
                 window: tuple[BaseMessage, ...], rows: tuple[int, ...],
                 sizes: tuple[int, ...], placed: tuple[Any, ...], known: str) -> None:
        self.placement, self.version, self.summary, self.folds = placement, version, summary, folds
        self.window, self.rows, self.sizes = window, rows, sizes  # sizes: each row's text
        self.chars = sum(sizes)
        self.placed = placed  # the placement record's columns as read
        self.known = known  # ``rows`` as an array literal (the next load's parameter)

    def seen(self, detached: bool) -> ClassicSeen:
        window = [detach(m) for m in self.window] if detached else list(self.window)
        return ClassicSeen(self.placement, self.version,
                           ClassicSnapshot(self.summary, self.folds, window, list(self.rows),
                                           kept=not detached))


class PostgresClassic(SqlClassic, QuickClassic):
    """Classic state on PostgreSQL: the usual statements, every write of the state also
    writing its row (a new version), and the one-statement load and save. What the last of
    those saw per thread is kept here (bounded by ``SEEN_CHARS``, oldest first out)."""

    keeps_messages = True  # each thread's window, decoded once

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store)
        self.pg = store
        self._seen: dict[str, _Seen] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def append(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        super().append(tx, messages)
        if messages:  # a new version (the row is made if the thread had none)
            self.store.send(tx, _TOUCH, {"tid": tx.thread_id})

    def clear(self, tx: Tx) -> None:
        self._keep(tx.thread_id, None)  # no decoded text of the thread stays here either
        super().clear(tx)

    # -- the quick path --------------------------------------------------------------------
    def quick_read(self, thread_id: str, detached: bool) -> ClassicSeen | None:
        prior = self._seen.get(thread_id)
        with self.pg.guard("load"):
            rows = self.pg.call(_QUICK_READ, {"t": thread_id,
                                              "known": prior.known if prior else "{}"})
        return self._read(thread_id, prior, rows, detached)

    async def aquick_read(self, thread_id: str, detached: bool) -> ClassicSeen | None:
        prior = self._seen.get(thread_id)
        with self.pg.guard("load"):
            rows = await self.pg.acall(_QUICK_READ, {"t": thread_id,
                                                     "known": prior.known if prior else "{}"})
        return self._read(thread_id, prior, rows, detached)

    def seen(self, thread_id: str) -> ClassicSeen | None:
        entry = self._seen.get(thread_id)
        return None if entry is None else entry.seen(False)

    def quick_append(self, thread_id: str, seen: ClassicSeen,
                     transcript: Sequence[BaseMessage], window: Sequence[BaseMessage]) -> bool:
        params, texts = _append_params(thread_id, seen, transcript, window)
        if params is None:
            return False
        with self.pg.guard("save"):
            rows = self.pg.call(_QUICK_APPEND, params)
        return self._appended(thread_id, seen, window, texts, rows)

    async def aquick_append(self, thread_id: str, seen: ClassicSeen,
                            transcript: Sequence[BaseMessage],
                            window: Sequence[BaseMessage]) -> bool:
        params, texts = _append_params(thread_id, seen, transcript, window)
        if params is None:
            return False
        with self.pg.guard("save"):
            rows = await self.pg.acall(_QUICK_APPEND, params)
        return self._appended(thread_id, seen, window, texts, rows)

    def _read(self, thread_id: str, prior: _Seen | None, rows: list[Any],
              detached: bool) -> ClassicSeen | None:
        if not rows:
            return None
        row = rows[0]
        ids, texts = tuple(row[7] or ()), row[8]
        if prior is not None and texts is None and ids == prior.rows and \
                row[:7] == (*prior.placed, prior.version, prior.summary, prior.folds):
            self._keep(thread_id, prior)  # the steady state: as this process last saw it
            return prior.seen(detached)
        placement = load_placement(row[:4], thread_id)
        assert placement is not None  # (a row was read)
        if prior is not None and texts is None and ids == prior.rows:
            window, sizes = prior.window, prior.sizes  # every row kept here
        else:
            known = dict(zip(prior.rows, zip(prior.window, prior.sizes))) if prior else {}
            new = iter(texts or ())  # the rows not in ``known``, in order
            decoded, lengths = [], []
            for key in ids:
                kept = known.get(key)
                if kept is None:
                    text = next(new)
                    kept = load_message(text, thread_id, "memshift_window", key,
                                        keep=True), len(text)
                decoded.append(kept[0])
                lengths.append(kept[1])
            window, sizes = tuple(decoded), tuple(lengths)
        entry = _Seen(placement, row[4], row[5] or "", row[6] or 0, window, ids, sizes,
                      tuple(row[:4]), _array(map(str, ids)))
        if placement.backend == "classic":
            self._keep(thread_id, entry)
        return entry.seen(detached)

    def _appended(self, thread_id: str, seen: ClassicSeen, window: Sequence[BaseMessage],
                  texts: list[str], rows: list[Any]) -> bool:
        if not rows:  # a miss: what was seen is stale
            self._keep(thread_id, None)
            return False
        version, ids = rows[0][0], tuple(rows[0][1] or ())
        prior = self._seen.get(thread_id)
        if prior is None or prior.version != seen.version or len(ids) != len(window):
            self._keep(thread_id, None)
            return True
        known = prior.known if not ids else \
            prior.known[:-1] + ("," if prior.rows else "") + ",".join(map(str, ids)) + "}"
        self._keep(thread_id, _Seen(prior.placement, version, prior.summary, prior.folds,
                                    prior.window + tuple(window), prior.rows + ids,
                                    prior.sizes + tuple(map(len, texts)), prior.placed, known))
        return True

    def _keep(self, thread_id: str, entry: _Seen | None) -> None:
        """Replace (``None``: drop) the thread's entry; the oldest go past ``SEEN_CHARS``."""
        with self._lock:
            old = self._seen.pop(thread_id, None)
            if old is not None:
                self._chars -= old.chars
            if entry is None:
                return
            self._seen[thread_id] = entry
            self._chars += entry.chars
            while self._chars > SEEN_CHARS and len(self._seen) > 1:
                self._chars -= self._seen.pop(next(iter(self._seen))).chars


def _append_params(thread_id: str, seen: ClassicSeen, transcript: Sequence[BaseMessage],
                   window: Sequence[BaseMessage]) -> tuple[dict[str, Any] | None, list[str]]:
    """The quick save's parameters and the window rows' texts; ``None`` for what only the
    usual path writes: a state with no version yet, messages without ids, a long id (its
    original is recorded there)."""
    if seen.version is None or original_of(thread_id) is not None or \
            any(m.id is None for m in transcript):
        return None, []
    texts = [dump_message(m) for m in window]
    wm = _array(map(_quoted, texts))
    same = len(transcript) == len(window) and all(a is b for a, b in zip(transcript, window))
    return {"k": _lock_key(thread_id), "t": thread_id, "pv": seen.placement.version,
            "v": seen.version, "mids": _array(_quoted(str(m.id)) for m in transcript),
            "tm": wm if same else _array(_quoted(dump_message(m)) for m in transcript),
            "wm": wm}, texts


def _array(elements: Iterable[str]) -> str:
    """A PostgreSQL array literal of ``elements`` (each already an element's text)."""
    return "{" + ",".join(elements) + "}"


def _quoted(text: str) -> str:
    """``text`` as an array element: in double quotes, where a backslash escapes the next
    character (so every text stays itself: commas, braces, quotes, ``NULL``, blanks)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
