"""The backends: one module each, behind the small contract in ``base``."""

from adapters.backends.base import FoldFn, MemoryBackend
from adapters.backends.classic import ClassicBackend, PolicySummaryBufferMemory
from adapters.backends.middleware import MemshiftSummarizationMiddleware, MiddlewareBackend

BACKENDS: dict[str, type[MemoryBackend]] = {
    ClassicBackend.name: ClassicBackend,
    MiddlewareBackend.name: MiddlewareBackend,
}

__all__ = ["BACKENDS", "ClassicBackend", "FoldFn", "MemoryBackend",
           "MemshiftSummarizationMiddleware", "MiddlewareBackend", "PolicySummaryBufferMemory"]
