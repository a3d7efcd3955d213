"""Shadow compare rules: ``compare=`` decides what equal means, ``ignore=`` names expected
classes of difference; every mismatch carries its class, ignored ones never count."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from adapters import MemoryPolicy
from adapters.diff_classes import Rules
from adapters.view import MemoryView
from compat import ConfigError, DiffClass, MismatchError, SummaryMemory
from compat.testing import filler_turn

POLICY = MemoryPolicy(max_tokens=120, keep_tokens=60)


def _view(summary: str = "s", messages: list | None = None, folds: int = 1) -> MemoryView:
    return MemoryView("t", summary, messages if messages is not None else
                      [HumanMessage("hello there"), AIMessage("hi")], folds)


@pytest.mark.parametrize(("other", "cls"), [
    (_view(summary="s  "), "whitespace"),
    (_view(messages=[HumanMessage("hello\n there"), AIMessage("hi")]), "whitespace"),
    (_view(summary="another wording"), "summary_text"),
    (_view(folds=2), "fold_count"),
    (_view(messages=[SystemMessage("hello there"), AIMessage("hi")]), "message_roles"),
    (_view(messages=[HumanMessage("hello there")]), "window"),
    # whitespace and roles never hide a real change: other tool arguments, other roles
    (_view(messages=[HumanMessage("hello there"), AIMessage("hi ", tool_calls=[
        {"name": "transfer", "args": {"amount": 10000}, "id": "c1"}])]), "window"),
    (_view(messages=[AIMessage("hello there"), HumanMessage("hi")]), "window"),
    (_view(summary="x", messages=[HumanMessage("other")]), "window"),
])
def test_each_difference_gets_its_class(other: MemoryView, cls: str) -> None:
    verdict = Rules().judge(_view(), other)
    assert verdict.diffs and verdict.cls == cls and not verdict.ignored
    assert Rules(ignore=[cls]).judge(_view(), other).ignored


def test_equal_views_have_no_verdict_and_custom_rules_come_first() -> None:
    assert Rules(ignore=["whitespace"]).judge(_view(), _view()).diffs == []

    def greeting(a: MemoryView, b: MemoryView) -> bool:
        return len(a.messages) != len(b.messages)

    shorter = _view(messages=[HumanMessage("hello there")])
    verdict = Rules(ignore=[greeting]).judge(_view(), shorter)
    assert verdict.cls == "greeting" and verdict.ignored
    named = Rules(ignore=[DiffClass("known", lambda a, b: True)]).judge(_view(), shorter)
    assert named.cls == "known" and named.ignored


def test_a_rule_that_raises_explains_nothing() -> None:
    def broken(a: MemoryView, b: MemoryView) -> bool:
        raise RuntimeError("bug in the rule")

    verdict = Rules(ignore=[broken]).judge(_view(), _view(messages=[]))
    assert verdict.cls == "window" and not verdict.ignored


def test_tool_arguments_and_human_ai_swaps_are_not_whitespace_or_roles() -> None:
    calls = [{"name": "transfer", "args": {"amount": 10}, "id": "c1"}]
    mine = _view(messages=[HumanMessage("pay"), AIMessage("ok", tool_calls=calls)])
    other = _view(messages=[HumanMessage("pay "), AIMessage("ok", tool_calls=[
        {**calls[0], "args": {"amount": 10000}}])])
    assert Rules().judge(mine, other).cls == "window"
    assert Rules().judge(mine, _view(messages=[HumanMessage("pay  "), AIMessage(
        "ok", tool_calls=calls)])).cls == "whitespace"


def test_a_compare_rule_that_raises_is_a_counted_mismatch() -> None:
    def broken(a: MemoryView, b: MemoryView) -> bool:
        raise RuntimeError("bug in compare")

    verdict = Rules(compare=broken).judge(_view(), _view())
    assert verdict.cls == "compare_error" and not verdict.ignored and verdict.diffs


def test_compare_replaces_the_equivalence() -> None:
    lenient = Rules(compare=lambda a, b: a.folds == b.folds)
    assert lenient.judge(_view(), _view(summary="other")).diffs == []
    strict = Rules(compare=lambda a, b: False)
    verdict = strict.judge(_view(), _view())
    assert verdict.diffs and verdict.cls == "compare"


@pytest.mark.parametrize("bad", ["candidate_error", "nonsense", 3])
def test_bad_rules_are_refused(bad: object) -> None:
    with pytest.raises(ConfigError):
        Rules(ignore=[bad])  # type: ignore[list-item]
    with pytest.raises(ConfigError):
        SummaryMemory(backend="shadow", policy=POLICY, ignore=[bad])


def _padded(memory: SummaryMemory) -> None:
    """The candidate's summary comes back with trailing spaces: a whitespace-only difference."""
    candidate = memory.backend_impl.candidate_backend
    real = candidate.load
    candidate.load = lambda thread_id, *a, **k: replace(  # type: ignore[method-assign]
        view := real(thread_id, *a, **k), summary=view.summary + "  ")


def _talk(memory: SummaryMemory, turns: int = 12) -> None:
    for i in range(turns):
        memory.save("t", *filler_turn("t", i, 8))
        memory.load("t")


@pytest.mark.parametrize("store_kind", ["memory", "sqlite", "postgres"])
def test_ignored_classes_are_recorded_and_counted_never_raised(store_kind: str, fresh_store,
                                                               tmp_path: Path) -> None:
    log = tmp_path / "shadow.jsonl"
    with SummaryMemory(backend="shadow", policy=POLICY, store=fresh_store(store_kind),
                       shadow_log=str(log), ignore=["whitespace"],
                       raise_on_mismatch=True) as memory:
        _padded(memory)
        _talk(memory)  # raise_on_mismatch: an ignored class never raises
        engine = memory.backend_impl
        engine.drain(30)
        assert memory.mismatches and all(m.ignored and m.cls == "whitespace" and m.kind == "view"
                                         for m in memory.mismatches)
        assert engine.classes[("whitespace", True)] == len(memory.mismatches)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines and {(x["cls"], x["ignored"]) for x in lines} == {("whitespace", True)}


def test_a_class_not_ignored_still_counts_and_raises() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY, ignore=["summary_text"],
                           raise_on_mismatch=True)
    _padded(memory)
    with pytest.raises(MismatchError, match="differs"):
        _talk(memory)
    assert memory.mismatches[-1].cls == "whitespace" and not memory.mismatches[-1].ignored


def test_failures_carry_their_kind_as_class() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY, ignore=["window"])

    def explode(*args: object, **kwargs: object) -> None:
        raise OSError("candidate database is gone")

    memory.backend_impl.candidate_backend.save = explode  # type: ignore[method-assign]
    memory.save("t", "q", "a")
    memory.backend_impl.drain(30)
    errors = [m for m in memory.mismatches if m.kind == "candidate_error"]
    assert errors and all(m.cls == "candidate_error" and not m.ignored for m in errors)


def test_shadow_config_object_takes_the_rules() -> None:
    from compat.config import ShadowConfig

    memory = SummaryMemory(backend="shadow", policy=POLICY,
                           shadow=ShadowConfig(compare=lambda a, b: True))
    _padded(memory)
    _talk(memory, 4)
    memory.backend_impl.drain(30)
    assert memory.mismatches == []
    assert memory.backend_impl.compared == 4


def test_doctor_counts_a_shadow_log_by_class(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from compat import cli

    log, url = tmp_path / "shadow.jsonl", f"sqlite:///{tmp_path}/s.db"
    with SummaryMemory(backend="shadow", policy=POLICY, store=url, shadow_log=str(log),
                       ignore=["whitespace"]) as memory:
        _padded(memory)
        _talk(memory, 6)
        memory.backend_impl.candidate_backend.save = _explode  # type: ignore[method-assign]
        memory.save("t", "q", "a")
        memory.drain(30)
        recorded = list(memory.mismatches)
    with log.open("a") as f:
        f.write("not json\n")
    code = cli.main(["doctor", "--store", url, "--shadow-log", str(log), "--json", "--quiet"])
    shadow = json.loads(capsys.readouterr().out)["shadow"]
    assert code == 0 and shadow["unreadable_lines"] == 1
    ignored = sum(m.ignored for m in recorded)
    assert shadow["classes"]["whitespace"] == {"counted": 0, "ignored": ignored} and ignored > 0
    assert shadow["classes"]["candidate_error"]["counted"] >= 1
    assert shadow["mismatches"] == len(recorded)
    cli.main(["doctor", "--store", url, "--shadow-log", str(log)])
    assert "whitespace" in capsys.readouterr().out


def _explode(*args: object, **kwargs: object) -> None:
    raise OSError("candidate database is gone")
