"""``MemoryPolicy``'s presets and its explanation: the budget arithmetic behind the limits."""

from __future__ import annotations

from typing import Any

from adapters.errors import ConfigError

__all__ = ["explain", "from_budget"]


def from_budget(
    cls: Any,
    context_window: int | Any,
    *,
    system: int = 0,
    tools: int = 0,
    rag: int = 0,
    output: int = 0,
    margin: int = 0,
    keep_ratio: float = 0.5,
    **kwargs: Any,
) -> Any:
    """Derive the history budget from the whole context window instead of guessing:
    ``max_tokens = window - (system + tools + rag + output + margin)``,
    ``keep_tokens = max_tokens * keep_ratio``. ``context_window`` may be a chat model
    whose ``profile["max_input_tokens"]`` supplies the window. See :meth:`explain`."""
    window = context_window
    if not isinstance(window, int) or isinstance(window, bool):
        profile = getattr(context_window, "profile", None) or {}
        window = profile.get("max_input_tokens") if hasattr(profile, "get") else None
        if not isinstance(window, int):
            raise ConfigError("context_window must be an int or a chat model whose "
                              "profile has max_input_tokens")
    parts = {"system": system, "tools": tools, "rag": rag, "output": output, "margin": margin}
    for name, value in parts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{name} reservation must be an integer >= 0, got {value!r}")
    if not 0 < keep_ratio <= 1:
        raise ConfigError(f"keep_ratio must be in (0, 1], got {keep_ratio}")
    reserved = sum(parts.values())
    history = window - reserved
    if history <= 0:
        detail = " + ".join(f"{k} {v:,}" for k, v in parts.items() if v)
        raise ConfigError(f"impossible budget: reservations {detail} = {reserved:,} leave "
                          f"{history:,} of the {window:,}-token context window for history")
    keep = max(1, int(history * keep_ratio))
    policy = cls(max_tokens=history, keep_tokens=keep, **kwargs)
    object.__setattr__(policy, "_budget", {"window": window, **parts, "reserved": reserved,
                                           "keep_ratio": keep_ratio})
    return policy


def explain(self: Any) -> str:
    """The arithmetic behind the limits, one line each."""
    lines = []
    if self._budget:
        b = self._budget
        lines.append(f"context window            {b['window']:>12,}")
        for name in ("system", "tools", "rag", "output", "margin"):
            lines.append(f"- {name:<24}{b[name]:>12,}")
        lines.append(f"= history budget (max_tokens){self.max_tokens:>9,}"
                     f"   ({b['window']:,} - {b['reserved']:,})")
        lines.append(f"keep_tokens = {self.max_tokens:,} x {b['keep_ratio']} = {self.keep_tokens:,}")
    elif self._clauses is not None:
        for clause in self._clauses:
            lines.append("fold when the window reaches " + " and ".join(
                f"{v:,} {k}" if k != "fraction" else f"{v:.0%} of the model's window"
                for k, v in clause.items()) + " (or)")
        lines.append(f"keep {self.keep_tokens or self.keep_messages:,} "
                     f"{'tokens' if self.keep_tokens else 'messages'}" if
                     self.keep is None else f"keep {self.keep}")
    else:
        if self.max_tokens is not None:
            lines.append(f"fold when the window exceeds {self.max_tokens:,} tokens; "
                         f"keep {self.keep_tokens:,}")
        if self.max_messages is not None:
            lines.append(f"fold when the window exceeds {self.max_messages} messages; "
                         f"keep {self.keep_messages}")
    lines.append(f"cut at {'turn boundaries' if self.cut == 'turn' else 'any message'}; "
                 "the summary message never counts; the newest turn always stays")
    return "\n".join(lines)
