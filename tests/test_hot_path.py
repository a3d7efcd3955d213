"""The hot-path shortcuts keep their promises: cheap copies equal deep copies, a saver joined
to a transaction reads a checkpoint once and forgets it on any write, a classic read is one
statement, PostgreSQL reads send no BEGIN/COMMIT."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from adapters.stores.tx_saver import read_once
from adapters.view import detach
from compat import SummaryMemory, admin
from compat.testing import filler_turn

MESSAGES = [
    HumanMessage("plain text", id="h1"),
    HumanMessage([{"type": "text", "text": "blocks"}, {"type": "image", "url": "x"}], id="h2"),
    AIMessage("calls", tool_calls=[{"name": "f", "args": {"q": [1, 2]}, "id": "c1"}],
              response_metadata={"usage": {"total": 3}}, additional_kwargs={"k": {"v": 1}}),
    ToolMessage("result", tool_call_id="c1", artifact={"rows": [1, 2]}),
    SystemMessage("summary", name="memshift"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type)
def test_detach_equals_a_deep_copy_and_shares_nothing_mutable(message: Any) -> None:
    original = copy.deepcopy(message.model_dump())
    out = detach(message)
    assert type(out) is type(message)
    assert out == message.model_copy(deep=True)
    assert out.model_dump() == original
    out.content = "tampered"
    for value in out.__dict__.values():  # mutate every container the copy holds
        if isinstance(value, dict):
            value["new"] = 1
        elif isinstance(value, list):
            value.append({"new": 1})
    assert message.model_dump() == original


def test_the_memory_store_hands_each_load_its_own_copies() -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    memory.save("t", "keep me", "kept")
    first, second = memory.load("t"), memory.load("t")
    assert all(a is not b for a, b in zip(first.messages, second.messages, strict=True))
    first.messages[0].content = "tampered"
    assert second.messages[0].content == "keep me"
    assert memory.load("t").messages[0].content == "keep me"


class _Counting(InMemorySaver):
    reads = 0

    def get_tuple(self, config: Any) -> Any:
        _Counting.reads += 1
        return super().get_tuple(config)


def test_a_transaction_saver_reads_a_checkpoint_once_until_a_write() -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = read_once(_Counting)()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    written = saver.put(config, empty_checkpoint(), {"step": 0}, {})
    _Counting.reads = 0
    first = saver.get_tuple(config)
    assert saver.get_tuple(config) is first and _Counting.reads == 1
    saver.put(written, empty_checkpoint(), {"step": 1}, {})
    assert saver.get_tuple(config).metadata["step"] == 1 and _Counting.reads == 2
    saver.put_writes(written, [("messages", [])], "task-1")
    saver.get_tuple(config)
    assert _Counting.reads == 3


def _statements(url: str, backend: str, action: Any) -> list[str]:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: list[str] = []

    def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement.split()[0].upper())

    def on_begin(conn: Any) -> None:
        seen.append("BEGIN")

    from adapters.stores.batch import Batch

    real_flush = Batch.flush

    def flush(self: Batch, sql: str | None = None, params: Any = None) -> Any:  # PostgreSQL
        seen.extend(q.split()[0].upper() for q in [*self._pending, *([sql] if sql else [])])
        return real_flush(self, sql, params)

    event.listen(Engine, "before_cursor_execute", on_execute)
    event.listen(Engine, "begin", on_begin)
    Batch.flush = flush  # type: ignore[method-assign]
    try:
        action()
    finally:
        Batch.flush = real_flush  # type: ignore[method-assign]
        event.remove(Engine, "before_cursor_execute", on_execute)
        event.remove(Engine, "begin", on_begin)
    return seen


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_classic_load_is_the_placement_and_the_state(kind: str, fresh_store: Any) -> None:
    """One statement reads where the thread lives and its state, its own snapshot: no
    BEGIN/COMMIT on SQLite (``adapters.stores.sqlite_classic``; it was BEGIN, two SELECTs,
    COMMIT), one round trip on PostgreSQL (``adapters.stores.postgres_classic``)."""
    url = fresh_store(kind)
    memory = SummaryMemory(backend="classic", store=url)
    for i in range(3):
        memory.save("t", *filler_turn("t", i, 8))
    if kind == "sqlite":  # the placement is read on the driver's connection: trace that
        from sqlalchemy import event

        engine = memory.backend_impl.store.engine
        traced: list[str] = []
        engine.dispose()
        event.listen(engine, "connect", lambda dbapi, _r: dbapi.set_trace_callback(
            lambda sql: traced.append(sql.split()[0].upper())))
        memory.load("t")
        assert [s for s in traced if s != "PRAGMA"] == ["SELECT"], traced
    else:
        from tests.test_pg_batch import trips

        with trips() as sent:
            memory.load("t")
        assert sent == [["SELECT"]], sent
    view = memory.load("t")
    assert [m.content for m in view.messages][-1].startswith("answer 2")
    memory.close()


def test_postgres_loads_send_no_begin_or_commit(fresh_store: Any) -> None:
    import psycopg

    url = fresh_store("postgresql")
    memory = SummaryMemory(backend="classic", store=url)
    memory.save("t", "q", "a")
    sent: list[str] = []
    real_execute, real_commit = psycopg.Connection.execute, psycopg.Connection.commit
    real_cursor_execute = psycopg.Cursor.execute

    def cursor_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query).split()[0].upper())
        return real_cursor_execute(self, query, *args, **kwargs)

    def commit(self: Any) -> None:
        if not self.autocommit:
            sent.append("COMMIT")
        real_commit(self)
    psycopg.Cursor.execute, psycopg.Connection.commit = cursor_execute, commit  # type: ignore[method-assign]
    try:
        memory.load("t")
    finally:
        psycopg.Cursor.execute, psycopg.Connection.commit = real_cursor_execute, real_commit  # type: ignore[method-assign]
    assert real_execute is psycopg.Connection.execute
    assert sent == ["SELECT"], sent
    memory.close()


def test_a_message_with_pydantic_extras_takes_the_deep_copy() -> None:
    message = HumanMessage("x", id="e1", custom={"nested": [1]})  # type: ignore[call-arg]
    out = detach(message)
    assert out == message.model_copy(deep=True)
    out.__pydantic_extra__["custom"]["nested"].append(2)  # type: ignore[index]
    assert message.__pydantic_extra__ == {"custom": {"nested": [1]}}


def _counting_detach(monkeypatch: Any) -> list[int]:
    import adapters.backends.classic as classic

    calls: list[int] = []
    real = classic.detach

    def counting(message: Any) -> Any:
        calls.append(1)
        return real(message)
    monkeypatch.setattr(classic, "detach", counting)
    return calls


def test_a_string_rendering_copies_nothing_and_a_message_view_copies_everything(
        monkeypatch: Any) -> None:
    text = SummaryMemory(backend="classic", store="memory")
    msgs = SummaryMemory(backend="classic", store="memory", return_messages=True)
    for memory in (text, msgs):
        memory.save_context({"input": "hi"}, {"output": "hello"})
    calls = _counting_detach(monkeypatch)
    assert text.load_memory_variables({}) == {"history": "Human: hi\nAI: hello"}
    assert calls == []
    loaded = msgs.load_memory_variables({})["history"]
    assert len(calls) == 2 and [m.content for m in loaded] == ["hi", "hello"]
    loaded[0].content = "tampered"  # the message view is the caller's; the store is not
    assert [m.content for m in msgs.load().messages] == ["hi", "hello"]
    assert msgs.transcript(msgs._rt.private_thread)[0].content == "hi"


def test_the_store_keeps_its_own_copy_of_a_turn_shared_by_transcript_and_window() -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    human, ai = HumanMessage("q", id="q1"), AIMessage("a", id="a1")
    memory.save("t", human, ai)
    human.content, ai.content = "edited by the caller", "edited too"
    store = memory._rt.store
    window = store.classic._windows["t"].messages
    log = store._transcripts["t"]
    assert [m.content for m in window] == ["q", "a"] and [m.content for m in log] == ["q", "a"]
    assert all(w is t for w, t in zip(window, log, strict=True))  # one copy, two indexes
    assert all(w is not m for w, m in zip(window, (human, ai), strict=True))
    memory.transcript("t")[0].content = "x"
    memory.load("t").messages[1].content = "y"
    assert [m.content for m in memory.load("t").messages] == ["q", "a"]
    assert [m.content for m in memory.transcript("t")] == ["q", "a"]


def test_memory_store_writes_roll_back_exactly() -> None:
    from adapters.stores.memory import MemoryStore

    store = MemoryStore()
    with store.transaction("t") as tx:
        store.classic.append(tx, [HumanMessage("1", id="m1"), AIMessage("2", id="m2")])

    def state() -> tuple:
        with store.transaction("t", write=False) as tx:
            snap = store.classic.read(tx)
        return snap.summary, snap.folds, [m.content for m in snap.window], snap.rows

    before = state()
    tx = store.begin("t")
    store.classic.append(tx, [HumanMessage("3", id="m3")])
    store.classic.fold(tx, "s", 1, state()[3][:1])
    store.classic.append(tx, [AIMessage("4", id="m4")])
    assert state()[2] == ["2", "3", "4"]
    store.rollback(tx)
    assert state() == before
    for write in (lambda tx: store.classic.replace(tx, "s", 2, [HumanMessage("r")]),
                  store.classic.clear):
        tx = store.begin("t")
        write(tx)
        store.rollback(tx)
        assert state() == before
    tx = store.begin("new")
    store.classic.append(tx, [HumanMessage("n")])
    store.rollback(tx)
    assert "new" not in store.classic._windows


def test_fresh_ids_are_unique_uuid4_strings() -> None:
    import uuid

    from adapters.engine import new_id

    ids = {new_id() for _ in range(5000)}
    assert len(ids) == 5000
    for value in list(ids)[:500]:
        parsed = uuid.UUID(value)
        assert str(parsed) == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_memory_keeps_its_collaborators_in_one_private_attribute() -> None:
    """One private read per call (``_rt``), shared by the views ``for_thread`` makes; unknown
    attributes still raise, and the operations that moved to ``compat.admin`` still answer on
    the memory, with a DeprecationWarning."""
    memory = SummaryMemory(backend="classic", store="memory")
    assert memory._rt.backend is memory.backend_impl and memory._rt.adopter is None
    with pytest.raises(AttributeError):
        memory.no_such_attribute  # noqa: B018
    bound = memory.for_thread("t")
    assert bound._rt is memory._rt and bound.thread_id == "t"
    bound.save(None, "q", "a")
    with pytest.warns(DeprecationWarning, match="compat.admin.placement"):
        assert memory.placement("t").backend == "classic"

    class Sub(SummaryMemory):
        pass
    sub = Sub(backend="classic", store="memory")
    sub.save_context({"input": "hi"}, {"output": "hello"})
    assert sub.buffer == "Human: hi\nAI: hello" and sub._rt.renderer is not None


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type)
def test_with_id_equals_pydantic_copy_then_assignment(message: Any) -> None:
    from adapters.view import with_id

    expected = message.model_copy()
    expected.id = "new-id"
    out = with_id(message, "new-id")
    assert type(out) is type(message) and out == expected and out is not message
    assert out.model_fields_set == expected.model_fields_set
    assert message.id != "new-id" or message.id is None
    out.content = "changed"  # a field set on the copy never reaches the original
    assert message.content != "changed"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_classic_save_and_load_leave_no_garbage_for_the_cycle_collector(
        store: str, tmp_path: Any) -> None:
    """A transaction freed by reference counting, not by the cycle collector: its undo
    closures held it (a cycle per save, ~40% of an in-memory save+load once the collector
    ran). Folds and a rolled-back save included."""
    import gc

    from adapters import MemoryPolicy

    url = "memory" if store == "memory" else f"sqlite:///{tmp_path}/gc.db"
    memory = SummaryMemory(backend="classic", store=url,
                           policy=MemoryPolicy(max_tokens=300, keep_tokens=120))
    for i in range(3):
        memory.save("t", *filler_turn("t", i, 12))
    while gc.collect():  # earlier tests' garbage, including what its weakref callbacks free
        pass
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for i in range(3, 23):
            memory.save_context({"input": filler_turn("t", i, 12)[0], "thread_id": "t"},
                                {"output": filler_turn("t", i, 12)[1]})
            memory.load_memory_variables({"thread_id": "t"})
        def refuse(tx: Any) -> Any:  # a guard that fails inside the transaction
            raise RuntimeError("rolled back")
            yield
        with pytest.raises(RuntimeError):
            memory.backend_impl.save("t", [HumanMessage("q"), AIMessage("a")], guard=refuse)
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert memory.load("t").folds >= 2
    assert garbage == []
    memory.close()


def test_window_counts_equal_a_whole_count_through_growth_folds_and_replacements() -> None:
    import random

    from adapters import count_tokens_cjk
    from adapters.backends.classic import WindowCounts

    counts = WindowCounts(count_tokens_cjk, windows=8)
    rng = random.Random(3)
    windows: list[list[Any]] = [[] for _ in range(5)]
    counted: list[int] = []
    real = counts.counter
    counts.counter = lambda ms: (counted.append(len(ms)), real(ms))[1]
    for step in range(600):
        w = rng.randrange(5)
        window = windows[w]
        action = rng.random()
        if action < 0.6:  # a turn
            window = window + [HumanMessage(f"q{step} " * rng.randrange(1, 9)), AIMessage("a")]
        elif action < 0.75:  # a fold drops the head
            window = window[rng.randrange(len(window) + 1):]
        elif action < 0.85 and window:  # a replaced window: equal messages, new objects
            window = [m.model_copy() for m in window]
        elif window:  # one message replaced in the middle
            i = rng.randrange(len(window))
            window = [*window[:i], HumanMessage("replaced"), *window[i + 1:]]
        windows[w] = window
        assert counts(window) == count_tokens_cjk(window)
    assert len(counts._sums) <= 8
    counted.clear()
    grown = windows[0] + [HumanMessage("one more")]
    counts(windows[0])
    counted.clear()
    assert counts(grown) == count_tokens_cjk(grown) and counted == [1]  # only the new one
    turn = [HumanMessage("a turn"), AIMessage("its answer")]
    counts([*grown, *turn], stored=len(grown))  # this step's messages are not kept...
    counted.clear()
    copies = [m.model_copy() for m in turn]  # ...the store's copies of them come back
    assert counts([*grown, *copies]) == count_tokens_cjk([*grown, *copies]) and counted == [1, 1]


@pytest.mark.parametrize("kind", ["memory", "postgres"])
def test_classic_folds_the_same_with_and_without_kept_window_counts(
        kind: str, fresh_store: Any) -> None:
    """In memory every window is the store's own objects; on PostgreSQL, the windows the quick
    path keeps (``ClassicSnapshot.kept``)."""
    from adapters import MemoryPolicy

    def run(keep_counts: bool) -> list[Any]:
        with SummaryMemory(backend="classic", store=fresh_store(kind),
                           policy=MemoryPolicy(max_tokens=200, keep_tokens=90)) as memory:
            backend = memory.backend_impl.leaves()[0].backend
            counts, policy = backend._counts, memory.active_policy
            assert counts is not None
            kept: list[int] = []

            def checked(window: Any, stored: int | None = None) -> int:
                assert stored is not None and stored <= len(window)
                tokens = counts(window, stored)
                assert tokens == policy.count(window)  # a kept count is the whole count
                kept.append(tokens)
                return tokens
            backend._counts = checked if keep_counts else None
            backend._local.__dict__.clear()  # the per-thread memory took the old value
            views = []
            for i in range(40):
                memory.save("t", *filler_turn("t", i, 9 + i % 7))
                view = memory.load("t")
                views.append((view.summary, view.folds, [m.content for m in view.messages]))
            assert kept or not keep_counts  # the saves used them
            return views
    assert run(True) == run(False)


def test_window_counts_only_where_messages_are_kept_and_counts_add_up(tmp_path: Any) -> None:
    from adapters import MemoryPolicy

    def not_declared(messages: Any) -> int:
        return len(messages) * 7
    assert SummaryMemory(backend="classic", store="memory").backend_impl.leaves()[0].backend._counts
    for memory in (SummaryMemory(backend="classic", store=f"sqlite:///{tmp_path}/c.db"),
                   SummaryMemory(backend="classic", store="memory",
                                 policy=MemoryPolicy(max_tokens=500, token_counter=not_declared))):
        assert memory.backend_impl.leaves()[0].backend._counts is None
        memory.close()


def test_kept_run_finds_the_same_objects_after_a_turn_a_fold_or_a_replacement() -> None:
    from adapters.view import kept_run

    a, b, c, d, e = (HumanMessage(x) for x in "abcde")
    assert kept_run((), [a]) == (0, 0) and kept_run((a,), []) == (0, 0)
    assert kept_run((a, b), [a, b, c, d]) == (0, 2)  # a turn appended
    assert kept_run((a, b, c), [b, c, d]) == (1, 2)  # a fold dropped the head
    assert kept_run((a, b, c, d), [a, b, e, d]) == (0, 2)  # replaced from the third on
    assert kept_run((a, b), [HumanMessage("a"), b]) == (0, 0)  # equal is not the same object
    assert kept_run((a, b, c), [c]) == (2, 1) and kept_run((a, b), [a]) == (0, 1)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type)
def test_a_row_decoded_again_equals_a_fresh_decode_and_shares_nothing(message: Any) -> None:
    """A stored row is decoded once and handed out as copies: each equals what decoding
    the text gives, and mutating one changes neither the next nor the kept one."""
    from langchain_core.messages import messages_from_dict

    from adapters.stores.schema import dump_message, load_message

    raw = dump_message(message)
    fresh = messages_from_dict([json.loads(raw)])[0]
    first, second = load_message(raw, keep=True), load_message(raw, keep=True)
    assert first == fresh and second == fresh and first is not second
    first.content = "tampered"
    for value in first.__dict__.values():
        if isinstance(value, dict):
            value["new"] = 1
        elif isinstance(value, list):
            value.append("new")
    assert load_message(raw, keep=True) == fresh and second == fresh


def test_only_window_rows_of_bounded_size_are_kept_and_an_erasure_drops_them(
        tmp_path: Any) -> None:
    """Transcript reads and long rows are decoded every time (they would only crowd the
    bound); an erased thread leaves no decoded text behind."""
    from adapters.stores import schema

    schema.forget_decoded()
    short, long = HumanMessage("short", id="s1"), HumanMessage("x" * 9_000, id="l1")
    schema.load_message(schema.dump_message(short))
    schema.load_message(schema.dump_message(long), keep=True)
    assert schema._decoded == {}
    memory = SummaryMemory(store=f"sqlite:///{tmp_path}/m.db", backend="classic")
    memory.save("t1", "remember the password swordfish", "noted")
    memory.load("t1")
    assert any("swordfish" in raw for raw in schema._decoded)
    admin.forget(memory, "t1")
    assert not any("swordfish" in raw for raw in schema._decoded)
    memory.close()


def test_a_corrupt_row_is_named_every_time_it_is_read() -> None:
    """A row that does not decode is never kept: every read raises the precise error."""
    from adapters.errors import CorruptDataError
    from adapters.stores.schema import load_message

    for _ in range(2):
        with pytest.raises(CorruptDataError, match="memshift_window"):
            load_message('{"type": "human"', "t1", "memshift_window", 7, keep=True)
