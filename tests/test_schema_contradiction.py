"""A store whose tables contradict its recorded schema version is refused at open (issue 40,
item 8): the error names the version found, what is missing, and the commands that help,
instead of a healthy-looking open whose first query fails with a raw driver error. The
check reads the catalog the open already reads: no extra statement on SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.pool import Pool

from adapters.errors import StoreError
from adapters.stores import open_store
from adapters.stores.url import sqlalchemy_url
from adapters.stores.versions import CURRENT
from compat import SummaryMemory, cli

DIALECTS = ["sqlite", "postgres"]

# (what is dropped, the DDL that drops it, what the refusal must name, the fix it gives)
UPGRADE, BACKUP = "memshift schema upgrade --store URL", "restore the store from a backup"
DAMAGE = [
    ("folds table", ["DROP TABLE memshift_folds"], "memshift_folds", UPGRADE),
    ("placement table", ["DROP TABLE memshift_placement"], "memshift_placement", UPGRADE),
    ("pinned column", ["ALTER TABLE memshift_placement DROP COLUMN pinned"],
     "memshift_placement.pinned", UPGRADE),
    ("transcript column", ["ALTER TABLE memshift_transcript DROP COLUMN message"],
     "memshift_transcript.message", BACKUP),
]


def _execute(url: str, statements: list[str]) -> None:
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def _store(fresh_store: Any, dialect: str) -> str:
    url = fresh_store("postgres" if dialect == "postgres" else "sqlite")
    memory = SummaryMemory(store=url, backend="classic")
    memory.save("t1", "my name is Ada", "hello Ada")
    memory.close()
    return url


@pytest.mark.parametrize("what, ddl, named, fix", DAMAGE, ids=[d[0] for d in DAMAGE])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_store_contradicting_its_version_is_refused_at_open(
        dialect: str, what: str, ddl: list[str], named: str, fix: str, fresh_store: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(fresh_store, dialect)
    _execute(url, ddl)
    for opening in (lambda: open_store(url), lambda: open_store(url, create_schema=False),
                    lambda: SummaryMemory(store=url, backend="middleware")):
        with pytest.raises(StoreError) as info:
            opening()
        message = str(info.value)
        assert f"schema version {CURRENT}" in message, message
        assert named in message, f"the refusal does not name {named}: {message}"
        assert fix in message and "memshift doctor --store URL" in message, message
    if fix == BACKUP:  # nothing to re-create: the upgrade refuses too, saying the same
        capsys.readouterr()
        assert cli.main(["schema", "upgrade", "--store", url]) == 2
        assert BACKUP in capsys.readouterr().err


@pytest.mark.parametrize("dialect", DIALECTS)
def test_schema_upgrade_recreates_what_it_can_and_the_store_opens_again(
        dialect: str, fresh_store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(fresh_store, dialect)
    _execute(url, ["DROP TABLE memshift_folds",
                   "ALTER TABLE memshift_placement DROP COLUMN pinned"])
    assert cli.main(["schema", "status", "--store", url, "--check"]) == 1
    assert "memshift_folds" in capsys.readouterr().out
    assert cli.main(["schema", "upgrade", "--store", url]) == 0
    memory = SummaryMemory(store=url, backend="classic")
    try:
        assert "Ada" in " ".join(str(m.content) for m in memory.load("t1").messages)
        memory.save("t1", "I live in Paris", "noted")
    finally:
        memory.close()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_healthy_store_still_opens(dialect: str, fresh_store: Any) -> None:
    url = _store(fresh_store, dialect)
    open_store(url).close()
    open_store(url, create_schema=False).close()


def _statements_at_open(path: Path) -> list[str]:
    """Every statement SQLite runs while memshift opens the store at ``path``."""
    seen: list[str] = []

    def trace(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.set_trace_callback(seen.append)

    event.listen(Pool, "connect", trace)
    try:
        open_store(f"sqlite:///{path}").close()
    finally:
        event.remove(Pool, "connect", trace)
    return seen


def test_the_check_adds_no_statement_at_open(tmp_path: Path) -> None:
    """Measured with SQLite's trace callback: the catalog the open reads already says what
    the tables hold, so the check costs at most one statement (here: none)."""
    path = tmp_path / "s.db"
    open_store(f"sqlite:///{path}").close()  # created
    first = _statements_at_open(path)
    baseline = _baseline_statements(path)
    assert len(first) <= len(baseline) + 1, (len(first), len(baseline), first)


def _baseline_statements(path: Path) -> list[str]:
    """The same open with the contradiction check switched off."""
    from adapters.stores import versions

    saved = versions.contradictions
    versions.contradictions = lambda status: []  # type: ignore[assignment]
    try:
        return _statements_at_open(path)
    finally:
        versions.contradictions = saved
