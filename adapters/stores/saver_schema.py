"""LangGraph's checkpoint tables, as ``memshift schema`` reports and prints them.

LangGraph migrates its own tables (``PostgresSaver.setup()`` records versions in
``checkpoint_migrations``; ``SqliteSaver.setup()`` creates its tables and adds a column it
gained later). memshift runs those same ``setup()`` calls when it may write DDL; here it only
reads where the store stands and prints the statements ``setup()`` would run, so
``create_schema=False`` and ``--sql`` cover LangGraph's tables too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

__all__ = ["SaverSchema", "saver_status"]


@dataclass
class SaverSchema:
    """Where LangGraph's tables stand: ``state`` in words, ``pending`` the statements."""

    state: str
    pending: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state, "up_to_date": not self.pending,
                "pending_statements": len(self.pending)}


def saver_status(conn: Connection) -> SaverSchema:
    """LangGraph's checkpoint tables on the store ``conn`` is on; reads only."""
    if conn.dialect.name == "postgresql":
        return _postgres(conn)
    return _sqlite(conn)


def _postgres(conn: Connection) -> SaverSchema:
    from adapters._upstream import postgres_saver_migrations

    migrations = postgres_saver_migrations()
    done = -1
    if inspect(conn).has_table("checkpoint_migrations"):
        top = conn.execute(text("SELECT max(v) FROM checkpoint_migrations")).scalar()
        done = -1 if top is None else int(top)
    last = len(migrations) - 1
    if done >= last:
        return SaverSchema(f"LangGraph migration {done} of {last}: current")
    pending = [migrations[0].strip()]
    for v in range(done + 1, len(migrations)):
        pending += [migrations[v].strip(), f"INSERT INTO checkpoint_migrations (v) VALUES ({v})"]
    state = "missing" if done < 0 else f"LangGraph migration {done} of {last}"
    return SaverSchema(state, pending)


def _sqlite(conn: Connection) -> SaverSchema:
    from adapters._upstream import sqlite_saver_setup_sql

    statements = sqlite_saver_setup_sql()
    insp = inspect(conn)
    tables = set(insp.get_table_names())
    if not {"checkpoints", "writes"} <= tables:
        return SaverSchema("missing", [s for s in statements if not s.upper().startswith("ALTER")])
    columns = {c["name"] for c in insp.get_columns("writes")}
    if "task_path" not in columns:
        return SaverSchema("writes.task_path missing",
                           [s for s in statements if s.upper().startswith("ALTER")])
    return SaverSchema("current")
