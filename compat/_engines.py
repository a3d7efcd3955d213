"""Building the engine a ``SummaryMemory``'s settings ask for: one backend, shadow, staged.

Keywords and environment variables become engines here, so the facade stays a facade.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Union

from adapters import MemoryPolicy, Store, open_store
from adapters.engine import MemoryEngine
from adapters.errors import ConfigError
from adapters.shadow import ShadowEngine
from adapters.staged import StagedEngine
from adapters.summarizer import CachingSummarizer

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["Engine", "build_engine"]

Engine = Union[MemoryEngine, ShadowEngine, StagedEngine]


def _share(value: float | None, env: str, default: str) -> float:
    """A share in [0, 1] from an argument, else an environment variable."""
    if value is None:
        raw = os.environ.get(env, default)
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{env} must be a number in [0, 1], got {raw!r}") from None
    if not 0 <= value <= 1:
        raise ConfigError(f"{env.removeprefix('MEMSHIFT_').lower()} must be within [0, 1], "
                          f"got {value}")
    return value


def _one(memory: SummaryMemory, name: str, policy: MemoryPolicy, summarizer: Any,
         owns_transcript: bool = True, store: Store | None = None) -> MemoryEngine:
    return MemoryEngine(name, policy=policy, summarizer=summarizer,
                        store=store or memory._store, llm=memory.llm,
                        human_prefix=memory.human_prefix, ai_prefix=memory.ai_prefix,
                        summary_message_cls=memory.summary_message_cls,
                        owns_transcript=owns_transcript)


def build_engine(memory: SummaryMemory, name: str, summarizer: Any) -> Engine:
    policy = memory.active_policy
    if name == "staged":
        target = open_store(memory.target_store) if memory.target_store is not None \
            else memory._store
        classic: Any = _one(memory, "classic", policy, summarizer)
        if memory.shadow_sample is not None:  # measure the next cohort before it moves
            shared = CachingSummarizer(summarizer)
            classic = ShadowEngine(
                primary=_one(memory, "classic", policy, shared),
                candidate=_one(memory, "middleware", policy, shared, owns_transcript=False,
                               store=target),
                sample=_share(memory.shadow_sample, "MEMSHIFT_SHADOW_SAMPLE", "1"),
                on_mismatch=memory.on_mismatch,
                log_path=memory.shadow_log or os.environ.get("MEMSHIFT_SHADOW_LOG"),
                timeout=memory.shadow_timeout)
        return StagedEngine(classic=classic,
                            middleware=_one(memory, "middleware", policy, summarizer,
                                            store=target),
                            rollout=_share(memory.rollout, "MEMSHIFT_ROLLOUT", "0"),
                            route=memory.route)
    if name != "shadow":
        return _one(memory, name, policy, summarizer)
    if memory.primary == memory.candidate and memory.candidate_policy is None:
        raise ConfigError("shadow needs two different backends or a candidate_policy")
    if not 0 < memory.shadow_timeout <= 3600:
        raise ConfigError(f"shadow_timeout must be seconds in (0, 3600], got {memory.shadow_timeout}")
    shared = CachingSummarizer(summarizer)  # one summary when both sides fold the same input
    return ShadowEngine(
        primary=_one(memory, memory.primary, policy, shared),
        candidate=_one(memory, memory.candidate, memory.candidate_policy or policy, shared,
                       owns_transcript=False),
        sample=_share(memory.shadow_sample, "MEMSHIFT_SHADOW_SAMPLE", "1"),
        on_mismatch=memory.on_mismatch,
        log_path=memory.shadow_log or os.environ.get("MEMSHIFT_SHADOW_LOG"),
        timeout=memory.shadow_timeout)
