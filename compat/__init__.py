"""memshift's public facade: ``from compat import SummaryMemory, MemoryPolicy``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Any

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
from compat import admin  # noqa: E402
from compat._stock import MOVED as _MOVED  # noqa: E402
from compat.memory import SummaryMemory  # noqa: E402
from compat.migration import MigrationReport, migrate  # noqa: E402
from compat.replay import ReplayReport, replay_file  # noqa: E402
from compat.sources import (  # noqa: E402
    ClassicHistorySource,
    GraphSource,
    SummaryMemorySource,
    ThreadSource,
)
from adapters.fold import FoldRecord  # noqa: E402
from adapters.workers import WorkersBusy, set_summarizer_workers  # noqa: E402
from adapters.diff_classes import DiffClass  # noqa: E402
from adapters.shadow import Mismatch  # noqa: E402

_MOVED.update({name: getattr(admin, name) for name in (
    "pin", "unpin", "placement", "restore_thread", "resummarize", "summary_history",
    "thread_ids", "iter_thread_ids", "reopen", "open_read_only")})

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


def __getattr__(name: str) -> Any:
    # a BaseChatMessageHistory subclass: defined on first use (see compat._histories)
    if name == "MemshiftChatHistory":
        from compat._histories import MemshiftChatHistory

        return MemshiftChatHistory
    if name == "STOCK_SUMMARY_PROMPT":  # langchain_classic.memory imports models (~1 s)
        from langchain_classic.memory.prompt import SUMMARY_PROMPT

        return SUMMARY_PROMPT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
