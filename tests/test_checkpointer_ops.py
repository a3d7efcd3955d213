"""``memory.checkpointer`` as LangGraph judges a saver: its checkpoint-conformance suite
(FULL where the stock saver is FULL), only the capabilities it implements, time travel over
every listed checkpoint, thread operations in memshift transactions, ``DeltaChannel`` state
kept or refused, and no hang at interpreter exit."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from compat import (
    DeltaStateError, GraphSource, MemoryPolicy, SummaryMemory, ThreadRecord, admin, migrate,
)
from compat.testing.fakes import EchoChatModel

ROOT = Path(__file__).resolve().parents[1]
EXTENDED = {"copy_thread", "delete_for_runs", "prune"}


def cfg(tid: str, **extra: Any) -> dict:
    return {"configurable": {"thread_id": tid, **extra}}


def _report(factory: Any) -> Any:
    return asyncio.run(validate(factory))


def _detected(report: Any) -> set[str]:
    return {cap for cap, result in report.results.items() if result.detected}


async def _stock_saver(url: str) -> AsyncIterator[BaseCheckpointSaver]:
    if url == "memory":
        yield InMemorySaver()
    elif url.startswith("sqlite"):
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with aiosqlite.connect(url.split("///", 1)[1]) as conn:
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver


@pytest.mark.parametrize("backend", ["middleware", "staged"])
def test_conformance_full_where_stock_is_full(store_url: str, backend: str, tmp_path: Path) -> None:
    memories: list[SummaryMemory] = []

    @checkpointer_test(name=f"memshift-{backend}")
    async def memshift() -> AsyncIterator[BaseCheckpointSaver]:
        memory = SummaryMemory(llm=EchoChatModel(), store=store_url, backend=backend)
        memories.append(memory)
        yield memory.checkpointer
        await memory.aclose()

    stock_url = f"sqlite:///{tmp_path}/stock.db" if store_url.startswith("sqlite") else store_url

    @checkpointer_test(name="stock")
    async def stock() -> AsyncIterator[BaseCheckpointSaver]:
        async for saver in _stock_saver(stock_url):
            yield saver

    ours, theirs = _report(memshift), _report(stock)
    failures = {cap: r.failures for cap, r in ours.results.items() if r.failures}
    assert ours.conformance_level() == "FULL", failures
    assert theirs.conformance_level() == "FULL"
    assert _detected(ours) >= _detected(theirs)
    assert EXTENDED <= _detected(ours)  # memshift implements them on every store of its own


def test_an_own_saver_is_advertised_as_it_is() -> None:
    """With the application's own saver, the operations it lacks are not advertised."""
    class Pruning(InMemorySaver):
        def prune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
            self.pruned = list(thread_ids)

        async def aprune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
            self.prune(thread_ids, strategy=strategy)

    plain = SummaryMemory(backend="middleware", checkpointer=InMemorySaver()).checkpointer
    assert DetectedCapabilities.from_instance(plain).detected.isdisjoint(
        {"copy_thread", "delete_for_runs", "prune"})
    assert type(plain).copy_thread is BaseCheckpointSaver.copy_thread  # LangGraph's default
    own = Pruning()
    pruning = SummaryMemory(backend="middleware", checkpointer=own).checkpointer
    assert {c.value for c in DetectedCapabilities.from_instance(pruning).detected} & EXTENDED == {
        "prune"}
    pruning.prune(["a", "b"])
    assert own.pruned == ["a", "b"]


# -- time travel ----------------------------------------------------------------------------
class Model(GenericFakeChatModel):
    def bind_tools(self, *args: Any, **kwargs: Any) -> Model:
        return self


def _model() -> Model:
    return Model(messages=iter([AIMessage(f"answer {i} " + "word " * 20) for i in range(10_000)]))


def _agent(memory: SummaryMemory) -> Any:
    return create_agent(_model(), [], middleware=[memory.middleware],
                        checkpointer=memory.checkpointer)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_listed_checkpoint_replays_and_forks(store_url: str, mode: str) -> None:
    """A UI lists the history and replays then forks each entry, one after another."""
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware",
                           policy=MemoryPolicy(max_tokens=200, keep_tokens=80))
    agent, tid = _agent(memory), f"tt-{mode}"

    async def walk() -> tuple[int, int]:
        for i in range(6):
            await agent.ainvoke({"messages": [HumanMessage(f"question {i} " + "x " * 20)]},
                                cfg(tid))
        listed = [s async for s in agent.aget_state_history(cfg(tid))]
        for state in listed:
            await agent.ainvoke(None, state.config)
            fork = await agent.aupdate_state(state.config, {"messages": [HumanMessage("fork")]})
            await agent.ainvoke(None, fork)
        return len(listed), len([s async for s in agent.aget_state_history(cfg(tid))])

    if mode == "async":
        listed, after = asyncio.run(walk())
    else:
        for i in range(6):
            agent.invoke({"messages": [HumanMessage(f"question {i} " + "x " * 20)]}, cfg(tid))
        history = list(agent.get_state_history(cfg(tid)))
        for state in history:
            agent.invoke(None, state.config)  # raises EmptyInputError if a part was pruned
            agent.invoke(None, agent.update_state(state.config,
                                                  {"messages": [HumanMessage("fork")]}))
        listed, after = len(history), len(list(agent.get_state_history(cfg(tid))))
    assert listed >= memory_keep(memory)
    assert after > listed  # replays and forks added checkpoints; none of the listed went
    memory.close()


def memory_keep(memory: SummaryMemory) -> int:
    return 4  # the default keep_checkpoints


def test_retention_keeps_whole_turns_and_bounds_the_thread(store_url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware")
    agent, tid = _agent(memory), "bounded"
    sizes = []
    for i in range(12):
        agent.invoke({"messages": [HumanMessage(f"q{i}")]}, cfg(tid))
        history = list(memory.checkpointer.list(cfg(tid)))
        sizes.append(len(history))
        oldest = history[-1]
        # the oldest kept checkpoint starts a turn: nothing of a turn is half kept
        assert oldest.metadata["source"] in ("input", "update", "fork")
    assert max(sizes) <= 2 * sizes[0] + 4  # bounded, not growing with the runs
    assert len(memory.load(tid).messages) > 0
    memory.close()


def test_retention_never_races_the_agents_writes() -> None:
    """Agent runs on many threads at once over the in-memory store (LangGraph writes
    checkpoints from its background threads meanwhile)."""
    memory = SummaryMemory(llm=_model(), backend="middleware")
    agent, errors = _agent(memory), []

    def work(n: int) -> None:
        try:
            for i in range(15):
                agent.invoke({"messages": [HumanMessage(f"{n}-{i}")]}, cfg(f"race-{n % 3}"))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# -- thread operations in memshift's transactions --------------------------------------------
def test_copy_thread_copies_the_memory_and_its_transcript(store_url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware",
                           policy=MemoryPolicy(max_tokens=120, keep_tokens=60))
    for i in range(6):
        memory.save("src", f"question {i} " + "x " * 30, f"answer {i} " + "y " * 30)
    memory.checkpointer.copy_thread("src", "dst")
    a, b = memory.load("src"), memory.load("dst")
    assert (a.summary, [m.text for m in a.messages]) == (b.summary, [m.text for m in b.messages])
    assert [m.id for m in memory.transcript("dst")] == [m.id for m in memory.transcript("src")]
    with pytest.raises(Exception, match="already has a transcript"):
        memory.checkpointer.copy_thread("src", "dst")
    memory.save("dst", "only in the copy", "ok")
    assert "only in the copy" not in [m.text for m in memory.load("src").messages]
    memory.close()


def test_delete_thread_is_the_memorys_clear(store_url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware")
    memory.save("gone", "hello", "there")
    memory.save("kept", "hello", "there")
    memory.checkpointer.delete_thread("gone")
    assert memory.load("gone").messages == []
    assert len(memory.load("kept").messages) == 2
    assert admin.placement(memory, "gone") is not None  # the record says where it lives
    memory.close()


def test_delete_for_runs_removes_one_agent_run(store_url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware")
    agent = _agent(memory)
    agent.invoke({"messages": [HumanMessage("first")]}, cfg("runs"))
    run_id = "3f1d2c4e-0000-4000-8000-000000000001"
    agent.invoke({"messages": [HumanMessage("second")]}, cfg("runs", run_id=run_id))
    assert "second" in [m.text for m in agent.get_state(cfg("runs")).values["messages"]]
    memory.checkpointer.delete_for_runs([run_id])
    texts = [m.text for m in agent.get_state(cfg("runs")).values["messages"]]
    assert "first" in texts and "second" not in texts
    memory.close()


# -- DeltaChannel state ----------------------------------------------------------------------
def _concat(state: Any, writes: Any) -> list:
    out = list(state or [])
    for w in writes:
        out += w
    return out


class DeltaState(TypedDict):
    items: Annotated[list, DeltaChannel(_concat)]


def _delta_graph(memory: SummaryMemory) -> Any:
    builder = StateGraph(DeltaState)
    builder.add_node("n", lambda s: {"items": ["x"]})
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    return builder.compile(checkpointer=memory.checkpointer)


def test_delta_channel_state_is_kept_or_refused(store_url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware")
    graph = _delta_graph(memory)
    for i in range(12):
        graph.invoke({"items": [i]}, cfg("delta"))
    items = graph.get_state(cfg("delta")).values["items"]
    assert len(items) == 24
    listed = len(list(memory.checkpointer.list(cfg("delta"))))
    assert listed == 36  # retention keeps a DeltaChannel thread whole
    with pytest.raises(DeltaStateError, match="DeltaChannel"):
        memory.checkpointer.prune(["delta"])
    with pytest.raises(NotImplementedError):  # as upstream's PostgresSaver.prune raises
        asyncio.run(memory.checkpointer.aprune(["delta"]))
    assert len(list(memory.checkpointer.list(cfg("delta")))) == listed  # nothing pruned
    memory.save("delta", "hello", "there")  # memshift's own writes keep the other channels
    assert graph.get_state(cfg("delta")).values["items"] == items
    admin.pin(memory, "delta", "classic")  # a move away and back keeps the other channels
    admin.pin(memory, "delta", "middleware")
    assert graph.get_state(cfg("delta")).values["items"] == items
    assert [m.text for m in memory.load("delta").messages][-2:] == ["hello", "there"]
    memory.close()


def test_restore_keeps_delta_channel_state(store_url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=store_url, backend="middleware")
    graph = _delta_graph(memory)
    for i in range(3):
        graph.invoke({"items": [i]}, cfg("delta"))
    memory.save("delta", "hello", "there")
    items = graph.get_state(cfg("delta")).values["items"]
    record = ThreadRecord("delta", "restored summary", [HumanMessage("h", id="h1"),
                                                        AIMessage("a", id="a1")], 1)
    assert admin.restore_thread(memory, record)
    assert graph.get_state(cfg("delta")).values["items"] == items
    assert memory.load("delta").summary == "restored summary"
    memory.close()


def _add_all(state: Any, writes: Any) -> list:
    out = list(state or [])
    for w in writes:
        out = add_messages(out, w)
    return out


class DeltaMessages(TypedDict):
    messages: Annotated[list, DeltaChannel(_add_all)]


def _delta_messages_graph(saver: Any) -> Any:
    builder = StateGraph(DeltaMessages)
    builder.add_node("n", lambda s: {"messages": [AIMessage(f"reply {len(s['messages'])}")]})
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    return builder.compile(checkpointer=saver)


def test_migrate_refuses_delta_messages_without_the_graph_and_reads_them_with_it() -> None:
    """Raw checkpoints of a DeltaChannel ``messages`` hold no messages: read without the graph
    the thread would migrate as empty and "verify"."""
    saver = InMemorySaver()
    graph = _delta_messages_graph(saver)
    for i in range(5):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]}, cfg("d1"))
    target = SummaryMemory(backend="middleware", store="memory")
    refused = migrate(GraphSource(saver), target)
    assert refused.verified == [] and refused.failed[0][0] == "d1"
    assert "DeltaStateError" in refused.failed[0][1] and "graph=" in refused.failed[0][1]
    assert target.load("d1").messages == []  # nothing written
    done = migrate(GraphSource(saver, graph=graph), target)
    assert done.migrated == ["d1"] and done.verified == ["d1"]
    assert [m.text for m in target.load("d1").messages] == \
        [m.text for m in graph.get_state(cfg("d1")).values["messages"]]


# -- clean exit ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_script_that_forgets_arelease_exits(kind: str, tmp_path: Path,
                                              request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path}/exit.db" if kind == "sqlite" else request.getfixturevalue("pg_url")
    script = textwrap.dedent(f"""
        import asyncio
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from compat import SummaryMemory

        class M(GenericFakeChatModel):
            def bind_tools(self, *a, **k): return self

        async def main():
            memory = SummaryMemory(store={url!r}, backend="middleware")
            agent = create_agent(M(messages=iter([AIMessage("hi")] * 5)), [],
                                 middleware=[memory.middleware], checkpointer=memory.checkpointer)
            await agent.ainvoke({{"messages": [HumanMessage("hello")]}},
                                {{"configurable": {{"thread_id": "t"}}}})
            await memory.asave("t2", "q", "a")
            print("done")

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("done")
