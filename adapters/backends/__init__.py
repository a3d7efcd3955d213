"""The backends: one module each, behind the small contract in ``base``."""

from typing import Any

from adapters.backends.base import FoldFn, MemoryBackend
from adapters.backends.classic import ClassicBackend
from adapters.backends.middleware import MiddlewareBackend

BACKENDS: dict[str, type[MemoryBackend]] = {
    ClassicBackend.name: ClassicBackend,
    MiddlewareBackend.name: MiddlewareBackend,
}

__all__ = ["BACKENDS", "ClassicBackend", "FoldFn", "MemoryBackend",
           "MemshiftSummarizationMiddleware", "MiddlewareBackend", "PolicySummaryBufferMemory"]


def __getattr__(name: str) -> Any:
    # the real classic memory is defined on first use (it brings a BaseChatMessageHistory)
    if name == "PolicySummaryBufferMemory":
        from adapters.backends.classic_memory import PolicySummaryBufferMemory

        return PolicySummaryBufferMemory
    # the middleware subclass brings langchain.agents (about 1.5 s of imports)
    if name == "MemshiftSummarizationMiddleware":
        from adapters.backends.agent_middleware import MemshiftSummarizationMiddleware

        return MemshiftSummarizationMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
