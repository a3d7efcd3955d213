"""Thread operations on LangGraph's checkpoint tables, inside memshift's transaction.

``SqliteSaver`` and ``PostgresSaver`` own the tables (``checkpoints``, their writes and, on
PostgreSQL, ``checkpoint_blobs``); neither implements ``copy_thread`` or ``delete_for_runs``
and ``SqliteSaver`` has no ``prune``. memshift runs these statements on the connection of a
transaction that holds the thread's lock, so they never interleave with a memshift write of
the thread, and LangGraph's own writes (newer checkpoints) are never what they delete.

Retention keeps whole turns: the newest ``keep`` root checkpoints and everything back to the
start of the oldest one's turn (a root checkpoint the loop did not write: an input, an update,
a fork), so every checkpoint ``list`` returns can be replayed and forked. A thread with
``DeltaChannel`` state (metadata keys ``counters_since_delta_snapshot`` /
``delta_writes_versioned``, as upstream's ``PostgresSaver.prune`` checks) is never retained and
``prune(keep_latest)`` refuses it. ``tests/test_checkpoint_ops.py`` checks the column lists
against the installed savers' tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.errors import DeltaStateError
from adapters.stores.base import Tx
from adapters.stores.sql_tx import _conn

__all__ = ["SqlCheckpointOps", "COLUMNS", "MOVED", "POSTGRES", "SQLITE"]

# LangGraph's tables, per dialect: (table, columns after thread_id, the checkpoint-id column
# or None for blobs).
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "sqlite": (
        ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
                        "metadata"),
        ("writes", "checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value"),
    ),
    "postgresql": (
        ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
                        "metadata"),
        ("checkpoint_writes", "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, "
                              "task_path"),
        ("checkpoint_blobs", "checkpoint_ns, channel, version, type, blob"),
    ),
}

# -- SQLite (named parameters; metadata is JSON text in a BLOB) ------------------------------
_S_META = "json_extract(CAST({a}metadata AS TEXT), '$.{key}')"
_S_DELTA = ("EXISTS (SELECT 1 FROM checkpoints d WHERE d.thread_id = :t AND ("
            + _S_META.format(a="d.", key="counters_since_delta_snapshot") + " IS NOT NULL OR "
            + _S_META.format(a="d.", key="delta_writes_versioned") + " IS NOT NULL))")
_S_CUT = (
    "(SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = :t AND checkpoint_ns = '' "
    "AND coalesce(" + _S_META.format(a="", key="source") + ", '') <> 'loop' "
    "AND checkpoint_id <= (SELECT checkpoint_id FROM checkpoints WHERE thread_id = :t "
    "AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1 OFFSET :skip) "
    "AND NOT " + _S_DELTA + ")")
_S_TURN = "(checkpoint_ns = '' OR instr(checkpoint_ns, ':') > 0)"
_S_LATEST = ("(SELECT max(k.checkpoint_id) FROM checkpoints k WHERE k.thread_id = :t "
             "AND k.checkpoint_ns = {table}.checkpoint_ns)")
_S_RUN = _S_META.format(a="{a}", key="run_id") + " IN (SELECT value FROM json_each(:runs))"

SQLITE = {
    "retain": [f"DELETE FROM {t} WHERE thread_id = :t AND {_S_TURN} AND checkpoint_id < {_S_CUT}"
               for t in ("writes", "checkpoints")],
    "prune_latest": [
        "DELETE FROM writes WHERE thread_id = :t AND checkpoint_id IS NOT "
        + _S_LATEST.format(table="writes"),
        "DELETE FROM checkpoints WHERE thread_id = :t AND checkpoint_id < "
        + _S_LATEST.format(table="checkpoints")],
    "delete_runs": [
        "DELETE FROM writes WHERE thread_id = :t AND EXISTS (SELECT 1 FROM checkpoints c "
        "WHERE c.thread_id = :t AND c.checkpoint_ns = writes.checkpoint_ns "
        "AND c.checkpoint_id = writes.checkpoint_id AND " + _S_RUN.format(a="c.") + ")",
        "DELETE FROM checkpoints WHERE thread_id = :t AND " + _S_RUN.format(a="")],
    "copy": [f"INSERT OR IGNORE INTO {t} (thread_id, {cols}) SELECT :target, {cols} FROM {t} "
             "WHERE thread_id = :t" for t, cols in COLUMNS["sqlite"]],
    "run_threads": "SELECT DISTINCT thread_id FROM checkpoints WHERE " + _S_RUN.format(a=""),
    "delta": "SELECT " + _S_DELTA,
    "erase": [f"DELETE FROM {t} WHERE thread_id = :t" for t, _ in COLUMNS["sqlite"]],
}

# -- PostgreSQL (pyformat; metadata and checkpoint are jsonb) ---------------------------------
_P_DELTA = ("EXISTS (SELECT 1 FROM checkpoints d WHERE d.thread_id = %(t)s AND "
            "(d.metadata ? 'counters_since_delta_snapshot' OR d.metadata ? 'delta_writes_versioned'))")


def _p_drop(where: str, kept: str, then: str = "") -> str:
    """One statement (one snapshot): the checkpoints ``where`` picks go, with their writes and
    the blobs they name that no checkpoint ``kept`` picks names (a blob of a checkpoint being
    written meanwhile is named by no deleted checkpoint, so it stays). ``then``: a query the
    statement answers (the deletions, as data-modifying CTEs, run whatever it reads)."""
    blobs = "blobs AS (DELETE" if then else "DELETE"
    return (
        f"WITH gone AS (DELETE FROM checkpoints c WHERE c.thread_id = %(t)s AND {where} "
        "RETURNING c.checkpoint_ns, c.checkpoint_id, c.checkpoint), "
        "w AS (DELETE FROM checkpoint_writes w USING gone g WHERE w.thread_id = %(t)s "
        "AND w.checkpoint_ns = g.checkpoint_ns AND w.checkpoint_id = g.checkpoint_id)"
        f"{', ' if then else ' '}{blobs} FROM checkpoint_blobs b WHERE b.thread_id = %(t)s "
        "AND EXISTS (SELECT 1 FROM gone g "
        "WHERE g.checkpoint_ns = b.checkpoint_ns "
        "AND g.checkpoint -> 'channel_versions' ->> b.channel = b.version) "
        "AND NOT EXISTS (SELECT 1 FROM checkpoints k WHERE k.thread_id = %(t)s "
        f"AND k.checkpoint_ns = b.checkpoint_ns AND ({kept}) "
        "AND k.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
        + (f") {then}" if then else ""))


_P_CUT = (
    "(SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %(t)s AND checkpoint_ns = '' "
    "AND coalesce(metadata ->> 'source', '') <> 'loop' "
    "AND checkpoint_id <= (SELECT checkpoint_id FROM checkpoints WHERE thread_id = %(t)s "
    "AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1 OFFSET %(skip)s) "
    "AND NOT " + _P_DELTA + ")")
_P_TURN = "(c.checkpoint_ns = '' OR strpos(c.checkpoint_ns, ':') > 0)"
_P_LATEST = ("(SELECT max(x.checkpoint_id) FROM checkpoints x WHERE x.thread_id = %(t)s "
             "AND x.checkpoint_ns = {a}.checkpoint_ns)")

# A placement guard: fails (aborting its transaction) unless the thread is still placed on
# ``%(backend)s`` at ``%(version)s``. An error is the only answer a statement can give
# inside a transaction sent whole, before its end (``adapters.stores.batch``): a cast of a
# text that is not a number, built from the row count so the planner cannot fold it.
MOVED = "memshift: the placement of the thread changed"
_P_PLACED = ("SELECT CASE WHEN count(*) = 1 THEN 1 ELSE ('" + MOVED + " (' || count(*) || ')')"
             "::int END FROM memshift_placement WHERE thread_id = %(t)s "
             "AND backend = %(backend)s AND version = %(version)s")
_P_RETAIN = (f"{_P_TURN} AND c.checkpoint_id < {_P_CUT}",
             f"NOT ({_P_TURN.replace('c.', 'k.')}) OR k.checkpoint_id >= {_P_CUT}")

POSTGRES = {
    "retain": [_p_drop(*_P_RETAIN)],
    "placed": _P_PLACED,
    "retain_placed": _p_drop(*_P_RETAIN, then=_P_PLACED),
    "prune_latest": [
        "DELETE FROM checkpoint_writes w WHERE w.thread_id = %(t)s AND w.checkpoint_id IS DISTINCT "
        "FROM " + _P_LATEST.format(a="w"),
        _p_drop("c.checkpoint_id < " + _P_LATEST.format(a="c"),
                "k.checkpoint_id = " + _P_LATEST.format(a="k"))],
    "delete_runs": [_p_drop("c.metadata ->> 'run_id' = ANY(%(runs)s)",
                            "coalesce(k.metadata ->> 'run_id', '') <> ALL(%(runs)s)")],
    "copy": [f"INSERT INTO {t} (thread_id, {cols}) SELECT %(target)s, {cols} FROM {t} "
             "WHERE thread_id = %(t)s ON CONFLICT DO NOTHING" for t, cols in COLUMNS["postgresql"]],
    "run_threads": "SELECT DISTINCT thread_id FROM checkpoints WHERE metadata ->> 'run_id' = ANY(%(runs)s)",
    "delta": "SELECT " + _P_DELTA,
    "erase": [f"DELETE FROM {t} WHERE thread_id = %(t)s" for t, _ in COLUMNS["postgresql"]],
}


class SqlCheckpointOps:
    """``Checkpoints`` thread operations for the SQL stores: run through ``store.run``/``arun``
    with a transaction of the thread (the async driver runs them in SQLAlchemy's greenlet)."""

    operations = frozenset({"copy_thread", "delete_for_runs", "prune"})
    keep: int
    dialect: str  # "sqlite" or "postgresql"

    def _sql(self) -> dict[str, Any]:
        return SQLITE if self.dialect == "sqlite" else POSTGRES

    def _params(self, tx: Tx, **extra: Any) -> dict[str, Any]:
        return {"t": tx.thread_id, **extra}

    def _runs(self, run_ids: Sequence[str]) -> Any:
        import json

        return json.dumps(list(run_ids)) if self.dialect == "sqlite" else list(run_ids)

    def _execute(self, tx: Tx, statements: Sequence[str], params: dict[str, Any]) -> None:
        conn = _conn(tx)
        for sql in statements:
            conn.exec_driver_sql(sql, params)

    def retain(self, tx: Tx) -> None:
        """Whole turns back from the newest ``keep`` root checkpoints (module docstring)."""
        self._execute(tx, self._sql()["retain"], self._params(tx, skip=max(self.keep, 1) - 1))

    def uses_delta(self, tx: Tx) -> bool:
        return bool(_conn(tx).exec_driver_sql(self._sql()["delta"], self._params(tx)).scalar())

    def prune_latest(self, tx: Tx) -> None:
        if self.uses_delta(tx):
            raise DeltaStateError.for_prune(tx.thread_id)
        self._execute(tx, self._sql()["prune_latest"], self._params(tx))

    def delete_runs(self, tx: Tx, run_ids: Sequence[str]) -> None:
        self._execute(tx, self._sql()["delete_runs"], self._params(tx, runs=self._runs(run_ids)))

    def run_threads(self, tx: Tx, run_ids: Sequence[str]) -> list[str]:
        rows = _conn(tx).exec_driver_sql(self._sql()["run_threads"],
                                         {"runs": self._runs(run_ids)}).all()
        return sorted(row[0] for row in rows)

    def copy_from(self, tx: Tx, source: str) -> None:
        """Every checkpoint, write and blob of ``source`` under ``tx``'s thread."""
        self._execute(tx, self._sql()["copy"], {"t": source, "target": tx.thread_id})

    def erase(self, tx: Tx) -> None:
        """Every checkpoint, write and blob of the thread (erasure: ``Store.erase``)."""
        self._execute(tx, self._sql()["erase"], self._params(tx))
