"""The ``--json`` writer streams: the same text as ``json.dumps(indent=2)``, lazy item lists
written as they are produced, secrets scrubbed, and a file replaced only when complete."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compat.cli._common import Output, remember_secret
from compat.cli._jsonstream import Items, chunks

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(),
                    st.floats(allow_nan=False))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)), max_leaves=20)


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_the_text_equals_json_dumps(document: object) -> None:
    assert "".join(chunks(document)) == dumps(document)


def test_keys_and_values_json_does_not_know_are_written_as_json_dumps_writes_them() -> None:
    document = {7: "seven", 2.5: (1, 2), None: [], True: {}, "d": date(2026, 12, 3),
                "inf": math.inf, "é": "ü"}
    assert "".join(chunks(document)) == dumps(document)


def test_lazy_items_are_written_as_a_list_and_iterated_once_while_writing() -> None:
    pulled: list[int] = []

    def rows() -> Iterator[dict[str, int]]:
        for i in range(3):
            pulled.append(i)
            yield {"n": i}

    document = {"rows": Items(rows), "empty": Items(lambda: iter(()))}
    stream = chunks(document)
    first = next(stream)
    assert pulled == []  # nothing is produced before the writer reaches the list
    text = first + "".join(stream)
    assert json.loads(text) == {"rows": [{"n": 0}, {"n": 1}, {"n": 2}], "empty": []}
    assert text == dumps({"rows": [{"n": i} for i in range(3)], "empty": []})
    assert pulled == [0, 1, 2]


def test_items_outside_the_writer_fail_loudly_instead_of_writing_an_empty_list() -> None:
    with pytest.raises(TypeError):
        json.dumps({"rows": Items(lambda: iter([1]))})


def test_emit_streams_to_stdout_and_file_with_secrets_scrubbed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remember_secret("postgresql://app:s3cr3t-pass@db/x")
    target = tmp_path / "out" / "report.json"
    out = Output(json=True, output=str(target), quiet=True)
    many = [f"thread-{i}" for i in range(20_000)]  # several write batches
    document = {"store": "postgresql://app:s3cr3t-pass@db/x", "note": "s3cr3t-pass",
                "ids": Items(lambda: iter(many))}
    out.emit(document)
    printed = capsys.readouterr().out
    assert "s3cr3t-pass" not in printed
    assert json.loads(printed) == json.loads(target.read_text(encoding="utf-8"))
    assert json.loads(printed)["ids"] == many
    assert printed == dumps({**document, "ids": many}).replace("s3cr3t-pass", "***") + "\n"
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_a_failure_while_writing_leaves_no_partial_report_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("{\"previous\": true}\n", encoding="utf-8")

    def broken() -> Iterator[str]:
        yield "a"
        raise RuntimeError("source went away")

    with pytest.raises(RuntimeError):
        Output(json=False, output=str(target), quiet=True).emit({"ids": Items(broken)})
    assert json.loads(target.read_text(encoding="utf-8")) == {"previous": True}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_the_reported_peak_memory_is_the_commands_own_not_a_large_parents(
        tmp_path: Path) -> None:
    """``ru_maxrss`` keeps the peak of the image before ``exec``: a command started by a
    400 MB parent would report 400 MB. ``stats.max_rss_mb`` reads the command's own peak."""
    import subprocess
    import sys

    child = ("import resource\nfrom compat.cli._migrate_report import peak_rss_kb\n"
             "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
             "print(peak_rss_kb(usage), usage.ru_maxrss)")
    parent = ("import subprocess, sys\nheld = bytearray(400 << 20)\n"
              "for i in range(0, len(held), 4096):\n    held[i] = 1\n"
              f"sys.exit(subprocess.run([sys.executable, '-c', {child!r}]).returncode)")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    own_kb, inherited_kb = map(float, out.stdout.split())
    assert inherited_kb > 400 * 1024  # what ru_maxrss says
    assert 0 < own_kb < 300 * 1024
