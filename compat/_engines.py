"""Building the engine a ``SummaryMemory``'s settings ask for.

Every memory runs on a router (``StagedEngine``) over both backends, so every path asks the
same placement record where a thread lives: ``backend="classic"``/``"middleware"`` are a
rollout of 0.0/1.0, ``backend="staged"`` a share (or a ``route``). ``backend="shadow"`` puts
a candidate mirror beside a router that serves. Keywords and environment variables become
engines here, so the facade stays a facade.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from adapters import MemoryPolicy, Store, open_store
from adapters.engine import MemoryEngine
from adapters.errors import ConfigError
from adapters.protocol import Engine
from adapters.diff_classes import Rules
from adapters.shadow import ShadowEngine
from adapters.staged import StagedEngine
from adapters.stores.base import capabilities
from adapters.stores.memory import MemoryStore
from adapters.summarizer import CachingSummarizer
from compat._stock import BufferRenderer
from compat.config import ShadowConfig, StagedConfig

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["Engine", "Runtime", "build_engine", "open_memory_store", "resolve_policy"]


class Runtime:
    """A memory's collaborators: its engine, store and policy, the legacy adopter, the
    string renderer, the private thread of an unbound in-memory memory."""

    __slots__ = ("backend", "store", "policy", "private_thread", "adopter", "renderer",
                 "checkpointer", "borrowed")

    def __init__(self) -> None:
        self.private_thread = f"private-{uuid.uuid4()}"
        self.adopter: Any = None
        self.renderer: BufferRenderer | None = None
        self.checkpointer: Any = None
        self.borrowed = False  # a store shared by the memories on one database
        self.backend: Engine
        self.store: Store
        self.policy: MemoryPolicy


def resolve_policy(policy: MemoryPolicy | None, max_token_limit: int | None,
                   prompt: Any, default_limit: int, llm: Any = None) -> MemoryPolicy:
    """The policy a memory follows: ``policy=``, else stock's own rule with
    ``max_token_limit`` (default ``default_limit``; ``MemoryPolicy.stock``); a contradiction
    between the two is refused; ``prompt=`` replaces the summary prompt; fractions in
    ``trigger=``/``keep=`` are read from ``llm``'s profile."""
    from dataclasses import replace

    if policy is None:
        policy = MemoryPolicy.stock(max_token_limit or default_limit, llm)
    elif max_token_limit is not None and max_token_limit != policy.max_tokens:
        raise ConfigError(f"max_token_limit={max_token_limit} conflicts with "
                          f"policy.max_tokens={policy.max_tokens}; pass one of them")
    if prompt is not None:
        policy = replace(policy, summary_prompt=prompt)
    if policy.fractional:
        if llm is None:
            raise ConfigError("a fraction in trigger= or keep= is read from the model's "
                              "profile: pass llm= (a chat model with profile['max_input_tokens'])")
        policy = policy.with_model(llm)
    return policy


def open_memory_store(url: Any, history: Any, create_schema: bool = True) -> tuple[Store, bool]:
    """The store a memory runs on, and whether it is borrowed (shared, not closed with the
    memory): ``url`` (``store=`` or ``$MEMSHIFT_STORE``), else where a ``chat_memory=``
    history lives (its SQL database: memshift's tables beside it), else in memory."""
    from compat._adopt import (
        explicit_memory_store_warning, history_store, is_persistent, shared_store,
    )

    if url is None and history is not None:
        derived = history_store(history)
        if derived is not None:
            return shared_store(derived, create_schema), True
    elif url in ("memory", "memory://") and history is not None and is_persistent(history):
        explicit_memory_store_warning(history)
    return open_store(url, create_schema=create_schema), False


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


def _shadow(config: ShadowConfig, primary: Engine, candidate: MemoryEngine) -> ShadowEngine:
    if not 0 < config.timeout <= 3600:
        raise ConfigError(f"shadow_timeout must be seconds in (0, 3600], got {config.timeout}")
    return ShadowEngine(
        primary=primary, candidate=candidate,
        sample=_share(config.sample, "MEMSHIFT_SHADOW_SAMPLE", "1"),
        on_mismatch=config.on_mismatch,
        log_path=config.log or os.environ.get("MEMSHIFT_SHADOW_LOG"),
        timeout=config.timeout, raise_on_mismatch=config.raise_on_mismatch,
        rules=Rules(config.compare, config.ignore))


def build_engine(memory: SummaryMemory, name: str, summarizer: Any, store: Store) -> Engine:
    """The engine for backend ``name`` (already validated) over ``store``, from the memory's
    public settings (policy, style, ``shadow``/``staged`` configs)."""
    policy = memory.active_policy
    route: dict[str, Any] = {"move_on_touch": memory.move_on_touch}
    staged, shadow = memory.staged or StagedConfig(), memory.shadow
    if name == "staged":
        target = store if staged.target_store is None else \
            open_store(staged.target_store, create_schema=memory.create_schema)
        classic: Engine = _one(memory, "classic", policy, summarizer, store)
        if shadow is not None and shadow.sample is not None:  # the next cohort, measured
            shared = CachingSummarizer(summarizer)
            classic = _shadow(shadow, _one(memory, "classic", policy, shared, store),
                              _one(memory, "middleware", policy, shared, target,
                                   owns_transcript=False))
        return StagedEngine(classic=classic,
                            middleware=_one(memory, "middleware", policy, summarizer, target),
                            rollout=_share(staged.rollout, "MEMSHIFT_ROLLOUT", "0"),
                            route=staged.route, **route)
    if staged.target_store is not None:
        raise ConfigError("target_store= is for backend='staged' (the middleware side on "
                          "another store)")
    if name != "shadow":  # the sides this store can host (its concerns)
        hosted = capabilities(store)

        def side(backend: str, concern: str) -> Engine | Callable[[], Engine] | None:
            """The served side built now; the other only when a thread needs moving."""
            if concern not in hosted:
                return None
            if backend == name:
                return _one(memory, backend, policy, summarizer, store)
            return lambda: _one(memory, backend, policy, summarizer, store)
        return StagedEngine(classic=side("classic", "classic"),
                            middleware=side("middleware", "checkpoints"), fixed=name, **route)
    shadow = shadow or ShadowConfig()
    if shadow.primary not in ("classic", "middleware") or \
            shadow.candidate not in ("classic", "middleware"):
        raise ConfigError(f"shadow compares 'classic' and 'middleware', got primary="
                          f"{shadow.primary!r}, candidate={shadow.candidate!r}")
    if shadow.primary == shadow.candidate and shadow.candidate_policy is None:
        raise ConfigError("shadow needs two different backends or a candidate_policy")
    shared = CachingSummarizer(summarizer)  # one summary when both sides fold the same input
    primary = StagedEngine(classic=_one(memory, "classic", policy, shared, store),
                           middleware=_one(memory, "middleware", policy, shared, store),
                           fixed=shadow.primary, **route)
    # a candidate of the primary's own backend would write the primary's rows: it mirrors
    # into a private in-process store instead
    mirror_store = MemoryStore() if shadow.primary == shadow.candidate else store
    return _shadow(shadow, primary, _one(memory, shadow.candidate,
                                         shadow.candidate_policy or policy, shared,
                                         mirror_store, owns_transcript=False))
