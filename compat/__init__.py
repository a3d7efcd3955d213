"""memshift's public facade: ``from compat import SummaryMemory, MemoryPolicy``.

``import compat`` loads the facade, its engines and stores only. The tools beside the memory
(``migrate``, ``replay_file``, the sources, ``admin``, the shadow's records) are loaded at
their first use (PEP 562 ``__getattr__``): every application pays at start for what it runs
on every request, and a migration's tools only when it migrates.

``from compat import SummaryMemory`` replaces ``from langchain_classic.memory import
ConversationSummaryBufferMemory`` and, like it, imports the real class's module (LangChain's
runnables and LangSmith come with it, ~0.4 s): the classic backend, the default, builds that
class at the first save, which then imports nothing of it. ``import compat`` alone (the
command line, the tools, a middleware migration's re-run) does not.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

from compat._guard import AdaptersConflictError, check_adapters_package

check_adapters_package()

from adapters import (  # noqa: E402
    DEFAULT_SUMMARY_PROMPT,
    ChatModelSummarizer,
    DeterministicSummarizer,
    MemoryPolicy,
    MemoryView,
    Summarizer,
    ThreadRecord,
    compare_views,
    count_tokens_cjk,
    tiktoken_counter,
)
from adapters.errors import (  # noqa: E402
    CheckpointPruned,
    ConfigError,
    ContentError,
    CorruptDataError,
    DeltaStateError,
    InputKeyError,
    InvalidThreadId,
    MemshiftError,
    MismatchError,
    StoreError,
    SummarizerError,
    ThreadElsewhere,
    ThreadIdRequired,
    UnknownArgumentError,
)
from compat._stock import MOVED as _MOVED  # noqa: E402
from compat import memory as _memory  # noqa: E402 (its class: ``SummaryMemory``, in _load)

if TYPE_CHECKING:  # loaded at first use, by __getattr__ below
    from compat.memory import SummaryMemory
    from adapters.diff_classes import DiffClass
    from adapters.fold import FoldRecord
    from adapters.shadow import Mismatch
    from adapters.workers import WorkersBusy, set_summarizer_workers
    from compat import admin
    from compat._histories import MemshiftChatHistory
    from compat.migration import MigrationReport, migrate
    from compat.replay import ReplayReport, replay_file
    from compat.sources import ClassicHistorySource, GraphSource, SummaryMemorySource, ThreadSource


def _admin_functions() -> dict[str, Any]:
    """``memory.<name>(...)`` that moved to ``compat.admin.<name>(memory, ...)``: resolved at
    the first such call (``compat._stock`` may not import ``compat.admin``, which builds
    memories)."""
    import compat.admin

    return {name: getattr(compat.admin, name) for name in _MOVED.names}


_MOVED.register(_admin_functions)

# modules that moved: ``import compat.cli_migrate`` still works, with a DeprecationWarning
_MOVED_MODULES = {"compat.cli_migrate": "compat.cli.migrate", "compat.cli_rollout":
                  "compat.cli.rollout", "compat.cli_governance": "compat.cli.eval",
                  "compat.history": "compat._stock", "compat.baselines": "compat.conversations"}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in _MOVED_MODULES else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(f"{spec.name} moved to {_MOVED_MODULES[spec.name]}", DeprecationWarning,
                      stacklevel=3)
        return importlib.import_module(_MOVED_MODULES[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """The module is the one it moved to, already executed."""


sys.meta_path.append(_MovedModules())

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "STOCK_SUMMARY_PROMPT",
    "AdaptersConflictError",
    "ClassicHistorySource",
    "GraphSource",
    "MigrationReport",
    "Mismatch",
    "DiffClass",
    "ReplayReport",
    "SummaryMemorySource",
    "ThreadSource",
    "ChatModelSummarizer",
    "CheckpointPruned",
    "ConfigError",
    "ContentError",
    "CorruptDataError",
    "DeltaStateError",
    "DeterministicSummarizer",
    "FoldRecord",
    "InputKeyError",
    "InvalidThreadId",
    "MemoryPolicy",
    "MemoryView",
    "MemshiftChatHistory",
    "MemshiftError",
    "MismatchError",
    "StoreError",
    "Summarizer",
    "SummarizerError",
    "SummaryMemory",
    "ThreadElsewhere",
    "ThreadIdRequired",
    "ThreadRecord",
    "UnknownArgumentError",
    "WorkersBusy",
    "__version__",
    "admin",
    "migrate",
    "replay_file",
    "set_summarizer_workers",
    "compare_views",
    "count_tokens_cjk",
    "tiktoken_counter",
]


def __dir__() -> list[str]:
    """The lazy names too, for ``dir(compat)`` and completion."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str) -> Any:
    """A public name loaded at its first use, then kept as a module attribute."""
    value = _load(name)
    globals()[name] = value  # the next access is a plain attribute read
    return value


def _load(name: str) -> Any:  # noqa: PLR0911 - one branch per module: each import is visible
    if name == "SummaryMemory":  # with the real class's module, as the stock import it replaces
        # (a submodule comes with its package: this runs langchain_classic.memory's __init__)
        import langchain_classic.memory.summary_buffer  # noqa: F401

        return _memory.SummaryMemory
    if name == "admin":
        import compat.admin

        return compat.admin
    if name in ("migrate", "MigrationReport"):
        from compat import migration

        return getattr(migration, name)
    if name in ("replay_file", "ReplayReport"):
        from compat import replay

        return getattr(replay, name)
    if name in ("ClassicHistorySource", "GraphSource", "SummaryMemorySource", "ThreadSource"):
        from compat import sources

        return getattr(sources, name)
    if name == "MemshiftChatHistory":  # a BaseChatMessageHistory subclass (see _histories)
        from compat._histories import MemshiftChatHistory

        return MemshiftChatHistory
    if name == "STOCK_SUMMARY_PROMPT":  # langchain_classic.memory imports models (~1 s)
        from langchain_classic.memory.prompt import SUMMARY_PROMPT

        return SUMMARY_PROMPT
    if name == "FoldRecord":
        from adapters.fold import FoldRecord

        return FoldRecord
    if name in ("WorkersBusy", "set_summarizer_workers"):
        from adapters import workers

        return getattr(workers, name)
    if name == "DiffClass":
        from adapters.diff_classes import DiffClass

        return DiffClass
    if name == "Mismatch":
        from adapters.shadow import Mismatch

        return Mismatch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
