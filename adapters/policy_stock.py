"""``MemoryPolicy.from_stock``: the ``MemoryPolicy`` that folds at the same turns as a stock object.

Why a module of its own: copying a stock constructor's arguments into ``MemoryPolicy`` is not
equivalent — the policy then counts with memshift's counter, not the app's (issue 39: 15
summarizer calls against stock's 2 on one app). This reads what the stock object itself holds:
``ConversationSummaryBufferMemory``'s ``max_token_limit``, its ``llm``'s count and its
``prompt``; ``SummarizationMiddleware``'s ``trigger``, ``keep``, ``token_counter``,
``summary_prompt`` and its model's profile (for fractions).

Not carried, because no ``MemoryPolicy`` field holds it: the middleware's trigger counts its own
summary message once a thread has one (memshift's window never does, so folds after the first
may come a turn later), and fires on a provider's reported ``usage_metadata`` total.

Neither stock class is imported here: an object of one exists only once its module is loaded,
so ``import adapters`` pays for neither (``langchain.agents`` costs ~1.5 s).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from adapters.errors import ConfigError
from adapters.tokens import TokenCounter

if TYPE_CHECKING:  # the class comes in as ``cls``: adapters.policy imports this module
    from adapters.policy import MemoryPolicy

__all__ = ["from_stock"]

_CLASSIC = ("langchain_classic.memory.summary_buffer", "ConversationSummaryBufferMemory")
_MIDDLEWARE = ("langchain.agents.middleware.summarization", "SummarizationMiddleware")
# stock summary memories from_stock does not read, and what to use instead
_INSTEAD = {
    "ConversationSummaryMemory": "MemoryPolicy.summary_only()",
    "ConversationTokenBufferMemory": "a buffer without a summary: no MemoryPolicy applies",
    "ConversationBufferWindowMemory": "a buffer without a summary: no MemoryPolicy applies",
}


def from_stock(cls: type[MemoryPolicy], obj: Any, **overrides: Any) -> MemoryPolicy:
    """``MemoryPolicy.from_stock``: the policy that folds at the same turns as ``obj``, a stock
    ``ConversationSummaryBufferMemory`` or ``SummarizationMiddleware`` (memshift's own
    middleware gives its policy). ``overrides`` are ``MemoryPolicy`` fields set on top
    (``fold="background"``, ``token_counter=...``). ``ConfigError`` names what cannot be
    translated."""
    own = getattr(obj, "policy", None)
    if isinstance(own, cls) and _is(obj, *_MIDDLEWARE):
        return dataclasses.replace(own, **overrides) if overrides else own
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"MemoryPolicy.from_stock got {unknown}, which are not MemoryPolicy fields")
    if _is(obj, *_CLASSIC):
        reader = _from_classic
    elif _is(obj, *_MIDDLEWARE):
        reader = _from_middleware
    else:
        name = type(obj).__name__
        instead = f"; use {_INSTEAD[name]}" if name in _INSTEAD else ""
        raise ConfigError(f"MemoryPolicy.from_stock reads a ConversationSummaryBufferMemory or a "
                          f"SummarizationMiddleware, got a {name}{instead}")
    _refuse_subclass(obj)
    try:
        return reader(cls, obj, overrides)
    except ConfigError as exc:
        raise ConfigError(f"{type(obj).__name__} cannot be translated: {exc}") from exc


def _stock_class(module: str, name: str) -> type | None:
    """The stock class, if its module is loaded (else no object of it can exist)."""
    loaded = sys.modules.get(module)
    found = vars(loaded).get(name) if loaded is not None else None
    return found if isinstance(found, type) else None


def _is(obj: Any, module: str, name: str) -> bool:
    kind = _stock_class(module, name)
    return kind is not None and isinstance(obj, kind)


def _refuse_subclass(obj: Any) -> None:
    """An app's subclass may decide otherwise when to fold: only the stock class is read."""
    for module, name in (_CLASSIC, _MIDDLEWARE):
        if type(obj) is not _stock_class(module, name) and _is(obj, module, name):
            raise ConfigError(
                f"{type(obj).__name__} subclasses {name}, and may fold at other turns than "
                f"the stock class does; MemoryPolicy.from_stock reads the stock class only: build "
                "MemoryPolicy(...) from the subclass's rule")


def _from_classic(cls: type[MemoryPolicy], memory: Any,
                  overrides: dict[str, Any]) -> MemoryPolicy:
    """Stock's ``prune`` rule (``MemoryPolicy.stock``) with this memory's limit, its llm's
    count and its prompt. Prefixes and the summary message class are the memory's keywords
    (``SummaryMemory(human_prefix=..., ...)``), not the policy's."""
    kwargs = {"summary_prompt": memory.prompt, **overrides}
    limit = kwargs.pop("max_tokens", memory.max_token_limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ConfigError(f"max_token_limit={limit!r}: stock then summarizes the whole window "
                          "after every turn, newest turn included, which memshift never does; "
                          "a MemoryPolicy's max_tokens is a positive integer")
    return cls.stock(max_token_limit=limit, llm=memory.llm, **kwargs)


def _from_middleware(cls: type[MemoryPolicy], middleware: Any,
                     overrides: dict[str, Any]) -> MemoryPolicy:
    """Stock's ``trigger``/``keep`` as it holds them (``None``: never), counted with its
    ``token_counter`` (the default one tuned to its model), fractions read from its model's
    profile, cut at any message, its ``summary_prompt``, its summary message counted toward
    the trigger as stock counts it."""
    trigger = middleware.trigger
    kwargs: dict[str, Any] = {
        "trigger": [] if trigger is None else trigger,
        "keep": middleware.keep,
        "token_counter": _named(middleware.token_counter),
        "summary_prompt": middleware.summary_prompt,
        "cut": "message",
        "count_summary": True,
        **overrides,
    }
    policy = cls(**kwargs)
    return policy.with_model(middleware.model)


def _named(counter: TokenCounter) -> TokenCounter:
    """``counter`` as a function with a name, for fold records (a ``functools.partial``,
    stock's default, has none)."""
    name = getattr(counter, "__name__", None)
    if name is not None:
        return counter
    inner = getattr(counter, "func", counter)

    def count(messages: Iterable[BaseMessage]) -> int:
        return int(counter(list(messages)))

    count.__name__ = f"stock_{getattr(inner, '__name__', type(inner).__name__)}"
    return count
