"""What the codemod reports but cannot fix by itself: call sites that will need a thread id on a
persistent store, keywords the facade refuses, star imports. Read from the original file (the
positions are the user's) with Python's own ``ast`` (one fast pass, any file size);
scope-blind on purpose: a report may over-warn, never rewrite.

Thread ids. A memory on a persistent store with no thread id raises ``ThreadIdRequired`` at
its first call, and a memory built with no ``store=`` is on one as soon as ``MEMSHIFT_STORE``
is set in a deployment: so every construction with no ``thread_id=`` whose uses in the file
(``save_context``/``load_memory_variables``, a chain built with ``memory=``) do not all carry
the thread key is named, with the fix."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from compat.codemod._names import (
    FACADE_MODULE, IN_MEMORY_HISTORIES, SOURCE_MODULES, TAKEN_OVER, accepted_keywords,
    keyword_hint, qualified_class, sql_history,
)
from compat.codemod._scan import Scan, col, dotted

__all__ = ["Note", "find"]

_CALLS = ("save_context", "asave_context", "load_memory_variables", "aload_memory_variables")
# what a chain holding the memory is called with (its inputs reach the memory)
_CHAIN_CALLS = ("invoke", "ainvoke", "run", "arun", "predict", "apredict", "acall", "stream",
                "astream", "__call__")
_FACADES = {f"{FACADE_MODULE}.{n}" for n in TAKEN_OVER.values()}


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


@dataclass
class _Built:
    """A memory built with no ``store=`` and no ``thread_id=``: on ``MEMSHIFT_STORE``'s store
    in a deployment. ``uses``: (line, whether the inputs carry the thread key; None: unknown)."""

    node: ast.Call
    thread_key: str
    uses: list[tuple[int, bool | None]] = field(default_factory=list)
    bound: bool = False  # ``.for_thread(...)`` seen: its calls go through a bound memory


def _literal(node: ast.expr | None) -> object:
    """The value of a literal expression, or ``...`` when it is not one."""
    return node.value if isinstance(node, ast.Constant) else ...


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    for arg in call.keywords:
        if arg.arg == name:
            return arg.value
    return None


def _keys(call: ast.Call, keywords: bool) -> set[object] | None:
    """The keys the call's inputs hold (its first positional or ``inputs=`` dict; with
    ``keywords``, a chain's ``predict(input=..., thread_id=...)`` too); ``None``: cannot tell;
    ``...`` for ``{**base, ...}``, which the persistent-store check leaves alone."""
    inputs = _kw(call, "inputs")
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if inputs is None and positional:
        inputs = positional[0]
    if inputs is None and keywords and call.keywords and not call.args:
        if any(k.arg is None for k in call.keywords):
            return None
        return {k.arg for k in call.keywords}
    if isinstance(inputs, ast.Dict):
        if any(k is None for k in inputs.keys):
            return ...  # type: ignore[return-value]
        return {_literal(k) for k in inputs.keys}
    if isinstance(inputs, ast.Call) and dotted(inputs.func) == "dict":
        return {k.arg for k in inputs.keywords if k.arg is not None}
    return None


class _Find(ast.NodeVisitor):
    def __init__(self, facts: Scan, lines: list[str]) -> None:
        super().__init__()
        self.facts = facts
        self.lines = lines
        self.calls: dict[str, str] = {}  # variable -> the class name its last call built
        self.memories: dict[str, _Memory] = {}  # variable -> a memory on a persistent store
        self.built: dict[int, _Memory | _Built] = {}  # constructor call -> what it built
        self.plain: dict[str, _Built] = {}  # variable -> a memory with no store, no thread
        self.chains: dict[str, _Built] = {}  # variable -> a chain holding such a memory
        self.every_plain: list[_Built] = []
        self.notes: list[Note] = []

    def _note(self, node: ast.expr | ast.stmt | ast.keyword, kind: str, message: str) -> None:
        self.notes.append(Note(node.lineno, col(self.lines, node.lineno, node.col_offset),
                               kind, message))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (not node.level and node.module in SOURCE_MODULES
                and any(a.name == "*" for a in node.names)):
            self._note(node, "star-import", f"'from {node.module} import *' is not rewritten: "
                       "import the names you use, and the summary memory from memshift: "
                       "from compat import SummaryMemory as ConversationSummaryBufferMemory")

    def _is_class(self, func: ast.expr) -> bool:
        chain = dotted(func)
        if chain in self.facts.classes:
            return chain not in self.facts.others
        if self.facts.facade_module and chain in _FACADES:
            return True
        return qualified_class(chain, self.facts.bindings) is not None

    # -- constructors and the calls on what they built ---------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        if self._is_class(node.func):
            built = self._constructor(node)
            if built is not None:
                self.built[id(node)] = built
            self.generic_visit(node)
        else:  # inner calls first: ``Chain(memory=SummaryMemory())`` needs the inner one
            self.generic_visit(node)
            self._use(node)

    def _use(self, node: ast.Call) -> None:
        func = node.func
        memory = _kw(node, "memory")
        if memory is not None:  # a chain built on a memory: its calls are the memory's
            held = (self.built.get(id(memory)) if isinstance(memory, ast.Call)
                    else self.plain.get(ast.unparse(memory)))
            if isinstance(held, _Built):
                self.built[id(node)] = held
        receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else None
        method = func.attr if isinstance(func, ast.Attribute) else None
        if receiver is None and isinstance(func, ast.Name) and func.id in self.chains:
            receiver, method = func.id, "__call__"
        if receiver is None or method is None:
            return
        if method in _CALLS:
            persistent = self.memories.get(receiver)
            if persistent is not None:
                self._inputs(node, method, persistent)
        plain = self.plain.get(receiver)
        if plain is not None and method == "for_thread":
            plain.bound = True
        elif plain is not None and method in _CALLS:
            plain.uses.append((node.lineno, self._carries(node, plain.thread_key, False)))
        chain = self.chains.get(receiver)
        if chain is not None and method in _CHAIN_CALLS:
            chain.uses.append((node.lineno, self._carries(node, chain.thread_key, True)))

    @staticmethod
    def _carries(call: ast.Call, key: str, keywords: bool) -> bool | None:
        keys = _keys(call, keywords)
        return None if keys is None or keys is ... else key in keys

    def _history_class(self, value: ast.expr | None) -> str | None:
        if isinstance(value, ast.Call):
            return (dotted(value.func) or "").rpartition(".")[2] or None
        if isinstance(value, ast.Name):
            return self.calls.get(value.id)
        return None

    def _constructor(self, call: ast.Call) -> _Memory | _Built | None:
        """Report a constructor call; what it builds, if that will need thread ids."""
        accepted = accepted_keywords()
        for arg in call.keywords:
            if arg.arg is not None and arg.arg not in accepted:
                self._note(arg, "refused-keyword", f"'{arg.arg}' is refused by SummaryMemory "
                           f"(UnknownArgumentError at construction): {keyword_hint(arg.arg)}")
        if _kw(call, "thread_id") is not None:
            return None
        key = _literal(_kw(call, "thread_key") or ast.Constant("thread_id"))
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
        if store_node is None or store is None:
            if any(k.arg is None for k in call.keywords):
                return None  # ``**settings``: may carry thread_id= or store=; cannot tell
            built = _Built(call, thread_key)
            self.every_plain.append(built)
            return built
        if store in ("memory", ""):
            return None
        where = repr(store) if store is not ... else ast.unparse(store_node)
        maybe = "" if store is not ... else " (if it names a persistent store)"
        self._note(call, "thread-id", f"SummaryMemory on store={where}{maybe} with no thread "
                   f"id: every load_memory_variables/save_context call needs "
                   f"inputs[{thread_key!r}], or bind one (memory.for_thread(tid) or "
                   "thread_id=...); else ThreadIdRequired")
        return _Memory(thread_key, where)

    def _inputs(self, call: ast.Call, method: str, memory: _Memory) -> None:
        keys = _keys(call, False)
        if keys is ... or (keys is not None and memory.thread_key in keys):
            return
        what = "have no" if keys is not None else "may lack (check that they carry)"
        self._note(call, "thread-id", f"{method}: the inputs {what} {memory.thread_key!r} and "
                   f"the memory is on store={memory.where}: ThreadIdRequired at run time")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        self._bind(node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        if node.value is not None:
            self._bind([node.target], node.value)

    def _bind(self, targets: list[ast.expr], value: ast.expr) -> None:
        built = self.built.get(id(value))
        for target in targets:
            name = ast.unparse(target)
            for table in (self.memories, self.calls, self.plain, self.chains):
                table.pop(name, None)  # type: ignore[attr-defined]
            if not isinstance(value, ast.Call):
                continue
            if self._is_class(value.func):
                if isinstance(built, _Memory):
                    self.memories[name] = built
                elif isinstance(built, _Built):
                    self.plain[name] = built
            elif isinstance(built, _Built):
                self.chains[name] = built
            else:
                self.calls[name] = (dotted(value.func) or "").rpartition(".")[2]

    # -- the memories a deployment's MEMSHIFT_STORE turns persistent ----------------------
    def thread_sites(self) -> None:
        """Name each memory built with no thread id whose uses do not all carry one."""
        for built in self.every_plain:
            if built.bound or (built.uses and all(c is True for _, c in built.uses)):
                continue
            key = built.thread_key
            lacking = sorted({line for line, c in built.uses if c is not True})
            if not built.uses:
                seen = "no call in this file carries a thread id"
            elif len(lacking) == 1:
                seen = f"the call on line {lacking[0]} carries none"
            else:
                seen = f"the calls on lines {', '.join(map(str, lacking))} carry none"
            self._note(built.node, "thread-id", f"SummaryMemory built with no thread_id= and "
                       f"no store= ({seen}): with MEMSHIFT_STORE set to a persistent store its "
                       f"first call raises ThreadIdRequired. Fix: thread_id=... for one "
                       f"conversation, memory.for_thread(tid) per conversation, or "
                       f"inputs[{key!r}] in every call (a chain's too)")


def find(tree: ast.Module, facts: Scan, lines: list[str]) -> list[Note]:
    """The findings of one parsed module, in source order."""
    finder = _Find(facts, lines)
    finder.visit(tree)
    finder.thread_sites()
    return sorted(set(finder.notes), key=lambda n: (n.line, n.col, n.kind))
