"""The memshift ``SummarizationMiddleware`` subclass and the one-node graph the middleware
backend writes checkpoints through.

Kept apart from ``adapters.backends.middleware`` because ``langchain.agents`` and
``langgraph.graph`` cost about 1.5 s to import: a command that never runs the middleware (a
re-run of a finished migration, ``history``, ``doctor``) does not pay for them.

Overrides (private API, listed in ``adapters._upstream``, spy-tested): ``_should_summarize``
/ ``_determine_cutoff_index`` follow the memshift policy (turn cuts, the summary message
never counted, no ``usage_metadata`` trigger, ``>`` not ``>=``). The summary itself comes
through upstream's public ``summarizer=`` hook: a writer that asks the fold function the
engine handed in (no trimming: the stock 4000-token trim silently drops the old summary).
"""

from __future__ import annotations

import copy
import dataclasses
from contextvars import ContextVar
from typing import Any, NotRequired, cast

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from adapters.backends.base import FoldFn
from adapters.backends.middleware_parts import FOLD_NODE, AgentHooks, split_summary
from adapters.fold import FoldJob
from adapters.policy import FoldPlan, MemoryPolicy
from adapters.policy_forms import stock_forms

__all__ = ["FoldCall", "MemshiftState", "MemshiftSummarizationMiddleware", "fold_graph"]


class MemshiftState(AgentState):
    """Agent state plus the fold count (so summarizer calls survive restarts)."""

    memshift_folds: NotRequired[int]


class _Declined(Exception):
    """The fold function said "not now": the stock flow stops with no update."""


@dataclasses.dataclass
class FoldCall:
    """One ``fold_update``/``afold_update`` call: what the middleware's copy for that call
    folds with (concurrent calls share nothing). ``fold``/``afold``: the fold function the
    engine handed in; ``ready``: a finished background fold to land; ``folds``: the state's
    fold count; ``plan``: what ``_determine_cutoff_index`` decided to fold, once it has."""

    fold: FoldFn | None = None
    afold: Any = None
    ready: FoldJob | None = None
    folds: int = 0
    plan: tuple[str, int, list[BaseMessage], FoldPlan] | None = None

    def job(self, messages_to_summarize: list[AnyMessage]
            ) -> tuple[str, int, list[BaseMessage], FoldPlan]:
        """What to fold: the plan ``_determine_cutoff_index`` made, or (a subclass decided
        the cutoff its own way) exactly what stock hands over."""
        if self.plan is not None:
            return self.plan
        _, previous, folded = split_summary(messages_to_summarize)
        return previous, self.folds, folded, FoldPlan(len(folded), "forced")

    def landing(self, summary: str, window: list[BaseMessage]) -> FoldJob | None:
        """The finished background fold, if it summarized exactly this state's messages."""
        ready = self.ready
        if ready is not None and ready.same(summary, self.folds, window, ready.plan):
            return ready
        return None

    def counted(self, update: dict[str, Any] | None) -> dict[str, Any] | None:
        """``update`` with the fold count it leaves (summarizer calls survive restarts)."""
        if update:
            update["memshift_folds"] = self.folds + 1
        return update


# the call ``fold_update`` is making: the summary writer answers for it
_CALL: ContextVar[FoldCall | None] = ContextVar("memshift_fold_call", default=None)


class MemshiftSummarizationMiddleware(SummarizationMiddleware):
    """``SummarizationMiddleware`` driven by a memshift policy and a handed-in fold."""

    state_schema = MemshiftState

    def __init__(self, policy: MemoryPolicy, model: BaseChatModel,
                 hooks: AgentHooks | None = None) -> None:
        trigger, keep = stock_forms(policy)  # the policy in stock's words (fractions resolved)
        # the summary writer through upstream's public hook: stock calls it with its own config
        # (the nostream tag, lc_source), under the caller's callbacks
        writer = RunnableLambda(self._write_summary, afunc=self._awrite_summary,
                                name="memshift_summary")
        prompt = policy.prompt  # stock's attribute holds a {messages} prompt only
        extra = {"summary_prompt": prompt.template} if prompt.input_variables == ["messages"] \
            else {}
        super().__init__(model, trigger=trigger, keep=keep,  # documentation only
                         token_counter=cast(Any, policy.counter), trim_tokens_to_summarize=None,
                         summarizer=writer, **extra)
        self.policy = policy
        # stock's documented attributes, as given (fractions and all)
        self.trigger = copy.deepcopy(policy.trigger) if policy.trigger is not None else trigger
        self.keep = policy.keep if policy.keep is not None else keep
        self.hooks = hooks
        self.call = FoldCall()  # the bound copy of one fold_update call has its own

    # -- stock's public token_counter attribute: the policy's counter ------------------------
    @property  # type: ignore[override]
    def token_counter(self) -> Any:
        policy = self.__dict__.get("policy")
        return policy.counter if policy is not None else self.__dict__.get("_stock_counter")

    @token_counter.setter
    def token_counter(self, counter: Any) -> None:
        """Stock's ``__init__`` sets it; an app (or LangChain's tests) may set it later: the
        policy this middleware folds by then counts with it (the classic side does not)."""
        if "policy" not in self.__dict__:
            self.__dict__["_stock_counter"] = counter
            return
        self.policy = dataclasses.replace(self.policy, token_counter=counter)
        self._partial_token_counter = counter

    # -- policy overrides (called by the stock before_model) --------------------------------
    def _should_summarize(self, messages: list[AnyMessage], total_tokens: int) -> bool:
        head, summary, window = split_summary(messages)
        counted = [head] if head is not None and self.policy.count_summary else []
        return self.call.landing(summary, window) is not None or bool(
            self.policy.trigger_reason([*counted, *window]))

    def _determine_cutoff_index(self, messages: list[AnyMessage]) -> int:
        head, summary, window = split_summary(messages)
        call = self.call
        ready = call.landing(summary, window)  # a background fold lands at its own cut
        plan = ready.plan if ready is not None else self.policy.plan_fold(
            window, [head] if head is not None else [])
        call.plan = (summary, call.folds, window, plan)
        return plan.cutoff + (1 if head is not None and plan.cutoff else 0)

    # -- the summary writer (upstream's ``summarizer=`` hook) -----------------------------
    def _write_summary(self, messages: list[AnyMessage], config: Any = None) -> str:
        call = _CALL.get()
        if call is None:  # called on its own (stock's _create_summary): summarize them
            _, previous, folded = split_summary(messages)
            return self._hooks().summarize(previous, folded)
        assert call.fold is not None, "fold_update binds the fold function"
        summary = call.fold(*call.job(messages))
        if summary is None:
            raise _Declined
        return summary

    async def _awrite_summary(self, messages: list[AnyMessage], config: Any = None) -> str:
        call = _CALL.get()
        if call is None:
            _, previous, folded = split_summary(messages)
            return await self._hooks().asummarize(previous, folded)
        assert call.afold is not None, "afold_update binds the async fold function"
        summary = await call.afold(*call.job(messages))
        if summary is None:
            raise _Declined
        return summary

    # -- one fold (the stock before_model / abefore_model, on a bound copy) -----------------
    def for_call(self, call: FoldCall) -> MemshiftSummarizationMiddleware:
        """A copy of this middleware for one call (concurrent calls share nothing)."""
        bound = copy.copy(self)
        bound.call = call
        return bound

    def fold_update(self, state: dict[str, Any], fold: FoldFn,
                    ready: FoldJob | None = None) -> dict[str, Any] | None:
        """The stock ``before_model`` update with ``fold`` writing the summary, plus the
        fold count (``ready``: a background fold to land, cut where it was planned)."""
        call = FoldCall(fold, None, ready, int(state.get("memshift_folds") or 0))
        token = _CALL.set(call)
        try:
            return call.counted(SummarizationMiddleware.before_model(
                self.for_call(call), state, None))  # type: ignore[arg-type]
        except _Declined:
            return None
        finally:
            _CALL.reset(token)

    async def afold_update(self, state: dict[str, Any], afold: Any,
                           ready: FoldJob | None = None) -> dict[str, Any] | None:
        """``fold_update`` through the stock ``abefore_model`` (an async fold function)."""
        call = FoldCall(None, afold, ready, int(state.get("memshift_folds") or 0))
        token = _CALL.set(call)
        try:
            return call.counted(await SummarizationMiddleware.abefore_model(
                self.for_call(call), state, None))  # type: ignore[arg-type]
        except _Declined:
            return None
        finally:
            _CALL.reset(token)

    # -- inside create_agent ----------------------------------------------------------------
    def _hooks(self) -> AgentHooks:
        if self.hooks is None:
            raise RuntimeError("this middleware belongs to a memshift memory; use memory.middleware")
        return self.hooks

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Fold before the model call; the pending question is the newest turn and stays
        (background folds: land the one finished for this state, hand a due one over)."""
        hooks = self._hooks()
        ready = hooks.agent_ready(split_summary(state["messages"])[2])
        return self.fold_update(state, hooks.agent_fold(), ready)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        hooks = self._hooks()
        ready = await hooks.aagent_ready(split_summary(state["messages"])[2])
        return await self.afold_update(state, hooks.agent_afold(), ready)

    # The agent's turn reaches the transcript where a checkpoint write already makes a
    # transaction (``memory.checkpointer``); on any other saver, here, when the model has
    # answered — never in an ``after_agent`` node: a node costs a checkpoint and its writes.
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        """The model call, then its turn recorded if the run's saver does not record it."""
        response = handler(request)
        self._hooks().model_turn([*request.state["messages"], *response.result])
        return response

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        response = await handler(request)
        await self._hooks().amodel_turn([*request.state["messages"], *response.result])
        return response


def fold_graph() -> Any:
    """The compiled one-node graph whose ``update_state`` writes a thread's checkpoint exactly
    as ``create_agent`` would (state schema, channels, versions)."""
    builder = StateGraph(MemshiftState)
    builder.add_node(FOLD_NODE, lambda state: {})
    builder.add_edge(START, FOLD_NODE)
    builder.add_edge(FOLD_NODE, END)
    return builder.compile()
