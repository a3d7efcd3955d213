"""memshift's schema versions, one step each: what every version holds (frozen: never today's
table definitions) and the DDL that brings a store from the version before to it.

Why a module of its own: ``adapters.stores.versions`` reads a store's version and runs the
upgrade; this is the history it runs, which grows by one step per version. A new step adds
its function, its ``STEPS`` entry, its ``IMPLIED`` tables and bumps ``CURRENT``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CURRENT", "Catalog", "IMPLIED", "REPAIRABLE_COLUMNS", "STEPS", "Step", "implied",
           "v2", "v4"]

CURRENT = 6

# What each version is (the memshift that introduced it):
#   1  memshift 0.1: memshift_transcript, memshift_window (32-bit ids on PostgreSQL),
#      memshift_classic
#   2  + memshift_folds (fold records); memshift_window ids 64-bit
#   3  + memshift_placement (which backend serves a thread)
#   4  + memshift_placement.pinned; versions recorded in memshift_schema
#   5  + memshift_long_ids (the id the application passed, beside a long id's key)
#   6  + memshift_evidence (what the fleet's shadows found, for rollout guards)

# The tables and columns each version implies (frozen, like the steps: never today's
# metadata), so that a store whose tables contradict the version it records is caught at open.
IMPLIED: dict[int, dict[str, tuple[str, ...]]] = {
    1: {"memshift_transcript": ("id", "thread_id", "message_id", "message"),
        "memshift_window": ("id", "session_id", "message"),
        "memshift_classic": ("thread_id", "summary", "folds")},
    2: {"memshift_folds": ("id", "thread_id", "record")},
    3: {"memshift_placement": ("thread_id", "backend", "version", "since")},
    4: {"memshift_placement": ("pinned",)},
    5: {"memshift_long_ids": ("thread_id", "original")},
    6: {"memshift_evidence": ("id", "thread_id", "kind", "cls", "ignored", "turn",
                              "recorded_at")},
}
REPAIRABLE_COLUMNS = {("memshift_placement", "pinned")}  # a step adds them to a kept table


def implied(version: int) -> dict[str, list[str]]:
    """Table -> columns that schema ``version`` holds."""
    out: dict[str, list[str]] = {}
    for v in sorted(IMPLIED):
        if v <= version:
            for table, columns in IMPLIED[v].items():
                out.setdefault(table, []).extend(columns)
    return out


@dataclass(frozen=True)
class Catalog:
    """What the store holds, as far as memshift's versions are concerned."""

    tables: frozenset[str]
    columns: dict[str, frozenset[str]]
    window_id_32bit: bool

    def has(self, table: str, column: str | None = None) -> bool:
        return table in self.tables and (column is None or column in self.columns[table])


@dataclass(frozen=True)
class Step:
    """One version's change: statements per dialect; ``needed`` says which still apply."""

    version: int
    name: str
    sql: Callable[[str, Catalog], list[str]]


def v2(dialect: str, cat: Catalog) -> list[str]:
    pk = "BIGSERIAL" if dialect == "postgresql" else "INTEGER"
    out = [f"CREATE TABLE IF NOT EXISTS memshift_folds (id {pk} NOT NULL, thread_id TEXT NOT "
           "NULL, record TEXT NOT NULL, PRIMARY KEY (id))",
           "CREATE INDEX IF NOT EXISTS ix_memshift_folds_thread ON memshift_folds "
           "(thread_id, id)"]
    if dialect == "postgresql" and cat.window_id_32bit:
        out += ["ALTER TABLE memshift_window ALTER COLUMN id TYPE BIGINT",
                "ALTER SEQUENCE IF EXISTS memshift_window_id_seq AS BIGINT"]
    return out


def v3(dialect: str, cat: Catalog) -> list[str]:
    return ["CREATE TABLE IF NOT EXISTS memshift_placement (thread_id TEXT NOT NULL, backend "
            "TEXT NOT NULL, version INTEGER NOT NULL, since FLOAT NOT NULL, "
            "PRIMARY KEY (thread_id))"]


def v4(dialect: str, cat: Catalog) -> list[str]:
    if cat.has("memshift_placement", "pinned"):
        return []
    if dialect == "postgresql":
        return ["ALTER TABLE memshift_placement ADD COLUMN IF NOT EXISTS pinned BOOLEAN NOT "
                "NULL DEFAULT false"]
    return ["ALTER TABLE memshift_placement ADD COLUMN pinned BOOLEAN NOT NULL DEFAULT 0"]


def v5(dialect: str, cat: Catalog) -> list[str]:
    return ["CREATE TABLE IF NOT EXISTS memshift_long_ids (thread_id TEXT NOT NULL, original "
            "TEXT NOT NULL, PRIMARY KEY (thread_id))"]


def v6(dialect: str, cat: Catalog) -> list[str]:
    pk = "BIGSERIAL" if dialect == "postgresql" else "INTEGER"
    return [f"CREATE TABLE IF NOT EXISTS memshift_evidence (id {pk} NOT NULL, thread_id TEXT "
            "NOT NULL, kind TEXT NOT NULL, cls TEXT NOT NULL, ignored BOOLEAN NOT NULL, turn "
            "INTEGER NOT NULL, recorded_at TEXT NOT NULL, PRIMARY KEY (id))",
            "CREATE INDEX IF NOT EXISTS ix_memshift_evidence_recorded ON memshift_evidence "
            "(recorded_at)",
            "CREATE INDEX IF NOT EXISTS ix_memshift_evidence_thread ON memshift_evidence "
            "(thread_id, id)"]


STEPS = (Step(2, "fold records (memshift_folds); 64-bit window ids", v2),
         Step(3, "placement record (memshift_placement)", v3),
         Step(4, "pinned threads (memshift_placement.pinned); versions recorded", v4),
         Step(5, "original long thread ids (memshift_long_ids)", v5),
         Step(6, "shadow evidence the fleet shares (memshift_evidence)", v6))
