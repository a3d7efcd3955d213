"""``StoreContract``: what a memshift store must do, concern by concern.

A store is the core (transactions with a per-thread lock, the append-only thread log) plus the
optional concerns it implements, detected by presence (``adapters.stores.capabilities``):
``classic`` state, ``checkpoints``, ``placements``, ``reads``. One test class per concern; a
concern the store lacks is skipped with its name (never a silent pass), and
``test_capabilities_are_what_the_store_declares`` compares what was found with what the
subclass says it implements (the ``capabilities`` fixture) — the capability report.

Subclass ``StoreContract`` and override the ``store`` fixture to return your store (a fresh,
empty one per test) and ``capabilities`` to declare its concerns. A memory running on it is
checked too (``test_a_memory_runs_on_it``), on each backend the store can host.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from adapters.stores.base import (
    CAPABILITIES, ClassicSnapshot, Placement, Store, capabilities,
)
from compat.testing._guard import assert_no_silent_overrides

__all__ = ["StoreCheckpointsContract", "StoreClassicContract", "StoreContract",
           "StoreLogContract", "StorePlacementsContract", "StoreReadsContract"]


def _turn(i: int, thread: str = "t") -> list[BaseMessage]:
    return [HumanMessage(f"q{i} {thread}", id=f"{thread}-q{i}"),
            AIMessage(f"a{i} {thread}", id=f"{thread}-a{i}")]


def _needs(store: Store, concern: str) -> None:
    if concern not in capabilities(store):
        pytest.skip(f"the store does not implement the {concern!r} concern")


class _Base:
    @pytest.fixture
    def store(self) -> Store:
        raise NotImplementedError("override the `store` fixture to return a fresh store")

    @pytest.fixture
    def capabilities(self) -> set[str]:
        """The concerns the store implements (``log`` is always there)."""
        return set(CAPABILITIES)


class StoreLogContract(_Base):
    """The core: transactions, the per-thread lock, the append-only thread log."""

    def test_a_committed_turn_is_in_the_log_in_order(self, store: Store) -> None:
        for i in range(3):
            with store.transaction("t") as tx:
                store.append_transcript(tx, _turn(i))
        with store.snapshot("t") as tx:
            assert [m.id for m in store.transcript_in(tx)] == [
                x for i in range(3) for x in (f"t-q{i}", f"t-a{i}")]
            assert store.last_ids(tx, 2) == ["t-q2", "t-a2"]
            assert store.known_ids(tx, ["t-q0", "t-a1", "nope"]) == {"t-q0", "t-a1"}

    def test_an_appended_message_id_is_stored_once(self, store: Store) -> None:
        for _ in range(2):
            with store.transaction("t") as tx:
                store.append_transcript(tx, _turn(0))
        with store.snapshot("t") as tx:
            assert [m.id for m in store.transcript_in(tx)] == ["t-q0", "t-a0"]

    def test_a_rolled_back_transaction_leaves_nothing(self, store: Store) -> None:
        with store.transaction("t") as tx:
            store.append_transcript(tx, _turn(0))
        tx = store.begin("t")
        store.append_transcript(tx, _turn(1))
        store.append_fold(tx, {"version": 1})
        store.rollback(tx)
        with store.snapshot("t") as tx:
            assert store.last_ids(tx, 10) == ["t-q0", "t-a0"]

    def test_threads_are_separate(self, store: Store) -> None:
        for thread in ("a", "b", "x'; DROP TABLE t;--"):
            with store.transaction(thread) as tx:
                store.append_transcript(tx, _turn(0, thread))
        with store.snapshot("a") as tx:
            assert [m.content for m in store.transcript_in(tx)] == ["q0 a", "a0 a"]

    def test_writers_of_one_thread_take_turns(self, store: Store) -> None:
        """The thread's lock lives as long as the transaction: a second writer waits."""
        order: list[str] = []
        first = store.begin("t")
        store.append_transcript(first, _turn(0))

        def second() -> None:
            with store.transaction("t") as tx:
                order.append("second in")
                store.append_transcript(tx, _turn(1))
        worker = threading.Thread(target=second)
        worker.start()
        time.sleep(0.2)
        order.append("first commits")
        store.commit(first)
        worker.join(30)
        assert order == ["first commits", "second in"]
        with store.snapshot("t") as tx:
            assert store.last_ids(tx, 4) == ["t-q0", "t-a0", "t-q1", "t-a1"]


class StoreClassicContract(_Base):
    """``store.classic``: a classic thread's summary, fold count and window."""

    def test_append_fold_replace_clear(self, store: Store) -> None:
        _needs(store, "classic")
        state = store.classic
        with store.transaction("t") as tx:
            assert state.read(tx) == ClassicSnapshot("", 0, [], [])
            state.append(tx, _turn(0) + _turn(1))
        with store.transaction("t") as tx:
            snap = state.read(tx)
            assert [m.id for m in snap.window] == ["t-q0", "t-a0", "t-q1", "t-a1"]
            state.fold(tx, "S1", 1, snap.rows[:2])
        with store.snapshot("t") as tx:
            snap = state.read(tx)
            assert (snap.summary, snap.folds, [m.id for m in snap.window]) == (
                "S1", 1, ["t-q1", "t-a1"])
        with store.transaction("t") as tx:
            state.replace(tx, "S2", 2, _turn(5))
        with store.snapshot("t") as tx:
            snap = state.read(tx)
            assert (snap.summary, snap.folds, [m.id for m in snap.window]) == (
                "S2", 2, ["t-q5", "t-a5"])
        with store.transaction("t") as tx:
            state.clear(tx)
        with store.snapshot("t") as tx:
            assert state.read(tx) == ClassicSnapshot("", 0, [], [])

    def test_a_rolled_back_fold_leaves_the_window(self, store: Store) -> None:
        _needs(store, "classic")
        with store.transaction("t") as tx:
            store.classic.append(tx, _turn(0))
        tx = store.begin("t")
        store.classic.fold(tx, "S", 1, store.classic.read(tx).rows)
        store.rollback(tx)
        with store.snapshot("t") as tx:
            snap = store.classic.read(tx)
            assert (snap.summary, len(snap.window)) == ("", 2)


class StorePlacementsContract(_Base):
    """The store is a ``Placements``: where each thread lives."""

    def test_set_read_count_and_roll_back(self, store: Any) -> None:
        _needs(store, "placements")
        with store.transaction("t") as tx:
            assert store.placement(tx) is None
            store.set_placement(tx, Placement("classic", 1, 1.0))
        with store.transaction("t") as tx:
            store.set_placement(tx, Placement("middleware", 2, 2.0, True))
        tx = store.begin("t")
        store.set_placement(tx, Placement("classic", 3, 3.0))
        store.rollback(tx)
        with store.snapshot("t") as tx:
            token = store.defer_placement(tx)
            assert store.deferred_placement(tx, token) == Placement("middleware", 2, 2.0, True)
        assert store.placement_counts() == [("middleware", True, 1, 1)]


class StoreReadsContract(_Base):
    """The store is a ``Reads``: transcripts, fold records and thread ids outside a
    transaction."""

    def test_transcripts_records_and_thread_ids(self, store: Any) -> None:
        _needs(store, "reads")
        for thread in ("b", "a"):
            with store.transaction(thread) as tx:
                store.append_transcript(tx, _turn(0, thread))
                store.append_fold(tx, {"version": 1, "thread_id": thread})
        with store.transaction("b") as tx:
            store.append_fold(tx, {"version": 2, "thread_id": "b"})
        assert [m.id for m in store.transcript("a")] == ["a-q0", "a-a0"]
        assert store.transcript("never") == []
        assert [r["version"] for r in store.fold_records("b")] == [1, 2]
        assert store.thread_ids() == ["b", "a"]
        assert sorted(store.iter_thread_ids()) == ["a", "b"]


class StoreCheckpointsContract(_Base):
    """``store.checkpoints``: LangGraph checkpoints inside memshift's transactions."""

    def test_a_checkpoint_commits_with_the_transaction_and_retention_bounds_it(
            self, store: Store) -> None:
        _needs(store, "checkpoints")
        from langgraph.checkpoint.base import empty_checkpoint

        checkpoints = store.checkpoints
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for _ in range(checkpoints.keep + 3):
            with store.transaction("t") as tx:
                saver = checkpoints.saver(tx)
                latest = saver.get_tuple(config)
                parent = latest.config if latest else config
                saver.put(parent, empty_checkpoint(), {"step": 0}, {})
        with store.transaction("t") as tx:
            checkpoints.retain(tx)
        kept = list(checkpoints.checkpointer.list(config))
        assert 1 <= len(kept) <= checkpoints.keep
        tx = store.begin("t")
        before = len(list(checkpoints.checkpointer.list(config)))
        latest = checkpoints.saver(tx).get_tuple(config)
        assert latest is not None
        checkpoints.saver(tx).put(latest.config, empty_checkpoint(), {"step": 1}, {})
        store.rollback(tx)
        assert len(list(checkpoints.checkpointer.list(config))) == before


class StoreContract(StoreLogContract, StoreClassicContract, StorePlacementsContract,
                    StoreReadsContract, StoreCheckpointsContract):
    """Every concern, the capability report, and a memory on the store."""

    def test_capabilities_are_what_the_store_declares(self, store: Store,
                                                      capabilities: set[str]) -> None:
        found = sorted(capabilities_of(store))
        assert found == sorted(capabilities | {"log"}), (
            f"{type(store).__name__} implements {found}; the subclass declares "
            f"{sorted(capabilities | {'log'})}")

    def test_a_memory_runs_on_it(self, store: Store) -> None:
        from compat.memory import SummaryMemory

        hosted = capabilities_of(store)
        if "placements" not in hosted:
            pytest.skip("no 'placements': a memory needs to know where a thread lives")
        for backend, concern in (("classic", "classic"), ("middleware", "checkpoints")):
            if concern not in hosted:
                continue
            memory = SummaryMemory(backend=backend, store=store, thread_id=f"m-{backend}")
            memory.save_context({"input": "hello"}, {"output": "hi"})
            assert [m.content for m in memory.load().messages] == ["hello", "hi"]
            if "reads" in hosted:
                assert [m.content for m in memory.transcript(f"m-{backend}")] == ["hello", "hi"]

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:
        """Store tests may not be silently overridden or removed; mark them xfail instead."""
        assert_no_silent_overrides(type(self), StoreContract)


capabilities_of = capabilities
