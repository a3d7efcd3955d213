"""A migration report's per-thread lists (``compat.migrating.ids``): they behave like the
lists they replace, and their memory does not grow by an object per thread."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compat.migration import ALREADY, NOT_FOUND, MigrationReport
from compat.migrating.ids import IdTable, Notes, Outcomes, ThreadIds

IDS = st.text(min_size=0, max_size=12)  # any text: empty, unicode, lone surrogates
OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), IDS),
    st.tuples(st.just("extend"), st.lists(IDS, max_size=4)),
    st.tuples(st.just("drop"), st.lists(IDS, max_size=3)),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(OPS, st.lists(IDS, max_size=6))
def test_thread_ids_behave_like_a_list(ops: list[tuple[str, object]],
                                       probes: list[str]) -> None:
    table, model = IdTable(), []
    ids = ThreadIds(table)
    for op, arg in ops:
        if op == "append":
            ids.append(arg)  # type: ignore[arg-type]
            model.append(arg)
        elif op == "extend":
            ids += arg  # type: ignore[assignment,operator]
            model += arg  # type: ignore[arg-type]
        else:
            gone = set(arg)  # type: ignore[call-overload]
            ids.drop(gone)
            model = [t for t in model if t not in gone]
        assert ids == model and list(ids) == model and len(ids) == len(model)
    assert ids[:3] == model[:3] and ids[-2:] == model[-2:] and repr(ids) == repr(model)
    for i, thread_id in enumerate(model):
        assert ids[i] == thread_id and thread_id in ids
    assert ids != [*model, "x"] and ids != tuple([*model, "x"])
    for probe in [*probes, *(t[:-1] for t in model), *(t + "0" for t in model)]:
        assert (probe in ids) == (probe in model), probe  # prefixes and extensions too


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(IDS, st.sampled_from([ALREADY, NOT_FOUND, "boom", ""])),
                max_size=40), st.lists(IDS, max_size=5))
def test_outcomes_behave_like_a_list_of_pairs(pairs: list[tuple[str, str]],
                                              gone: list[str]) -> None:
    outcomes = Outcomes(IdTable(), pairs)
    assert outcomes == pairs and len(outcomes) == len(pairs)
    assert outcomes.by_reason() == dict(Counter(r for _, r in pairs))
    assert [outcomes[i] for i in range(len(pairs))] == pairs and outcomes[1:] == pairs[1:]
    outcomes.drop(set(gone))
    kept = [(t, r) for t, r in pairs if t not in set(gone)]
    assert outcomes == kept and outcomes.by_reason() == dict(Counter(r for _, r in kept))
    assert outcomes == [list(p) for p in kept]  # pairs read back from JSON compare equal


def test_an_id_that_is_not_text_is_kept_as_it_is_and_reasons_must_be_text() -> None:
    """A caller's non-str id is reported as given (the run fails that thread, it does not
    abort); a reason is always text."""
    ids = ThreadIds(IdTable(), ["a", 42, None, "b", ""])  # type: ignore[list-item]
    assert ids == ["a", 42, None, "b", ""] and 42 in ids and None in ids and "" in ids
    assert "42" not in ids and 43 not in ids
    ids.drop({42})
    assert ids == ["a", None, "b", ""]
    with pytest.raises(TypeError, match="a reason is a str, not NoneType"):
        Outcomes(IdTable()).append(("t", None))  # type: ignore[arg-type]


def test_a_run_over_ids_that_are_not_text_fails_those_threads_only() -> None:
    from compat import SummaryMemory
    from compat.migration import migrate

    source = SummaryMemory(backend="classic")
    source.save("a", "hello", "hi")
    target = SummaryMemory(backend="middleware")
    report = migrate(source, target, threads=["a", 42, None])  # type: ignore[list-item]
    assert report.migrated == ["a"] and [t for t, _ in report.failed] == [42, None]
    assert all(reason for _, reason in report.failed) and report.total == 3


def test_notes_map_each_thread_to_its_note_and_print_each_note_once() -> None:
    table = IdTable()
    notes = Notes(table, {"a": "rebuilt", "b": "rebuilt", "c": "other"})
    assert dict(notes) == {"a": "rebuilt", "b": "rebuilt", "c": "other"}
    assert notes["c"] == "other" and "a" in notes and "z" not in notes and len(notes) == 3
    assert notes.distinct() == ["other", "rebuilt"]
    with pytest.raises(KeyError):
        notes["z"]
    notes.drop({"c"})
    assert dict(notes) == {"a": "rebuilt", "b": "rebuilt"} and notes.distinct() == ["rebuilt"]
    notes.add("d", "other")
    assert notes["d"] == "other" and len(notes) == 3  # a lookup after an add sees it


def test_reading_notes_as_a_mapping_decodes_each_id_once(monkeypatch: Any) -> None:
    """``dict(notes)``, ``items()``, ``==``: one decode per noted thread (a lookup that
    scanned the lists would decode ~n^2/2 ids: 50 million at 10,000 threads)."""
    decoded = 0
    real = IdTable.__getitem__

    def counting(self: IdTable, ordinal: int) -> str:
        nonlocal decoded
        decoded += 1
        return real(self, ordinal)

    monkeypatch.setattr(IdTable, "__getitem__", counting)
    notes = Notes(IdTable(), {f"t{i}": ("x" if i % 2 else "y") for i in range(2_000)})
    assert dict(notes.items()) == dict(notes) and notes == dict(notes) and "t7" in notes
    assert decoded <= 2_000


def test_reports_compare_by_content_and_notes_can_be_assigned() -> None:
    one = MigrationReport("s", "t", migrated=["a"], notes={"a": "n"})
    two = MigrationReport("s", "t")
    two.migrated.append("a")
    two.notes = {"a": "n"}
    assert one == two and isinstance(two.notes, Notes) and two.notes.distinct() == ["n"]
    two.forget("a")
    assert one != two and dict(two.notes) == {}


def test_a_report_built_from_lists_reads_back_the_same() -> None:
    report = MigrationReport("s", "t", migrated=["a", "b"], skipped=[("c", ALREADY)],
                             failed=[("d", "boom")], verified=["a", "b", "c"],
                             rebuilt=["a"], notes={"a": "rebuilt from history"})
    assert report.migrated == ["a", "b"] and report.skipped == [("c", ALREADY)]
    assert report.failed == [("d", "boom")] and report.verified == ["a", "b", "c"]
    assert report.total == 4 and not report.ok
    assert report.counts()["skipped"] == 1 and report.skipped_by_reason() == {ALREADY: 1}
    report.verified = [t for t in report.verified if t != "b"]  # assigning a list still works
    assert report.verified == ["a", "c"] and isinstance(report.verified, ThreadIds)
    report.forget(["a"])
    assert report.migrated == ["b"] and dict(report.notes) == {} and report.rebuilt == []
    assert "counts=" in repr(report)


def _fill(report: MigrationReport, threads: list[str]) -> None:
    """What a first run over stock classic threads records per thread (each id a new
    string, as a run reads it from a store)."""
    for held in threads:
        thread_id = str(uuid.UUID(held))
        report.notes.add(thread_id, "summary rebuilt from the stored history")
        report.verified.append(thread_id)
        report.migrated.append(thread_id)
        report.rebuilt.append(thread_id)


def test_a_report_holds_no_object_per_thread() -> None:
    """50,000 threads' outcomes: a constant number of objects, ~60 bytes a thread (the
    lists of str they replace held ~147 with a uuid id, as 50,000 small objects)."""
    threads = [str(uuid.uuid4()) for _ in range(50_000)]
    report = MigrationReport("s", "t")
    _fill(report, threads[:10])  # the first buffers exist
    gc.collect()
    before = len(gc.get_objects())
    tracemalloc.start()
    try:
        _fill(report, threads[10:])
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    gc.collect()
    assert len(gc.get_objects()) - before < 50
    assert held / len(threads) < 80, held
    assert report.migrated[-1] == threads[-1] and len(report.verified) == 50_000
