"""langchain 1.5's ``trigger=`` / ``keep=`` vocabulary for ``MemoryPolicy``, read as stock's
``SummarizationMiddleware`` reads it: ``("tokens", N)``, ``("messages", N)``,
``("fraction", f)``, ``TriggerClause`` dicts (AND), lists of either (OR). A trigger clause is
met at ``>=`` its thresholds, as stock's; ``max_tokens``/``max_messages`` keep the classic
``>``. Fractions read the model's ``profile["max_input_tokens"]`` (``MemoryPolicy.with_model``).
"""

from __future__ import annotations

from typing import Any

from adapters import _upstream
from adapters.errors import ConfigError

__all__ = ["DEFAULT_KEEP", "clause_reason", "parse_keep", "parse_trigger", "resolve",
           "stock_forms", "window_of", "window_or_raise"]

DEFAULT_KEEP = ("messages", 20)  # stock's keep= default


class TriggerTypeError(ConfigError, TypeError):
    """``trigger=`` of a type stock refuses with ``TypeError``."""
Clause = dict[str, Any]


def parse_trigger(trigger: Any) -> tuple[Clause, ...]:
    try:
        clauses = _upstream.normalize_trigger(trigger)
    except TypeError as exc:  # stock's type: a TypeError too
        raise TriggerTypeError(f"trigger={trigger!r}: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"trigger={trigger!r}: {exc}") from None
    return tuple(clauses)  # [] -> no clause: never folds, as stock


def parse_keep(keep: Any) -> tuple[str, Any]:
    try:
        return _upstream.validate_context_size(keep, "keep")
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"keep={keep!r}: {exc}") from None


def window_of(model: Any) -> int | None:
    """The model's context window from its profile (``None`` when it has none)."""
    profile = getattr(model, "profile", None)
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return window if isinstance(window, int) and not isinstance(window, bool) else None


def window_or_raise(model: Any) -> int:
    window = window_of(model)
    if window is None:
        raise ConfigError(
            "Model profile information is required to use fractional token limits: "
            "a fraction in trigger= or keep= needs the model's context window, and "
            f"{type(model).__name__} has no profile['max_input_tokens']: use ('tokens', N), "
            "or give the model a profile (ChatModel(..., profile={'max_input_tokens': N}))")
    return window


def resolve(clauses: tuple[Clause, ...], keep: tuple[str, Any] | None,
            window: int) -> tuple[list[Clause], tuple[str, Any] | None]:
    """Fractions as token counts of a ``window``-token context, as stock computes them."""
    out = []
    for clause in clauses:
        clause = dict(clause)
        if "fraction" in clause:
            tokens = int(window * clause.pop("fraction"))
            clause["tokens"] = max(tokens, clause.get("tokens", 0))  # AND: the stricter one
        out.append(clause)
    if keep is not None and keep[0] == "fraction":
        keep = ("tokens", max(1, int(window * keep[1])))
    return out, keep


def clause_reason(clauses: tuple[Clause, ...], tokens: int | None, length: int) -> str:
    """The first clause the window meets (all its thresholds, ``>=``), as a reason; ``""``."""
    for clause in clauses:
        if "fraction" in clause:
            raise ConfigError("this policy has a fraction that was never resolved: build it "
                              "with policy.with_model(model) (SummaryMemory does, with llm=)")
        parts = []
        for kind, limit in clause.items():
            value = tokens if kind == "tokens" else length
            if value is None or value < limit:
                break
            parts.append(f"{kind}={value}>={limit}")
        else:
            return "&".join(parts)
    return ""


def stock_forms(policy: Any) -> tuple[Any, Any]:
    """``(trigger, keep)`` as stock takes them, for the middleware's documented attributes."""
    clauses = policy.trigger_clauses
    if clauses is not None:
        trigger: Any = [tuple(c.items())[0] if len(c) == 1 else dict(c) for c in clauses]
        trigger = trigger[0] if len(trigger) == 1 else trigger
    else:
        trigger = [(k, v) for k, v in (("tokens", policy.max_tokens and policy.max_tokens + 1),
                                       ("messages", policy.max_messages and
                                        policy.max_messages + 1)) if v]
        trigger = trigger[0] if len(trigger) == 1 else trigger
    keep = ("tokens", policy.keep_tokens) if policy.keep_tokens else \
        ("messages", policy.keep_messages)
    return trigger, keep
