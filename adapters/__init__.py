"""memshift's backends: the contract, the classic and middleware adapters, and stores.

The import name ``adapters`` is shared with an unrelated PyPI distribution; ``compat``
checks before importing this package that the one on the path is memshift's.
"""

from __future__ import annotations

from typing import Any

__memshift__ = True  # marker checked by compat: this ``adapters`` is memshift's

from adapters.backends import (
    BACKENDS,
    ClassicBackend,
    MemoryBackend,
    MiddlewareBackend,
)
from adapters.engine import MemoryEngine
from adapters.errors import (
    BackendConflictError,
    ConfigError,
    ContentError,
    InputKeyError,
    InvalidThreadId,
    MemshiftError,
    StoreError,
    SummarizerError,
    ThreadIdRequired,
    UnknownArgumentError,
)
from adapters.policy import DEFAULT_SUMMARY_PROMPT, FoldPlan, MemoryPolicy
from adapters.stores import MemoryStore, Store, open_store, redact_url
from adapters.summarizer import (
    ChatModelSummarizer,
    DeterministicSummarizer,
    Summarizer,
)
from adapters.tokens import count_tokens_cjk, tiktoken_counter
from adapters.view import MemoryView, ThreadRecord, compare_views

policy_from_stock = MemoryPolicy.from_stock  # the same translation, as a function

__all__ = [
    "BACKENDS",
    "DEFAULT_SUMMARY_PROMPT",
    "BackendConflictError",
    "ChatModelSummarizer",
    "ClassicBackend",
    "ConfigError",
    "ContentError",
    "DeterministicSummarizer",
    "FoldPlan",
    "InputKeyError",
    "InvalidThreadId",
    "MemoryBackend",
    "MemoryEngine",
    "MemoryPolicy",
    "MemoryStore",
    "MemoryView",
    "MemshiftError",
    "MemshiftSummarizationMiddleware",
    "MiddlewareBackend",
    "PolicySummaryBufferMemory",
    "Store",
    "StoreError",
    "Summarizer",
    "SummarizerChatModel",
    "SummarizerError",
    "ThreadIdRequired",
    "ThreadRecord",
    "UnknownArgumentError",
    "compare_views",
    "count_tokens_cjk",
    "open_store",
    "policy_from_stock",
    "redact_url",
    "tiktoken_counter",
]


def __getattr__(name: str) -> Any:
    # defined on first use: see adapters.backends (each brings seconds of imports)
    if name in ("PolicySummaryBufferMemory", "MemshiftSummarizationMiddleware"):
        from adapters import backends

        return getattr(backends, name)
    if name == "SummarizerChatModel":  # a BaseChatModel: LangChain's runnables (~1 s)
        from adapters.summarizer_model import SummarizerChatModel

        return SummarizerChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
