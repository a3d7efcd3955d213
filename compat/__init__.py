"""memshift's public facade: ``from compat import SummaryMemory, MemoryPolicy``."""

from __future__ import annotations

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
    InputKeyError,
    InvalidThreadId,
    MemshiftError,
    StoreError,
    SummarizerError,
    ThreadElsewhere,
    ThreadIdRequired,
    UnknownArgumentError,
)
from compat.history import MemshiftChatHistory  # noqa: E402
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
from adapters.shadow import Mismatch  # noqa: E402

from langchain_classic.memory.prompt import SUMMARY_PROMPT as STOCK_SUMMARY_PROMPT  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "STOCK_SUMMARY_PROMPT",
    "AdaptersConflictError",
    "ClassicHistorySource",
    "GraphSource",
    "MigrationReport",
    "Mismatch",
    "ReplayReport",
    "SummaryMemorySource",
    "ThreadSource",
    "ChatModelSummarizer",
    "ConfigError",
    "ContentError",
    "DeterministicSummarizer",
    "FoldRecord",
    "InputKeyError",
    "InvalidThreadId",
    "MemoryPolicy",
    "MemoryView",
    "MemshiftChatHistory",
    "MemshiftError",
    "StoreError",
    "Summarizer",
    "SummarizerError",
    "SummaryMemory",
    "ThreadElsewhere",
    "ThreadIdRequired",
    "ThreadRecord",
    "UnknownArgumentError",
    "__version__",
    "migrate",
    "replay_file",
    "compare_views",
    "count_tokens_cjk",
    "tiktoken_counter",
]
