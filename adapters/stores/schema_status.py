"""``memshift schema``'s library side (``compat.cli.schema`` prints it): where a store's schema stands, the DDL an upgrade would
run, and the upgrade itself (``adapters.stores.versions`` for memshift's tables,
``adapters.stores.saver_schema`` for LangGraph's).

Status and ``--sql`` only read (a read-only session); an upgrade opens the store the way
every memshift process does, under the same setup lock, so it never races an app starting.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from adapters.errors import ConfigError, StoreError
from adapters.stores.saver_schema import SaverSchema, saver_status
from adapters.stores.url import kind_of, scrub, scrub_cause, show_url, sqlite_path
from adapters.stores.versions import SchemaStatus, pending_sql, read_status, upgrade

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
        with _guarded(url, "cannot read the schema of"), engine.connect() as conn:
            return SchemaReport(show_url(url), read_status(conn), saver_status(conn))
    finally:
        engine.dispose()


@contextmanager
def _guarded(url: str, what: str) -> Iterator[None]:
    """Driver errors as a ``StoreError`` that shows no part of the URL's password, raised
    outside the handler (no ``__context__`` holding the driver's own text)."""
    failed = None
    try:
        yield
    except (SQLAlchemyError, sqlite3.Error) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        failed = f"{type(exc).__name__}: {scrub(detail, url)[:300]}"
        scrub_cause(exc, url)
    if failed is not None:
        raise StoreError(f"{what} {show_url(url)}: {failed}")


def upgrade_schema(url: str) -> list[str]:
    """Create or upgrade the schema of ``url`` to this memshift's (``CURRENT``) and
    LangGraph's; the steps memshift applied (LangGraph's ``setup()`` logs its own). A store
    whose tables contradict the version it records is repaired first, where it can be (its
    missing tables and the columns a step adds are created again, empty)."""
    from adapters.stores import open_store

    if kind_of(url) == "memory":
        raise ConfigError("the in-memory store has no schema to upgrade")
    repaired = _repair(url)
    store = open_store(url)
    try:
        return repaired + list(getattr(store, "schema_applied", ()))
    finally:
        store.close()


def _repair(url: str) -> list[str]:
    """Re-create what a contradicted store lacks (under the setup lock); nothing for a
    store that is not contradicted."""
    from adapters.stores.url import libpq_conninfo, split_query, sqlalchemy_url

    kind = kind_of(url)
    if kind == "sqlite":
        if not sqlite_path(url).exists():
            return []
        engine = create_engine(f"sqlite:///{sqlite_path(url)}", poolclass=NullPool)
    else:
        base, _, query = url.partition("?")
        params = split_query(query, show_url(url), True)[1]
        engine = create_engine(sqlalchemy_url(libpq_conninfo(base, params)), poolclass=NullPool,
                               hide_parameters=True, connect_args={"prepare_threshold": None})
    try:
        with _guarded(url, "cannot repair the schema of"):
            with engine.connect() as conn:
                if not read_status(conn).contradicted:
                    return []
            if kind == "sqlite":  # SQLite serialises the steps' transactions itself
                return upgrade(engine, show_url(url), repair=True)
            from adapters.stores.postgres import setup_lock

            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn, \
                    setup_lock(conn.connection.driver_connection, show_url(url)):
                return upgrade(engine, show_url(url), repair=True)
    finally:
        engine.dispose()

