"""A versioned schema: every earlier layout (0.1's 32-bit window ids included) is upgraded by
explicit, recorded, idempotent steps — at open, by ``memshift schema upgrade`` or by the DDL
``--sql`` prints — to the same tables a new store gets; a newer memshift's store and, with
``create_schema=False``, a missing or older schema are refused before anything is written."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy import create_engine, inspect, text

from adapters.errors import StoreError
from adapters.stores import open_store
from adapters.stores.readonly import open_read_only
from adapters.stores.schema import dump_message
from adapters.stores.url import sqlalchemy_url
from adapters.stores.versions import CURRENT, STEPS
from compat import SummaryMemory, cli

DIALECTS = ["sqlite", "postgres"]

# What each earlier memshift created (frozen, as its SQLAlchemy metadata compiled it).
_V1 = {
    "sqlite": [
        "CREATE TABLE memshift_transcript (id INTEGER NOT NULL, thread_id TEXT NOT NULL, "
        "message_id TEXT NOT NULL, message TEXT NOT NULL, PRIMARY KEY (id), CONSTRAINT "
        "uq_memshift_transcript_message UNIQUE (thread_id, message_id))",
        "CREATE INDEX ix_memshift_transcript_thread ON memshift_transcript (thread_id, id)",
        "CREATE TABLE memshift_window (id INTEGER NOT NULL, session_id TEXT, message TEXT, "
        "PRIMARY KEY (id))",
        "CREATE INDEX ix_memshift_window_session ON memshift_window (session_id, id)",
        "CREATE TABLE memshift_classic (thread_id TEXT NOT NULL, summary TEXT NOT NULL, "
        "folds INTEGER NOT NULL, PRIMARY KEY (thread_id))",
    ],
    "postgres": [
        "CREATE TABLE memshift_transcript (id BIGSERIAL NOT NULL, thread_id TEXT NOT NULL, "
        "message_id TEXT NOT NULL, message TEXT NOT NULL, PRIMARY KEY (id), CONSTRAINT "
        "uq_memshift_transcript_message UNIQUE (thread_id, message_id))",
        "CREATE INDEX ix_memshift_transcript_thread ON memshift_transcript (thread_id, id)",
        "CREATE TABLE memshift_window (id SERIAL NOT NULL, session_id TEXT, message TEXT, "
        "PRIMARY KEY (id))",  # 0.1: a 32-bit id
        "CREATE INDEX ix_memshift_window_session ON memshift_window (session_id, id)",
        "CREATE TABLE memshift_classic (thread_id TEXT NOT NULL, summary TEXT NOT NULL, "
        "folds INTEGER NOT NULL, PRIMARY KEY (thread_id))",
    ],
}


def _layout(dialect: str, version: int) -> list[str]:
    """The DDL of schema ``version`` (4: as memshift made it before versions were recorded)."""
    ddl = list(_V1[dialect])
    if version >= 2:
        if dialect == "postgres":
            ddl[2] = ddl[2].replace("id SERIAL", "id BIGSERIAL")
        pk = "BIGSERIAL" if dialect == "postgres" else "INTEGER"
        ddl += [f"CREATE TABLE memshift_folds (id {pk} NOT NULL, thread_id TEXT NOT NULL, "
                "record TEXT NOT NULL, PRIMARY KEY (id))",
                "CREATE INDEX ix_memshift_folds_thread ON memshift_folds (thread_id, id)"]
    if version >= 3:
        pinned = ", pinned BOOLEAN NOT NULL" if version >= 4 else ""
        ddl.append("CREATE TABLE memshift_placement (thread_id TEXT NOT NULL, backend TEXT NOT "
                   f"NULL, version INTEGER NOT NULL, since FLOAT NOT NULL{pinned}, "
                   "PRIMARY KEY (thread_id))")
    return ddl


def _execute(url: str, statements: list[str], params: dict[str, Any] | None = None) -> None:
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement), params or {})
    finally:
        engine.dispose()


def _old_store(url: str, dialect: str, version: int) -> None:
    """A store at ``version`` holding one conversation: a summary, a window, a transcript."""
    _execute(url, _layout(dialect, version))
    turns = [HumanMessage("my name is Ada", id="m1"), AIMessage("hello Ada", id="m2")]
    _execute(url, ["INSERT INTO memshift_classic (thread_id, summary, folds) "
                   "VALUES ('t1', 'Ada introduced herself.', 1)"])
    for m in turns:
        _execute(url, ["INSERT INTO memshift_window (session_id, message) VALUES ('t1', :m)",
                       "INSERT INTO memshift_transcript (thread_id, message_id, message) "
                       "VALUES ('t1', :i, :m)"], {"m": dump_message(m), "i": m.id})


def _catalog(url: str, defaults: bool = True) -> dict[str, Any]:
    engine = create_engine(sqlalchemy_url(url.partition("?")[0]))
    try:
        insp = inspect(engine)
        out = {}
        for table in sorted(t for t in insp.get_table_names() if t.startswith("memshift_")):
            out[table] = {
                "columns": [(c["name"], str(c["type"]), c["nullable"],
                             str(c.get("default")) if defaults else "")
                            for c in insp.get_columns(table)],
                "pk": insp.get_pk_constraint(table)["constrained_columns"],
                "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                                  for i in insp.get_indexes(table)),
                "unique": sorted((u["name"], tuple(u["column_names"]))
                                 for u in insp.get_unique_constraints(table))}
        return out
    finally:
        engine.dispose()


def _history(url: str) -> list[tuple[int, str]]:
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            return [(r[0], r[1]) for r in conn.execute(text(
                "SELECT version, step FROM memshift_schema ORDER BY version"))]
    finally:
        engine.dispose()


def _schema_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(["schema", *args, "--json", "--quiet"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_earlier_version_is_upgraded_at_open_with_every_turn_kept(
        dialect: str, version: int, fresh_store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_store(dialect)
    _old_store(url, dialect, version)
    code, before = _schema_cli(capsys, "status", "--store", url, "--check")
    assert code == 1 and before["memshift"]["version"] == version
    assert not before["memshift"]["recorded"] and before["upgrade_pending"]

    memory = SummaryMemory(store=url, backend="classic", thread_id="t1")
    loaded = memory.load_memory_variables({})["history"]
    assert "Ada introduced herself." in loaded and "hello Ada" in loaded
    memory.save_context({"input": "I work on compilers"}, {"output": "noted"})
    assert [m.id for m in memory.transcript("t1")][:2] == ["m1", "m2"]
    memory.close()

    steps = _history(url)
    expected = [(s.version, s.name) for s in STEPS if s.version > version] or \
        [(CURRENT, "record the schema version")]
    assert steps == expected
    code, after = _schema_cli(capsys, "status", "--store", url, "--check")
    assert code == 0 and after["memshift"]["version"] == CURRENT and after["memshift"]["recorded"]
    # the same tables a new store gets (defaults too, once step 4 added the column itself)
    assert _catalog(url, defaults=version < 4) == _catalog(_fresh(fresh_store, dialect),
                                                           defaults=version < 4)


def _fresh(fresh_store: Any, dialect: str) -> str:
    url = fresh_store(dialect)
    open_store(url).close()
    return url


def test_a_0_1_window_on_postgres_takes_ids_past_32_bits(fresh_store: Any) -> None:
    url = fresh_store("postgres")
    _old_store(url, "postgres", 1)
    _execute(url, ["SELECT setval('memshift_window_id_seq', 2147483647)"])
    memory = SummaryMemory(store=url, backend="classic", thread_id="t1")
    memory.save_context({"input": "past 2^31"}, {"output": "fine"})
    engine = create_engine(sqlalchemy_url(url))
    with engine.connect() as conn:
        top = conn.execute(text("SELECT max(id) FROM memshift_window")).scalar()
    engine.dispose()
    assert top > 2**31 - 1
    assert "past 2^31" in memory.load_memory_variables({})["history"]
    memory.close()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_step_half_applied_by_hand_runs_again_cleanly(dialect: str, fresh_store: Any) -> None:
    """Idempotent steps: the DDL of every step already applied (without its record, as a DBA
    interrupted mid-script leaves it) is run again without error, then recorded."""
    url = fresh_store(dialect)
    _old_store(url, dialect, 1)
    from adapters.stores.versions import read_status

    engine = create_engine(sqlalchemy_url(url))
    with engine.connect() as conn:
        status = read_status(conn)
    engine.dispose()
    assert status.catalog is not None
    name = "postgresql" if dialect == "postgres" else "sqlite"
    _execute(url, STEPS[0].sql(name, status.catalog) + STEPS[1].sql(name, status.catalog))
    store = open_store(url)
    assert store.schema_applied == tuple(  # 2 and 3 read as done from the catalog
        f"{s.version}: {s.name}" for s in STEPS[2:])
    store.close()
    again = open_store(url)
    assert again.schema_applied == ()
    again.close()


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("version", [0, 1, 3])
def test_the_sql_a_dba_applies_gives_the_store_upgrade_would(
        dialect: str, version: int, fresh_store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    by_hand, by_memshift = fresh_store(dialect), fresh_store(dialect)
    for url in (by_hand, by_memshift):
        if version:
            _old_store(url, dialect, version)
    capsys.readouterr()
    assert cli.main(["schema", "upgrade", "--sql", "--store", by_hand]) == 0
    script = capsys.readouterr().out
    assert _catalog(by_hand) == ({} if not version else _catalog(by_memshift))  # wrote nothing
    if dialect == "sqlite":
        conn = sqlite3.connect(by_hand.removeprefix("sqlite:///"))
        conn.executescript(script)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(by_hand, autocommit=True) as conn:
            for statement in script.split(";\n"):
                if statement.strip() and not statement.strip().startswith("--"):
                    conn.execute(statement)  # type: ignore[call-overload]
                elif "\n" in statement.strip():  # a comment line, then the statement
                    conn.execute(statement.split("\n", 1)[1])  # type: ignore[call-overload]
    open_store(by_hand, create_schema=False).close()  # current, memshift's and LangGraph's
    open_store(by_memshift).close()
    assert _catalog(by_hand) == _catalog(by_memshift)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_store_from_a_newer_memshift_is_refused_naming_both_versions(
        dialect: str, fresh_store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = _fresh(fresh_store, dialect)
    _execute(url, ["INSERT INTO memshift_schema (version, step, applied_at, memshift_version) "
                   "VALUES (9, 'something new', '2027-06-01', '0.9.0')"])
    before = _catalog(url)
    for opening in (lambda: open_store(url), lambda: open_store(url, create_schema=False),
                    lambda: SummaryMemory(store=url, backend="middleware"),
                    lambda: open_read_only(url)):
        with pytest.raises(StoreError, match=r"schema version 9 \(written by memshift 0\.9\.0\)"
                                             rf".*versions up to {CURRENT}"):
            opening()
    code, result = _schema_cli(capsys, "upgrade", "--store", url)
    assert code == 2 and "version 9" in result["error"] and f"up to {CURRENT}" in result["error"]
    assert _catalog(url) == before


@pytest.mark.parametrize("dialect", DIALECTS)
def test_create_schema_false_runs_no_ddl_and_says_what_to_run(
        dialect: str, fresh_store: Any) -> None:
    empty = fresh_store(dialect)
    with pytest.raises(StoreError, match="no memshift tables and create_schema=False.*"
                                         "memshift schema upgrade"):
        SummaryMemory(store=empty, backend="classic", create_schema=False)
    assert _catalog(empty) == {}
    old = fresh_store(dialect)
    _old_store(old, dialect, 2)
    before = _catalog(old)
    with pytest.raises(StoreError, match=f"schema version 2 .*needs version {CURRENT}"):
        open_store(old + "?create_schema=0")
    assert _catalog(old) == before
    current = _fresh(fresh_store, dialect)
    memory = SummaryMemory(store=current, backend="middleware", create_schema=False,
                           thread_id="t")
    memory.save_context({"input": "hi"}, {"output": "hello"})
    assert "hello" in str(memory.load_memory_variables({})["history"])
    memory.close()


def test_langgraph_tables_missing_are_refused_too(fresh_store: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url = _fresh(fresh_store, "postgres")
    _execute(url, ["DELETE FROM checkpoint_migrations WHERE v > 5"])
    code, status = _schema_cli(capsys, "status", "--store", url, "--check")
    assert code == 1 and status["memshift"]["up_to_date"] and not status["langgraph"]["up_to_date"]
    with pytest.raises(StoreError, match="LangGraph's checkpoint tables .*create_schema=False"):
        open_store(url, create_schema=False)
    capsys.readouterr()
    assert cli.main(["schema", "upgrade", "--sql", "--store", url]) == 0
    assert "INSERT INTO checkpoint_migrations (v) VALUES (6)" in capsys.readouterr().out
    code, done = _schema_cli(capsys, "upgrade", "--store", url)
    assert code == 0 and not done["upgrade_pending"] and done["applied"] == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_processes_starting_together_upgrade_once(dialect: str, fresh_store: Any) -> None:
    url = fresh_store(dialect)
    _old_store(url, dialect, 1)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            open_store(url).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [v for v, _ in _history(url)] == [s.version for s in STEPS]


def test_upgrade_check_writes_nothing_and_exits_1(fresh_store: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_store("sqlite")
    _old_store(url, "sqlite", 3)
    before = _catalog(url)
    code, result = _schema_cli(capsys, "upgrade", "--check", "--store", url)
    assert code == 1 and [s["version"] for s in result["memshift"]["pending"]] == [4, 5, 6]
    assert _catalog(url) == before
    code, result = _schema_cli(capsys, "upgrade", "--store", url)
    assert code == 0 and result["applied"] == [
        "4: pinned threads (memshift_placement.pinned); versions recorded",
        "5: original long thread ids (memshift_long_ids)",
        "6: shadow evidence the fleet shares (memshift_evidence)"]
    code, again = _schema_cli(capsys, "upgrade", "--store", url)
    assert code == 0 and again["applied"] == []


def test_doctor_names_a_pending_upgrade_and_its_command(fresh_store: Any,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_store("sqlite")
    _old_store(url, "sqlite", 2)
    capsys.readouterr()
    code = cli.main(["doctor", "--store", url, "--json", "--quiet"])
    found = json.loads(capsys.readouterr().out)
    assert code == 1
    problem = next(p for p in found["problems"] if "schema version 2" in p["what"])
    assert "memshift schema upgrade --store URL" in problem["fix"]
