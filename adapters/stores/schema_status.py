"""``memshift schema``'s library side (``compat.cli.schema`` prints it): where a store's schema stands, the DDL an upgrade would
run, and the upgrade itself (``adapters.stores.versions`` for memshift's tables,
``adapters.stores.saver_schema`` for LangGraph's).

Status and ``--sql`` only read (a read-only session); an upgrade opens the store the way
every memshift process does, under the same setup lock, so it never races an app starting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import ConfigError, StoreError
from adapters.stores.saver_schema import SaverSchema, saver_status
from adapters.stores.url import kind_of, show_url, sqlite_path
from adapters.stores.versions import SchemaStatus, pending_sql, read_status

__all__ = ["SchemaReport", "schema_report", "upgrade_schema"]


@dataclass
class SchemaReport:
    store: str
    memshift: SchemaStatus
    langgraph: SaverSchema

    @property
    def pending(self) -> bool:
        return not self.memshift.current or bool(self.langgraph.pending)

    def sql(self) -> str:
        """Every statement an upgrade would run: memshift's steps, then LangGraph's."""
        parts = [pending_sql(self.memshift)]
        if self.langgraph.pending:
            parts.append("-- LangGraph's checkpoint tables (" + self.langgraph.state + ")")
            parts += [s + ";" for s in self.langgraph.pending]
        return "\n".join(p for p in parts if p)

    def as_dict(self) -> dict[str, Any]:
        return {"store": self.store, "memshift": self.memshift.as_dict(),
                "langgraph": self.langgraph.as_dict(), "upgrade_pending": self.pending}


def schema_report(url: str) -> SchemaReport:
    """Where ``url``'s schema stands; reads only (a SQLite file that does not exist yet is
    reported as empty, and not created)."""
    from adapters.stores.readonly import read_engine

    kind = kind_of(url)
    if kind == "memory":
        raise ConfigError("the in-memory store has no schema: schema commands take a sqlite "
                          "or postgresql store")
    missing = kind == "sqlite" and not sqlite_path(url).exists()
    engine = create_engine("sqlite://") if missing else read_engine(url)
    try:
        with engine.connect() as conn:
            return SchemaReport(show_url(url), read_status(conn), saver_status(conn))
    except SQLAlchemyError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise StoreError(f"cannot read the schema of {show_url(url)}: {type(exc).__name__}: "
                         f"{detail[:300]}") from None
    finally:
        engine.dispose()


def upgrade_schema(url: str) -> list[str]:
    """Create or upgrade the schema of ``url`` to this memshift's (``CURRENT``) and
    LangGraph's; the steps memshift applied (LangGraph's ``setup()`` logs its own)."""
    from adapters.stores import open_store

    if kind_of(url) == "memory":
        raise ConfigError("the in-memory store has no schema to upgrade")
    store = open_store(url)
    try:
        return list(getattr(store, "schema_applied", ()))
    finally:
        store.close()

