"""The shape of the code, checked: no import circles (lazy imports included), dependencies that
point one way (``compat`` → ``adapters`` → LangChain; the library never imports its CLI), one
engine protocol every engine implements, and a facade that stays small."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compat", "adapters")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks: types only, never run."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module of ours that ``name`` imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _within(graph: dict[str, set[str]], prefix: str) -> dict[str, set[str]]:
    """The graph of ``prefix``'s modules, a package's ``__init__`` standing for its own name
    only when another module imports the package itself."""
    return {k: {v for v in vs if v.startswith(prefix)} for k, vs in graph.items()
            if k.startswith(prefix)}


def test_no_import_circles_in_compat_or_adapters() -> None:
    graph = _graph()
    for prefix in PACKAGES:
        assert _cycles(_within(graph, prefix)) == [], f"import circles in {prefix}"


def test_adapters_never_import_compat_and_the_library_never_imports_its_cli() -> None:
    graph = _graph()
    upward = {m: sorted(v for v in vs if v.startswith("compat"))
              for m, vs in graph.items() if m.startswith("adapters")}
    assert {m: v for m, v in upward.items() if v} == {}
    library = {m: sorted(v for v in vs if v.startswith("compat.cli"))
               for m, vs in graph.items()
               if m.startswith("compat") and not m.startswith(("compat.cli", "compat.__main__"))}
    assert {m: v for m, v in library.items() if v} == {}


def test_compat_is_split_by_job() -> None:
    root = [p for p in (ROOT / "compat").glob("*.py")]
    assert len(root) <= 20, sorted(p.name for p in root)
    for package in ("cli", "report", "testing"):
        assert (ROOT / "compat" / package / "__init__.py").exists()
    assert not list((ROOT / "compat").glob("*cli*.py")), "CLI modules outside compat/cli"
    assert not list((ROOT / "compat").glob("*report*.py")), "report modules outside compat/report"


@pytest.mark.parametrize("kind", ["memory", "classic", "shadow", "staged"])
def test_every_engine_implements_the_whole_protocol(kind: str) -> None:
    from adapters.protocol import Engine
    from compat import SummaryMemory

    memory = SummaryMemory(backend=kind if kind != "memory" else "classic")
    engines = [memory.backend_impl, *memory.backend_impl.leaves()]
    required = {name for name, member in inspect.getmembers(Engine)
                if getattr(member, "__isabstractmethod__", False)}
    for engine in engines:
        assert isinstance(engine, Engine)
        missing = {n for n in required if getattr(type(engine), n).__qualname__.startswith(
            "Engine.")}
        assert not missing, f"{type(engine).__name__} lacks {missing}"
        for name in ("load", "aload", "save", "asave", "clear", "aclear", "prune", "aprune",
                     "restore", "arestore", "locate", "claim", "place", "close"):
            assert callable(getattr(engine, name))
    memory.close()


# What a namedtuple / SQLAlchemy ``Row`` offers under an underscore: their public API.
_PUBLIC_UNDERSCORES = frozenset({"_replace", "_asdict", "_fields", "_make", "_mapping"})


def _underscore_reaches(path: Path) -> list[tuple[int, str]]:
    """``<name>._x`` and ``<a>.<b>._x`` where the receiver is not ``self``/``cls``, an imported
    module or name, a module-private object (``_WORKERS._reset``: the module's own), or a
    fresh instance a classmethod just built (``built = cls(...)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    built: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            root = func.value if isinstance(func, ast.Attribute) else func
            if isinstance(root, ast.Name) and root.id == "cls":
                built.update(t.id for t in node.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or \
                node.attr.startswith("__") or node.attr in _PUBLIC_UNDERSCORES:
            continue
        receiver = node.value
        if isinstance(receiver, ast.Name):
            name = receiver.id
            if name in ("self", "cls") or name in imported or name in built or \
                    name.startswith("_"):
                continue
            found.append((node.lineno, f"{name}.{node.attr}"))
        elif isinstance(receiver, ast.Attribute):  # self.placer._hints, engine.store._x
            found.append((node.lineno, f"….{receiver.attr}.{node.attr}"))
    return found


def test_no_module_reaches_into_another_classes_underscore_members() -> None:
    """``engine._x``, ``memory._x``, ``bound._x``, ``self.placer._x``… outside the class that
    owns them. ``adapters._upstream`` is exempt: reaching into LangChain's and LangGraph's
    privates is its whole job (and every such touch is spy-tested there)."""
    import re

    pattern = re.compile(r"\b(engine|primary|candidate|inner|memory|leaf|side|router)\._[a-z]")
    offenders = []
    for name, path in _modules().items():
        if name in ("compat.memory",):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not line.lstrip().startswith("#"):
                offenders.append(f"{name}:{number}: {line.strip()}")
        if name == "adapters._upstream" or name.startswith("adapters._upstream."):
            continue
        offenders += [f"{name}:{number}: {what}" for number, what in _underscore_reaches(path)]
    assert offenders == []


def test_the_underscore_check_sees_a_bound_copy() -> None:
    """The check above catches what it was written for (a copy of another object written
    through its underscores), and leaves alone what is fine."""
    import tempfile

    source = ("import os\nclass A:\n    @classmethod\n    def make(cls):\n"
              "        built = cls()\n        built._x = 1\n        return built\n"
              "    def f(self, row):\n        bound = copy(self)\n        bound._fold = None\n"
              "        self.placer._hints.clear()\n        os._exit\n"
              "        return row._mapping, _SINGLETON._reset, self._y\n")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    try:
        found = [what for _, what in _underscore_reaches(Path(handle.name))]
    finally:
        Path(handle.name).unlink()
    assert found == ["bound._fold", "….placer._hints"]


MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    """A module over 400 lines does more than one job: split it along a seam (a module or a
    package per job), never into arbitrary halves."""
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def _name_dispatches(path: Path) -> list[str]:
    """``getattr(obj, <not a literal>)`` calls: a method chosen by a string at run time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) >= 2
            and not isinstance(node.args[1], ast.Constant)]


def test_engine_operations_are_called_not_dispatched_by_name() -> None:
    """The router every call passes through calls each side's operation explicitly (a reader
    and an IDE can follow it): no ``getattr(self.engines[...], op)`` anywhere, and no
    ``getattr`` with a computed name in the staged engine and its placement modules."""
    routing = [p for p in (ROOT / "adapters").glob("*.py")
               if p.stem == "staged" or p.stem.startswith(("staged_", "placement"))]
    assert {p.stem for p in routing} >= {"staged", "placement", "placement_guard"}
    assert [hit for path in routing for hit in _name_dispatches(path)] == []
    spelled = [name for name, path in _modules().items()
               if "getattr(self.engines" in path.read_text(encoding="utf-8")]
    assert spelled == []


def test_the_facade_is_small() -> None:
    from langchain_classic.base_memory import BaseMemory

    from compat import SummaryMemory

    base = set(dir(BaseMemory))
    public = [n for n in dir(SummaryMemory) if not n.startswith("_") and n not in base
              and n not in SummaryMemory.model_fields]
    methods = [n for n in public if not isinstance(inspect.getattr_static(SummaryMemory, n),
                                                   property)]
    assert len(methods) <= 20, sorted(methods)  # forget/arelease live in compat.admin
    lines = (ROOT / "compat" / "memory.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"compat/memory.py has {lines} lines"
