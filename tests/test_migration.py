"""compat.migrate: classic <-> middleware across stores, idempotence, crash, legacy sources."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from adapters import MemoryPolicy, compare_views
from adapters.view import message_signature
from compat import SummaryMemory
from compat.migration import migrate
from compat.sources import ClassicHistorySource, GraphSource
from compat.testing.conversations import agent_turn, filler_turn
from compat import admin

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)
THREADS = [f"user-{n}:chat" for n in range(8)]


def _talk(memory: SummaryMemory, turns: range) -> None:
    for i in turns:
        for t in THREADS:
            memory.save(t, *(agent_turn(t, i, 6) if i % 5 == 2 else filler_turn(t, i, 10)))


def _assert_equal(a: SummaryMemory, b: SummaryMemory) -> None:
    for t in THREADS:
        assert not compare_views(a.load(t), b.load(t)), (t, compare_views(a.load(t), b.load(t)))
        sig = [message_signature(m) + (m.id,) for m in a.transcript(t)]
        assert sig == [message_signature(m) + (m.id,) for m in b.transcript(t)], t


@pytest.mark.parametrize("target_kind", ["sqlite", "postgres"])
def test_classic_sqlite_to_middleware_and_back(fresh_store, target_kind: str) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("sqlite"), policy=POLICY) as source, \
            SummaryMemory(backend="middleware", store=fresh_store(target_kind), policy=POLICY) as target:
        _talk(source, range(15))
        report = migrate(source, target)
        assert report.ok and sorted(report.migrated) == sorted(THREADS)
        assert sorted(report.verified) == sorted(THREADS)
        _assert_equal(source, target)
        assert all(source.load(t).folds >= 1 for t in THREADS)

        again = migrate(source, target)  # idempotent: nothing to do, nothing duplicated
        assert again.migrated == [] and len(again.skipped) == 8 and again.ok
        _assert_equal(source, target)

        _talk(target, range(15, 20))  # the app runs on the target now

        back = migrate(target, source)  # rollback is the same call reversed
        assert back.ok and sorted(back.verified) == sorted(THREADS)
        for t in THREADS:
            assert not compare_views(source.load(t), target.load(t))
            have = {m.id for m in source.transcript(t)}
            assert all(m.id in have for m in target.transcript(t))  # nothing saved on the target is lost
        assert migrate(target, source).migrated == []

        _talk(source, range(20, 22))  # both sides go on on their own (a split brain):
        _talk(target, range(20, 22))  # neither overwrites the other
        kept = {t: source.load(t) for t in THREADS}
        split = migrate(target, source)
        assert split.migrated == [] and split.counts()["target_newer"] == len(THREADS)
        assert all(not compare_views(kept[t], source.load(t)) for t in THREADS)


def test_dry_run_writes_nothing(fresh_store) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("sqlite"), policy=POLICY) as source, \
            SummaryMemory(backend="middleware", store=fresh_store("sqlite"), policy=POLICY) as target:
        _talk(source, range(3))
        report = migrate(source, target, dry_run=True)
        assert len(report.migrated) == 8 and report.dry_run
        assert admin.thread_ids(target) == [] and target.load(THREADS[0]).messages == []


def test_crash_half_way_then_rerun_completes(fresh_store, monkeypatch: pytest.MonkeyPatch) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("sqlite"), policy=POLICY) as source, \
            SummaryMemory(backend="middleware", store=fresh_store("sqlite"), policy=POLICY) as target:
        _talk(source, range(10))
        backend = type(target.backend_impl.middleware_engine().backend)
        real = backend.write
        calls = {"n": 0}

        def dying_restore(self: Any, *args: Any, **kwargs: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 4:  # thread 4's transcript is written in the transaction, its state is not
                raise KeyboardInterrupt("killed")
            real(self, *args, **kwargs)

        monkeypatch.setattr(backend, "write", dying_restore)
        with pytest.raises(KeyboardInterrupt):
            migrate(source, target)
        monkeypatch.setattr(backend, "write", real)
        partial = [t for t in THREADS if target.transcript(t) and compare_views(source.load(t), target.load(t))]
        assert partial == []  # transcript and state commit together: the crash left nothing half-written
        assert [t for t in THREADS if target.transcript(t)] == THREADS[:3]

        report = migrate(source, target)
        assert report.ok and len(report.skipped) == 3 and len(report.migrated) == 5
        _assert_equal(source, target)  # no duplicates, no partial threads


def test_one_bad_thread_is_reported_not_fatal(fresh_store) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("sqlite"), policy=POLICY) as source, \
            SummaryMemory(backend="middleware", policy=POLICY) as target:
        _talk(source, range(2))
        report = migrate(source, target, threads=[*THREADS[:2], "no-such-thread", ""])
        assert report.migrated == THREADS[:2]
        assert ("no-such-thread", "not found in the source") in report.skipped
        assert len(report.failed) == 1 and "thread id" in report.failed[0][1]
        assert not report.ok


def _seed_graph(checkpointer: Any) -> Any:
    """The seed tutorials' rolling-summary graph: State(MessagesState) + summary, keep last 2."""

    class State(MessagesState):
        summary: str

    def conversation(state: State) -> dict:
        return {"messages": [AIMessage(f"answer to: {state['messages'][-1].content}")]}

    def summarize(state: State) -> dict:
        summary = state.get("summary", "")
        text = " / ".join(str(m.content) for m in state["messages"][:-2])
        return {"summary": f"{summary} | {text}" if summary else text,
                "messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}

    builder = StateGraph(State)
    builder.add_node("conversation", conversation)
    builder.add_node("summarize_conversation", summarize)
    builder.add_edge(START, "conversation")
    builder.add_conditional_edges(
        "conversation", lambda s: "summarize_conversation" if len(s["messages"]) > 6 else END)
    builder.add_edge("summarize_conversation", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
def test_seed_graph_thread_migrates_with_summary_and_last_two(saver_kind: str, tmp_path) -> None:
    if saver_kind == "memory":
        saver = InMemorySaver()
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(tmp_path / "graph.db", check_same_thread=False))
    graph = _seed_graph(saver)
    cfg = {"configurable": {"thread_id": "1"}}
    for q in ["hi! I'm Lance", "what's my name?", "i like the 49ers!", "tell me about Nick Bosa"]:
        graph.invoke({"messages": [HumanMessage(q)]}, cfg)
    state = graph.get_state(cfg).values
    assert state["summary"] and len(state["messages"]) == 2

    target = SummaryMemory(backend="middleware", policy=POLICY)
    report = migrate(GraphSource(saver), target)
    assert report.ok and report.migrated == ["1"] and "1" in report.notes
    view = target.load("1")
    assert view.summary == state["summary"]
    assert [m.content for m in view.messages] == [m.content for m in state["messages"]]
    assert migrate(GraphSource(saver), target).migrated == []  # idempotent


def test_stock_agent_thread_migrates_to_classic() -> None:
    """A stock create_agent + SummarizationMiddleware thread: the summary is the tagged message."""
    source = SummaryMemory(backend="middleware", policy=POLICY)
    for i in range(8):
        source.save("agent-1", *filler_turn("agent-1", i, 10))
    saver = source.checkpointer
    target = SummaryMemory(backend="classic", policy=POLICY)
    report = migrate(GraphSource(saver), target)
    assert report.ok
    assert not compare_views(source.load("agent-1"), target.load("agent-1"))


def test_stock_classic_history_table_gets_its_summary_rebuilt(tmp_path) -> None:
    from langchain_classic.memory import ConversationSummaryBufferMemory
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    from adapters import SummarizerChatModel, count_tokens_cjk
    from compat import DeterministicSummarizer

    url = f"sqlite:///{tmp_path}/legacy.db"
    llm = SummarizerChatModel(summarizer=DeterministicSummarizer(), token_counter=count_tokens_cjk)
    for t in ("a", "b"):
        stock = ConversationSummaryBufferMemory(
            llm=llm, max_token_limit=100, chat_memory=SQLChatMessageHistory(session_id=t, connection=url))
        for i in range(6):
            stock.save_context({"input": filler_turn(t, i, 10)[0]}, {"output": filler_turn(t, i, 10)[1]})

    target = SummaryMemory(backend="middleware", policy=POLICY, store=f"sqlite:///{tmp_path}/new.db")
    source = ClassicHistorySource(url)
    report = migrate(source, target)
    assert report.ok and sorted(report.rebuilt) == ["a", "b"]
    reference = SummaryMemory(backend="classic", policy=POLICY)
    for i in range(6):
        reference.save("a", *filler_turn("a", i, 10))
    assert not compare_views(reference.load("a"), target.load("a"))
    assert len(target.transcript("a")) == 12
    assert migrate(source, target).migrated == []  # stable ids: re-running duplicates nothing
    assert len(target.transcript("a")) == 12
    source.close()
    target.close()


@pytest.mark.parametrize("target_backend", ["classic", "shadow", "staged"])
def test_every_target_records_the_migration_with_the_state(target_backend: str) -> None:
    """The ``migrated`` fold record commits with the state it describes, whatever the
    target's backend (shadow and staged targets used to get the state without the record)."""
    source = SummaryMemory(backend="classic", policy=POLICY)
    _talk(source, range(8))
    extra: dict[str, Any] = {"rollout": 1.0} if target_backend == "staged" else {}
    target = SummaryMemory(backend=target_backend, policy=POLICY, **extra)
    report = migrate(source, target, threads=THREADS[:2])
    assert report.ok and sorted(report.migrated) == sorted(THREADS[:2])
    for t in THREADS[:2]:
        assert not compare_views(source.load(t), target.load(t))
        history = admin.summary_history(target, t)
        assert [r["trigger"] for r in history] == ["migrated from " + report.source]
        assert history[0]["version"] == source.load(t).folds


def test_restore_thread_writes_a_fold_record_with_the_state() -> None:
    from adapters.fold import FoldRecord
    from adapters.view import ThreadRecord

    memory = SummaryMemory(backend="classic", policy=POLICY)
    record = ThreadRecord(thread_id="t", summary="restored summary", folds=2,
                          window=[HumanMessage("q", id="q"), AIMessage("a", id="a")],
                          transcript=[HumanMessage("q", id="q"), AIMessage("a", id="a")])
    fold = FoldRecord(thread_id="t", version=2, trigger="restored from backup",
                      messages_before=2, messages_kept=2, folded=0, folded_first_id=None,
                      folded_last_id=None, summary_tokens=3, summarizer="backup",
                      prompt_version=POLICY.prompt_version, duration_ms=0.0)
    admin.restore_thread(memory, record, fold_record=fold)
    assert memory.load("t").summary == "restored summary"
    assert [r["trigger"] for r in admin.summary_history(memory, "t")] == ["restored from backup"]
    with pytest.raises(Exception, match="thread"):  # a record for another thread is refused
        admin.restore_thread(memory, record, fold_record=FoldRecord(**{**fold.as_dict(), "thread_id": "u"}))
    assert len(admin.summary_history(memory, "t")) == 1 and admin.summary_history(memory, "u") == []
    admin.restore_thread(memory, record)  # without a record: the state only, as before
    assert len(admin.summary_history(memory, "t")) == 1
