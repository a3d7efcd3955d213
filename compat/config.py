"""The settings of a ``SummaryMemory`` beyond one backend, grouped by job.

``SummaryMemory(shadow=ShadowConfig(...), staged=StagedConfig(...), legacy=LegacyConfig(...))``;
the flat keywords of earlier versions (``primary=``, ``rollout=``, ``chat_memory=``…) are still
accepted and land in these objects (``FLAT``), so an existing call site does not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from adapters import MemoryPolicy

__all__ = ["FLAT", "LegacyConfig", "ShadowConfig", "StagedConfig", "dump_setting", "split_flat"]


@dataclass(frozen=True)
class ShadowConfig:
    """``backend="shadow"``: the primary serves, the candidate is compared (and, with
    ``backend="staged"``, ``sample`` mirrors a share of the classic cohort)."""

    primary: str = "classic"
    candidate: str = "middleware"
    candidate_policy: MemoryPolicy | None = None
    on_mismatch: Callable[[Any], None] | None = None
    sample: float | None = None  # else $MEMSHIFT_SHADOW_SAMPLE, else 1.0
    log: str | None = None  # else $MEMSHIFT_SHADOW_LOG
    timeout: float = 5.0  # seconds: a close drains this long; raise_on_mismatch waits this long
    raise_on_mismatch: bool = False  # tests: a load waits for the verdict and raises
    compare: Callable[[Any, Any], bool] | None = None  # (primary, candidate) views -> equal?
    ignore: tuple[Any, ...] = ()  # expected classes of difference (``adapters.diff_classes``)


@dataclass(frozen=True)
class StagedConfig:
    """``backend="staged"``: a rollout share (or a ``route``) decides each thread's backend."""

    rollout: float | None = None  # else $MEMSHIFT_ROLLOUT, else 0.0
    route: Callable[[str], str] | None = None  # thread_id -> "classic" | "middleware"
    target_store: Any = None  # the middleware side on another store (a URL or a Store)


@dataclass(frozen=True)
class LegacyConfig:
    """A thread's history from before memshift: a ``chat_memory=`` object, or a stock
    ``SQLChatMessageHistory`` table in the store's database."""

    history: Any = None  # a BaseChatMessageHistory (stock's chat_memory=)
    write: bool | None = None  # write turns through (default: on for a persistent history)
    table: str | None = None  # the stock table to adopt from (default: message_store)
    adopt: bool = True  # False: refuse a store holding stock tables (migrate them first)


# flat keyword -> (config, its field)
FLAT: dict[str, tuple[type, str]] = {
    "primary": (ShadowConfig, "primary"), "candidate": (ShadowConfig, "candidate"),
    "candidate_policy": (ShadowConfig, "candidate_policy"),
    "on_mismatch": (ShadowConfig, "on_mismatch"), "shadow_sample": (ShadowConfig, "sample"),
    "shadow_log": (ShadowConfig, "log"), "shadow_timeout": (ShadowConfig, "timeout"),
    "raise_on_mismatch": (ShadowConfig, "raise_on_mismatch"),
    "compare": (ShadowConfig, "compare"), "ignore": (ShadowConfig, "ignore"),
    "rollout": (StagedConfig, "rollout"), "route": (StagedConfig, "route"),
    "target_store": (StagedConfig, "target_store"),
    "chat_memory": (LegacyConfig, "history"), "legacy_write": (LegacyConfig, "write"),
    "legacy_table": (LegacyConfig, "table"), "adopt_legacy": (LegacyConfig, "adopt"),
}
_FIELD = {ShadowConfig: "shadow", StagedConfig: "staged", LegacyConfig: "legacy"}


def split_flat(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the flat keywords folded into their config objects (given objects are
    updated with them: ``SummaryMemory(shadow=ShadowConfig(...), shadow_sample=0.1)``)."""
    out = {k: v for k, v in kwargs.items() if k not in FLAT}
    for cls, name in _FIELD.items():
        flat = {field: kwargs[key] for key, (owner, field) in FLAT.items()
                if owner is cls and key in kwargs}
        if not flat:
            continue
        base = out.get(name) or cls()
        values = {f.name: getattr(base, f.name) for f in fields(cls)}
        out[name] = cls(**{**values, **flat})
    return out


def dump_setting(value: Any) -> Any:
    """A setting as ``model_dump`` may show it: URLs redacted, objects named, never a
    password."""
    from adapters import redact_url

    if isinstance(value, StagedConfig):
        return {"rollout": value.rollout, "route": value.route is not None,
                "target_store": dump_setting(value.target_store)}
    if isinstance(value, LegacyConfig):
        return {"history": type(value.history).__name__ if value.history else None,
                "write": value.write, "table": value.table, "adopt": value.adopt}
    if value is None or isinstance(value, str):
        return redact_url(value) if value else value
    return type(value).__name__
