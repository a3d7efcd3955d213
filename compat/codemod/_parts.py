"""The rewrite applied statement by statement: LibCST parses and walks only the top-level
statements that mention the class or its modules, and everything between them is copied as
it is. A walk of every LibCST node is what made a large file cost seconds per 100 KB; a
statement that names neither the class nor ``langchain`` holds nothing either pass changes
(pass 1 changes imports of the classic modules and ``module.Class`` chains, pass 2 the
imports of those modules), and what pass 2 needs from the whole file (the names still used,
whether ``import compat`` is there) comes from the ``ast`` scan."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper

from compat.codemod._rewrite import Change, _Swap, _Tidy
from compat.codemod._scan import Scan, mentions

__all__ = ["PartSyntaxError", "rewrite_parts"]


class PartSyntaxError(Exception):
    """LibCST cannot parse a statement Python parses (a position in the whole file)."""

    def __init__(self, line: int, col: int, message: str) -> None:
        super().__init__(message)
        self.line, self.col, self.message = line, col, message


@dataclass(frozen=True)
class _Part:
    """Whole lines ``start``..``end`` (1-based, inclusive) holding top-level statements."""

    start: int
    end: int
    text: str


def _parts(tree: ast.Module, lines: list[str]) -> list[_Part]:
    """The top-level statements that mention the legacy names, as runs of whole lines
    (statements sharing a line are one part; a decorated definition starts at its first
    decorator)."""
    spans: list[list[int]] = []
    for statement in tree.body:
        decorators = getattr(statement, "decorator_list", [])
        start = min([statement.lineno, *(d.lineno for d in decorators)])
        end = statement.end_lineno or statement.lineno
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    parts = []
    for start, end in spans:
        text = "".join(lines[start - 1:end])
        if mentions(text):
            parts.append(_Part(start, end, text))
    return parts


def rewrite_parts(tree: ast.Module, facts: Scan, lines: list[str]
                  ) -> tuple[str | None, list[Change]]:
    """The rewritten file and its changes (``None``: nothing to change)."""
    parts = _parts(tree, lines)
    swap = _Swap(dict(facts.bindings))
    modules: list[cst.Module] = []
    touched: list[bool] = []  # per part: did a pass change it
    for part in parts:
        try:
            module = cst.parse_module(part.text)
        except cst.ParserSyntaxError as exc:
            raise PartSyntaxError(part.start - 1 + exc.editor_line, exc.editor_column,
                                  exc.message) from exc
        swap.offset = part.start - 1
        before = len(swap.changes)
        # the module is ours and fresh: no defensive deep copy
        modules.append(MetadataWrapper(module, unsafe_skip_copy=True).visit(swap))
        touched.append(len(swap.changes) > before)
    changes = list(swap.changes)
    if swap.suppliers:
        tidy = _Tidy(swap.suppliers, facts.used, not facts.facade_module_top, swap.imports)
        for index, part in enumerate(parts):
            if "import" in part.text:  # pass 2 changes import statements only
                before = len(tidy.changes)
                modules[index] = modules[index].visit(tidy)
                touched[index] = touched[index] or len(tidy.changes) > before
        changes = sorted(changes + tidy.changes, key=lambda c: (c.line, c.col))
    if not changes:
        return None, []
    out: list[str] = []
    done = 0  # lines copied so far
    for part, module, changed in zip(parts, modules, touched):
        out.append("".join(lines[done:part.start - 1]))
        if not changed:
            out.append(part.text)  # an untouched part: copied
        elif module.body:
            out.append(module.code)
        # else: every statement of the part was removed, and so are its lines
        done = part.end
    out.append("".join(lines[done:]))
    return "".join(out), changes
