"""The rewrite: imports of the classic class (and qualified uses through a module import) become
memshift's facade; everything else round-trips byte for byte (LibCST keeps comments,
parentheses and blank lines), so the diff shows only what changed.

Two passes: the first swaps ``from <classic> import C`` aliases and ``<module>.C`` uses; the
second, knowing which module names are still used, drops module imports nothing needs any more
and adds ``import compat`` where the qualified uses came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from compat.codemod._names import (
    FACADE_MODULE, SOURCE_MODULES, TAKEN_OVER, is_source_or_parent, qualified_class,
)

__all__ = ["Change", "dotted", "module_bindings", "rewrite"]


@dataclass(frozen=True)
class Change:
    """One rewrite, at its place in the original file (1-based line and column)."""

    line: int
    col: int
    old: str
    new: str


def dotted(node: cst.BaseExpression | None) -> str | None:
    """``a.b.c`` for a pure attribute chain of names, else ``None``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head is not None else None
    return None


def module_bindings(tree: cst.Module) -> dict[str, str]:
    """Names bound to a classic module or one of its parents: ``import a.b`` binds ``a``,
    ``import a.b as x`` binds ``x`` to ``a.b``, ``from a import b`` binds ``b`` to ``a.b``."""
    found: dict[str, str] = {}

    class Bindings(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            for alias in node.names:
                name = dotted(alias.name) or ""
                if not is_source_or_parent(name):
                    continue
                if alias.asname is not None:
                    found[dotted(alias.asname.name) or ""] = name
                else:
                    found[name.split(".")[0]] = name.split(".")[0]

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            base = dotted(node.module)
            if node.relative or base is None or isinstance(node.names, cst.ImportStar):
                return
            for alias in node.names:
                name = f"{base}.{dotted(alias.name)}"
                if is_source_or_parent(name):
                    bound = alias.asname.name if alias.asname else alias.name
                    found[dotted(bound) or ""] = name

    tree.visit(Bindings())
    return found




def _facade_import(aliases: Sequence[tuple[str, str]]) -> cst.ImportFrom:
    """``from compat import SummaryMemory as Name`` (one alias per taken-over name)."""
    names = [cst.ImportAlias(name=cst.Name(target), asname=cst.AsName(name=cst.Name(bound)))
             for target, bound in aliases]
    names = [n.with_changes(comma=cst.MaybeSentinel.DEFAULT) for n in names]
    return cst.ImportFrom(module=cst.Name(FACADE_MODULE), names=names)


_FACADE_IMPORT = cst.Import(names=[cst.ImportAlias(name=cst.Name(FACADE_MODULE))])


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class _Swap(cst.CSTTransformer):
    """Pass 1: facade imports for the classic class; ``module.Class`` -> ``compat.Facade``."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, bindings: dict[str, str]) -> None:
        super().__init__()
        self.bindings = bindings
        self.changes: list[Change] = []
        self.suppliers: set[str] = set()  # module names a qualified use came through
        self._after: list[cst.ImportFrom] = []
        self.imports: dict[str, list[tuple[int, int]]] = {}  # import text -> its places
        self.offset = 0  # lines before the part of the file being visited

    def _change(self, node: cst.CSTNode, new: str) -> None:
        pos = self.get_metadata(PositionProvider, node).start
        self.changes.append(Change(pos.line + self.offset, pos.column + 1, _code(node).strip(),
                                   new))

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        cls = qualified_class(dotted(original_node), self.bindings)
        if cls is None:
            return updated_node
        self.suppliers.add((dotted(original_node) or "").split(".")[0])
        new = cst.Attribute(value=cst.Name(FACADE_MODULE), attr=cst.Name(TAKEN_OVER[cls]))
        self._change(original_node, _code(new))
        return new

    def leave_ImportFrom(self, original_node: cst.ImportFrom,
                         updated_node: cst.ImportFrom) -> cst.ImportFrom:
        module = dotted(updated_node.module)
        if (updated_node.relative or module not in SOURCE_MODULES
                or isinstance(updated_node.names, cst.ImportStar)):
            return updated_node
        names = list(updated_node.names)
        taken = [a for a in names if dotted(a.name) in TAKEN_OVER]
        if not taken:
            return updated_node
        facade = _facade_import([(TAKEN_OVER[dotted(a.name) or ""],
                                  dotted(a.asname.name if a.asname else a.name) or "")
                                 for a in taken])
        rest = [a for a in names if a not in taken]
        if not rest:
            self._change(original_node, _code(facade).strip())
            return facade
        if names[-1] in taken:  # the new last name ends as the old last one did
            rest[-1] = rest[-1].with_changes(comma=names[-1].comma)
        kept = updated_node.with_changes(names=rest)
        self._after.append(facade)
        self._change(original_node, f"{_code(kept).strip()}\n{_code(facade).strip()}")
        return kept

    def visit_Import(self, node: cst.Import) -> None:
        self._where(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._where(node)

    def _where(self, node: cst.Import | cst.ImportFrom) -> None:
        """Where each import statement is, for pass 2's changes (same text, same place)."""
        pos = self.get_metadata(PositionProvider, node).start
        self.imports.setdefault(_code(node).strip(), []).append((pos.line + self.offset,
                                                                 pos.column + 1))

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> Any:
        if not self._after:
            return updated_node
        after = [cst.SimpleStatementLine(body=[imp]) for imp in self._after]
        self._after = []
        return cst.FlattenSentinel([updated_node, *after])

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite,
                                   updated_node: cst.SimpleStatementSuite
                                   ) -> cst.SimpleStatementSuite:
        """``if x: from … import A, C``: the facade import joins the same line."""
        if not self._after:
            return updated_node
        body = [*updated_node.body[:-1],
                updated_node.body[-1].with_changes(semicolon=cst.Semicolon(
                    whitespace_after=cst.SimpleWhitespace(" "))), *self._after]
        self._after = []
        return updated_node.with_changes(body=body)


class _Names(cst.CSTVisitor):
    """Every name used outside import statements."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``x.memory`` does not use a name ``memory``
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # nor does ``f(memory=...)``
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.used.add(node.value)


def _has_facade_module_import(tree: cst.Module) -> bool:
    for statement in tree.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(
                        dotted(a.name) == FACADE_MODULE and a.asname is None for a in small.names):
                    return True
    return False


class _Tidy(cst.CSTTransformer):
    """Pass 2: drop the module imports that only supplied rewritten uses; add ``import compat``
    where each of them was (once at module level), so every scope that had the module name
    has the facade's."""

    def __init__(self, suppliers: set[str], used: set[str], need_facade: bool,
                 where: dict[str, list[tuple[int, int]]]) -> None:
        super().__init__()
        self.unused = suppliers - used
        self.suppliers = suppliers
        self.need_facade = need_facade
        self.where = where
        self.changes: list[Change] = []
        self.depth = 0  # inside a def, class, if or try: each supplier there gets its own

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.depth += 1

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        self.depth -= 1
        return updated_node

    def _record(self, old: cst.CSTNode, new: str) -> None:
        places = self.where.get(_code(old).strip()) or [(0, 0)]
        line, col = places.pop(0) if len(places) > 1 else places[0]  # in source order
        self.changes.append(Change(line, col, _code(old).strip(), new))

    def _bound(self, alias: cst.ImportAlias, from_import: bool) -> str:
        if alias.asname is not None:
            return dotted(alias.asname.name) or ""
        name = dotted(alias.name) or ""
        return name if from_import else name.split(".")[0]

    def _body(self, smalls: Sequence[cst.BaseSmallStatement], nested: bool
              ) -> tuple[list[cst.BaseSmallStatement], bool]:
        """The statements with unused supplier aliases dropped, and whether an ``import
        compat`` must follow them."""
        body: list[cst.BaseSmallStatement] = []
        add = False
        for small in smalls:
            if not isinstance(small, (cst.Import, cst.ImportFrom)) or isinstance(
                    small.names, cst.ImportStar):
                body.append(small)
                continue
            aliases = list(small.names)
            from_import = isinstance(small, cst.ImportFrom)
            bound = [self._bound(a, from_import) for a in aliases]
            if not any(b in self.suppliers for b in bound):
                body.append(small)
                continue
            keep = [a for a, b in zip(aliases, bound) if b not in self.unused]
            facade = self.need_facade
            if not nested:  # one ``import compat`` at module level is enough
                self.need_facade = False
            if keep:
                if aliases[-1] not in keep:
                    keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                kept = small.with_changes(names=keep)
                body.append(kept)
                add = add or facade
                if facade or len(keep) < len(aliases):
                    self._record(small, _code(kept).strip()
                                 + (f"\nimport {FACADE_MODULE}" if facade else ""))
            elif facade:
                body.append(_FACADE_IMPORT)
                self._record(small, f"import {FACADE_MODULE}")
            else:
                self._record(small, "")
        return body, add

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> Any:
        body, add = self._body(updated_node.body, self.depth > 0)
        if not body:
            return cst.RemoveFromParent()
        line = updated_node.with_changes(body=[
            s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) if i == len(body) - 1 else s
            for i, s in enumerate(body)])
        if not add:
            return line
        return cst.FlattenSentinel([line, cst.SimpleStatementLine(body=[_FACADE_IMPORT])])

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite,
                                   updated_node: cst.SimpleStatementSuite) -> Any:
        body, add = self._body(updated_node.body, True)  # ``if x: import …`` is nested
        body = body + [_FACADE_IMPORT] if add else body
        if not body:
            body = [cst.Pass()]
        return updated_node.with_changes(body=[
            s.with_changes(semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" ")))
            if i < len(body) - 1 else s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            for i, s in enumerate(body)])


@dataclass
class Rewritten:
    """The rewritten module and what changed."""

    tree: cst.Module
    changes: list[Change] = field(default_factory=list)


def rewrite(tree: cst.Module) -> Rewritten:
    """Both passes over a parsed module."""
    bindings = module_bindings(tree)
    swap = _Swap(bindings)
    swapped = MetadataWrapper(tree).visit(swap)
    if not swap.suppliers:
        return Rewritten(swapped, swap.changes)
    names = _Names()
    swapped.visit(names)
    tidy = _Tidy(swap.suppliers, names.used, not _has_facade_module_import(swapped),
                 swap.imports)
    tree = swapped.visit(tidy)
    changes = sorted(swap.changes + tidy.changes, key=lambda c: (c.line, c.col))
    return Rewritten(tree, changes)
