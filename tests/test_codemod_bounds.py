"""``memshift codemod`` is bounded (issue 40 item 2): a file that does not mention the legacy
names is not parsed, a file over ``--max-bytes`` is skipped and reported, and a large file
that does mention them is handled in one pass (timings are in the report, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.codemod import DEFAULT_MAX_BYTES, codemod_source, run_codemod
from tests._cli import run_memshift

LEGACY = ("from langchain_classic.memory import ConversationSummaryBufferMemory\n"
          "m = ConversationSummaryBufferMemory(thread_id='t')\n")


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    import libcst

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed a file that does not mention the legacy names")

    monkeypatch.setattr(libcst, "parse_module", refuse)
    monkeypatch.setattr(ast, "parse", refuse)


def test_a_file_without_the_legacy_names_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "import os\n\ndef f(x):\n    return os.path.join(x, 'memory')\n" * 500
    _no_parse(monkeypatch)
    result = codemod_source(source, "plain.py")
    assert result.new_source == source and not result.findings and not result.rewrites


def test_a_broken_file_without_the_legacy_names_is_left_alone_silently() -> None:
    result = codemod_source("def broken(:\n    pass\n", "broken.py")
    assert not result.changed and not result.findings


@pytest.mark.parametrize("source", [
    "from langchain_classic.memory import *\n",
    "from langchain.memory import (ConversationBufferMemory)\nimport compat\n"
    "m = compat.SummaryMemory(store='sqlite:///x.db')\n",
    "from langchain_classic import memory\nm = memory.ConversationSummaryBufferMemory()\n",
])
def test_the_pre_check_lets_through_every_file_that_matters(source: str) -> None:
    assert codemod_source(source).findings or codemod_source(source).changed


def test_a_file_over_the_bound_is_skipped_and_reported(tmp_path: Path) -> None:
    big = tmp_path / "generated.py"
    big.write_text(LEGACY + "x = 1\n" * 200)
    small = tmp_path / "small.py"
    small.write_text(LEGACY)
    report = run_codemod([tmp_path], write=True, max_bytes=500)
    assert big.read_text() == LEGACY + "x = 1\n" * 200  # not touched
    assert "from compat import" in small.read_text()
    assert [Path(s["path"]).name for s in report.skipped] == ["generated.py"]
    reason = report.skipped[0]["reason"]
    assert "--max-bytes" in reason and str(big.stat().st_size) in reason


def test_a_file_over_the_bound_that_does_not_mention_the_names_is_not_reported(
        tmp_path: Path) -> None:
    (tmp_path / "vendored.py").write_text("x = 1\n" * 200)
    report = run_codemod([tmp_path], max_bytes=500)
    assert not report.skipped and not report.changed


def test_the_default_bound_is_one_mebibyte(tmp_path: Path) -> None:
    assert DEFAULT_MAX_BYTES == 1024 * 1024
    big = tmp_path / "huge.py"
    big.write_text(LEGACY + "# " + "x" * DEFAULT_MAX_BYTES + "\n")
    report = run_codemod([tmp_path])
    assert [Path(s["path"]).name for s in report.skipped] == ["huge.py"]


def test_the_command_takes_max_bytes(tmp_path: Path) -> None:
    (tmp_path / "generated.py").write_text(LEGACY + "x = 1\n" * 200)
    done = run_memshift("codemod", str(tmp_path), "--max-bytes", "500", "--json", check=0)
    doc = json.loads(done.stdout)
    assert [Path(s["path"]).name for s in doc["skipped"]] == ["generated.py"]
    assert doc["files_changed"] == [] and doc["max_bytes"] == 500
    text = run_memshift("codemod", str(tmp_path), "--max-bytes", "500", check=0)
    assert "generated.py: skipped:" in text.stderr and "--max-bytes" in text.stderr
    run_memshift("codemod", str(tmp_path), "--max-bytes", "0", check=2)


def test_a_large_file_with_legacy_uses_everywhere_is_rewritten_whole() -> None:
    """Every block of a ~150 KB file is rewritten and reported, in the same places as a file
    of one block (the splitting into statements must not lose or shift anything)."""
    block = ("\n\ndef handler_{i}(llm, q):\n"
             "    other = lcm.ConversationSummaryBufferMemory(llm=llm, store='sqlite:///m.db')\n"
             "    return other.load_memory_variables({{'input': q}})\n")
    head = ("from langchain_classic.memory import ConversationSummaryBufferMemory\n"
            "import langchain_classic.memory as lcm\n")
    count = 1000
    source = head + "".join(block.format(i=i) for i in range(count))
    result = codemod_source(source, "big.py")
    assert result.new_source.count("compat.SummaryMemory(") == count
    assert "import langchain_classic" not in result.new_source
    assert len(result.rewrites) == count + 2
    assert sorted(f.line for f in result.findings if f.kind == "thread-id") == sorted(
        [6 + 5 * i for i in range(count)] + [7 + 5 * i for i in range(count)])
    assert codemod_source(result.new_source).new_source == result.new_source
