"""A memory whose configuration can only ever serve one backend builds the other side only
when it needs it (``adapters.placement_sides``): a thread no placement record names (the
guard asks the other side whether it holds the thread), a thread found there that moves, or
a caller that asks for every engine. Every placement guarantee holds meanwhile."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from adapters import MemoryPolicy
from adapters.engine import MemoryEngine
from adapters.errors import ConfigError
from adapters.staged import StagedEngine
from adapters.stores.memory import MemoryStore
from adapters.summarizer import DeterministicSummarizer

POLICY = MemoryPolicy(max_messages=6, keep_messages=2)
OTHER = {"classic": "middleware", "middleware": "classic"}


def _turn(thread_id: str, i: int) -> list:
    return [HumanMessage(f"{thread_id} question {i}", id=f"{thread_id}-h{i}"),
            AIMessage(f"{thread_id} answer {i}", id=f"{thread_id}-a{i}")]


def _one(name: str, store: MemoryStore) -> MemoryEngine:
    return MemoryEngine(name, policy=POLICY, summarizer=DeterministicSummarizer(), store=store)


def _lazy(fixed: str, store: MemoryStore, built: list[str],
          other_store: MemoryStore | None = None) -> StagedEngine:
    other = OTHER[fixed]

    def factory() -> MemoryEngine:
        built.append(other)
        return _one(other, other_store or store)
    sides = {fixed: _one(fixed, store), other: factory}
    return StagedEngine(classic=sides["classic"], middleware=sides["middleware"], fixed=fixed)


def _full(fixed: str, store: MemoryStore) -> StagedEngine:
    return StagedEngine(classic=_one("classic", store), middleware=_one("middleware", store),
                        fixed=fixed)


@pytest.mark.parametrize("fixed", ["classic", "middleware"])
def test_the_other_side_is_not_built_at_construction(fixed: str) -> None:
    built: list[str] = []
    engine = _lazy(fixed, MemoryStore(), built)
    assert built == [] and list(engine.engines) == [fixed]
    assert engine.sides.lazy() == (OTHER[fixed],)
    engine.close()


@pytest.mark.parametrize("fixed", ["classic", "middleware"])
def test_recorded_threads_are_served_without_the_other_side(fixed: str) -> None:
    store = MemoryStore()
    seeded = _full(fixed, store)
    seeded.save("t", _turn("t", 0))  # recorded on the fixed side
    built: list[str] = []
    engine = _lazy(fixed, store, built)
    engine.save("t", _turn("t", 1))
    view = engine.load("t")
    assert [m.id for m in view.messages][-2:] == ["t-h1", "t-a1"]
    assert built == [] and engine.placement_of("t").backend == fixed


@pytest.mark.parametrize("fixed", ["classic", "middleware"])
def test_a_thread_no_record_names_builds_the_other_side_once(fixed: str) -> None:
    """The guard still asks the other side whether it holds an unrecorded thread."""
    store = MemoryStore()
    built: list[str] = []
    engine = _lazy(fixed, store, built)
    engine.save("new", _turn("new", 0))
    engine.save("newer", _turn("newer", 0))
    assert built == [OTHER[fixed]]
    assert engine.placement_of("new").backend == fixed
    assert engine.load("new").messages[-1].id == "new-a0"


@pytest.mark.parametrize("fixed", ["classic", "middleware"])
def test_a_legacy_thread_on_the_other_side_moves_and_loses_nothing(fixed: str) -> None:
    """No record names it and it lives on the other side: never served as an empty view."""
    store = MemoryStore()
    legacy = _one(OTHER[fixed], store)  # no placement record: what an old memory left
    legacy.save("old", _turn("old", 0))
    legacy.save("old", _turn("old", 1))
    built: list[str] = []
    engine = _lazy(fixed, store, built)
    view = engine.load("old")
    assert [m.id for m in view.messages][-2:] == ["old-h1", "old-a1"]
    assert built == [OTHER[fixed]]
    assert engine.placement_of("old").backend == fixed and engine.moves == 1


@pytest.mark.parametrize("fixed", ["classic", "middleware"])
def test_a_thread_recorded_on_the_other_side_moves(fixed: str) -> None:
    store = MemoryStore()
    before = _full(OTHER[fixed], store)
    before.save("t", _turn("t", 0))
    built: list[str] = []
    engine = _lazy(fixed, store, built)  # a newer configuration: it applies itself
    engine.save("t", _turn("t", 1))
    assert built == [OTHER[fixed]]
    assert engine.placement_of("t").backend == fixed
    assert [m.id for m in engine.load("t").messages][-4:] == ["t-h0", "t-a0", "t-h1", "t-a1"]


def test_a_side_built_later_gets_the_summarizer_and_clock_set_since() -> None:
    built: list[str] = []
    engine = _lazy("classic", MemoryStore(), built)
    writer = DeterministicSummarizer(max_chars=10)
    engine.summarizer = writer
    engine.clock = clock = (lambda: 42.0)
    middleware = engine.middleware_engine()  # asked for: built now
    assert built == ["middleware"] and middleware is not None
    assert middleware.summarizer is writer and middleware.clock is clock


def test_leaves_build_every_side_classic_first() -> None:
    built: list[str] = []
    engine = _lazy("middleware", MemoryStore(), built)
    assert [leaf.name for leaf in engine.leaves()] == ["classic", "middleware"]
    assert built == ["classic"] and list(engine.engines) == ["classic", "middleware"]


def test_a_side_built_later_on_another_store_is_refused() -> None:
    built: list[str] = []
    engine = _lazy("classic", MemoryStore(), built, other_store=MemoryStore())
    with pytest.raises(ConfigError, match="same|store of the side"):
        engine.save("new", _turn("new", 0))


def test_a_staged_rollout_builds_both_sides_at_once() -> None:
    built: list[str] = []
    store = MemoryStore()

    def factory() -> MemoryEngine:
        built.append("middleware")
        return _one("middleware", store)
    engine = StagedEngine(classic=_one("classic", store), middleware=factory, rollout=0.5)
    assert built == ["middleware"] and engine.sides.lazy() == ()


def _graph_built(engine: StagedEngine) -> bool:
    """Whether the middleware side built its fold graph or its middleware (both cached)."""
    side = engine.sides.built.get("middleware")
    backend = side.leaves()[0].backend if side is not None else None
    return backend is not None and bool({"graph", "middleware"} & set(vars(backend)))


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_asking_the_middleware_side_about_a_new_thread_builds_no_graph(driver: str) -> None:
    """No checkpoint: the middleware side holds nothing, answered by a saver lookup; the
    graph is built only when a middleware read, fold or write needs it."""
    import asyncio

    built: list[str] = []
    engine = _lazy("classic", MemoryStore(), built)
    if driver == "sync":
        engine.save("new", _turn("new", 0))
        view = engine.load("new")
    else:
        async def run():
            await engine.asave("new", _turn("new", 0))
            return await engine.aload("new")
        view = asyncio.run(run())
    assert built == ["middleware"] and not _graph_built(engine)
    assert engine.placement_of("new").backend == "classic" and view.messages[-1].id == "new-a0"


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_checkpointed_thread_is_still_found_on_the_middleware_side(driver: str) -> None:
    """A checkpoint: the lookup reads it as a load does, and the thread moves whole."""
    import asyncio

    store = MemoryStore()
    legacy = _one("middleware", store)  # no placement record
    legacy.save("old", _turn("old", 0))
    engine = _lazy("classic", store, [])
    if driver == "sync":
        engine.save("old", _turn("old", 1))
    else:
        asyncio.run(engine.asave("old", _turn("old", 1)))
    assert engine.placement_of("old").backend == "classic" and engine.moves == 1
    assert [m.id for m in engine.load("old").messages][-4:] == ["old-h0", "old-a0", "old-h1",
                                                                 "old-a1"]
