"""What the codemod reports but cannot fix by itself: call sites that will need a thread id on a
persistent store, keywords the facade refuses, star imports. Read from the original file (the
positions are the user's), scope-blind on purpose: a report may over-warn, never rewrite."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from compat.codemod._names import (
    FACADE_MODULE, IN_MEMORY_HISTORIES, SOURCE_MODULES, TAKEN_OVER, accepted_keywords,
    keyword_hint, sql_history,
)
from compat.codemod._rewrite import dotted, module_bindings, qualified_class

__all__ = ["Note", "find"]

_CALLS = ("save_context", "asave_context", "load_memory_variables", "aload_memory_variables")


@dataclass(frozen=True)
class Note:
    """One finding, 1-based line and column."""

    line: int
    col: int
    kind: str  # "thread-id" | "needs-store" | "refused-keyword" | "star-import"
    message: str


@dataclass(frozen=True)
class _Memory:
    """A memory built in this file without a thread id on a store that may be persistent."""

    thread_key: str
    where: str


def _literal(node: cst.BaseExpression) -> object:
    """The value of a literal expression, or ``...`` when it is not one."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Name)):
        try:
            return ast.literal_eval(cst.Module(body=[]).code_for_node(node))
        except (ValueError, SyntaxError):
            return ...
    return ...


def _kw(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


class _Find(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, bindings: dict[str, str]) -> None:
        super().__init__()
        self.bindings = bindings
        self.classes: set[str] = set()  # bare names bound to the class (classic or facade)
        self.others: set[str] = set()  # names some other import binds too: ambiguous, skipped
        self.calls: dict[str, str] = {}  # variable -> the class name its last call built
        self.memories: dict[str, _Memory] = {}
        self.notes: list[Note] = []
        self.has_facade_module = False

    def _note(self, node: cst.CSTNode, kind: str, message: str) -> None:
        pos = self.get_metadata(PositionProvider, node).start
        self.notes.append(Note(pos.line, pos.column + 1, kind, message))

    # -- what names the class ----------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        if any(dotted(a.name) == FACADE_MODULE and a.asname is None for a in node.names):
            self.has_facade_module = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted(node.module)
        if node.relative or module is None:
            return
        if isinstance(node.names, cst.ImportStar):
            if module in SOURCE_MODULES:
                self._note(node, "star-import", f"'from {module} import *' is not rewritten: "
                           "import the names you use, and the summary memory from memshift: "
                           "from compat import SummaryMemory as ConversationSummaryBufferMemory")
            return
        for alias in node.names:
            name = dotted(alias.name)
            bound = dotted(alias.asname.name if alias.asname else alias.name)
            if ((module in SOURCE_MODULES and name in TAKEN_OVER)
                    or (module == FACADE_MODULE and name in TAKEN_OVER.values())):
                self.classes.add(bound or "")
            else:
                self.others.add(bound or "")

    def _is_class(self, func: cst.BaseExpression) -> bool:
        chain = dotted(func)
        if chain in self.classes:
            return chain not in self.others
        if self.has_facade_module and chain in {f"{FACADE_MODULE}.{n}" for n in TAKEN_OVER.values()}:
            return True
        return qualified_class(chain, self.bindings) is not None

    # -- constructors and the calls on what they built ---------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if self._is_class(node.func):
            self._constructor(node)
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _CALLS:
            memory = self.memories.get(cst.Module(body=[]).code_for_node(func.value))
            if memory is not None:
                self._inputs(node, func.attr.value, memory)

    def _history_class(self, value: cst.BaseExpression | None) -> str | None:
        if isinstance(value, cst.Call):
            return (dotted(value.func) or "").rpartition(".")[2] or None
        if isinstance(value, cst.Name):
            return self.calls.get(value.value)
        return None

    def _constructor(self, call: cst.Call) -> _Memory | None:
        """Report a constructor call; the memory it builds, if it will need thread ids."""
        accepted = accepted_keywords()
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value not in accepted:
                name = arg.keyword.value
                self._note(arg, "refused-keyword", f"'{name}' is refused by SummaryMemory "
                           f"(UnknownArgumentError at construction): {keyword_hint(name)}")
        if _kw(call, "thread_id") is not None:
            return None
        key = _literal(_kw(call, "thread_key") or cst.SimpleString('"thread_id"'))
        thread_key = key if isinstance(key, str) else "thread_id"
        store_node = _kw(call, "store")
        store = _literal(store_node) if store_node is not None else None
        history = self._history_class(_kw(call, "chat_memory"))
        if history is not None and history not in IN_MEMORY_HISTORIES:
            self._note(call, "thread-id", f"chat_memory={history}(...) is persistent: memshift "
                       "keys this memory's thread by the history's session_id (a file history: "
                       "its path); one history per conversation keeps stock's behaviour, a "
                       f"history shared by conversations needs inputs[{thread_key!r}] or "
                       "memory.for_thread(tid)")
            if store_node is None and not sql_history(history):
                self._note(call, "needs-store", f"chat_memory={history}(...) outlives the "
                           "process but no store= is named: SummaryMemory raises ConfigError; "
                           "add store='sqlite:///memshift.db' or 'postgresql://...' (or set "
                           "MEMSHIFT_STORE)")
            return None
        if store_node is None or store in ("memory", None, ""):
            return None
        where = repr(store) if store is not ... else cst.Module(body=[]).code_for_node(store_node)
        maybe = "" if store is not ... else " (if it names a persistent store)"
        self._note(call, "thread-id", f"SummaryMemory on store={where}{maybe} with no thread "
                   f"id: every load_memory_variables/save_context call needs "
                   f"inputs[{thread_key!r}], or bind one (memory.for_thread(tid) or "
                   "thread_id=...); else ThreadIdRequired")
        return _Memory(thread_key, where)

    def _inputs(self, call: cst.Call, method: str, memory: _Memory) -> None:
        inputs = _kw(call, "inputs")
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if inputs is None and positional:
            inputs = positional[0].value
        keys: set[object] | None = None
        if isinstance(inputs, cst.Dict):
            if any(isinstance(e, cst.StarredDictElement) for e in inputs.elements):
                return  # ``{**base, ...}``: cannot tell
            keys = {_literal(e.key) for e in inputs.elements if isinstance(e, cst.DictElement)}
        elif isinstance(inputs, cst.Call) and dotted(inputs.func) == "dict":
            keys = {a.keyword.value for a in inputs.args if a.keyword is not None}
        if keys is not None and memory.thread_key in keys:
            return
        what = "have no" if keys is not None else "may lack (check that they carry)"
        self._note(call, "thread-id", f"{method}: the inputs {what} {memory.thread_key!r} and "
                   f"the memory is on store={memory.where}: ThreadIdRequired at run time")

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._bind([t.target for t in original_node.targets], original_node.value)

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        if original_node.value is not None:
            self._bind([original_node.target], original_node.value)

    def _bind(self, targets: list[cst.BaseExpression], value: cst.BaseExpression) -> None:
        for target in targets:
            name = cst.Module(body=[]).code_for_node(target)
            self.memories.pop(name, None)
            self.calls.pop(name, None)
            if isinstance(value, cst.Call):
                if self._is_class(value.func):
                    memory = self._quiet_constructor(value)
                    if memory is not None:
                        self.memories[name] = memory
                else:
                    self.calls[name] = (dotted(value.func) or "").rpartition(".")[2]

    def _quiet_constructor(self, call: cst.Call) -> _Memory | None:
        """The memory a constructor builds, without reporting it a second time."""
        notes = list(self.notes)
        memory = self._constructor(call)
        self.notes = notes
        return memory


def find(tree: cst.Module) -> list[Note]:
    """The findings of one parsed module, in source order."""
    finder = _Find(module_bindings(tree))
    MetadataWrapper(tree).visit(finder)
    return sorted(set(finder.notes), key=lambda n: (n.line, n.col, n.kind))
