"""A thread id over the byte budget is kept under a key (``adapters.thread_keys``); the id the
application passed is stored beside the key once, so ``thread_ids()``, ``doctor`` and
``export`` name the thread as the application does — and ``forget`` erases that id too.
An id within the budget pays nothing for it: no statement is added to its saves."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text

from adapters.stores.url import sqlalchemy_url
from adapters.thread_keys import is_key, storage_id
from compat import MemoryPolicy, SummaryMemory, admin
from compat.doctor import diagnose
from tests._cli import run_memshift

KINDS = ["memory", "sqlite", "postgres"]


def _long_id(seed: int) -> str:
    """Over the byte budget (1,000 CJK characters: 3,000 bytes), with quotes and a
    backslash, so that only a parameterised statement stores it unchanged."""
    rng = random.Random(seed)
    return "user'\"; --\\" + "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(990))


def _rows(url: str, table: str) -> list[tuple[Any, ...]]:
    engine = create_engine(sqlalchemy_url(url))
    try:
        if table not in inspect(engine).get_table_names():
            return []
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(f"SELECT * FROM {table}"))]
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["classic", "middleware"])
@pytest.mark.parametrize("kind", KINDS)
def test_thread_ids_list_the_id_the_application_passed(kind: str, backend: str,
                                                       fresh_store: Any) -> None:
    url = fresh_store(kind)
    long = _long_id(1)
    assert is_key(storage_id(long))
    with SummaryMemory(store=url, backend=backend) as memory:
        memory.save("short", "q0", "a0")
        memory.save(long, "q1", "a1")
        memory.save(long, "q2", "a2")  # a second save records nothing more
        listed = admin.thread_ids(memory)
        assert listed == ["short", long], [t[:30] for t in listed]
        # what the listing gives finds the thread again
        assert [m.text for m in memory.transcript(listed[1])] == ["q1", "a1", "q2", "a2"]
    if kind != "memory":
        assert _rows(url, "memshift_long_ids") == [(storage_id(long), long)]
        reader = admin.open_read_only(url)
        try:
            assert admin.thread_ids(reader) == ["short", long]
        finally:
            reader.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_doctor_and_export_name_the_long_id(kind: str, fresh_store: Any,
                                            tmp_path: Any) -> None:
    url = fresh_store(kind)
    long = _long_id(2)
    with SummaryMemory(store=url, backend="classic") as memory:
        memory.save(long, "hello", "hi")
        memory.save("other", "q", "a")
        memory.clear(long)  # a transcript and no state: doctor lists it as empty
    seen: list[str] = []
    found = diagnose(url, on_thread=seen.append)
    assert found.empty == [long] and sorted(seen) == sorted([long, "other"])
    path = tmp_path / "out.jsonl"
    done = run_memshift("export", "--store", url, "--quiet", check=0)
    path.write_text(done.stdout, encoding="utf-8")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert {line["thread_id"] for line in lines} == {long, "other"}
    assert [line["content"] for line in lines if line["thread_id"] == long] == ["hello", "hi"]
    listed = tmp_path / "threads.txt"
    listed.write_text(long + "\n", encoding="utf-8")
    only = run_memshift("export", "--store", url, "--threads", str(listed), "--quiet", check=0)
    assert {json.loads(line)["thread_id"] for line in only.stdout.splitlines()} == {long}


@pytest.mark.parametrize("kind", KINDS)
def test_forget_erases_the_stored_original_id(kind: str, fresh_store: Any) -> None:
    url = fresh_store(kind)
    long, kept = _long_id(3), _long_id(4)
    with SummaryMemory(store=url, backend="classic") as memory:
        memory.save(long, "my secret", "noted")
        memory.save(kept, "q", "a")
        admin.forget(memory, long, compact=False)
        assert admin.thread_ids(memory) == [kept]
        if kind != "memory":
            assert _rows(url, "memshift_long_ids") == [(storage_id(kept), kept)]
        memory.save(long, "back again", "welcome")  # a new thread under the same id
        assert admin.thread_ids(memory) == [kept, long]


def _save_statements(url: str, thread_id: str) -> list[str]:
    """Every statement one save of ``thread_id`` sends (after its first save)."""
    from tests.test_hot_path import _statements

    memory = SummaryMemory(store=url, backend="classic")
    memory.save(thread_id, "q0", "a0")
    try:
        if url.startswith("sqlite"):  # the placement is read on the driver's connection
            from sqlalchemy import event

            engine = memory.backend_impl.store.engine
            traced: list[str] = []
            engine.dispose()
            event.listen(engine, "connect", lambda dbapi, _r: dbapi.set_trace_callback(
                lambda sql: traced.append(sql)))
            memory.save(thread_id, "q1", "a1")
            return traced
        return _statements(url, "classic", lambda: memory.save(thread_id, "q1", "a1"))
    finally:
        memory.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_only_a_long_id_pays_one_idempotent_insert_per_save(kind: str,
                                                            fresh_store: Any) -> None:
    url = fresh_store(kind)
    short = _save_statements(url, "short")
    long = _save_statements(url, _long_id(5))
    assert not any("memshift_long_ids" in s for s in short)
    if kind == "sqlite":  # full statements: the long id's extra one is the insert
        extra = [s for s in long if "memshift_long_ids" in s]
        assert len(extra) == 1 and extra[0].upper().startswith("INSERT"), extra
        assert len(long) == len(short) + 1
    else:  # PostgreSQL: the insert travels in the save's batch (no round trip of its own)
        assert len(long) == len(short) + 1


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_store_from_before_the_table_is_upgraded_and_names_a_long_id_at_its_next_save(
        kind: str, fresh_store: Any) -> None:
    from adapters.stores import open_store

    url = fresh_store(kind)
    long = _long_id(6)
    with SummaryMemory(store=url, backend="classic") as memory:
        memory.save(long, "q0", "a0")
    engine = create_engine(sqlalchemy_url(url))  # as schema version 4 left it
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE memshift_long_ids"))
        conn.execute(text("DROP TABLE memshift_evidence"))  # (version 6)
        conn.execute(text("DELETE FROM memshift_schema WHERE version >= 5"))
    engine.dispose()
    store = open_store(url)
    assert store.schema_applied[0] == "5: original long thread ids (memshift_long_ids)"
    store.close()
    with SummaryMemory(store=url, backend="classic") as memory:
        assert admin.thread_ids(memory) == [storage_id(long)]  # saved before: its key
        memory.save(long, "q1", "a1")
        assert admin.thread_ids(memory) == [long]


def test_a_migration_in_a_new_process_carries_the_long_id_to_the_target(
        fresh_store: Any) -> None:
    """The migrating process meets the thread only by its key (the store's listing): the
    listing teaches it the original, so the target records it too."""
    source, target = fresh_store("sqlite"), fresh_store("postgres")
    long = _long_id(7)
    with SummaryMemory(store=source, backend="classic") as memory:
        memory.save(long, "q", "a")
    run_memshift("migrate", "--from", "classic", "--from-store", source, "--to", "middleware",
                 "--to-store", target, "--quiet", process=True, check=0)
    assert _rows(target, "memshift_long_ids") == [(storage_id(long), long)]
    with SummaryMemory(store=target, backend="middleware") as memory:
        assert admin.thread_ids(memory) == [long]
        assert [m.text for m in memory.transcript(long)] == ["q", "a"]


def test_a_recorded_original_that_is_not_the_keys_id_is_not_shown(fresh_store: Any) -> None:
    url = fresh_store("sqlite")
    long = _long_id(8)
    with SummaryMemory(store=url, backend="classic") as memory:
        memory.save(long, "q", "a")
    engine = create_engine(sqlalchemy_url(url))
    with engine.begin() as conn:
        conn.execute(text("UPDATE memshift_long_ids SET original = :o"), {"o": _long_id(9)})
    engine.dispose()
    with SummaryMemory(store=url, backend="classic") as memory:
        assert admin.thread_ids(memory) == [storage_id(long)]  # the key, never another name


def test_a_migration_report_names_a_long_thread_by_its_original_id(tmp_path: Any) -> None:
    """A report line about a long-id thread (here: a fold record that does not decode) shows
    the id the application passed, not the key."""
    import json
    import sqlite3

    source, target = f"sqlite:///{tmp_path}/s.db", f"sqlite:///{tmp_path}/t.db"
    long = _long_id(11)
    with SummaryMemory(store=source, backend="classic",
                       policy=MemoryPolicy(max_tokens=60, keep_tokens=30)) as memory:
        for i in range(4):
            memory.save(long, f"question {i} " + "w " * 10, f"answer {i}")
    with sqlite3.connect(f"{tmp_path}/s.db") as conn:
        conn.execute("UPDATE memshift_folds SET record = 'oops'")
    done = run_memshift("migrate", "--from", "classic", "--from-store", source, "--to",
                        "middleware", "--to-store", target, "--json", process=True)
    assert done.returncode == 1, done.stderr[-2000:]
    incomplete = json.loads(done.stdout)["threads"]["incomplete"]
    assert [item["thread_id"] for item in incomplete] == [long]
    text = run_memshift("migrate", "--from", "classic", "--from-store", source, "--to",
                        "middleware", "--to-store", target, process=True).stdout
    assert storage_id(long) not in text and f"INCOMPLETE {long!r}" in text
