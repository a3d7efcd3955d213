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
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from adapters.errors import ConfigError
from compat.codemod._files import Unsafe, read_file, walk, write_file
from compat.codemod._names import accepted_keywords
from compat.codemod._scan import NEEDLES, mentions, scan, split_lines

__all__ = ["DEFAULT_MAX_BYTES", "CodemodReport", "FileResult", "Finding", "Rewrite",
           "accepted_keywords", "codemod_source", "require_libcst", "run_codemod"]

INSTALL = "pip install 'memshift[codemod]'"
# a larger file that names the class is skipped and reported: a generated or vendored file
# must not stall a repository's run (``--max-bytes`` raises it)
DEFAULT_MAX_BYTES = 1024 * 1024


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
    written: list[str] = field(default_factory=list)  # paths --write replaced
    max_bytes: int = DEFAULT_MAX_BYTES

    def skip(self, path: Path, reason: str) -> None:
        """A file not read, or not written, and why (reported on stderr and in --json)."""
        self.skipped.append({"path": str(path), "reason": reason})

    changed = property(lambda self: [f for f in self.files if f.changed])
    rewrites = property(lambda self: [r for f in self.files for r in f.rewrites])
    findings = property(lambda self: [n for f in self.files for n in f.findings])

    def as_dict(self) -> dict[str, Any]:
        """The machine-readable report (``--json``)."""
        return {"command": "codemod", "ok": True, "mode": "write" if self.write else "diff",
                "files_scanned": len(self.files),
                "files_changed": [f.path for f in self.changed],
                "rewrites": [asdict(r) for r in self.rewrites],
                "files_written": self.written,
                "findings": [asdict(n) for n in self.findings],
                "skipped": self.skipped, "max_bytes": self.max_bytes}


def require_libcst() -> None:
    """LibCST, or a ``ConfigError`` that says how to install it."""
    try:
        import libcst  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"memshift codemod needs LibCST: {INSTALL}") from exc


def codemod_source(source: str, path: str = "<string>") -> FileResult:
    """One file's text rewritten, with its findings. A file that names neither the class nor
    its modules is returned as it is without being parsed (most of a repository); a file
    that does not parse is returned unchanged with a ``syntax-error`` finding."""
    require_libcst()
    result = FileResult(path, source, source)
    if not mentions(source):
        return result
    from compat.codemod._findings import find
    from compat.codemod._parts import PartSyntaxError, rewrite_parts

    try:
        tree = ast.parse(source, filename=path)  # Python's own message and position
    except SyntaxError as exc:
        result.findings.append(Finding(path, exc.lineno or 1, exc.offset or 1, "syntax-error",
                                       f"not parsed, not touched: {exc.msg}"))
        return result
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        result.findings.append(Finding(path, 1, 1, "syntax-error",
                                       f"not parsed, not touched: {exc}"))
        return result
    lines = split_lines(source)
    try:
        facts = scan(tree)
        result.findings = [Finding(path, n.line, n.col, n.kind, n.message)
                           for n in find(tree, facts, lines)]
        new_source, changes = rewrite_parts(tree, facts, lines)
    except PartSyntaxError as exc:
        result.findings.append(Finding(path, exc.line, exc.col, "syntax-error",
                                       "LibCST cannot parse it; not touched: " + exc.message))
        return result
    except RecursionError:
        result.findings.append(Finding(path, 1, 1, "syntax-error", "nested too deeply for "
                                       "the codemod; not touched"))
        return result
    if new_source is not None:
        result.new_source = new_source
        result.rewrites = [Rewrite(path, c.line, c.col, c.old, c.new) for c in changes]
    return result


def _oversized(size: int, max_bytes: int) -> str:
    return (f"{size} bytes, over --max-bytes {max_bytes}: not parsed, not rewritten (a "
            "generated or vendored file? raise --max-bytes to include it)")


def run_codemod(paths: Iterable[str | Path], write: bool = False,
                max_bytes: int = DEFAULT_MAX_BYTES) -> CodemodReport:
    """Rewrite every Python file under ``paths`` (``write=False``: compute only). Skipped with
    a reason: notebooks, files that are not UTF-8, symlinks and anything resolving outside the
    tree given (never written through), and files over ``max_bytes`` that name the class (a
    bound on a generated or vendored file). A missing path is a ``ConfigError``."""
    require_libcst()
    if max_bytes < 1:
        raise ConfigError(f"max_bytes must be at least 1, not {max_bytes}")
    given = [Path(p) for p in paths]
    for path in given:
        if not path.exists() and not path.is_symlink():
            raise ConfigError(f"no such file or folder: {path}")
    report = CodemodReport(write, max_bytes=max_bytes)
    for found in walk(given):
        path = found.path
        if found.reason is not None:
            report.skip(path, found.reason)
            continue
        if path.suffix == ".ipynb":
            report.skip(path, "notebook: not rewritten; change its import cell by hand (or "
                        "convert it with jupytext and run the codemod on the script)")
            continue
        if path.suffix not in (".py", ".pyi"):
            report.skip(path, "not a Python file")
            continue
        try:
            raw, seen = read_file(path, found.root)
        except Unsafe as exc:
            report.skip(path, str(exc))
            continue
        bom = raw.startswith(b"\xef\xbb\xbf")  # kept on write; LibCST reads the text after it
        if len(raw) > max_bytes:
            if any(n.encode() in raw for n in NEEDLES):
                report.skip(path, _oversized(len(raw), max_bytes))
            continue
        try:
            source = raw[3:].decode("utf-8") if bom else raw.decode("utf-8")
        except UnicodeDecodeError:
            report.skip(path, "not UTF-8: not read")
            continue
        result = codemod_source(source, str(path))
        report.files.append(result)
        if write and result.changed:
            try:
                write_file(path, found.root, (b"\xef\xbb\xbf" if bom else b"")
                           + result.new_source.encode("utf-8"), seen)
            except Unsafe as exc:
                report.skip(path, str(exc))
                continue
            report.written.append(str(path))
    return report
