"""memshift's schema versions: what each one added, how a store's version is read (recorded in
``memshift_schema``, or inferred from the catalog of a store written before versions were
recorded), and the explicit steps that bring an older store to this version.

Like Alembic's history: every step is frozen DDL (never today's table definitions), runs in
its own transaction together with the row that records it, and is idempotent (``IF NOT
EXISTS``, or a catalog check where SQLite has none), so a step interrupted half-way or run
twice leaves the same store. ``memshift schema upgrade --sql`` prints the same statements for
a DBA. LangGraph's own tables are migrated by LangGraph (``saver_schema``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Column, Integer, MetaData, Table, Text, inspect, select, text
from sqlalchemy.engine import Connection, Engine

from adapters.errors import StoreError
from adapters.stores.schema_steps import (
    CURRENT, REPAIRABLE_COLUMNS, STEPS, Catalog, Step, implied, v2, v4,
)

__all__ = ["CURRENT", "SchemaStatus", "Step", "STEPS", "VERSION_TABLE", "contradictions",
           "pending_sql", "read_status", "refuse_contradicted", "refuse_newer",
           "require_current", "upgrade"]

logger = logging.getLogger("memshift.schema")

VERSION_TABLE = "memshift_schema"
_meta = MetaData()
versions_table = Table(
    VERSION_TABLE, _meta,
    Column("version", Integer, nullable=False),
    Column("step", Text, nullable=False),
    Column("applied_at", Text, nullable=False),
    Column("memshift_version", Text, nullable=False),
)
_CREATE_VERSIONS = ("CREATE TABLE IF NOT EXISTS memshift_schema (version INTEGER NOT NULL, "
                    "step TEXT NOT NULL, applied_at TEXT NOT NULL, memshift_version TEXT NOT NULL)")

@dataclass
class SchemaStatus:
    """A store's schema: its version (0: no memshift tables), whether that version was
    recorded or inferred, who wrote it, and what an upgrade would run."""

    version: int
    recorded: bool
    written_by: str | None = None
    dialect: str = ""
    catalog: Catalog | None = field(default=None, repr=False)
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def newer(self) -> bool:
        return self.version > CURRENT

    @property
    def pending(self) -> list[Step]:
        """The steps an upgrade runs (none for an empty store: it is created whole)."""
        if self.version == 0 or self.newer:
            return []
        return [s for s in STEPS if s.version > self.version]

    @property
    def behind(self) -> bool:
        """memshift's tables exist but lack what this version reads (an upgrade adds it)."""
        return 0 < self.version < CURRENT

    @property
    def current(self) -> bool:
        return self.version == CURRENT and self.recorded and not self.contradicted

    @property
    def contradicted(self) -> list[str]:
        """What the recorded version implies and the tables lack (see :func:`contradictions`)."""
        return contradictions(self)

    def describe(self) -> str:
        if self.version == 0:
            return "no memshift tables"
        how = "recorded" if self.recorded else "inferred: written before versions were recorded"
        missing = self.contradicted
        return f"schema version {self.version} ({how})" + (
            f", contradicted by its tables: {', '.join(missing)}" if missing else "")

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "current": CURRENT, "recorded": self.recorded,
                "written_by": self.written_by, "up_to_date": self.current,
                "contradicted_by": self.contradicted,
                "pending": [{"version": v, "step": n} for v, n, _ in _plan(self)],
                "history": self.history}


def _catalog(conn: Connection) -> Catalog:
    insp = inspect(conn)
    tables = frozenset(t for t in insp.get_table_names() if t.startswith("memshift_"))
    columns = {t: frozenset(c["name"] for c in insp.get_columns(t)) for t in tables}
    narrow = False
    if conn.dialect.name == "postgresql" and "memshift_window" in tables:
        kind = conn.execute(text(
            "SELECT data_type FROM information_schema.columns WHERE table_name = "
            "'memshift_window' AND column_name = 'id' AND table_schema = current_schema()"
        )).scalar()
        narrow = kind == "integer"
    return Catalog(tables, columns, narrow)


def contradictions(status: SchemaStatus) -> list[str]:
    """What a *recorded* version implies and the store's tables lack: ``table`` (missing),
    ``table.column`` (missing), or a PostgreSQL window id still 32-bit. Read from the catalog
    the open has already read: no statement of its own. (An inferred version is what the
    tables show, so nothing contradicts it; a newer memshift's is refused anyway.)"""
    cat = status.catalog
    if not status.recorded or status.newer or cat is None:
        return []
    out: list[str] = []
    for table, columns in implied(status.version).items():
        if table not in cat.tables:
            out.append(f"{table} (table missing)")
            continue
        out += [f"{table}.{c} (column missing)" for c in columns if c not in cat.columns[table]]
    if status.version >= 2 and cat.window_id_32bit:
        out.append("memshift_window.id (32-bit, version 2 made it 64-bit)")
    return out


def _repairable(status: SchemaStatus) -> bool:
    """Only whole tables and the columns a step adds can be created again; a column dropped
    from a kept table took its rows' values with it."""
    cat = status.catalog
    assert cat is not None
    return all(table not in cat.tables or (table, column) in REPAIRABLE_COLUMNS
               or column in cat.columns[table]
               for table, columns in implied(status.version).items() for column in columns)


def _repair_sql(status: SchemaStatus) -> list[str]:
    """What re-creates what a contradicted store lacks (idempotent): its missing tables (with
    their indexes), the columns steps add, 64-bit window ids."""
    cat = status.catalog
    assert cat is not None
    missing = {t for t in implied(status.version) if t not in cat.tables}
    out = [s for s in _create_all_sql(status.dialect)
           if any(f" {t} " in s + " " or f" {t}(" in s for t in missing)]
    out += v4(status.dialect, cat) if "memshift_placement" not in missing else []
    if cat.window_id_32bit:
        out += [s for s in v2(status.dialect, cat) if s.startswith("ALTER")]
    return out


def refuse_contradicted(status: SchemaStatus, shown: str) -> None:
    """A store whose tables contradict the version it records is not opened as if healthy:
    its first query would fail later with a raw driver error (or, worse, write half a turn)."""
    missing = status.contradicted
    if not missing:
        return
    fix = ("`memshift schema upgrade --store URL` creates the missing tables and columns "
           "again (empty: restore their rows from a backup)" if _repairable(status) else
           "restore the store from a backup: a column dropped from a table took its values "
           "with it, and no upgrade can bring them back")
    raise StoreError(
        f"{shown} records memshift schema version {status.version}, but its tables contradict "
        f"it: {', '.join(missing)}. Nothing was read or written. Run `memshift doctor --store "
        f"URL` to see what is affected; then {fix}")


def _infer(cat: Catalog) -> int:
    if not cat.has("memshift_transcript"):
        return 0
    if not cat.has("memshift_folds") or cat.window_id_32bit:
        return 1
    if not cat.has("memshift_placement"):
        return 2
    if not cat.has("memshift_placement", "pinned"):
        return 3
    if not cat.has("memshift_long_ids"):
        return 4
    return 6 if cat.has("memshift_evidence") else 5


def read_status(conn: Connection) -> SchemaStatus:
    """The schema of the store ``conn`` is on; reads only."""
    cat = _catalog(conn)
    dialect = conn.dialect.name
    if VERSION_TABLE in cat.tables:
        rows = conn.execute(select(versions_table).order_by(versions_table.c.version)).all()
        if rows:
            top = max(rows, key=lambda r: r.version)
            return SchemaStatus(top.version, True, top.memshift_version, dialect, cat,
                                [dict(r._mapping) for r in rows])
    return SchemaStatus(_infer(cat), False, None, dialect, cat)


def memshift_version() -> str:
    """The installed memshift's version (what schema records and run logs name)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memshift")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def _record(version: int, step: str, dialect: str) -> tuple[str, dict[str, Any]]:
    return ("INSERT INTO memshift_schema (version, step, applied_at, memshift_version) "
            "VALUES (:version, :step, :at, :by)",
            {"version": version, "step": step, "by": memshift_version(),
             "at": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def _plan(status: SchemaStatus) -> list[tuple[int, str, list[str]]]:
    """(version, step, statements) for each step still to run: the whole schema for an empty
    store, else the pending steps, or only the version record for a current unrecorded one."""
    if status.newer or status.current:
        return []
    if status.contradicted:
        if not _repairable(status):
            return []
        return [(status.version, "re-create what the tables lacked: "
                 + ", ".join(status.contradicted), _repair_sql(status))]
    if status.version == 0:
        return [(CURRENT, "create memshift's tables", _create_all_sql(status.dialect))]
    assert status.catalog is not None
    plan = [(s.version, s.name, s.sql(status.dialect, status.catalog)) for s in status.pending]
    return plan or [(CURRENT, "record the schema version", [])]


def _create_all_sql(dialect_name: str) -> list[str]:
    from sqlalchemy.dialects import postgresql, sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    from adapters.stores.schema import metadata

    dialect = (postgresql if dialect_name == "postgresql" else sqlite).dialect()
    out = []
    for table in metadata.sorted_tables:
        out.append(" ".join(str(CreateTable(table, if_not_exists=True).compile(
            dialect=dialect)).split()))
        out += [" ".join(str(CreateIndex(ix, if_not_exists=True).compile(
            dialect=dialect)).split()) for ix in sorted(table.indexes, key=lambda i: i.name or "")]
    return out


def pending_sql(status: SchemaStatus) -> str:
    """The DDL an upgrade would run, as a script a DBA can review and apply."""
    lines: list[str] = []
    plan = _plan(status)
    if plan:
        lines.append(_CREATE_VERSIONS + ";")
    for version, name, statements in plan:
        lines.append(f"-- memshift schema {version}: {name}")
        lines += [s + ";" for s in statements]
        sql, values = _record(version, name, status.dialect)
        for key, value in values.items():
            literal = str(value) if isinstance(value, int) else \
                "'" + str(value).replace("'", "''") + "'"
            sql = sql.replace(f":{key}", literal)
        lines.append(sql + ";")
    return "\n".join(lines)


def upgrade(engine: Engine, shown: str, *, repair: bool = False) -> list[str]:
    """Bring the store to ``CURRENT`` (the caller holds the setup lock): each step in one
    transaction with its record, each logged; an empty store is created whole the same way.
    Returns the steps applied (none when it was current). A store whose tables contradict
    its recorded version is refused, unless ``repair`` (``memshift schema upgrade``): then
    what can be created again is."""
    with engine.connect() as conn:
        status = read_status(conn)
    refuse_newer(status, shown)
    if not repair or not _repairable(status):
        refuse_contradicted(status, shown)
    applied = []
    for version, name, statements in _plan(status):
        with engine.begin() as conn:
            conn.execute(text(_CREATE_VERSIONS))
            for statement in statements:
                conn.execute(text(statement))
            sql, values = _record(version, name, status.dialect)
            conn.execute(text(sql), values)
        if status.version:  # an upgrade is news; a new store is not
            logger.warning("schema upgrade on %s: version %d applied (%s)", shown, version, name)
        applied.append(f"{version}: {name}")
    return applied


def refuse_newer(status: SchemaStatus, shown: str) -> None:
    if status.newer:
        raise StoreError(
            f"{shown} has memshift schema version {status.version} (written by memshift "
            f"{status.written_by}); this memshift knows versions up to {CURRENT}: upgrade "
            "memshift to use this store (nothing was read or written)")


def require_current(conn: Connection, shown: str) -> SchemaStatus:
    """``create_schema=False``: no DDL, and a store that is not at ``CURRENT`` is refused."""
    status = read_status(conn)
    refuse_newer(status, shown)
    refuse_contradicted(status, shown)
    if status.version == 0:
        raise StoreError(f"{shown} has no memshift tables and create_schema=False: create "
                         f"them with `memshift schema upgrade --store URL` (or review the DDL "
                         "with `--sql` first)")
    if not status.current:
        raise StoreError(f"{shown} has {status.describe()}; this memshift needs version "
                         f"{CURRENT} and create_schema=False runs no DDL: run `memshift schema "
                         "upgrade --store URL` (or `--sql` for the statements)")
    return status
