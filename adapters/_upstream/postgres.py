"""``PostgresSaver``'s read and write as statements memshift sends itself.

Part of ``adapters._upstream`` (every private upstream detail in one package): read it when
``langgraph-checkpoint-postgres`` releases. ``memory.checkpointer`` reads a run's checkpoint
and the thread's placement in one statement (``postgres_get_tuple_with``), and writes a
checkpoint in one message with what must commit with it (``postgres_put_statements``: the
lock, the placement guard, retention, the transcript), so neither costs a transaction of
its own. ``tests/test_upstream.py`` checks both against the real ``get_tuple`` and ``put``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["postgres_get_tuple_with", "postgres_put_statements"]

Statement = tuple[str, Any]  # (SQL in psycopg's paramstyle, its parameters)
# the columns of ``PostgresSaver.SELECT_SQL``, in the order ``_load_checkpoint_tuple`` reads
_COLUMNS = ("thread_id", "checkpoint", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
            "metadata", "channel_values", "pending_writes")


def postgres_get_tuple_with(run: Callable[[str, Any], Sequence[Sequence[Any]]],
                            config: Any, also: str, params: dict[str, Any]
                            ) -> tuple[Any, tuple[Any, ...]]:
    """``PostgresSaver.get_tuple(config)`` and the row of ``also`` (a ``SELECT`` of at most
    one row, ``params`` its named parameters) in one statement: one snapshot without
    ``BEGIN``/``COMMIT``: the checkpoint tuple (``None`` when there is none) and the columns
    of ``also`` (``None`` each when it has no row). ``run(sql, params)`` sends a statement
    and gives its rows (tuples).
    ``get_tuple``'s ``SELECT_SQL`` (the checkpoint, its blobs and pending writes) as a
    lateral join beside ``also``; a checkpoint older than format 4 has its pending sends
    migrated with ``get_tuple``'s second statement."""
    from langgraph.checkpoint.base import get_checkpoint_id

    saver = _loader()
    conf = config["configurable"]
    wanted = get_checkpoint_id(config)
    pick = ("AND checkpoint_id = %(lg_id)s" if wanted
            else "ORDER BY checkpoint_id DESC LIMIT 1")
    sql = (f"SELECT {', '.join('c.' + c for c in _COLUMNS)}, a.* FROM (SELECT 1) one "
           f"LEFT JOIN LATERAL ({also}) a ON true LEFT JOIN LATERAL ({saver.SELECT_SQL} "
           f"WHERE thread_id = %(lg_thread)s AND checkpoint_ns = %(lg_ns)s {pick}) c ON true")
    args = {**params, "lg_thread": str(conf["thread_id"]), "lg_ns": conf.get("checkpoint_ns", ""),
            **({"lg_id": wanted} if wanted else {})}
    (row,) = run(sql, args)
    extra = tuple(row[len(_COLUMNS):])
    if row[0] is None:
        return None, extra
    value = dict(zip(_COLUMNS, row[:len(_COLUMNS)]))
    if value["checkpoint"]["v"] < 4 and value["parent_checkpoint_id"]:  # as get_tuple does
        sends = run(saver.SELECT_PENDING_SENDS_SQL,
                    (value["thread_id"], [value["parent_checkpoint_id"]]))
        if sends:
            if value["channel_values"] is None:
                value["channel_values"] = []
            saver._migrate_pending_sends(sends[0][1], value["checkpoint"], value["channel_values"])
    return saver._load_checkpoint_tuple(value), extra


def postgres_put_statements(config: Any, checkpoint: Any, metadata: Any,
                            new_versions: Any) -> tuple[Any, list[Statement]]:
    """What ``PostgresSaver.put(config, checkpoint, metadata, new_versions)`` returns and the
    statements it would send (one per blob, then the checkpoint), without sending them:
    the real ``put`` run against a cursor that writes them down (its private ``_cursor``)."""
    saver = _recording_class()()
    stored = saver.put(config, checkpoint, metadata, new_versions)
    return stored, saver.statements


@functools.cache
def _loader() -> Any:
    """A ``PostgresSaver`` without a connection, for its SQL and deserialization (the
    serializer a saver built without one uses: the joined savers' own)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver(None)  # type: ignore[arg-type]


class _Cursor:
    """Writes statements down instead of sending them."""

    def __init__(self, statements: list[Statement]) -> None:
        self.statements = statements

    def execute(self, sql: str, params: Any = None) -> None:
        self.statements.append((sql, params))

    def executemany(self, sql: str, rows: Any) -> None:
        self.statements.extend((sql, params) for params in rows)


@functools.cache
def _recording_class() -> type:
    """Defined once, on first use (the PostgreSQL extra is optional)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class _Recording(PostgresSaver):
        def __init__(self) -> None:
            super().__init__(None)  # type: ignore[arg-type]
            self.statements: list[Statement] = []

        @contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            yield _Cursor(self.statements)
    return _Recording
