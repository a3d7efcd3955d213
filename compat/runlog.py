"""The run log: one row per ``memshift`` run that wrote to a store, kept in that store.

Like a schema-migration tool's history table: ``memshift_runs`` (run id, command, source and
target with passwords masked, policy, counts, status, start and finish, memshift version,
shard). A row is written when a run starts (status ``running``) and completed when it ends
(``ok``, ``failed`` or ``interrupted``), so a run that was killed stays visible as
``running``. The table is created on first use, never by a dry run; ``memshift history``
reads it without writing.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Column, Index, MetaData, Table, Text, create_engine, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from adapters.errors import StoreError
from adapters.stores.url import lock_key, sqlalchemy_url
from adapters.stores.versions import memshift_version

__all__ = ["RUNS_TABLE", "RunLog", "RunRow", "memshift_version", "read_runs"]

RUNS_TABLE = "memshift_runs"
metadata = MetaData()
runs = Table(
    RUNS_TABLE, metadata,
    Column("run_id", Text, primary_key=True),
    Column("command", Text, nullable=False),
    Column("source", Text),
    Column("target", Text),
    Column("shard", Text),
    Column("policy", Text),  # JSON: origin, effective policy, what was recorded
    Column("counts", Text),  # JSON: the command's result counters
    Column("status", Text, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("finished_at", Text),
    Column("memshift_version", Text, nullable=False),
    Index("ix_memshift_runs_started", "started_at"),
)
_CREATE_LOCK = lock_key("memshift_runs setup")
WRITE_ATTEMPTS = 8  # about 5 s of backoff beyond each attempt's own busy wait


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    command: str
    source: str | None
    target: str | None
    shard: str | None
    policy: dict[str, Any] | None
    counts: dict[str, Any] | None
    status: str
    started_at: str
    finished_at: str | None
    memshift_version: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _row(r: Any) -> RunRow:
    return RunRow(r.run_id, r.command, r.source, r.target, r.shard,
                  json.loads(r.policy) if r.policy else None,
                  json.loads(r.counts) if r.counts else None, r.status, r.started_at,
                  r.finished_at, r.memshift_version)


def _engine(url: str) -> Engine:
    base = url.partition("?")[0]
    if base.startswith("sqlite:"):
        return create_engine(base, poolclass=NullPool, connect_args={"timeout": 60})
    return create_engine(sqlalchemy_url(base), poolclass=NullPool, hide_parameters=True,
                         connect_args={"prepare_threshold": None, "connect_timeout": 10})


class RunLog:
    """Writes the run rows of one store (a SQL store; ``None`` from :meth:`open` otherwise)."""

    def __init__(self, engine: Engine, shown: str, owned: bool = True) -> None:
        self.engine, self.shown, self._owned = engine, shown, owned
        self._created = False

    @classmethod
    def open(cls, url: str, shown: str) -> RunLog | None:
        """The store's run log, or ``None`` for the in-memory store (nothing outlives it)."""
        if url.partition("?")[0] in ("memory", "memory://"):
            return None
        return cls(_engine(url), shown)

    @classmethod
    def of_store(cls, store: Any) -> RunLog | None:
        """The run log of an open SQL store, on its own engine (left open by ``close``);
        ``None`` for a store without one."""
        engine = getattr(store, "engine", None)
        return None if engine is None else cls(engine, store.url, owned=False)

    def _create(self) -> None:
        """Create the table once, whatever number of shards start together."""
        if self._created:
            return
        try:
            with self.engine.begin() as conn:
                if conn.dialect.name == "postgresql":  # ends with the transaction
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _CREATE_LOCK})
                metadata.create_all(conn)
        except SQLAlchemyError:
            if not inspect(self.engine).has_table(RUNS_TABLE):  # lost a race: fine if it exists
                raise
        self._created = True

    def start(self, command: str, *, source: str | None, target: str | None,
              shard: str | None, policy: dict[str, Any] | None,
              counts: dict[str, Any] | None = None) -> str:
        """A ``running`` row (``counts``: what the run is about to do, until it finishes)."""
        run_id = uuid.uuid4().hex
        values = {"run_id": run_id, "command": command, "source": source, "target": target,
                  "shard": shard, "policy": json.dumps(policy, default=str) if policy else None,
                  "counts": json.dumps(counts, default=str) if counts else None,
                  "status": "running", "started_at": _now(),
                  "memshift_version": memshift_version()}
        self._write(lambda conn: conn.execute(runs.insert(), values))
        return run_id

    def finish(self, run_id: str, status: str, counts: dict[str, Any]) -> None:
        values = {"status": status, "counts": json.dumps(counts, default=str),
                  "finished_at": _now()}
        self._write(lambda conn: conn.execute(
            runs.update().where(runs.c.run_id == run_id).values(**values)))

    def unfinished(self, prefix: str, *, suffix: str) -> list[tuple[str, str]]:
        """``(run_id, status)`` of the runs whose command starts with ``prefix`` and ends with
        ``suffix`` that did not finish ``ok`` and were not finished by a later run (cut off:
        ``running``; stopped by an error: ``failed``), oldest first."""
        if not inspect(self.engine).has_table(RUNS_TABLE):
            return []
        query = (select(runs.c.run_id, runs.c.status, runs.c.counts)
                 .where(runs.c.command.startswith(prefix, autoescape=True),
                        runs.c.command.endswith(suffix, autoescape=True),
                        runs.c.status.in_(("running", "failed")))
                 .order_by(runs.c.started_at, runs.c.run_id))
        with self.engine.connect() as conn:
            rows = list(conn.execute(query))
        return [(r.run_id, r.status) for r in rows
                if "completed_by" not in json.loads(r.counts or "{}")]

    def _write(self, body: Any) -> None:
        """One transaction, retried while another process holds the database (SQLite answers
        a writer it cannot wait for with an immediate error)."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                self._create()
                with self.engine.connect() as conn:
                    conn = conn.execution_options(memshift_write=True)  # SQLite: IMMEDIATE
                    with conn.begin():
                        body(conn)
                return
            except OperationalError as exc:
                if attempt == WRITE_ATTEMPTS - 1:
                    self._fail(exc)
                time.sleep(0.02 * 2 ** attempt)
            except SQLAlchemyError as exc:
                self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        raise StoreError(f"cannot write the run log ({RUNS_TABLE}) in {self.shown}: "
                         f"{type(exc).__name__}") from None

    def close(self) -> None:
        if self._owned:
            self.engine.dispose()


def read_runs(engine: Engine, limit: int | None = None) -> list[RunRow]:
    """Runs, oldest first (the newest ``limit`` of them); ``[]`` when none were logged."""
    if not inspect(engine).has_table(RUNS_TABLE):
        return []
    query = select(runs).order_by(runs.c.started_at.desc(), runs.c.run_id)
    if limit is not None:
        query = query.limit(limit)
    with engine.connect() as conn:
        rows = [_row(r) for r in conn.execute(query)]
    return list(reversed(rows))
