"""``memshift codemod``: the import swap done by a tool, on a fixture repository of one file per
pattern (``tests/data/codemod/repo``: ``NAME.py.in`` is the file, ``NAME.py.out`` what it
becomes; stored with a suffix so that neither pytest nor ruff reads them as code)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compat import SummaryMemory, UnknownArgumentError
from compat.codemod import accepted_keywords, codemod_source, run_codemod
from tests._cli import run_memshift
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "data" / "codemod" / "repo"
CASES = sorted(p.relative_to(FIXTURES).as_posix()[: -len(".in")]
               for p in FIXTURES.rglob("*.in"))
PYTHON_CASES = [c for c in CASES if c.endswith(".py")]

# (file, line, kind): every finding the fixture repository must give, and no other
EXPECTED_FINDINGS = sorted([
    # every memory built with no thread id whose calls carry none: ThreadIdRequired at its
    # first call once MEMSHIFT_STORE names a persistent store (issue 40 item 3)
    ("p01_plain.py", 7, "thread-id"),
    ("p02_aliased.py", 6, "thread-id"),
    ("p03_langchain_memory.py", 6, "thread-id"),
    ("p04_submodule.py", 6, "thread-id"),
    ("p05_multiname.py", 10, "thread-id"),
    ("p06_flat_multiname.py", 6, "thread-id"),
    ("p07_module_import.py", 6, "thread-id"),
    ("p08_module_alias.py", 6, "thread-id"),
    ("p09_from_package.py", 6, "thread-id"),
    ("p10_combined.py", 8, "thread-id"),
    ("p11_runnable_history.py", 11, "thread-id"),
    ("p12_annotations.py", 19, "thread-id"),
    ("p14_try_except.py", 9, "thread-id"),
    ("p16_migrated.py", 8, "thread-id"),
    ("p16_migrated.py", 9, "thread-id"),
    ("p18_refused_keywords.py", 6, "thread-id"),
    ("p24_try_module_import.py", 9, "thread-id"),
    ("pkg/p21_nested.py", 7, "thread-id"),
    ("pkg/p21_nested.py", 7, "thread-id"),
    # the rest
    ("p15_star.py", 2, "star-import"),
    ("p17_persistent_store.py", 4, "thread-id"),
    ("p17_persistent_store.py", 8, "thread-id"),
    ("p17_persistent_store.py", 10, "thread-id"),
    ("p18_refused_keywords.py", 8, "refused-keyword"),
    ("p18_refused_keywords.py", 9, "refused-keyword"),
    ("p19_chat_memory.py", 11, "thread-id"),
    ("p19_chat_memory.py", 15, "thread-id"),
    ("p19_chat_memory.py", 15, "needs-store"),
    ("p22_syntax_error.py", 4, "syntax-error"),
    ("p25_service_class.py", 7, "thread-id"),
    ("p25_service_class.py", 10, "thread-id"),
])
CHANGED = sorted(c for c in PYTHON_CASES
                 if (FIXTURES / f"{c}.in").read_text() != (FIXTURES / f"{c}.out").read_text())


def _repo(tmp_path: Path) -> Path:
    """A copy of the fixture repository with the real file names."""
    repo = tmp_path / "repo"
    for case in CASES:
        target = repo / case
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / f"{case}.in", target)
    return repo


def _snapshot(repo: Path) -> dict[str, str]:
    return {p.relative_to(repo).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(repo.rglob("*")) if p.is_file()}


def test_the_fixture_repository_covers_at_least_fifteen_patterns() -> None:
    assert len(CASES) >= 15
    for case in CASES:
        assert (FIXTURES / f"{case}.out").exists(), f"{case}: no expected output"
    assert len(CHANGED) >= 15, CHANGED


@pytest.mark.parametrize("case", PYTHON_CASES)
def test_each_pattern_becomes_its_expected_output(case: str) -> None:
    source = (FIXTURES / f"{case}.in").read_text(encoding="utf-8")
    expected = (FIXTURES / f"{case}.out").read_text(encoding="utf-8")
    result = codemod_source(source, case)
    assert result.new_source == expected
    if case != "p22_syntax_error.py":
        ast.parse(result.new_source)  # still Python
        # idempotent: the rewritten file rewrites to itself
        assert codemod_source(result.new_source, case).new_source == result.new_source


def test_findings_on_the_repository(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    report = run_codemod([repo])
    got = sorted((Path(f.path).relative_to(repo).as_posix(), f.line, f.kind)
                 for f in report.findings)
    assert got == EXPECTED_FINDINGS
    for finding in report.findings:
        assert finding.col >= 1 and finding.message
    refused = {f.message.split("'")[1] for f in report.findings if f.kind == "refused-keyword"}
    assert refused == {"max_tokens_limit", "moving_summary_buffer"}


def test_refused_keywords_are_what_the_facade_refuses() -> None:
    accepted = accepted_keywords()
    assert {"llm", "max_token_limit", "chat_memory", "store", "thread_id"} <= accepted
    for name in ("max_tokens_limit", "moving_summary_buffer"):
        assert name not in accepted
        with pytest.raises(UnknownArgumentError, match=name):
            SummaryMemory(**{name: 1})


def test_diff_writes_nothing_then_write_then_idempotent(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _snapshot(repo)
    done = run_memshift("codemod", str(repo), check=0)
    assert _snapshot(repo) == before  # --diff (the default) writes nothing
    for case in CHANGED:
        assert f"+++ {repo / case}" in done.stdout
    assert "p16_migrated.py" not in done.stdout and "p15_star.py" not in done.stdout
    assert "skipped" in done.stderr and "p23_notebook.ipynb" in done.stderr
    assert "p22_syntax_error.py:4" in done.stderr and "syntax" in done.stderr

    run_memshift("codemod", str(repo), "--write", check=0)
    after = _snapshot(repo)
    for case in CASES:
        assert after[case] == (FIXTURES / f"{case}.out").read_text(encoding="utf-8"), case

    again = run_memshift("codemod", str(repo), "--diff", check=0)
    assert again.stdout == ""  # a second run: an empty diff
    assert _snapshot(repo) == after


def test_json_report_shape(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    done = run_memshift("codemod", str(repo), "--json", check=0)
    doc = json.loads(done.stdout)
    assert doc["command"] == "codemod" and doc["mode"] == "diff" and doc["ok"] is True
    assert sorted(Path(p).relative_to(repo).as_posix() for p in doc["files_changed"]) == CHANGED
    assert doc["files_scanned"] == len(PYTHON_CASES)
    rewrite = doc["rewrites"][0]
    assert set(rewrite) == {"path", "line", "col", "old", "new"}
    assert any(r["new"] == "from compat import SummaryMemory as ConversationSummaryBufferMemory"
               for r in doc["rewrites"])
    assert {tuple(sorted(f)) for f in doc["findings"]} == {
        ("col", "kind", "line", "message", "path")}
    assert len(doc["findings"]) == len(EXPECTED_FINDINGS)
    assert [Path(s["path"]).name for s in doc["skipped"]] == ["p23_notebook.ipynb"]
    assert "notebook" in doc["skipped"][0]["reason"]
    assert _snapshot(repo) == _snapshot(_repo(tmp_path / "again"))  # --json alone writes nothing


def test_rewritten_modules_import_memshift(tmp_path: Path) -> None:
    """Each rewritten file, imported in a fresh process: the names it uses are memshift's and
    its ``build()`` gives memshift memories."""
    repo = _repo(tmp_path)
    run_memshift("codemod", str(repo), "--write", check=0)
    modules = [c[: -len(".py")].replace("/", ".") for c in CHANGED]
    script = """
import importlib, inspect, json, sys
import compat
import langchain_classic.memory
from langchain_classic.memory import ConversationSummaryBufferMemory as Stock
# what langchain 0.x called it: the names a file keeps from it must still import
sys.modules["langchain.memory"] = langchain_classic.memory
out = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    stock = [k for k, v in vars(module).items() if v is Stock]
    uses = [k for k, v in vars(module).items() if v is compat.SummaryMemory or v is compat]
    built = error = None
    build = getattr(module, "build", None)
    if build is not None and all(p.default is not p.empty
                                 for p in inspect.signature(build).parameters.values()):
        try:
            result = build()
        except Exception as exc:  # the refused keywords the report named
            error = type(exc).__name__
        else:
            items = result if isinstance(result, tuple) else [result]
            items = [m for i in items for m in getattr(i, "memories", [i])]
            built = [type(i).__module__ + "." + type(i).__name__ for i in items if i is not None]
    out[name] = {"stock": stock, "uses": uses, "built": built, "error": error}
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script, *modules], capture_output=True,
                          text=True, cwd=repo, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{repo}"})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen.pop("p18_refused_keywords")["error"] == "UnknownArgumentError"
    for name, found in seen.items():
        assert found["error"] is None, (name, found)
        assert not found["stock"], (name, found)
        assert found["uses"], (name, found)
        if found["built"] is not None:
            assert "compat.memory.SummaryMemory" in found["built"], (name, found)
    assert sum(found["built"] is not None for found in seen.values()) >= 12


def test_a_notebook_and_a_broken_file_given_directly(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    notebook = run_memshift("codemod", str(repo / "p23_notebook.ipynb"), check=0)
    assert notebook.stdout == "" and "notebook" in notebook.stderr
    broken = run_memshift("codemod", str(repo / "p22_syntax_error.py"), "--write", check=0)
    assert "p22_syntax_error.py:4:" in broken.stderr
    assert (repo / "p22_syntax_error.py").read_text() == (
        FIXTURES / "p22_syntax_error.py.in").read_text()


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    run_memshift("codemod", str(tmp_path / "nowhere"), check=2)


def test_without_libcst_the_command_names_the_extra(tmp_path: Path) -> None:
    shim = tmp_path / "shim" / "libcst"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("No module named libcst")\n')
    (tmp_path / "app.py").write_text("x = 1\n")
    done = run_memshift("codemod", str(tmp_path / "app.py"), cwd=tmp_path, check=2,
                        env={"PYTHONPATH": f"{tmp_path / 'shim'}{os.pathsep}{ROOT}"})
    assert "pip install 'memshift[codemod]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the patch tool")
def test_the_diff_applies_with_patch(tmp_path: Path) -> None:
    """What ``--diff`` prints is a patch: applied, it gives what ``--write`` gives."""
    repo = _repo(tmp_path)
    done = run_memshift("codemod", ".", cwd=repo, check=0)
    subprocess.run(["patch", "-p0", "--quiet"], input=done.stdout, text=True, cwd=repo,
                   check=True, timeout=60)
    for case in CASES:
        assert (repo / case).read_text(encoding="utf-8") == (
            FIXTURES / f"{case}.out").read_text(encoding="utf-8"), case


@pytest.mark.parametrize(("source", "expected"), [
    ("if x: from langchain_classic.memory import ConversationBufferMemory, "
     "ConversationSummaryBufferMemory\n",
     "if x: from langchain_classic.memory import ConversationBufferMemory; "
     "from compat import SummaryMemory as ConversationSummaryBufferMemory\n"),
    ("if x: import langchain_classic.memory as lcm  # c\nm = lcm.ConversationSummaryBufferMemory()\n",
     "if x: import compat  # c\nm = compat.SummaryMemory()\n"),
    ("import os; import langchain_classic.memory as lcm; import sys\n"
     "m = lcm.ConversationSummaryBufferMemory()\n",
     "import os; import compat; import sys\nm = compat.SummaryMemory()\n"),
    ("import langchain_classic.memory, os\n"
     "m = langchain_classic.memory.ConversationSummaryBufferMemory()\n",
     "import os\nimport compat\nm = compat.SummaryMemory()\n"),
    ("import compat\nimport langchain_classic.memory as lcm\nm = lcm.ConversationSummaryBufferMemory()\n",
     "import compat\nm = compat.SummaryMemory()\n"),
    ("def f():\n    import langchain_classic.memory as lcm\n"
     "    return lcm.ConversationSummaryBufferMemory()\n"
     "import langchain_classic.memory as lcm2\nx = lcm2.ConversationSummaryBufferMemory\n",
     "def f():\n    import compat\n    return compat.SummaryMemory()\n"
     "import compat\nx = compat.SummaryMemory\n"),
    ("import langchain_classic\nm = langchain_classic.memory.ConversationSummaryBufferMemory()\n",
     "import compat\nm = compat.SummaryMemory()\n"),
    # a name still written is kept imported (the check is by name, not by flow)
    ("from langchain_classic import memory\nmemory = memory.ConversationSummaryBufferMemory()\n",
     "from langchain_classic import memory\nimport compat\nmemory = compat.SummaryMemory()\n"),
    ("from langchain_classic.memory import ConversationSummaryBufferMemory\r\n"
     "m = ConversationSummaryBufferMemory()\r\n",
     "from compat import SummaryMemory as ConversationSummaryBufferMemory\r\n"
     "m = ConversationSummaryBufferMemory()\r\n"),
    ("from .memory import ConversationSummaryBufferMemory\n",
     "from .memory import ConversationSummaryBufferMemory\n"),  # the app's own module
])
def test_statement_shapes(source: str, expected: str) -> None:
    result = codemod_source(source)
    assert result.new_source == expected
    compile(result.new_source, "<rewritten>", "exec")
    assert codemod_source(expected).new_source == expected


def test_findings_follow_the_thread_key_and_non_literal_stores() -> None:
    source = ("from compat import SummaryMemory\n"
              "m = SummaryMemory(store=url, thread_key='session')\n"
              "m.save_context({'input': 'q', 'session': s}, {'output': 'a'})\n"
              "m.save_context(dict(input='q'), {'output': 'a'})\n"
              "m.load_memory_variables(inputs)\n")
    notes = [(f.line, f.kind, f.message) for f in codemod_source(source).findings]
    assert [(line, kind) for line, kind, _ in notes] == [
        (2, "thread-id"), (4, "thread-id"), (5, "thread-id")]
    assert "if it names a persistent store" in notes[0][2]
    assert "'session'" in notes[1][2] and "may lack" in notes[2][2]


def test_a_file_with_a_byte_order_mark_is_rewritten_and_keeps_it(tmp_path: Path) -> None:
    from compat.codemod import run_codemod

    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbffrom langchain_classic.memory import "
                     b"ConversationSummaryBufferMemory\n")
    report = run_codemod([tmp_path], write=True)
    assert not report.skipped and [f for f in report.files if f.changed]
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"from compat import SummaryMemory" in data
