"""Building the engine a ``SummaryMemory``'s settings ask for.

Every memory runs on a router (``StagedEngine``) over both backends, so every path asks the
same placement record where a thread lives: ``backend="classic"``/``"middleware"`` are a
rollout of 0.0/1.0, ``backend="staged"`` a share (or a ``route``). ``backend="shadow"`` puts
a candidate mirror beside a router that serves. Keywords and environment variables become
engines here, so the facade stays a facade.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from adapters import MemoryPolicy, Store, open_store
from adapters.engine import MemoryEngine
from adapters.errors import ConfigError
from adapters.protocol import Engine
from adapters.shadow import ShadowEngine
from adapters.staged import StagedEngine
from adapters.stores.memory import MemoryStore
from adapters.summarizer import CachingSummarizer

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["Engine", "build_engine"]


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
         store: Store, owns_transcript: bool = True) -> MemoryEngine:
    return MemoryEngine(name, policy=policy, summarizer=summarizer, store=store,
                        llm=memory.llm, human_prefix=memory.human_prefix,
                        ai_prefix=memory.ai_prefix,
                        summary_message_cls=memory.summary_message_cls,
                        owns_transcript=owns_transcript)


def _shadow(memory: SummaryMemory, primary: Engine, candidate: MemoryEngine) -> ShadowEngine:
    if not 0 < memory.shadow_timeout <= 3600:
        raise ConfigError(f"shadow_timeout must be seconds in (0, 3600], got {memory.shadow_timeout}")
    return ShadowEngine(
        primary=primary, candidate=candidate,
        sample=_share(memory.shadow_sample, "MEMSHIFT_SHADOW_SAMPLE", "1"),
        on_mismatch=memory.on_mismatch,
        log_path=memory.shadow_log or os.environ.get("MEMSHIFT_SHADOW_LOG"),
        timeout=memory.shadow_timeout)


def build_engine(memory: SummaryMemory, name: str, summarizer: Any, store: Store) -> Engine:
    """The engine for backend ``name`` (already validated) over ``store``."""
    policy = memory.active_policy
    route: dict[str, Any] = {"move_on_touch": memory.move_on_touch}
    if name == "staged":
        target = open_store(memory.target_store) if memory.target_store is not None else store
        classic: Engine = _one(memory, "classic", policy, summarizer, store)
        if memory.shadow_sample is not None:  # measure the next cohort before it moves
            shared = CachingSummarizer(summarizer)
            classic = _shadow(memory, _one(memory, "classic", policy, shared, store),
                              _one(memory, "middleware", policy, shared, target,
                                   owns_transcript=False))
        return StagedEngine(classic=classic,
                            middleware=_one(memory, "middleware", policy, summarizer, target),
                            rollout=_share(memory.rollout, "MEMSHIFT_ROLLOUT", "0"),
                            route=memory.route, **route)
    if memory.target_store is not None:
        raise ConfigError("target_store= is for backend='staged' (the middleware side on "
                          "another store)")
    if name != "shadow":
        return StagedEngine(classic=_one(memory, "classic", policy, summarizer, store),
                            middleware=_one(memory, "middleware", policy, summarizer, store),
                            fixed=name, **route)
    if memory.primary not in ("classic", "middleware") or \
            memory.candidate not in ("classic", "middleware"):
        raise ConfigError(f"shadow compares 'classic' and 'middleware', got primary="
                          f"{memory.primary!r}, candidate={memory.candidate!r}")
    if memory.primary == memory.candidate and memory.candidate_policy is None:
        raise ConfigError("shadow needs two different backends or a candidate_policy")
    shared = CachingSummarizer(summarizer)  # one summary when both sides fold the same input
    primary = StagedEngine(classic=_one(memory, "classic", policy, shared, store),
                           middleware=_one(memory, "middleware", policy, shared, store),
                           fixed=memory.primary, **route)
    # a candidate of the primary's own backend would write the primary's rows: it mirrors
    # into a private in-process store instead
    mirror_store = MemoryStore() if memory.primary == memory.candidate else store
    return _shadow(memory, primary, _one(memory, memory.candidate,
                                         memory.candidate_policy or policy, shared,
                                         mirror_store, owns_transcript=False))
