"""What a ``MemoryPolicy`` accepts: its fields checked, and stock's ``trigger=``/``keep=``
read into the classic fields.

Why a module of its own: ``adapters.policy`` is the rule (the dataclass and what it answers
while folding); every way a configuration can be wrong is here, in the order the policy
reports it. These functions read a policy's public fields and give back what it should hold;
the dataclass sets its own fields.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapters import policy_forms
from adapters.errors import ConfigError

if TYPE_CHECKING:
    from adapters.policy import MemoryPolicy

__all__ = ["DEFAULT_SUMMARY_CAP", "MAX_RETRY_BACKOFF", "MAX_SUMMARY_RETRIES", "StockForms",
           "check_choices", "check_sizes", "default_keeps", "read_stock_forms"]

MAX_SUMMARY_RETRIES = 10  # per fold; a fold that fails is tried again on a later save
DEFAULT_SUMMARY_CAP = 8_000  # tokens: a longer summary is a failed fold when no cap is set
MAX_RETRY_BACKOFF = 300.0  # seconds: the ceiling of the doubling backoff between failed folds

SIZES = ("max_tokens", "keep_tokens", "max_messages", "keep_messages", "max_summary_tokens",
         "max_summary_input_tokens", "max_message_tokens", "model_window", "max_failed_folds",
         "max_lag_tokens")


def _positive_int(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{name} must be greater than 0, got {value}")


def check_sizes(policy: MemoryPolicy) -> None:
    """Every size is a positive integer (or unset)."""
    for name in SIZES:
        _positive_int(name, getattr(policy, name))


@dataclass(frozen=True)
class StockForms:
    """``trigger=``/``keep=`` as the policy holds them: the caller's trigger copied, its
    clauses (``None`` without ``trigger=``) and the ``keep_*`` fields they mean."""

    trigger: Any
    clauses: tuple[dict[str, Any], ...] | None
    keep_tokens: int | None
    keep_messages: int | None


def read_stock_forms(policy: MemoryPolicy) -> StockForms:
    """Read ``trigger=``/``keep=``; a non-fraction ``keep`` becomes ``keep_*``; fractions are
    resolved against ``model_window`` when it is known."""
    trigger, clauses = policy.trigger, None
    kept = {"tokens": policy.keep_tokens, "messages": policy.keep_messages}
    if trigger is not None:
        trigger = copy.deepcopy(trigger)  # the caller's lists stay the caller's
        if policy.max_tokens is not None or policy.max_messages is not None:
            raise ConfigError("trigger= replaces max_tokens/max_messages; pass one of them")
        clauses = policy_forms.parse_trigger(trigger)
    elif policy.max_tokens is None and policy.max_messages is None:
        raise ConfigError("keep= needs trigger= (or max_tokens/max_messages with keep_*)")
    keep = policy.keep
    if keep is not None:
        kind, value = policy_forms.parse_keep(keep)
        target = "tokens" if kind == "fraction" else kind  # a fraction: tokens, resolved
        other = "messages" if target == "tokens" else "tokens"
        mine = kept[target]
        if kept[other] is not None or (mine is not None and kind != "fraction" and mine != value):
            raise ConfigError("keep= replaces keep_tokens/keep_messages; pass one of them")
        if kind != "fraction":  # the field it means (replace() passes it back: no conflict)
            kept[kind] = value
    if policy.model_window is not None:  # fractions as stock computes them
        resolved, keep_size = policy_forms.resolve(clauses or (), keep, policy.model_window)
        if clauses is not None:
            clauses = tuple(resolved)
        if keep is not None and keep[0] == "fraction" and keep_size is not None:
            kept["tokens"] = keep_size[1]
    if keep is None and clauses is not None and kept["tokens"] is None and \
            kept["messages"] is None:
        kept["messages"] = policy_forms.DEFAULT_KEEP[1]
    return StockForms(trigger, clauses, kept["tokens"], kept["messages"])


def default_keeps(policy: MemoryPolicy) -> dict[str, int]:
    """The classic limits: each ``keep_*`` needs its ``max_*`` and is at most it; an unset one
    is the trigger value (stock's rule). Gives the ``keep_*`` fields to set."""
    out: dict[str, int] = {}
    for trig, keep in (("max_tokens", "keep_tokens"), ("max_messages", "keep_messages")):
        t, k = getattr(policy, trig), getattr(policy, keep)
        if k is not None and t is None:
            raise ConfigError(f"{keep} needs {trig}")
        if k is not None and k > t:
            raise ConfigError(f"{keep}={k} is larger than {trig}={t}; keep must be <= trigger")
        if k is None and t is not None:
            out[keep] = t
    return out


def check_choices(policy: MemoryPolicy) -> None:
    """The enumerated fields, the preferences store, retries, timeout and backoff."""
    if policy.fold not in ("inline", "background"):
        raise ConfigError(f"fold must be 'inline' or 'background', got {policy.fold!r}")
    if policy.cut not in ("turn", "message"):
        raise ConfigError(f"cut must be 'turn' or 'message', got {policy.cut!r}")
    if policy.summary_format not in ("text", "structured"):
        raise ConfigError(
            f"summary_format must be 'text' or 'structured', got {policy.summary_format!r}")
    if not isinstance(policy.check_summaries, bool):  # "false" must not leave the checks on
        raise ConfigError(f"check_summaries must be True or False, got {policy.check_summaries!r}")
    if not isinstance(policy.count_summary, bool):
        raise ConfigError(f"count_summary must be True or False, got {policy.count_summary!r}")
    if not isinstance(policy.keep_specifics, bool):
        raise ConfigError(f"keep_specifics must be True or False, got {policy.keep_specifics!r}")
    bound = policy.max_specifics_tokens
    if isinstance(bound, bool) or not isinstance(bound, int) or not 16 <= bound <= 100_000:
        raise ConfigError(f"max_specifics_tokens must be an integer in [16, 100000], got "
                          f"{bound!r}")
    if policy.preferences_store is not None and policy.summary_format != "structured":
        raise ConfigError("preferences_store needs summary_format='structured'")
    if policy.preferences_store is not None and not hasattr(policy.preferences_store, "put"):
        raise ConfigError("preferences_store must be a LangGraph BaseStore (with .put)")
    retries = policy.summary_retries
    if isinstance(retries, bool) or not isinstance(retries, int) \
            or not 0 <= retries <= MAX_SUMMARY_RETRIES:
        raise ConfigError(f"summary_retries must be an integer in [0, {MAX_SUMMARY_RETRIES}], "
                          f"got {retries!r}")
    timeout = policy.summary_timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not 0 < timeout <= 86_400:
        raise ConfigError(f"summary_timeout must be seconds in (0, 86400], got {timeout!r}")
    lag = policy.max_lag_seconds
    if lag is not None and (isinstance(lag, bool) or not isinstance(lag, (int, float))
                            or not 0 < lag <= 86_400):
        raise ConfigError(f"max_lag_seconds must be seconds in (0, 86400], got {lag!r}")
    backoff = policy.retry_backoff
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) \
            or not 0 <= backoff <= 3600:
        raise ConfigError(f"retry_backoff must be seconds in [0, 3600], got {backoff!r}")
    if policy.on_summary_error not in ("defer", "raise"):
        raise ConfigError(
            f"on_summary_error must be 'defer' or 'raise', got {policy.on_summary_error!r}"
        )
