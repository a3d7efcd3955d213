"""The hot-path shortcuts keep their promises: cheap copies equal deep copies, a saver joined
to a transaction reads a checkpoint once and forgets it on any write, a classic read is one
statement, PostgreSQL reads send no BEGIN/COMMIT."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from adapters.stores.tx_saver import read_once
from adapters.view import detach
from compat import SummaryMemory
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

    event.listen(Engine, "before_cursor_execute", on_execute)
    event.listen(Engine, "begin", on_begin)
    try:
        action()
    finally:
        event.remove(Engine, "before_cursor_execute", on_execute)
        event.remove(Engine, "begin", on_begin)
    return seen


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_classic_load_is_one_statement(kind: str, fresh_store: Any) -> None:
    url = fresh_store(kind)
    memory = SummaryMemory(backend="classic", store=url)
    for i in range(3):
        memory.save("t", *filler_turn("t", i, 8))
    selects = [s for s in _statements(url, "classic", lambda: memory.load("t")) if s != "BEGIN"]
    assert selects == ["SELECT"], selects
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
