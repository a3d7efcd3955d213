"""The way out: ``memshift finish --store URL --check`` proves, thread by thread, that stock
LangChain v1 (``create_agent`` + ``SummarizationMiddleware`` on the stock saver of the same
database) builds the prompt memshift builds — or names the threads still on classic and what
differs — and prints the code to run without memshift; that code, run, continues every
thread with its summary and window."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from compat import MemoryPolicy, SummaryMemory
from compat.testing.conversations import filler_turn
from tests._cli import run_memshift
from tests.test_cutover_agent import RecordingFake, cfg, is_summary

POLICY = MemoryPolicy(max_tokens=200, keep_tokens=100)


def _seed(url: str) -> None:
    with SummaryMemory(backend="middleware", store=url, policy=POLICY) as memory:
        for tid in ("alice", "bob"):
            for i in range(8):
                memory.save(tid, *filler_turn(tid, i, 10))
    with SummaryMemory(backend="classic", store=url, policy=POLICY) as memory:
        for i in range(3):
            memory.save("carol", *filler_turn("carol", i, 10))


def _stock_saver(url: str) -> tuple[Any, Any]:
    if url.startswith("sqlite:///"):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        return SqliteSaver(conn), conn.close
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    return PostgresSaver(conn), conn.close


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_finish_check_names_classic_threads_then_proves_the_way_out(fresh_store,
                                                                    kind: str) -> None:
    url = fresh_store(kind)
    _seed(url)
    first = run_memshift("finish", "--store", url, "--check", "--json")
    assert first.returncode == 1, first.stderr[-2000:]
    result = json.loads(first.stdout)
    assert result["on_classic"] == ["carol"] and result["equal"] == 2
    with SummaryMemory(backend="middleware", store=url, policy=POLICY) as memory:
        memory.load("carol")  # moved at first touch
    done = run_memshift("finish", "--store", url, "--check", "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["on_classic"] == [] and result["equal"] == 3 and result["different"] == []
    assert "SummarizationMiddleware(" in result["code"] and "create_agent(" in result["code"]
    assert ('trigger=("tokens", 200)' in result["code"]
            and 'keep=("tokens", 100)' in result["code"])
    assert result["gives_up"]  # what leaving costs, said
    text = run_memshift("finish", "--store", url, "--check").stdout
    assert "create_agent(" in text and "3 thread(s)" in text

    # the printed way out, run: stock classes only, on the same database
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    saver, close = _stock_saver(url)
    try:
        model = RecordingFake(messages=iter([AIMessage(f"stock reply {i}") for i in range(9)]))
        agent = create_agent(model=model, middleware=[SummarizationMiddleware(
            model=model, trigger=("tokens", 200), keep=("tokens", 100))], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage("one more question")]}, cfg("alice"))
    finally:
        close()
    seen = model.seen[-1]
    with SummaryMemory(backend="middleware", store=url, policy=POLICY) as memory:
        view = memory.load("alice")
    assert is_summary(seen[0]) and view.summary in seen[0].text  # the summary carried over
    assert [m.text for m in seen[1:-1]] == [m.text for m in view.messages][:len(seen) - 2]
