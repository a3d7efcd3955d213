"""``memshift codemod --write`` never writes outside the tree it was given (issue 40 item 1):
a file symlink is skipped and reported, and a symlink swapped in during the run is not
written through."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import compat.codemod as codemod_module
from compat.codemod import run_codemod
from tests._cli import run_memshift

LEGACY = ("from langchain_classic.memory import ConversationSummaryBufferMemory\n"
          "m = ConversationSummaryBufferMemory(thread_id='t')\n")

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt",
                                reason="needs POSIX symlinks")


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    """``tree/app.py`` (legacy), ``outside/victim.py`` (legacy) and ``tree/link.py`` -> victim."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (tree / "app.py").write_text(LEGACY)
    victim = outside / "victim.py"
    victim.write_text(LEGACY)
    (tree / "link.py").symlink_to(victim)
    return tree, victim


def test_a_file_symlink_out_of_the_tree_is_skipped_and_reported(tmp_path: Path) -> None:
    tree, victim = _layout(tmp_path)
    report = run_codemod([tree], write=True)
    assert victim.read_text() == LEGACY, "wrote outside the tree"
    assert (tree / "link.py").is_symlink()
    assert "from compat import SummaryMemory" in (tree / "app.py").read_text()
    skipped = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert "link.py" in skipped and "symlink" in skipped["link.py"]
    assert [Path(f.path).name for f in report.files] == ["app.py"]


def test_a_symlink_inside_the_tree_is_skipped_too(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "app.py").write_text(LEGACY)
    (tree / "alias.py").symlink_to(tree / "app.py")
    report = run_codemod([tree], write=True)
    assert [Path(f.path).name for f in report.changed] == ["app.py"]
    assert (tree / "alias.py").is_symlink()
    assert [Path(s["path"]).name for s in report.skipped] == ["alias.py"]


def test_a_symlink_given_directly_is_not_written_through(tmp_path: Path) -> None:
    tree, victim = _layout(tmp_path)
    report = run_codemod([tree / "link.py"], write=True)
    assert victim.read_text() == LEGACY
    assert not report.files and "symlink" in report.skipped[0]["reason"]


def test_the_command_reports_the_skip_on_the_terminal_and_in_json(tmp_path: Path) -> None:
    tree, victim = _layout(tmp_path)
    done = run_memshift("codemod", str(tree), "--write", check=0)
    assert victim.read_text() == LEGACY
    assert f"{tree / 'link.py'}: skipped:" in done.stderr and "symlink" in done.stderr
    assert "rewrote 1 of 1 files" in done.stderr
    (tree / "app.py").write_text(LEGACY)
    doc = json.loads(run_memshift("codemod", str(tree), "--write", "--json", check=0).stdout)
    assert victim.read_text() == LEGACY
    assert [Path(s["path"]).name for s in doc["skipped"]] == ["link.py"]
    assert "symlink" in doc["skipped"][0]["reason"]
    assert [Path(p).name for p in doc["files_written"]] == ["app.py"]


def _swap_during_run(monkeypatch: pytest.MonkeyPatch, swap: object) -> None:
    """Run ``swap()`` after the file is read and rewritten in memory, before it is written."""
    real = codemod_module.codemod_source

    def rewrite_then_swap(source: str, path: str = "<string>") -> object:
        result = real(source, path)
        swap()  # type: ignore[operator]
        return result

    monkeypatch.setattr(codemod_module, "codemod_source", rewrite_then_swap)


def test_a_file_swapped_for_a_symlink_during_the_run_is_not_written_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, victim = _layout(tmp_path)
    (tree / "link.py").unlink()
    app = tree / "app.py"

    def swap() -> None:
        app.unlink()
        app.symlink_to(victim)

    _swap_during_run(monkeypatch, swap)
    report = run_codemod([tree], write=True)
    assert victim.read_text() == LEGACY, "wrote through a symlink swapped in during the run"
    assert app.is_symlink()
    assert any(Path(s["path"]).name == "app.py" and "changed during the run" in s["reason"]
               for s in report.skipped)
    assert not report.written


def test_a_folder_swapped_for_a_symlink_during_the_run_is_not_written_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "pkg").mkdir(parents=True)
    outside.mkdir()
    (tree / "pkg" / "app.py").write_text(LEGACY)
    (outside / "app.py").write_text(LEGACY)

    def swap() -> None:
        (tree / "pkg").rename(tmp_path / "moved")
        (tree / "pkg").symlink_to(outside, target_is_directory=True)

    _swap_during_run(monkeypatch, swap)
    report = run_codemod([tree], write=True)
    assert (outside / "app.py").read_text() == LEGACY, "wrote through a swapped-in folder"
    assert any("changed during the run" in s["reason"] for s in report.skipped)


def test_a_write_goes_through_a_temporary_file_and_keeps_the_mode(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    app = tree / "app.py"
    app.write_text(LEGACY)
    app.chmod(0o751)
    report = run_codemod([tree], write=True)
    assert [Path(p).name for p in report.written] == ["app.py"]
    assert stat.S_IMODE(app.stat().st_mode) == 0o751
    assert sorted(p.name for p in tree.iterdir()) == ["app.py"]  # no temporary left behind
    assert "from compat import SummaryMemory" in app.read_text()
