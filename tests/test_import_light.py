"""``import compat`` loads the facade, its engines and stores, and nothing else: every app pays
its import on every start, so the migration, replay, admin, report and CLI tools load at their
first use — and still answer under the same public names (PEP 562).

``from compat import SummaryMemory`` replaces ``from langchain_classic.memory import
ConversationSummaryBufferMemory`` and imports what that import did (the real class's module,
with LangChain's runnables and LangSmith, which loads OpenTelemetry when it is installed): the
classic backend's first save then imports no more than a few milliseconds' worth, and builds
no middleware graph (issue 38 item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# memshift modules that are tools beside the memory: never loaded by ``import compat``
FORBIDDEN = ("compat.migration", "compat.migrating", "compat.sources", "compat.admin",
             "compat.replay", "compat.report", "compat.codemod", "compat.rollout",
             "compat.erasure", "compat.doctor", "compat.runlog", "compat.cli",
             "compat.evaluation", "compat.conversations", "compat._rebuild")
# the facade's own modules: what ``import compat`` may load of ``compat``
COMPAT_ALLOWED = {"compat", "compat._guard", "compat._stock", "compat._turns", "compat.config",
                  "compat.memory", "compat._adopt", "compat._engines"}
# what a first save builds (the real classic class, the middleware's graph, the stand-in
# model, SQL stores), never ``import compat``
NOT_AT_IMPORT = ("adapters.backends.classic_memory", "adapters.backends.agent_middleware",
                 "adapters.summarizer_model", "adapters.stores.sql", "adapters.stores.sqlite",
                 "adapters.stores.postgres", "langchain_classic.memory", "langchain.agents",
                 "langgraph.graph", "sqlalchemy", "opentelemetry")
# what ``from compat import SummaryMemory`` imports beyond ``import compat``: the real class's
# module, as the stock import it replaces (and whatever that import loads itself, below)
WITH_THE_NAME = ("langchain_classic.memory",)
# never loaded by a classic memory's first save: the middleware's graph and agents
NOT_ON_CLASSIC = ("adapters.backends.agent_middleware", "langchain.agents", "langgraph.graph")


def _run(code: str) -> dict:
    """``code`` in a fresh interpreter (this checkout first on the path); its last line of
    output is JSON."""
    prelude = f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    out = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={k: v for k, v in __import__("os").environ.items()
                              if not k.startswith(("OTEL_", "MEMSHIFT_"))})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _hits(loaded: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_import_compat_loads_the_facade_only() -> None:
    got = _run("""
        import json, sys
        import compat
        from compat import MemoryPolicy, MemoryView, ConfigError
        print(json.dumps({"modules": sorted(sys.modules)}))
    """)
    loaded = got["modules"]
    ours = [m for m in loaded if m.split(".")[0] in ("compat", "adapters")]
    assert _hits(loaded, FORBIDDEN) == [], f"tools loaded by import compat; all: {ours}"
    assert sorted(m for m in ours if m.startswith("compat") and m not in COMPAT_ALLOWED) == []
    assert _hits(loaded, NOT_AT_IMPORT) == [], f"first-save work done at import; all: {ours}"


def test_the_summary_memory_name_brings_what_the_stock_import_did_and_no_more() -> None:
    """``from compat import SummaryMemory`` loads the real class's module (the stock import it
    replaces paid it at import too); of the first-save work it loads nothing else that
    ``from langchain_classic.memory import ConversationSummaryBufferMemory`` does not load
    itself (LangSmith imports OpenTelemetry's SDK when installed), and none of the tools."""
    stock = _run("""
        import json, sys
        from langchain_classic.memory import ConversationSummaryBufferMemory
        print(json.dumps({"modules": sorted(sys.modules)}))
    """)["modules"]
    got = _run("""
        import json, sys
        from compat import SummaryMemory
        from adapters import telemetry
        print(json.dumps({"modules": sorted(sys.modules), "live": telemetry.TELEMETRY.live()}))
    """)
    loaded = got["modules"]
    assert _hits(loaded, WITH_THE_NAME) == sorted(_hits(stock, WITH_THE_NAME))
    assert _hits(loaded, FORBIDDEN) == [] and got["live"] is False
    extra = sorted(set(_hits(loaded, NOT_AT_IMPORT)) - set(stock))
    assert extra == [], f"first-save work done by the name, beyond the stock import: {extra}"


def test_a_classic_first_save_builds_no_middleware_graph() -> None:
    """A thread no placement names: the guard asks the middleware side whether it holds it,
    a saver lookup (no checkpoint: nothing held), not a graph built to read the state."""
    got = _run("""
        import json, sys
        from compat import SummaryMemory
        memory = SummaryMemory(backend="classic", store="memory")
        memory.save(None, "hi", "there")
        memory.save("t", "q", "a")
        memory.load_memory_variables({})
        print(json.dumps({"modules": sorted(sys.modules),
                          "placement": memory.backend_impl.placement_of("t").backend}))
    """)
    assert _hits(got["modules"], NOT_ON_CLASSIC) == [] and got["placement"] == "classic"


def test_a_save_and_a_load_load_no_tool_either() -> None:
    """The per-turn path needs none of the tools, and with no SDK installed records nothing."""
    got = _run("""
        import json, sys
        from compat import SummaryMemory
        memory = SummaryMemory()
        memory.save(None, "hi", "there")
        memory.load_memory_variables({})
        from adapters import telemetry
        print(json.dumps({"modules": sorted(sys.modules), "live": telemetry.TELEMETRY.live()}))
    """)
    # (OpenTelemetry may be loaded now: langsmith, under the real classic class, imports it)
    assert _hits(got["modules"], FORBIDDEN) == [] and got["live"] is False


def test_every_public_name_still_answers_lazily() -> None:
    got = _run("""
        import json, sys, warnings
        import compat
        before = "compat.admin" in sys.modules
        missing = [n for n in compat.__all__ if not hasattr(compat, n)]
        from compat import ClassicHistorySource, migrate, replay_file
        import compat.migration, compat.replay, compat.sources
        same = [compat.migrate is compat.migration.migrate,
                compat.replay_file is compat.replay.replay_file,
                compat.ClassicHistorySource is compat.sources.ClassicHistorySource,
                compat.admin is sys.modules["compat.admin"],
                callable(migrate) and callable(replay_file) and isinstance(ClassicHistorySource, type)]
        print(json.dumps({"before": before, "missing": missing, "same": same}))
    """)
    assert got == {"before": False, "missing": [], "same": [True] * 5}


def test_operations_moved_to_admin_still_answer_on_the_memory() -> None:
    """``memory.placement(...)`` (deprecated) and ``memory.forget``/``memory.arelease``
    (pending deprecation) resolve ``compat.admin`` at their first call, not at import."""
    got = _run("""
        import asyncio, json, sys, warnings
        from compat import SummaryMemory
        memory = SummaryMemory(backend="classic", store="memory")
        memory.save("t", "q", "a")
        loaded_before = "compat.admin" in sys.modules
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            where = memory.placement("t").backend
            forgot = memory.forget("t") is not None
            asyncio.run(memory.arelease())
        import compat.admin
        kinds = [type(w.message).__name__ for w in caught if "compat.admin" in str(w.message)]
        print(json.dumps({"before": loaded_before, "where": where, "forgot": forgot,
                          "empty": memory.load("t").messages == [], "kinds": kinds,
                          "classmethod": callable(SummaryMemory.read_only)}))
    """)
    assert got == {"before": False, "where": "classic", "forgot": True, "empty": True,
                   "kinds": ["DeprecationWarning", "PendingDeprecationWarning",
                             "PendingDeprecationWarning"], "classmethod": True}
