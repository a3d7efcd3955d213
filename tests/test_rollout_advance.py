"""``memshift rollout advance``: guarded steps on a store full of threads. With 5 % of the
threads diverging in the shadow it halts (or steps back) at the first step; with none, or
with the divergence of an ignored class, it reaches the target; every decision is in the
run log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters import MemoryPolicy
from adapters.staged import share_of
from compat import SummaryMemory, cli
from compat.rollout import Evidence, parse_guards, shares
from compat.testing import filler_turn
from compat import ConfigError
from tests._fleet_workers import serve_diverging

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)
THREADS = [f"user-{n}" for n in range(60)]


def _divergent(rate: float) -> set[str]:
    """Every 1/rate-th thread in rollout order: each step's cohort holds its share."""
    if not rate:
        return set()
    ordered = sorted(THREADS, key=share_of)
    return set(ordered[::round(1 / rate)])


def _shadowed(url: str, log: Path, diverging: set[str], ignore: tuple[str, ...] = ()) -> None:
    """The application in shadow for a while: the candidate's view of ``diverging`` threads
    comes back with padded whitespace (a real shadow, a real log)."""
    with SummaryMemory(backend="shadow", store=url, policy=POLICY, shadow_log=str(log),
                       ignore=list(ignore)) as memory:
        serve_diverging(memory, THREADS, diverging)
    log.touch()




def _advance(url: str, log: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    """The shadow ran before the rollout: its evidence is in the store (and the log); no
    traffic arrives during the steps, so only the mismatch guard has evidence to judge."""
    code = cli.main(["rollout", "advance", "--store", url, "--to", "0.5", "--step", "0.1",
                     "--guard", "mismatch_rate<0.01", "--interval", "0",
                     "--shadow-log", str(log), "--json", "--quiet", *extra])
    return code, json.loads(capsys.readouterr().out)


def _on_middleware(url: str) -> set[str]:
    with SummaryMemory(backend="staged", store=url, policy=POLICY) as memory:
        engine = memory.backend_impl
        return {t for t in THREADS
                if (p := engine.placement_of(t)) is not None and p.backend == "middleware"}


def _history(url: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert cli.main(["history", "--store", url, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)["runs"]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, fresh_store) -> str:
    return fresh_store(request.param)


def test_five_percent_divergence_halts_before_the_next_step(url: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "shadow.jsonl"
    _shadowed(url, log, _divergent(0.05))
    code, result = _advance(url, log, capsys)
    assert code == 1 and result["tripped"] and len(result["steps"]) == 1
    step = result["steps"][0]
    assert step["decision"] == "halted" and step["tripped"] == ["mismatch_rate<0.01"]
    assert step["evidence"]["mismatch_rate"] >= 0.05 and result["reached"] == 0.1
    moved = _on_middleware(url)
    assert moved and all(share_of(t) < 0.1 for t in moved)  # the first cohort, no further
    runs = _history(url, capsys)
    assert any("rollout advance 0 -> 0.1" in r["command"] and r["status"] == "failed"
               and r["counts"]["decision"] == "halted" for r in runs)


def test_rollback_on_trip_moves_the_step_back(url: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "shadow.jsonl"
    _shadowed(url, log, _divergent(0.05))
    code, result = _advance(url, log, capsys, "--rollback-on-trip")
    assert code == 1 and result["steps"][-1]["decision"] == "rolled_back"
    assert result["reached"] == 0.0 and _on_middleware(url) == set()
    # every thread still has its memory where it now lives
    with SummaryMemory(backend="staged", store=url, policy=POLICY) as memory:
        assert all(memory.load(t).messages or memory.load(t).summary for t in THREADS)


def test_no_divergence_reaches_the_target(url: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "shadow.jsonl"
    _shadowed(url, log, set())
    code, result = _advance(url, log, capsys)
    assert code == 0 and not result["tripped"] and result["reached"] == 0.5
    assert [s["share_to"] for s in result["steps"]] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert result["steps"][-1]["decision"] == "reached"
    moved = _on_middleware(url)
    assert moved == {t for t in THREADS if share_of(t) < 0.5}
    assert sum(s["moved"] for s in result["steps"]) == len(moved)
    decisions = [r["counts"]["decision"] for r in _history(url, capsys)
                 if r["command"].startswith("rollout advance")]
    assert sorted(decisions) == sorted(["advanced"] * 4 + ["reached"])


def test_an_ignored_class_never_trips_a_guard(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    url, log = f"sqlite:///{tmp_path}/app.db", tmp_path / "shadow.jsonl"
    _shadowed(url, log, _divergent(0.05), ignore=("whitespace",))
    assert log.read_text()  # the mismatches are recorded, as ignored
    code, result = _advance(url, log, capsys)
    assert code == 0 and result["reached"] == 0.5


def test_min_threads_leaves_a_thin_step_unjudged(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url, log = f"sqlite:///{tmp_path}/app.db", tmp_path / "shadow.jsonl"
    _shadowed(url, log, _divergent(0.05))
    code, result = _advance(url, log, capsys, "--min-threads", "1000")
    assert code == 0 and {s["decision"] for s in result["steps"][:-1]} == {"unjudged"}


def test_guards_and_steps_are_checked() -> None:
    assert [str(g) for g in parse_guards("mismatch_rate<0.01, fold_failures<=2")] == \
        ["mismatch_rate<0.01", "fold_failures<=2"]
    for bad in ("", "speed<1", "mismatch_rate", "mismatch_rate<x"):
        with pytest.raises(ConfigError):
            parse_guards(bad)
    assert shares(0.0, 0.25, 0.1) == [0.1, 0.2, 0.25] and shares(0.5, 0.2, 0.2) == [0.3, 0.2]
    assert Evidence(threads=20).get("mismatch_rate") is None  # nothing compared: no evidence
    assert Evidence(threads=20, compared=20, mismatching_threads=1).get("mismatch_rate") == 0.05
    assert Evidence(threads=20, folds=0).get("fold_failures") is None


def test_a_mismatch_guard_without_any_shadow_evidence_halts_saying_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    with SummaryMemory(store=url, policy=POLICY) as memory:
        memory.save("t", "q", "a")
    for guard in ("mismatch_rate<0.01", "fold_failures<1"):  # no shadow ran, no fold since
        assert cli.main(["rollout", "advance", "--store", url, "--to", "1.0", "--interval",
                         "0", "--guard", guard, "--quiet", "--rollback-on-trip"]) == 1


def test_fold_failures_of_the_moved_cohort_trip_the_guard(tmp_path: Path) -> None:
    """The library, with the application at work during each step's interval: the threads
    just moved fold with a summarizer that fails, and the fold guard halts the rollout."""
    from compat import admin
    from compat.rollout import advance

    url = f"sqlite:///{tmp_path}/app.db"
    with SummaryMemory(store=url, policy=POLICY) as memory:
        for thread in THREADS[:40]:
            memory.save(thread, *filler_turn(thread, 0, 8))

    class Failing:
        def summarize(self, summary: str, messages: list) -> str:
            raise RuntimeError("the model is down")

    def traffic(_seconds: float) -> None:
        with SummaryMemory(backend="staged", store=url, policy=POLICY, rollout=0.0,
                           summarizer=Failing()) as app:
            engine = app.backend_impl
            for thread in THREADS[:40]:
                placement = engine.placement_of(thread)
                if placement is not None and placement.backend == "middleware":
                    for i in range(1, 8):
                        try:
                            app.save(thread, *filler_turn(thread, i, 8))
                        except Exception:  # noqa: BLE001 - the failing fold, recorded
                            pass

    steps = advance(lambda share: SummaryMemory(store=url, policy=POLICY, backend="staged",
                                                rollout=share),
                    admin.iter_thread_ids, start=0.0, target=1.0, step=0.25,
                    guards=parse_guards("fold_failure_rate<0.05"), interval=1.0, sleep=traffic)
    assert steps[-1].decision == "halted" and steps[-1].evidence["fold_failures"] > 0
    assert len(steps) == 1 and steps[0].tripped == ["fold_failure_rate<0.05"]


def test_a_thread_that_fails_to_move_halts_even_an_unjudged_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compat import admin
    from compat.rollout import advance
    from adapters.protocol import Engine

    url = f"sqlite:///{tmp_path}/app.db"
    with SummaryMemory(store=url, policy=POLICY) as memory:
        for thread in THREADS[:30]:
            memory.save(thread, "q", "a")

    def broken(self: Any, thread_id: str) -> Any:
        raise RuntimeError("the move failed")

    monkeypatch.setattr(Engine, "place", broken)
    steps = advance(lambda share: SummaryMemory(store=url, policy=POLICY, backend="staged",
                                                rollout=share),
                    admin.iter_thread_ids, start=0.0, target=1.0, step=0.5,
                    guards=parse_guards("fold_failures<1"), min_threads=1000, sleep=pytest.fail)
    assert len(steps) == 1 and steps[0].decision == "halted" and steps[0].failed > 0
    assert "failed to move" in steps[0].tripped[0]


def _seeded(url: str, count: int = 30) -> None:
    with SummaryMemory(store=url, policy=POLICY) as memory:
        for thread in THREADS[:count]:
            memory.save(thread, "q", "a")


def _cut_after(monkeypatch: pytest.MonkeyPatch, moves: int, cut: Any) -> None:
    """``Engine.place`` moves ``moves`` threads for real, then ``cut()`` runs (the database
    goes away, or a stop arrives) before the next one."""
    from adapters.protocol import Engine

    real, done = Engine.place, []

    def place(self: Any, thread_id: str) -> Any:
        if len(done) == moves:
            cut()
        result = real(self, thread_id)
        done.append(thread_id)
        return result

    monkeypatch.setattr(Engine, "place", place)


def _lose(url: str, pg_server: Any = None) -> tuple[Any, Any]:
    """Functions that take the store away from this process and give it back: a SQLite file
    moved aside; a PostgreSQL database that refuses connections, its sessions terminated."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        files = [path.with_name(path.name + end) for end in ("", "-wal", "-shm")]
        aside = path.parent / "away"

        def away() -> None:
            aside.mkdir()
            for file in files:
                if file.exists():
                    file.rename(aside / file.name)

        def back() -> None:
            for file in aside.iterdir():
                file.replace(path.parent / file.name)

        return away, back
    name = url.rsplit("/", 1)[1].split("?")[0]

    def allow(on: bool) -> None:
        with pg_server.admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(on).lower()}')
            if not on:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))

    return (lambda: allow(False)), (lambda: allow(True))


def _step_rows(url: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [r for r in _history(url, capsys) if r["command"].startswith("rollout advance")]


def test_a_store_lost_mid_step_halts_and_the_row_names_every_moved_thread(
        url: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from compat.erasure import thread_hash

    _seeded(url)
    pg = request.getfixturevalue("pg_server") if url.startswith("postgres") else None
    lose, restore = _lose(url, pg)
    _cut_after(monkeypatch, 3, lose)
    try:
        code = cli.main(["rollout", "advance", "--store", url, "--to", "1.0", "--step", "1.0",
                         "--guard", "fold_failures<1", "--interval", "0", "--json", "--quiet"])
        result = json.loads(capsys.readouterr().out)
    finally:
        restore()
    monkeypatch.undo()
    assert code == 1 and result["tripped"]  # the documented halt, not an error exit
    step = result["steps"][-1]
    assert step["decision"] == "halted" and any("store" in t for t in step["tripped"])
    moved = _on_middleware(url)
    assert len(moved) == 3
    rows = _step_rows(url, capsys)
    assert len(rows) == 1 and rows[0]["status"] in ("running", "failed")
    named = set(rows[0]["counts"]["moving"])
    assert {thread_hash(t) for t in moved} <= named  # every moved thread is in the record
    assert not any(t in json.dumps(rows) for t in THREADS)  # by hash, never the id


def test_a_stopped_step_records_the_threads_it_moved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from compat.cli._stop import Stopped
    from compat.erasure import thread_hash

    url = f"sqlite:///{tmp_path}/app.db"
    _seeded(url)

    def stop() -> None:
        raise Stopped("stopped by SIGTERM")

    _cut_after(monkeypatch, 4, stop)
    code = cli.main(["rollout", "advance", "--store", url, "--to", "1.0", "--step", "1.0",
                     "--guard", "fold_failures<1", "--interval", "0", "--json", "--quiet"])
    capsys.readouterr()
    monkeypatch.undo()
    assert code == 143
    moved = _on_middleware(url)
    rows = _step_rows(url, capsys)
    assert len(moved) == 4 and [r["status"] for r in rows] == ["interrupted"]
    assert set(rows[0]["counts"]["moved_threads"]) == {thread_hash(t) for t in moved}
