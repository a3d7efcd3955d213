"""``memshift codemod``'s library: the import-line swap of migration guide §1, done by a tool
on a whole repository, with a report of what a tool cannot decide (thread ids on persistent
stores, keywords the facade refuses, star imports).

``run_codemod(paths, write=False)`` is what the command calls; ``codemod_source(text)`` does
one file's text. LibCST (``pip install 'memshift[codemod]'``) is imported on first use, so the
rest of memshift never needs it.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from adapters.errors import ConfigError
from compat.codemod._names import accepted_keywords

__all__ = ["CodemodReport", "FileResult", "Finding", "Rewrite", "accepted_keywords",
           "codemod_source", "require_libcst", "run_codemod"]

INSTALL = "pip install 'memshift[codemod]'"
# folders a repository walk never enters
_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "__pycache__", "node_modules", ".tox",
              ".nox", "site-packages", "build", "dist", ".mypy_cache", ".ruff_cache"}


@dataclass(frozen=True)
class Rewrite:
    """One changed import or use (position in the original file, 1-based)."""

    path: str
    line: int
    col: int
    old: str
    new: str


@dataclass(frozen=True)
class Finding:
    """Something to look at by hand (kind: thread-id, needs-store, refused-keyword,
    star-import, syntax-error)."""

    path: str
    line: int
    col: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.kind}: {self.message}"


@dataclass
class FileResult:
    """One file: its text before and after, and what was found."""

    path: str
    old_source: str
    new_source: str
    rewrites: list[Rewrite] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new_source != self.old_source

    def diff(self) -> str:
        """A unified diff (empty when unchanged)."""
        return "".join(difflib.unified_diff(self.old_source.splitlines(keepends=True),
                                            self.new_source.splitlines(keepends=True),
                                            fromfile=self.path, tofile=self.path))


@dataclass
class CodemodReport:
    """A run over some paths: every Python file scanned, and what was skipped and why."""

    write: bool
    files: list[FileResult] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    changed = property(lambda self: [f for f in self.files if f.changed])
    rewrites = property(lambda self: [r for f in self.files for r in f.rewrites])
    findings = property(lambda self: [n for f in self.files for n in f.findings])

    def as_dict(self) -> dict[str, Any]:
        """The machine-readable report (``--json``)."""
        return {"command": "codemod", "ok": True, "mode": "write" if self.write else "diff",
                "files_scanned": len(self.files),
                "files_changed": [f.path for f in self.changed],
                "rewrites": [asdict(r) for r in self.rewrites],
                "findings": [asdict(n) for n in self.findings],
                "skipped": self.skipped}


def require_libcst() -> None:
    """LibCST, or a ``ConfigError`` that says how to install it."""
    try:
        import libcst  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"memshift codemod needs LibCST: {INSTALL}") from exc


def codemod_source(source: str, path: str = "<string>") -> FileResult:
    """One file's text rewritten, with its findings; a file that does not parse is returned
    unchanged with a ``syntax-error`` finding."""
    require_libcst()
    import libcst as cst

    from compat.codemod._findings import find
    from compat.codemod._rewrite import rewrite

    result = FileResult(path, source, source)
    try:
        ast.parse(source, filename=path)  # Python's own message and position
        tree = cst.parse_module(source)
    except SyntaxError as exc:
        result.findings.append(Finding(path, exc.lineno or 1, exc.offset or 1, "syntax-error",
                                       f"not parsed, not touched: {exc.msg}"))
        return result
    except cst.ParserSyntaxError as exc:
        result.findings.append(Finding(path, exc.editor_line, exc.editor_column,
                                       "syntax-error", "LibCST cannot parse it; not touched: "
                                       + exc.message))
        return result
    result.findings = [Finding(path, n.line, n.col, n.kind, n.message) for n in find(tree)]
    done = rewrite(tree)
    result.new_source = done.tree.code
    result.rewrites = [Rewrite(path, c.line, c.col, c.old, c.new) for c in done.changes]
    return result


def _walk(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if not path.is_dir():
            yield path
            continue
        for child in sorted(path.rglob("*")):
            parts = child.relative_to(path).parts
            if (child.is_file() and child.suffix in (".py", ".pyi", ".ipynb")
                    and not any(p in _SKIP_DIRS or p.startswith(".") for p in parts[:-1])):
                yield child


def run_codemod(paths: Iterable[str | Path], write: bool = False) -> CodemodReport:
    """Rewrite every Python file under ``paths`` (``write=False``: compute only). Notebooks and
    files that are not UTF-8 are skipped with a reason; a missing path is a ``ConfigError``."""
    require_libcst()
    given = [Path(p) for p in paths]
    for path in given:
        if not path.exists():
            raise ConfigError(f"no such file or folder: {path}")
    report = CodemodReport(write)
    for path in _walk(given):
        if path.suffix == ".ipynb":
            report.skipped.append({"path": str(path), "reason": "notebook: not rewritten; "
                                   "change its import cell by hand (or convert it with "
                                   "jupytext and run the codemod on the script)"})
            continue
        if path.suffix not in (".py", ".pyi"):
            report.skipped.append({"path": str(path), "reason": "not a Python file"})
            continue
        raw = path.read_bytes()
        bom = raw.startswith(b"\xef\xbb\xbf")  # kept on write; LibCST reads the text after it
        try:
            source = raw[3:].decode("utf-8") if bom else raw.decode("utf-8")
        except UnicodeDecodeError:
            report.skipped.append({"path": str(path), "reason": "not UTF-8: not read"})
            continue
        result = codemod_source(source, str(path))
        report.files.append(result)
        if write and result.changed:
            path.write_bytes((b"\xef\xbb\xbf" if bom else b"")
                             + result.new_source.encode("utf-8"))
    return report
