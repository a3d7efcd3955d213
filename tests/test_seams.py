"""Journeys across the seams of a cutover: every path finds a thread where it lives.

Each test walks the steps a team takes (flip the flag, hand the threads to ``create_agent``,
migrate, re-run, roll back) and checks every thread after every step against an unmoved
twin: never an empty or stale memory, never a silent loss.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from adapters import DeterministicSummarizer, MemoryPolicy, compare_views, open_store
from compat import SummaryMemory, migrate
from compat.testing import EchoChatModel, filler_turn
from compat import admin

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)
STORES = ["memory", "sqlite", "postgres"]


def _memory(backend: str, store: Any, **kwargs: Any) -> SummaryMemory:
    return SummaryMemory(backend=backend, store=store, policy=POLICY,
                         summarizer=DeterministicSummarizer(max_chars=1_000_000), **kwargs)


class Twins:
    """One unmoved twin per thread on each backend, fed the same turns."""

    def __init__(self, threads: list[str]) -> None:
        self.twins = {b: _memory(b, "memory") for b in ("classic", "middleware")}
        self.turns = {t: 0 for t in threads}

    def talk(self, memory: SummaryMemory, thread: str, n: int = 1) -> None:
        for _ in range(n):
            args = filler_turn(thread, self.turns[thread], 8)
            memory.save(thread, *args)
            for twin in self.twins.values():
                twin.save(thread, *args)
            self.turns[thread] += 1

    def check(self, memory: SummaryMemory) -> None:
        for thread, turns in self.turns.items():
            view = memory.load(thread)
            for twin in self.twins.values():
                diffs = compare_views(view, twin.load(thread))
                assert not diffs, f"{thread} on {view.backend}: {diffs}"
            assert len(memory.transcript(thread)) == 2 * turns, thread


@pytest.mark.parametrize("kind", STORES)
def test_flipping_the_flag_both_ways_keeps_every_thread(kind: str, fresh_store: Any) -> None:
    url = fresh_store(kind)
    store = open_store(url)  # one object, so the in-memory store is shared too
    threads = [f"user-{i}" for i in range(4)]
    twins = Twins(threads)
    for flag in ("classic", "middleware", "classic", "middleware"):
        memory = _memory(flag, store)
        twins.check(memory)  # every thread whole right after the flip, before any save
        for thread in threads:
            twins.talk(memory, thread, 3)
        twins.check(memory)
        assert {admin.placement(memory, t).backend for t in threads} == {flag}
    # four flips: each thread moved three times, one version per move
    assert all(admin.placement(memory, t).version == 4 for t in threads)
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_move_on_touch_false_is_a_precise_error_never_an_empty_view(kind: str,
                                                                     fresh_store: Any) -> None:
    from compat import ThreadElsewhere

    store = open_store(fresh_store(kind))
    classic = _memory("classic", store)
    for i in range(3):
        classic.save("alice", *filler_turn("alice", i, 8))
    strict = _memory("middleware", store, move_on_touch=False)
    with pytest.raises(ThreadElsewhere, match="'alice' lives on the classic backend") as err:
        strict.load("alice")
    assert err.value.lives_on == "classic" and err.value.wanted == "middleware"
    assert "memshift rollout move --to middleware" in str(err.value)
    with pytest.raises(ThreadElsewhere):
        strict.save("alice", "q", "a")
    with pytest.raises(ThreadElsewhere):
        strict.checkpointer.get_tuple({"configurable": {"thread_id": "alice"}})
    assert len(classic.transcript("alice")) == 6  # the refused save stored nothing
    assert admin.placement(classic, "alice").backend == "classic"
    strict.save("bob", "q", "a")  # a new thread is this memory's own
    assert admin.placement(strict, "bob").backend == "middleware"
    store.close()


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_create_agent_after_a_flip_continues_every_thread(kind: str, mode: str,
                                                          fresh_store: Any) -> None:
    store = open_store(fresh_store(kind))
    threads = ["a", "b"]
    twins = Twins(threads)
    classic = _memory("classic", store)
    for thread in threads:
        twins.talk(classic, thread, 6)
    before = {t: classic.load(t) for t in threads}
    memory = _memory("middleware", store)
    agent = create_agent(EchoChatModel(), middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)

    async def arun(thread: str) -> Any:
        config = {"configurable": {"thread_id": thread}}
        state = await agent.aget_state(config)
        await agent.ainvoke({"messages": [HumanMessage("next?")]}, config)
        return state

    for thread in threads:
        config = {"configurable": {"thread_id": thread}}
        if mode == "sync":
            state = agent.get_state(config)  # the first read moves the thread
            agent.invoke({"messages": [HumanMessage("next?")]}, config)
        else:
            state = asyncio.run(arun(thread))
        messages = state.values["messages"]
        assert messages[0].additional_kwargs.get("lc_source") == "summarization"
        assert [m.content for m in messages[1:]] == [m.content for m in before[thread].messages]
        view = memory.load(thread)
        assert view.summary == before[thread].summary, "the agent lost the summary"
        assert [m.content for m in view.messages][-2] == "next?"
        assert admin.placement(memory, thread).backend == "middleware"
        assert len(memory.transcript(thread)) == 2 * 6 + 2
    if mode == "async":
        asyncio.run(admin.arelease(memory))
    store.close()


@pytest.mark.parametrize("kind", STORES)
def test_staged_at_full_rollout_hands_classic_threads_to_the_agent(kind: str,
                                                                   fresh_store: Any) -> None:
    store = open_store(fresh_store(kind))
    classic = _memory("classic", store)
    for i in range(5):
        classic.save("t", *filler_turn("t", i, 8))
    before = classic.load("t")
    staged = _memory("staged", store, rollout=1.0)
    agent = create_agent(EchoChatModel(), middleware=[staged.middleware],
                         checkpointer=staged.checkpointer)
    state = agent.get_state({"configurable": {"thread_id": "t"}})
    assert [m.content for m in state.values["messages"][1:]] == \
        [m.content for m in before.messages]
    store.close()


@pytest.mark.parametrize("rollout", [0.0, 0.5, 1.0])
def test_staged_prune_and_clear_work_where_the_thread_lives(rollout: float) -> None:
    memory = _memory("staged", "memory", rollout=rollout)
    for t in ("t1", "t2", "t3"):
        memory.save(t, *filler_turn(t, 0, 8))
        memory.for_thread(t).chat_memory.add_messages(
            [HumanMessage(f"q FACT-{t}-x " + "w " * 120), AIMessage("a " * 120)])
        memory.for_thread(t).prune()  # stock prune(): folds now, where the thread lives
        assert memory.load(t).folds == 1, t
        memory.clear(t)
        assert (memory.load(t).summary, memory.load(t).messages) == ("", [])


def test_a_staged_memory_on_two_stores_reads_where_each_thread_lives(tmp_path: Any) -> None:
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    twins = Twins(["t"])
    first = _memory("staged", old, rollout=0.0, target_store=new)
    twins.talk(first, "t", 4)
    first.close()
    moved = _memory("staged", old, rollout=1.0, target_store=new)
    twins.talk(moved, "t", 4)  # moved to the new store at first touch, then 4 more turns
    assert admin.placement(moved, "t").backend == "middleware"
    twins.check(moved)
    assert [m.content for m in moved.transcript("t")] == \
        [m.content for m in twins.twins["classic"].transcript("t")]
    assert admin.thread_ids(moved) == ["t"]
    assert any(r.get("backend") for r in admin.summary_history(moved, "t"))
    moved.close()
    back = _memory("staged", old, rollout=0.0, target_store=new)  # rollback to the old store
    twins.talk(back, "t", 2)
    twins.check(back)
    back.close()


def test_shadow_close_without_drain_counts_every_dropped_candidate_write() -> None:
    import threading

    gate = threading.Event()
    memory = SummaryMemory(backend="shadow", policy=POLICY)
    candidate = memory.backend_impl.candidate_backend
    real = candidate.save

    def slow(*args: Any, **kwargs: Any) -> Any:
        gate.wait(10)
        return real(*args, **kwargs)
    candidate.save = slow  # type: ignore[method-assign]
    for i in range(30):
        memory.save(f"t{i % 3}", *filler_turn(f"t{i % 3}", i, 4))
    memory.close(drain=False)
    gate.set()
    dropped = [m for m in memory.mismatches if m.kind == "candidate_dropped"]
    counts = {m.thread_id: int(m.diff[0].split(": ")[1].split()[0]) for m in dropped}
    assert set(counts) <= {"t0", "t1", "t2"} and sum(counts.values()) >= 29  # one may be running
    assert memory.backend_impl.dropped == sum(counts.values())


def test_shadow_close_drains_by_default() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY)
    for i in range(20):
        memory.save("t", *filler_turn("t", i, 4))
    memory.close()
    assert not [m for m in memory.mismatches if m.kind == "candidate_dropped"]
    assert memory.backend_impl.candidate_backend.load("t").messages  # every write landed


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_migrate_re_run_after_cutover_never_overwrites_the_newer_target(kind: str,
                                                                       fresh_store: Any) -> None:
    source_url, target_url = fresh_store("sqlite"), fresh_store(kind)
    source = _memory("classic", source_url)
    for t in ("a", "b"):
        for i in range(5):
            source.save(t, *filler_turn(t, i, 8))
    target = _memory("middleware", target_url)
    first = migrate(source, target)
    assert first.ok and sorted(first.migrated) == ["a", "b"]
    for i in range(5, 9):  # the app now runs on the target
        target.save("a", *filler_turn("a", i, 8))
    after_cutover = target.load("a")
    again = migrate(source, target)  # "a crashed migration is finished by running it again"
    assert ("a", "target newer (it moved on since it was migrated: kept as it is)") in again.skipped
    assert again.counts()["target_newer"] == 1 and again.ok
    assert not compare_views(target.load("a"), after_cutover)
    assert len(target.transcript("a")) == 18
    source.close()
    target.close()


def test_migrate_while_the_source_is_written_catches_up_or_reports_the_change(
        fresh_store: Any) -> None:
    """The app writes the source during the run: every thread already copied that receives
    a turn is caught up by the delta pass; a thread that receives one on every read is
    reported ``changed during migration``, not verified, and the run is not ok."""
    from compat.sources import MemorySource

    source_url, target_url = fresh_store("sqlite"), fresh_store("sqlite")
    source = _memory("classic", source_url)
    threads = [f"t{i}" for i in range(20)]
    for t in threads:
        source.save(t, *filler_turn(t, 0, 8))
    app = _memory("classic", source_url)  # the live app, another memory on the same store
    turns = dict.fromkeys(threads, 1)

    def talk(thread: str) -> None:
        app.save(thread, *filler_turn(thread, turns[thread], 8))
        turns[thread] += 1

    class Busy(MemorySource):
        """t7 receives a turn right after each time the migration reads it (a thread in
        constant use)."""

        def read(self, thread_id: str) -> Any:
            found = super().read(thread_id)
            if thread_id == "t7":
                talk("t7")
            return found

    done: list[str] = []

    def on_thread(thread_id: str, outcome: str) -> None:
        done.append(thread_id)
        talk(done[len(done) // 2])  # a thread copied earlier in the run gets a new turn

    target = _memory("middleware", target_url)
    report = migrate(Busy(source), target, on_thread=on_thread)
    assert report.changed == ["t7"] and "t7" not in report.verified and not report.ok
    assert report.caught_up and set(report.caught_up) > {"t7"}
    assert report.counts()["changed_during_migration"] == 1
    for t in threads:
        have, want = [m.id for m in target.transcript(t)], [m.id for m in source.transcript(t)]
        if t == "t7":
            assert have == want[:len(have)] and len(have) < len(want)
        else:
            assert have == want, f"{t}: verified but misses turns written during the run"
            assert t in report.verified
    final = migrate(source, target)  # the app is quiet now: a re-run finishes the job
    assert final.ok and final.migrated == ["t7"]
    for closing in (source, app, target):
        closing.close()


# -- legacy histories: the per-request app on SQLChatMessageHistory -------------------------

class _CountingLLM:
    """A summary model for both the stock class and memshift: counts calls, counts tokens
    offline (the stock class asks the model), answers from the prompt alone."""

    @staticmethod
    def make() -> Any:
        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import get_buffer_string
        from langchain_core.outputs import ChatGeneration, ChatResult

        from adapters import count_tokens_cjk

        class Counting(BaseChatModel):
            calls: int = 0

            @property
            def _llm_type(self) -> str:
                return "counting"

            def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                          **kwargs: Any) -> Any:
                self.calls += 1
                text = get_buffer_string(messages)
                return ChatResult(generations=[ChatGeneration(
                    message=AIMessage(f"summary {len(text)}"))])

            def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
                return count_tokens_cjk(messages)
        return Counting()


def _request(memory_class: Any, llm: Any, engine: Any, session: str, i: int) -> None:
    """One request of a FastAPI-style app: a memory built per request on the user's SQL
    history, a load and a save, exactly as the public apps of this shape do."""
    import warnings

    from langchain_community.chat_message_histories import SQLChatMessageHistory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = SQLChatMessageHistory(session_id=session, connection=engine)
        memory = memory_class(llm=llm, chat_memory=history, max_token_limit=120,
                              return_messages=True)
        memory.load_memory_variables({})
        question, answer = filler_turn(session, i, 8)
        memory.save_context({"input": question}, {"output": answer})


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_per_request_sql_history_app_keeps_every_turn_across_swaps_and_restarts(
        kind: str, fresh_store: Any) -> None:
    import warnings

    from langchain_classic.memory import ConversationSummaryBufferMemory
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from sqlalchemy import create_engine

    from adapters.stores import sqlalchemy_url

    ours_url, stock_url = fresh_store(kind), fresh_store(kind)
    ours_llm, stock_llm = _CountingLLM.make(), _CountingLLM.make()
    engines = {u: create_engine(sqlalchemy_url(u)) for u in (ours_url, stock_url)}
    for i in range(6):  # the same app, stock beside memshift (only the import differs)
        _request(SummaryMemory, ours_llm, engines[ours_url], "u1", i)
        _request(ConversationSummaryBufferMemory, stock_llm, engines[stock_url], "u1", i)
    for url, old in engines.items():  # a restart: new engines, nothing in memory
        old.dispose()
        engines[url] = create_engine(sqlalchemy_url(url))
    for i in range(6, 10):
        _request(SummaryMemory, ours_llm, engines[ours_url], "u1", i)
        _request(ConversationSummaryBufferMemory, stock_llm, engines[stock_url], "u1", i)
    assert ours_llm.calls <= stock_llm.calls, (ours_llm.calls, stock_llm.calls)
    engines[stock_url].dispose()
    engine = engines[ours_url]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = SQLChatMessageHistory(session_id="u1", connection=engine)
        said = [m.content for m in history.messages]
    assert said == [text for i in range(10) for text in filler_turn("u1", i, 8)], \
        "the stock class, swapped back, would not see every turn said under memshift"
    for i in range(10, 12):  # swapped back to stock for two requests
        _request(ConversationSummaryBufferMemory, stock_llm, engine, "u1", i)
    for i in range(12, 14):  # and to memshift again: the stock turns are imported, once
        _request(SummaryMemory, ours_llm, engine, "u1", i)
    calls = ours_llm.calls
    with SummaryMemory(llm=ours_llm, chat_memory=SQLChatMessageHistory(
            session_id="u1", connection=engine), max_token_limit=120) as memory:
        transcript = [m.content for m in memory.transcript("u1")]
        assert transcript == [t for i in range(14) for t in filler_turn("u1", i, 8)]
        view = memory.load("u1")
        assert view.summary and view.messages[-1].content == filler_turn("u1", 13, 8)[1]
        assert memory.store_url.startswith(ours_url.split("://")[0])  # the history's database
    assert ours_llm.calls == calls, "an identical restart summarized again"
    engine.dispose()


def test_a_persistent_history_without_a_store_is_refused_not_kept_in_memory(
        tmp_path: Any) -> None:
    from langchain_community.chat_message_histories import FileChatMessageHistory

    from compat import ConfigError

    history = FileChatMessageHistory(str(tmp_path / "h.json"))
    with pytest.raises(ConfigError, match="store="):
        SummaryMemory(chat_memory=history)
    memory = SummaryMemory(chat_memory=history, store=f"sqlite:///{tmp_path}/m.db",
                           thread_id="u")
    memory.save_context({"input": "q"}, {"output": "a"})
    assert [m.content for m in history.messages] == ["q", "a"]  # written through by default
    memory.clear()
    assert history.messages == [] and memory.load().messages == []  # clear() reaches it too
    memory.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_agents_first_read_adopts_a_stock_history(kind: str, fresh_store: Any) -> None:
    """A ``message_store`` thread nobody touched yet: create_agent's first read adopts it
    (summary rebuilt) instead of starting an empty thread."""
    from tests.test_adopt import _stock_store

    url = fresh_store(kind)
    _stock_store(url, users=1, turns=6)
    memory = _memory("middleware", url)
    agent = create_agent(EchoChatModel(), middleware=[memory.middleware],
                         checkpointer=memory.checkpointer)
    state = agent.get_state({"configurable": {"thread_id": "user-0"}})
    assert state.values.get("messages"), "the agent saw an empty thread"
    assert admin.summary_history(memory, "user-0")[-1]["trigger"].startswith("adopted")
    memory.close()


# -- faults at the seams --------------------------------------------------------------------

_FLAG_WORKER = """
import sys, time, warnings
warnings.filterwarnings("ignore")
from langchain_core.messages import AIMessage, HumanMessage
from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory
import os
url, flag, tag, n, marker = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
if flag == "middleware":  # the newer deployment: built after the old one
    while not os.path.exists(marker):
        time.sleep(0.01)
with SummaryMemory(backend=flag, store=url, policy=MemoryPolicy(max_tokens=150, keep_tokens=80),
                   summarizer=DeterministicSummarizer(max_chars=1_000_000)) as memory:
    if flag == "classic":
        open(marker, "w").close()
    for round_ in range(3):
        for i in range(n):
            t = f"t{i}"
            memory.save_messages(t, [HumanMessage(f"q FACT-{t}-{tag}-{round_} ", id=f"{t}-{tag}-{round_}-h"),
                                     AIMessage("a", id=f"{t}-{tag}-{round_}-a")])
            memory.load(t)
"""


def _env() -> dict[str, str]:
    import os
    from pathlib import Path

    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_with_different_flags_move_each_thread_at_most_once(
        kind: str, fresh_store: Any, tmp_path: Any) -> None:
    """An old deployment (classic) and a new one (middleware) on one store at once: the newer
    configuration wins, every thread moves at most once, no turn is lost or doubled."""
    import re
    import subprocess
    import sys

    url = fresh_store(kind)
    _memory("classic", url).close()  # schema first
    marker = str(tmp_path / "old-deployment-built")
    children = [subprocess.Popen([sys.executable, "-c", _FLAG_WORKER, url, flag, tag, "60", marker],
                                 env=_env(), stderr=subprocess.PIPE, text=True)
                for flag, tag in (("classic", "old"), ("middleware", "new"))]
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-2000:]
    with _memory("classic", url) as memory:  # a reader; it follows the newer decisions
        versions = []
        for i in range(60):
            t = f"t{i}"
            placement = admin.placement(memory, t)
            versions.append(placement.version)
            assert placement.version <= 2, f"{t} moved {placement.version - 1} times"
            assert placement.backend == "middleware", f"{t}: the newer configuration lost"
            ids = [m.id for m in memory.transcript(t)]
            assert len(ids) == 12 and len(set(ids)) == 12, f"{t}: lost or doubled turns"
            leaf = memory.backend_impl.leaves()[0 if placement.backend == "classic" else 1]
            view = leaf.load(t)
            text = view.summary + " " + " ".join(str(m.content) for m in view.messages)
            missing = [(tag, r) for tag in ("old", "new") for r in range(3)
                       if not re.search(rf"FACT-{t}-{tag}-{r}\b", text)]
            assert not missing, f"{t} on {placement.backend} lacks {missing}"
        assert 2 in versions, "the two deployments never overlapped"


_MOVER = """
import sys, warnings
warnings.filterwarnings("ignore")
from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory
url = sys.argv[1]
with SummaryMemory(backend="middleware", store=url, policy=MemoryPolicy(max_tokens=150, keep_tokens=80),
                   summarizer=DeterministicSummarizer(max_chars=1_000_000)) as memory:
    for i in range(400):
        memory.load(f"t{i % 150}")  # the first touch moves the thread
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_kill_9_during_moves_on_first_touch_leaves_every_thread_whole(
        kind: str, fresh_store: Any) -> None:
    import signal
    import subprocess
    import sys
    import time

    url = fresh_store(kind)
    with _memory("classic", url) as memory:
        for i in range(150):
            for k in range(4):
                memory.save(f"t{i}", *filler_turn(f"t{i}", k, 8))
        originals = {f"t{i}": memory.load(f"t{i}") for i in range(150)}
    child = subprocess.Popen([sys.executable, "-c", _MOVER, url], env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with _memory("classic", url) as watcher:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            moved = sum(n for b, _, n, _ in watcher.backend_impl.placement_counts()
                        if b == "middleware")
            if moved >= 10:
                break
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert child.returncode == -signal.SIGKILL, "the moves finished before the kill"
        leaves = watcher.backend_impl.leaves()
        for tid, before in originals.items():
            placement = admin.placement(watcher, tid)
            leaf = leaves[0 if placement.backend == "classic" else 1]
            assert not compare_views(before, leaf.load(tid)), f"{tid} damaged by the kill"
    with _memory("middleware", url) as after:  # the next process finishes the moves
        for tid, before in originals.items():
            assert not compare_views(before, after.load(tid))
            assert admin.placement(after, tid).backend == "middleware"
            assert len(after.transcript(tid)) == 8
