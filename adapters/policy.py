"""``MemoryPolicy``: the one rule set that drives both backends, and the fold planner.

Both adapters ask :func:`plan_fold` where to cut, so the classic memory and the
middleware fold the same messages at the same moment by construction. What a policy accepts
is checked in ``adapters.policy_checks``; its prompt in ``adapters.policy_prompt``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from adapters import policy_checks, policy_forms, policy_presets
from adapters.errors import ConfigError
from adapters.fold_cuts import FoldPlan, plan_fold
from adapters.policy_checks import (  # noqa: F401 (re-exported: fold, overflow import them)
    DEFAULT_SUMMARY_CAP, MAX_RETRY_BACKOFF, MAX_SUMMARY_RETRIES,
)
from adapters.policy_prompt import (
    BUILT_IN_PROMPTS, DEFAULT_SUMMARY_PROMPT, as_prompt, counter_spec,
)
from adapters.redaction import resolve_redactor
from adapters.structured import STRUCTURED_PROMPT
from adapters.tokens import TokenCounter, is_additive, resolve_token_counter

if TYPE_CHECKING:
    from langchain_core.prompts import PromptTemplate

    PromptLike = str | PromptTemplate | None
else:  # what pydantic resolves (a facade field holds a policy) without importing prompts
    PromptLike = Any

__all__ = ["DEFAULT_SUMMARY_PROMPT", "FoldPlan", "MemoryPolicy"]


@dataclass(frozen=True)
class MemoryPolicy:
    """When to fold the oldest messages into the running summary, and how much to keep.

    Folding starts when the verbatim window (the summary message never counts)
    exceeds ``max_tokens`` or ``max_messages`` and cuts until what stays fits
    ``keep_tokens`` / ``keep_messages`` (default: the trigger value, the classic rule).
    Keeping less than the trigger gives hysteresis: a fold every few turns.
    """

    max_tokens: int | None = None
    keep_tokens: int | None = None
    max_messages: int | None = None
    keep_messages: int | None = None
    cut: Literal["turn", "message"] = "turn"
    token_counter: str | TokenCounter | None = None
    summary_prompt: PromptLike = None
    summary_format: Literal["text", "structured"] = "text"
    summary_retries: int = 2
    on_summary_error: Literal["defer", "raise"] = "defer"
    max_summary_tokens: int | None = None  # cap asked of the model and enforced on the reply
    summary_timeout: float = 120.0  # seconds per summarizer attempt; a hung call fails the fold
    max_summary_input_tokens: int | None = None  # fold in chunks above this (summary + messages)
    max_message_tokens: int | None = 100_000  # a longer message is refused before anything is written
    retry_backoff: float = 1.0  # seconds before a failed fold is tried again; doubles, capped
    max_failed_folds: int | None = 3  # then the offline fallback folds (None: never)
    # fail closed: a reply that is no summary (a refusal, the prompt or previous summary
    # echoed, too short, the folded text's numbers and ids dropped: ``adapters.fold_check``)
    # fails the fold like a summarizer error; False stores any non-empty reply within the cap
    check_summaries: bool = True
    # the specifics (numbers, ids, paths, URLs, e-mails) a summary dropped, carried verbatim
    # after it in a ledger of at most max_specifics_tokens (``adapters.ledger``); opt-in
    keep_specifics: bool = False
    max_specifics_tokens: int = 256
    # the summary message counts toward the trigger, as stock SummarizationMiddleware counts
    # it (agent path; ``policy_from_stock`` sets it for a middleware), never toward keep
    count_summary: bool = False
    # "background": save returns once the turn is committed; the fold lands a little later
    fold: Literal["inline", "background"] = "inline"
    max_lag_tokens: int | None = None  # background: a window this far past the trigger waits
    max_lag_seconds: float | None = None  # ...for at most this long (default 5 s; <= summary_timeout)
    is_overflow: Callable[[BaseException], bool] | None = field(default=None, compare=False)
    redact: Any = None  # True (built-in redactor), a str -> str callable, or a list of them
    redact_transcript: bool = False
    preferences_store: Any = field(default=None, compare=False)  # a LangGraph BaseStore
    user_of: Callable[[str], str] | None = field(default=None, compare=False)
    # langchain 1.5's forms (see policy_forms): instead of max_*/keep_*, stock's meaning
    trigger: Any = None
    keep: Any = None
    model_window: int | None = None  # the context window fractions are read from (with_model)
    _clauses: tuple[dict[str, Any], ...] | None = field(init=False, repr=False, compare=False,
                                                        default=None)
    _counter: TokenCounter = field(init=False, repr=False, compare=False)
    # None until first read when the prompt is a built-in one (known valid): building a
    # PromptTemplate imports LangChain's runnables, ~1 s of a CLI's start-up
    _prompt: Any = field(init=False, repr=False, compare=False)  # PromptTemplate | None
    _prompt_text: str = field(init=False, repr=False, compare=False)
    _redactor: Any = field(init=False, repr=False, compare=False)
    _budget: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        policy_checks.check_sizes(self)
        if self.trigger is not None or self.keep is not None:
            forms = policy_checks.read_stock_forms(self)
            object.__setattr__(self, "trigger", forms.trigger)
            if forms.clauses is not None:
                object.__setattr__(self, "_clauses", forms.clauses)
            object.__setattr__(self, "keep_tokens", forms.keep_tokens)
            object.__setattr__(self, "keep_messages", forms.keep_messages)
        elif self.max_tokens is None and self.max_messages is None:
            raise ConfigError("MemoryPolicy needs max_tokens or max_messages (or both), or "
                              "trigger= as SummarizationMiddleware takes it")
        if self._clauses is None:  # trigger= and keep= are independent, as in stock
            for name, value in policy_checks.default_keeps(self).items():
                object.__setattr__(self, name, value)
        policy_checks.check_choices(self)
        object.__setattr__(self, "_counter", resolve_token_counter(self.token_counter))
        default = STRUCTURED_PROMPT if self.summary_format == "structured" else DEFAULT_SUMMARY_PROMPT
        chosen = self.summary_prompt or default
        built = None if isinstance(chosen, str) and chosen in BUILT_IN_PROMPTS else \
            as_prompt(chosen)
        object.__setattr__(self, "_prompt", built)
        object.__setattr__(self, "_prompt_text", chosen if built is None else built.template)
        object.__setattr__(self, "_redactor", resolve_redactor(self.redact))

    @property
    def trigger_clauses(self) -> tuple[dict[str, Any], ...] | None:
        """``trigger=`` as clauses (AND within, OR across); ``None`` for ``max_*``."""
        return self._clauses

    @property
    def fractional(self) -> bool:
        """A fraction waits for the model's window (``with_model``)."""
        keep = self.keep is not None and self.keep[0] == "fraction" and self.keep_tokens is None
        return keep or any("fraction" in c for c in self._clauses or ())

    def with_model(self, model: Any) -> MemoryPolicy:
        """This policy with its fractions read from ``model``'s profile (stock's arithmetic);
        itself when it has none. ``ConfigError`` when the model has no window to read.
        ``trigger``/``keep`` stay as given; the clauses and ``keep_tokens`` are resolved."""
        if not self.fractional:
            return self
        from dataclasses import replace

        return replace(self, model_window=policy_forms.window_or_raise(model))

    # -- presets -------------------------------------------------------------------
    @classmethod
    def from_budget(cls, context_window: int | Any, **kwargs: Any) -> MemoryPolicy:
        """Derive the history budget from the whole context window instead of guessing:
        ``max_tokens = window - (system + tools + rag + output + margin)``,
        ``keep_tokens = max_tokens * keep_ratio`` (keywords ``system``, ``tools``, ``rag``,
        ``output``, ``margin``, ``keep_ratio``; the rest are policy fields). ``context_window``
        may be a chat model whose ``profile["max_input_tokens"]`` supplies the window."""
        policy: MemoryPolicy = policy_presets.from_budget(cls, context_window, **kwargs)
        return policy

    @classmethod
    def stock(cls, max_token_limit: int = 2000, llm: Any = None, **kwargs: Any) -> MemoryPolicy:
        """``ConversationSummaryBufferMemory``'s own rule, the default of a memory built with no
        ``policy=``: fold when the window exceeds ``max_token_limit``, cutting message by
        message until it fits; stock's ``SUMMARY_PROMPT``; ``llm``'s own token count (memshift's
        offline counter, with one warning, where that would download). The departures are
        stock's defects that lose data or break a provider (the guide lists them)."""
        from langchain_classic.memory.prompt import SUMMARY_PROMPT

        from adapters.model_tokens import model_counter

        kwargs.setdefault("cut", "message")
        kwargs.setdefault("summary_prompt", SUMMARY_PROMPT)
        if "token_counter" not in kwargs and llm is not None:
            kwargs["token_counter"] = model_counter(llm)
        return cls(max_tokens=max_token_limit, **kwargs)

    @classmethod
    def from_stock(cls, stock: Any, **overrides: Any) -> MemoryPolicy:
        """The policy that folds at a stock ``ConversationSummaryBufferMemory``'s or
        ``SummarizationMiddleware``'s turns, its counter included (``adapters.policy_stock``);
        ``overrides`` are policy fields set on top."""
        from adapters.policy_stock import from_stock

        return from_stock(cls, stock, **overrides)

    @classmethod
    def summary_only(cls, **kwargs: Any) -> MemoryPolicy:
        """``ConversationSummaryMemory`` on either backend: everything older than the newest
        turn is folded into the summary after every turn (the newest turn stays verbatim)."""
        return cls(max_messages=2, keep_messages=2, **kwargs)

    def explain(self) -> str:
        """The arithmetic behind the limits, one line each."""
        return policy_presets.explain(self)

    # -- the recorded form ------------------------------------------------------------
    RECORDED = ("max_tokens", "keep_tokens", "max_messages", "keep_messages", "cut",
                "summary_format", "max_summary_tokens", "trigger", "check_summaries",
                "count_summary", "keep_specifics", "max_specifics_tokens")

    def recorded(self) -> dict[str, Any]:
        """The fold rule as plain data, stored with every fold record so that tools
        (migrate, resummarize, replay) can use the policy a thread was folded with. Built
        once (the policy is frozen); each call gets its own copy."""
        out: dict[str, Any] | None = self.__dict__.get("_recorded")
        if out is None:
            out = {name: getattr(self, name) for name in self.RECORDED}
            if self._clauses is None:
                del out["trigger"]  # absent from records written before trigger= existed
            else:
                out["trigger"] = [dict(c) for c in self._clauses]
            if self.check_summaries:
                del out["check_summaries"]  # recorded when off (older records: on)
            if not self.count_summary:
                del out["count_summary"]  # recorded when on (older records: off)
            if not self.keep_specifics:  # recorded when on, with its bound
                del out["keep_specifics"], out["max_specifics_tokens"]
            out["token_counter"] = counter_spec(self.token_counter)
            out["prompt_version"] = self.prompt_version
            object.__setattr__(self, "_recorded", out)
        return dict(out)

    @classmethod
    def from_recorded(cls, data: dict[str, Any], **overrides: Any) -> MemoryPolicy:
        """A policy from :meth:`recorded` data (a callable counter's name is not
        resolvable and falls back to the default counter)."""
        kwargs: dict[str, Any] = {k: data[k] for k in cls.RECORDED if k in data}
        counter = data.get("token_counter")
        if isinstance(counter, str) and not counter.startswith("callable:"):
            kwargs["token_counter"] = counter  # a callable cannot be rebuilt: the default
        kwargs.update(overrides)
        return cls(**kwargs)

    # -- derived ------------------------------------------------------------------
    @property
    def counter(self) -> TokenCounter:
        """The token counter both backends use."""
        return self._counter

    @property
    def prompt(self) -> PromptTemplate:
        """The summary prompt (variables ``summary`` and ``new_lines``)."""
        if self._prompt is None:
            object.__setattr__(self, "_prompt", as_prompt(self._prompt_text))
        return self._prompt

    @property
    def redactor(self) -> Callable[[str], str] | None:
        """What scrubs text before it reaches the summarizer (``None``: off)."""
        return self._redactor

    def user_id(self, thread_id: str) -> str:
        """The user a thread belongs to, for long-term preferences: ``user_of`` or the
        thread id up to its last ``:`` (``tenant-1:user-42:chat-7`` -> ``tenant-1:user-42``)."""
        if self.user_of is not None:
            return self.user_of(thread_id)
        return thread_id.rsplit(":", 1)[0] if ":" in thread_id else thread_id

    @property
    def prompt_version(self) -> str:
        """Short hash of the summary prompt text, for fold records and reports (hashed once:
        the policy is frozen)."""
        version: str | None = self.__dict__.get("_prompt_version")
        if version is None:
            version = hashlib.sha256(self._prompt_text.encode()).hexdigest()[:12]
            object.__setattr__(self, "_prompt_version", version)
        return version

    def overflowed(self, exc: BaseException | None) -> bool:
        """Did the summarizer reject its input as too long? ``is_overflow`` if given, else the
        providers' usual wording (OpenAI ``context_length_exceeded``, "maximum context
        length", Anthropic "prompt is too long", …) anywhere in the error chain."""
        while exc is not None:
            if self.is_overflow is not None:
                if self.is_overflow(exc):
                    return True
            elif _OVERFLOW.search(f"{type(exc).__name__}: {exc}"):
                return True
            exc = exc.__cause__ or exc.__context__
        return False

    def count(self, messages: Sequence[BaseMessage]) -> int:
        return self._counter(list(messages))

    def check_sizes(self, messages: Sequence[BaseMessage]) -> None:
        """Refuse a turn holding a message over ``max_message_tokens`` (nothing is written)."""
        cap = self.max_message_tokens
        if cap is None:
            return
        for message in messages:
            if (size := self.count([message])) > cap:
                from adapters.errors import ContentError

                raise ContentError(f"a {message.type} message of {size} tokens exceeds "
                                   f"max_message_tokens={cap}; nothing was stored")

    @property
    def additive(self) -> bool:
        """Counts add up per message (the counter was declared so): they may be kept."""
        return is_additive(self._counter)

    # -- the fold rule --------------------------------------------------------------
    def trigger_reason(self, window: Sequence[BaseMessage], tokens: int | None = None) -> str:
        """Why the window must be folded, or ``""`` when it fits (``tokens``: already counted)."""
        if tokens is None and self.counts_tokens:
            tokens = self.count(window)
        return self._reason(tokens, len(window))

    @property
    def counts_tokens(self) -> bool:
        """Whether the trigger needs a token count of the window."""
        if self._clauses is None:
            return self.max_tokens is not None
        return any("tokens" in c or "fraction" in c for c in self._clauses)

    def _reason(self, tokens: int | None, length: int) -> str:
        if self._clauses is not None:
            return policy_forms.clause_reason(self._clauses, tokens, length)
        if self.max_tokens is not None and tokens is not None and tokens > self.max_tokens:
            return f"tokens={tokens}>{self.max_tokens}"
        if self.max_messages is not None and length > self.max_messages:
            return f"messages={length}>{self.max_messages}"
        return ""

    def plan_fold(self, window: Sequence[BaseMessage],
                  summary: Sequence[BaseMessage] = ()) -> FoldPlan:
        """The smallest cut whose remainder fits the keep limits (``fold_cuts``); ``summary``
        (the summary message) counts toward the trigger only, with ``count_summary``."""
        return plan_fold(self, window, summary if self.count_summary else ())

    def fits_keep(self, window: Sequence[BaseMessage]) -> bool:
        if self.keep_messages is not None and len(window) > self.keep_messages:
            return False
        return self.keep_tokens is None or self.count(window) <= self.keep_tokens

    def is_cut_point(self, window: Sequence[BaseMessage], index: int) -> bool:
        """May the window start at ``index``? Never at a ToolMessage; by turn: only at a question."""
        message = window[index]
        if isinstance(message, ToolMessage):
            return False
        return self.cut == "message" or isinstance(message, HumanMessage)


_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|"
    r"too many (input )?tokens|input is too long|ContextOverflow", re.I)
