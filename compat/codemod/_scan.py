"""One pass of Python's own parser over a file: the facts both the report and the rewrite
need (which names bind the class or its modules, which names are used). ``ast`` is a C parser
with a node per construct and LibCST a Python one with a node per token; reading the whole
file with ``ast`` and handing LibCST only the statements that mention the legacy names is what
keeps a large file from costing a LibCST pass over every line of it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from compat.codemod._names import (
    FACADE_MODULE, SOURCE_MODULES, TAKEN_OVER, is_source_or_parent, qualified_class,
)

__all__ = ["NEEDLES", "Scan", "col", "dotted", "mentions", "scan", "split_lines"]

# a file (or a top-level statement) that contains none of these cannot be rewritten and holds
# nothing to report: the class names (legacy and facade), the source modules' root package
# (a module import or a star import names no class)
NEEDLES = tuple(sorted({*TAKEN_OVER, *TAKEN_OVER.values(),
                        *{m.split(".")[0] for m in SOURCE_MODULES}}))
_NEEDLE = re.compile("|".join(re.escape(n) for n in NEEDLES))
_LINE_END = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def mentions(text: str) -> bool:
    """Whether ``text`` names the class or its modules (the cheap pre-check)."""
    return _NEEDLE.search(text) is not None


def split_lines(source: str) -> list[str]:
    """The lines as Python counts them (``\\n``, ``\\r\\n`` or ``\\r``), ends kept."""
    lines = _LINE_END.split(source)
    return lines[:-1] if lines and lines[-1] == "" else lines


def col(lines: list[str], line: int, offset: int) -> int:
    """A 1-based column in characters from ``ast``'s 0-based offset in UTF-8 bytes."""
    if not 1 <= line <= len(lines):
        return offset + 1
    return len(lines[line - 1].encode("utf-8")[:offset].decode("utf-8", "ignore")) + 1


def dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for a pure attribute chain of names, else ``None``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head is not None else None
    return None




@dataclass
class Scan:
    """What one walk of the module found."""

    bindings: dict[str, str] = field(default_factory=dict)  # name -> classic module (parent)
    classes: set[str] = field(default_factory=set)  # bare names bound to the class
    others: set[str] = field(default_factory=set)  # names some other import binds too
    facade_module: bool = False  # ``import compat`` somewhere
    facade_module_top: bool = False  # ``import compat`` at module level
    used: set[str] = field(default_factory=set)  # names used outside imports, after the swap


def _imports(found: Scan, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == FACADE_MODULE and alias.asname is None:
                found.facade_module = True
            if is_source_or_parent(alias.name):
                bound = alias.asname or alias.name.split(".")[0]
                found.bindings[bound] = alias.name if alias.asname else bound
        return
    if node.level or node.module is None:
        return
    for alias in node.names:
        if alias.name == "*":
            continue
        bound = alias.asname or alias.name
        if ((node.module in SOURCE_MODULES and alias.name in TAKEN_OVER)
                or (node.module == FACADE_MODULE and alias.name in TAKEN_OVER.values())):
            found.classes.add(bound)
        else:
            found.others.add(bound)
        if is_source_or_parent(f"{node.module}.{alias.name}"):
            found.bindings[bound] = f"{node.module}.{alias.name}"


def scan(tree: ast.Module) -> Scan:
    """Imports, and the names used outside them (as LibCST's pass 2 counts them: every name
    but an attribute's or a keyword's, and not the module name of a rewritten chain)."""
    found = Scan()
    found.facade_module_top = any(
        isinstance(s, ast.Import) and any(a.name == FACADE_MODULE and a.asname is None
                                          for a in s.names) for s in tree.body)
    names: list[ast.Name] = []
    chains: list[ast.Attribute] = []
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Name:
            names.append(node)  # type: ignore[arg-type]
        elif kind is ast.Attribute:
            if node.attr in TAKEN_OVER:  # type: ignore[attr-defined]
                chains.append(node)  # type: ignore[arg-type]
        elif kind is ast.Import or kind is ast.ImportFrom:
            _imports(found, node)  # type: ignore[arg-type]
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            found.used.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.arg:
            found.used.add(node.arg)  # type: ignore[attr-defined]
        elif kind is ast.Global or kind is ast.Nonlocal:
            found.used.update(node.names)  # type: ignore[attr-defined]
        elif kind in (ast.ExceptHandler, ast.MatchAs, ast.MatchStar):
            if node.name:  # type: ignore[attr-defined]
                found.used.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.MatchMapping and node.rest:  # type: ignore[attr-defined]
            found.used.add(node.rest)  # type: ignore[attr-defined]
    swapped: set[int] = set()  # the head name of each chain the rewrite replaces
    for chain in chains:
        if qualified_class(dotted(chain), found.bindings) is not None:
            head: ast.expr = chain
            while isinstance(head, ast.Attribute):
                head = head.value
            swapped.add(id(head))
    found.used.update(n.id for n in names if id(n) not in swapped)
    return found
