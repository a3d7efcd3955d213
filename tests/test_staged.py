"""Staged cutover: per-thread placement, lazy moves, monotone rollouts, rolling deploys."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._cli import run_memshift

from adapters import DeterministicSummarizer, MemoryPolicy, compare_views, open_store
from adapters.staged import share_of
from compat import SummaryMemory
from compat.testing.conversations import filler_turn
from compat import admin

ROOT = Path(__file__).resolve().parent.parent
POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)
STORES = ["memory", "sqlite", "postgres"]


def staged(store: object, rollout: float, **kwargs: object) -> SummaryMemory:
    return SummaryMemory(backend="staged", store=store, rollout=rollout, policy=POLICY,
                         summarizer=DeterministicSummarizer(max_chars=1_000_000), **kwargs)


def twin(backend: str) -> SummaryMemory:
    return SummaryMemory(backend=backend, policy=POLICY,
                         summarizer=DeterministicSummarizer(max_chars=1_000_000))


@pytest.mark.parametrize("kind", STORES)
def test_a_moved_thread_continues_like_its_unmoved_twins(kind: str, fresh_store) -> None:
    url = fresh_store(kind)
    store = open_store(url)  # one store object, so the in-memory case shares it too
    twins = {"classic": twin("classic"), "middleware": twin("middleware")}
    turn = 0

    def talk(memory: SummaryMemory, n: int) -> None:
        nonlocal turn
        for _ in range(n):
            args = filler_turn("t", turn, 8)
            memory.save("t", *args)
            for other in twins.values():
                other.save("t", *args)
            turn += 1
            view = memory.load("t")
            for other in twins.values():
                assert not compare_views(view, other.load("t")), compare_views(view, other.load("t"))

    talk(staged(store, 0.0), 7)
    assert admin.placement(staged(store, 0.0), "t").backend == "classic"
    forward = staged(store, 1.0)  # a new configuration: the next touch moves the thread
    talk(forward, 7)
    assert admin.placement(forward, "t").backend == "middleware" and admin.placement(forward, "t").version == 2
    back = staged(store, 0.0)  # rollback of the cohort
    talk(back, 7)
    assert admin.placement(back, "t").backend == "classic" and admin.placement(back, "t").version == 3
    assert len(back.transcript("t")) == 2 * turn  # every turn once, whichever side saved it
    store.close()


def test_raising_the_rollout_only_adds_and_lowering_moves_back_above_the_share() -> None:
    store = open_store("memory")
    threads = [f"t{i}" for i in range(200)]
    placed: dict[float, dict[str, str]] = {}
    for rollout in (0.0, 0.1, 0.5, 1.0, 0.2):
        memory = staged(store, rollout)
        for t in threads:
            memory.save(t, *filler_turn(t, int(rollout * 10), 4))
        placed[rollout] = {t: admin.placement(memory, t).backend for t in threads}
        assert all((b == "middleware") == (share_of(t) < rollout) for t, b in placed[rollout].items())
    for low, high in ((0.0, 0.1), (0.1, 0.5), (0.5, 1.0)):
        assert {t for t, b in placed[low].items() if b == "middleware"} <= \
            {t for t, b in placed[high].items() if b == "middleware"}
    assert all(len(staged(store, 0.2).transcript(t)) == 10 for t in threads)


def test_a_failed_move_leaves_the_thread_intact_and_the_next_touch_moves_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store("memory")
    memory = staged(store, 0.0)
    for i in range(6):
        memory.save("t", *filler_turn("t", i, 8))
    before = memory.load("t")
    forward = staged(store, 1.0)
    target = forward.backend_impl.engines["middleware"].backend
    real = type(target).write

    def dying(self: object, tx: object, writes: object) -> None:
        real(self, tx, writes)  # the state is written inside the move's transaction...
        raise KeyboardInterrupt("killed")  # ...which then dies

    monkeypatch.setattr(type(target), "write", dying)
    with pytest.raises(KeyboardInterrupt):
        forward.load("t")
    monkeypatch.setattr(type(target), "write", real)
    assert admin.placement(forward, "t").backend == "classic"
    assert not compare_views(before, staged(store, 0.0).load("t"))
    assert forward.load("t").backend == "middleware"
    assert not compare_views(before, forward.load("t"))


def test_pins_override_the_rollout_until_unpinned() -> None:
    store = open_store("memory")
    memory = staged(store, 0.0)
    memory.save("vip", "q", "a")
    admin.pin(memory, "vip", "middleware")
    assert memory.load("vip").backend == "middleware"
    assert staged(store, 0.0).load("vip").backend == "middleware"  # any configuration
    admin.unpin(memory, "vip")
    assert staged(store, 0.0).load("vip").backend == "classic"
    fixed = SummaryMemory(backend="classic", policy=POLICY)  # a pin overrides a fixed flag too
    fixed.save("vip", "q", "a")
    admin.pin(fixed, "vip", "middleware")
    assert fixed.load("vip").backend == "middleware" and admin.placement(fixed, "vip").pinned
    with pytest.raises(Exception, match="classic.*middleware"):
        admin.pin(fixed, "vip", "graph")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


WORKER = """
import sys, warnings
warnings.filterwarnings("ignore")
from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn
url, rollout, tag, n = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
with SummaryMemory(backend="staged", store=url, rollout=rollout,
                   policy=MemoryPolicy(max_tokens=150, keep_tokens=80),
                   summarizer=DeterministicSummarizer(max_chars=1_000_000)) as memory:
    for round_ in range(2):
        for i in range(n):
            memory.save(f"t{i}", *filler_turn(f"t{i}-{tag}", round_, 4))
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_rolling_deploy_never_ping_pongs_a_thread(kind: str, fresh_store) -> None:
    """Two processes, rollout 0.1 and 0.5, started together on one store: every thread
    changes backend at most once and holds every turn once."""
    url = fresh_store(kind)
    staged(url, 0.0).close()  # schema first
    children = [subprocess.Popen([sys.executable, "-c", WORKER, url, str(rollout), tag, "200"],
                                 env=_env(), stderr=subprocess.PIPE, text=True)
                for rollout, tag in ((0.1, "a"), (0.5, "b"))]
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-2000:]
    with staged(url, 0.5) as memory:
        for i in range(200):
            placement = admin.placement(memory, f"t{i}")
            assert placement.version <= 2, f"t{i} moved {placement.version - 1} times"
            ids = [m.id for m in memory.transcript(f"t{i}")]
            assert len(ids) == 8 and len(set(ids)) == 8
            view = memory.backend_impl.engines[placement.backend].load(f"t{i}")
            text = view.summary + " " + " ".join(str(m.content) for m in view.messages)
            for tag in "ab":
                for r in range(2):
                    assert f"FACT-t{i}-{tag}-{r} " in text, f"t{i} lost a turn"


def test_rollout_cli_status_and_move(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    with staged(url, 0.0) as memory:
        for i in range(40):
            memory.save(f"t{i}", "q", "a")
    moved = run_memshift("rollout", "move", "--to", "middleware", "--share", "0.5", "--store",
                         url, "--json", check=0)
    result = json.loads(moved.stdout)
    expected = sum(share_of(f"t{i}") < 0.5 for i in range(40))
    assert result["moved"] == expected and result["failed"] == 0
    status = run_memshift("rollout", "status", "--store", url, "--json", check=0)
    counts = json.loads(status.stdout)
    assert counts["threads"] == {"middleware": expected, "classic": 40 - expected}
    assert counts["moved_at_least_once"] == expected
    sharded = [json.loads(run_memshift(
        "rollout", "move", "--to", "classic", "--share", "0", "--store", url, "--shard", f"{k}/2",
        "--json", check=0).stdout)["moved"] for k in (1, 2)]
    assert sum(sharded) == expected  # the two shards together moved the cohort back


def test_kill_9_in_the_middle_of_eager_moves_leaves_every_thread_intact(tmp_path: Path) -> None:
    import signal
    import time

    url = f"sqlite:///{tmp_path}/app.db"
    with staged(url, 0.0) as memory:
        for i in range(150):
            for k in range(4):
                memory.save(f"t{i}", *filler_turn(f"t{i}", k, 8))
        originals = {f"t{i}": memory.load(f"t{i}") for i in range(150)}
    cli = [sys.executable, "-m", "compat", "rollout", "move", "--to", "middleware", "--share", "1",
           "--store", url, "--max-tokens", "150", "--keep-tokens", "80"]
    child = subprocess.Popen(cli, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with staged(url, 0.0) as watcher:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            counts = dict(((b, p), n) for b, p, n, _ in watcher.backend_impl.store.placement_counts())
            if counts.get(("middleware", False), 0) >= 10:
                break
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert child.returncode == -signal.SIGKILL, "the move finished before the kill"
        engines = watcher.backend_impl.engines
        on = {"classic": 0, "middleware": 0}
        for tid, before in originals.items():
            placement = admin.placement(watcher, tid)
            on[placement.backend] += 1
            assert not compare_views(before, engines[placement.backend].load(tid)), tid
        assert on["middleware"] >= 10 and on["classic"] > 0
    rerun = subprocess.run(cli, env=_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    with staged(url, 1.0) as after:
        for tid, before in originals.items():
            assert admin.placement(after, tid).backend == "middleware"
            assert not compare_views(before, after.load(tid))


PHASES = """
import sys, warnings
warnings.filterwarnings("ignore")
from langchain_core.messages import AIMessage, HumanMessage
from adapters import DeterministicSummarizer, MemoryPolicy
from compat import SummaryMemory
url, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for phase, rollout in enumerate((0.0, 0.1, 0.5, 1.0, 0.2)):
    with SummaryMemory(backend="staged", store=url, rollout=rollout,
                       policy=MemoryPolicy(max_tokens=150, keep_tokens=80),
                       summarizer=DeterministicSummarizer(max_chars=1_000_000)) as memory:
        for i in range(n):
            t = f"t{i}"
            memory.save_messages(t, [HumanMessage(f"q FACT-{t}-{tag}-{phase} ", id=f"{t}-{tag}-{phase}-h"),
                                     AIMessage("a", id=f"{t}-{tag}-{phase}-a")])
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_four_processes_while_the_rollout_changes(kind: str, fresh_store) -> None:
    """4 processes, 150 threads, each process going through rollout 0 → 0.1 → 0.5 → 1.0 → 0.2:
    no turn lost or duplicated, and the backend a thread is placed on holds all of it."""
    url = fresh_store(kind)
    staged(url, 0.0).close()
    children = [subprocess.Popen([sys.executable, "-c", PHASES, url, tag, "150"], env=_env(),
                                 stderr=subprocess.PIPE, text=True) for tag in "abcd"]
    for child in children:
        _, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-2000:]
    with staged(url, 0.2) as memory:
        engines = memory.backend_impl.engines
        for i in range(150):
            t = f"t{i}"
            ids = [m.id for m in memory.transcript(t)]
            assert len(ids) == 40 and len(set(ids)) == 40, f"{t}: lost or duplicated turns"
            view = engines[admin.placement(memory, t).backend].load(t)
            text = view.summary + " " + " ".join(str(m.content) for m in view.messages)
            missing = [(tag, p) for tag in "abcd" for p in range(5)
                       if not re.search(rf"FACT-{t}-{tag}-{p}\b", text)]
            assert not missing, f"{t} on {admin.placement(memory, t).backend} lacks {missing}"


def test_threads_still_on_classic_can_be_shadowed_before_their_cohort_moves() -> None:
    store = open_store("memory")
    memory = staged(store, 0.0, shadow_sample=1.0)
    for i in range(8):
        memory.save("t", *filler_turn("t", i, 8))
        memory.load("t")
    shadow = memory.backend_impl.engines["classic"]
    shadow.drain(30)
    assert admin.placement(memory, "t").backend == "classic"
    assert shadow.compared >= 8 and memory.mismatches == []
    moved = staged(store, 1.0)  # the cohort moves; the measured equivalence holds after it
    moved.save("t", *filler_turn("t", 8, 8))
    assert admin.placement(moved, "t").backend == "middleware"
    assert len(moved.transcript("t")) == 18


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_staged_async_moves_without_worker_threads(kind: str, fresh_store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from tests.test_async import _no_threads

    url = fresh_store(kind)
    with staged(url, 0.0) as memory:
        for i in range(4):
            memory.save("t", *filler_turn("t", i, 8))
        before = memory.load("t")
    _no_threads(monkeypatch)

    async def run() -> None:
        async with staged(url, 1.0) as moved:
            view = await moved.aload("t")  # moves on the async drivers
            assert view.backend == "middleware" and not compare_views(before, view)
            await moved.asave("t", *filler_turn("t", 4, 8))
            assert (await moved.aload("t")).messages[-1].content.startswith("answer 4")
    asyncio.run(run())


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_fixed_configuration_serves_its_threads_without_the_router(
        kind: str, fresh_store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: a fixed backend's saves and loads go straight to its own side, whose
    transaction checks the placement; only a thread placed elsewhere goes through the router,
    which moves it at first touch, once."""
    from adapters.staged import StagedEngine

    routed: list[str] = []
    real = StagedEngine._routed

    def spy(self: StagedEngine, thread_id: str, *args: object) -> object:
        routed.append(thread_id)
        return real(self, thread_id, *args)  # type: ignore[arg-type]
    monkeypatch.setattr(StagedEngine, "_routed", spy)
    store = open_store(fresh_store(kind))
    with SummaryMemory(backend="middleware", store=store) as other:
        other.save("moved", "q0", "a0")
    routed.clear()
    with SummaryMemory(backend="classic", store=store) as memory:
        for i in range(4):
            memory.save("t", f"q{i}", f"a{i}")
            assert len(memory.load("t").messages) == 2 * (i + 1)
        assert routed == []
        assert [str(m.content) for m in memory.load("moved").messages] == ["q0", "a0"]
        assert routed == ["moved"]  # found on the middleware side: moved at first touch
        assert admin.placement(memory, "moved").backend == "classic"
        memory.save("moved", "q1", "a1")
        assert [str(m.content) for m in memory.load("moved").messages] == ["q0", "a0", "q1", "a1"]
        assert routed == ["moved"]  # from then on, served straight
