"""Middleware backend: the real ``SummarizationMiddleware`` on a LangGraph checkpointer.

``save`` reads the thread's checkpoint, runs the stock ``before_model`` over the stored
messages plus the new turn, and writes one checkpoint with ``update_state`` through a
saver bound to the engine's transaction. The thread is stored raw in the root namespace,
so ``create_agent(model, middleware=[mw], checkpointer=same)`` continues it.

Overrides (private API, listed in ``adapters._upstream``, spy-tested): ``_should_summarize``
/ ``_determine_cutoff_index`` follow the memshift policy (turn cuts, the summary message
never counted, no ``usage_metadata`` trigger, ``>`` not ``>=``). The summary itself comes
through upstream's public ``summarizer=`` hook: a writer that asks the fold function the
engine handed in (no trimming: the stock 4000-token trim silently drops the old summary).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any, NotRequired, Protocol, cast

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from adapters import _upstream
from adapters.errors import MemshiftError, corrupt
from adapters.policy_forms import stock_forms
from adapters.backends.base import FoldFn, MemoryBackend
from adapters.fold import FoldJob
from adapters.policy import FoldPlan, MemoryPolicy
from adapters.stores.base import Tx
from adapters.summarizer import SummarizerChatModel
from adapters.view import MemoryView, ThreadRecord

__all__ = [
    "FOLD_NODE",
    "SUMMARY_PREFIX",
    "AgentHooks",
    "MemshiftState",
    "MemshiftSummarizationMiddleware",
    "MiddlewareBackend",
    "split_summary",
]


FOLD_NODE = "memshift_fold"
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


class MemshiftState(AgentState):
    """Agent state plus the fold count (so summarizer calls survive restarts)."""

    memshift_folds: NotRequired[int]


def is_summary_message(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and (
        message.additional_kwargs.get("lc_source") == "summarization"
    )


def split_summary(messages: Sequence[BaseMessage]) -> tuple[BaseMessage | None, str, list[BaseMessage]]:
    """(summary message, summary text, verbatim window) of a middleware thread."""
    if messages and is_summary_message(messages[0]):
        head = messages[0]
        text = head.content if isinstance(head.content, str) else str(head.content)
        return head, text.removeprefix(SUMMARY_PREFIX), list(messages[1:])
    return None, "", list(messages)


def build_summary_message(summary: str) -> HumanMessage:
    """The exact message stock ``SummarizationMiddleware`` writes."""
    return _upstream.build_summary_message(summary)


class AgentHooks(Protocol):
    """What the middleware needs from the engine when ``create_agent`` runs it."""

    def agent_fold(self) -> FoldFn: ...

    def agent_afold(self) -> Any: ...

    def agent_ready(self, window: Sequence[BaseMessage]) -> FoldJob | None: ...

    async def aagent_ready(self, window: Sequence[BaseMessage]) -> FoldJob | None: ...

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str: ...

    async def asummarize(self, summary: str, messages: Sequence[BaseMessage]) -> str: ...

    def after_agent(self, window: Sequence[BaseMessage]) -> None: ...

    async def aafter_agent(self, window: Sequence[BaseMessage]) -> None: ...


class _Declined(Exception):
    """The fold function said "not now": the stock flow stops with no update."""


# the copy ``fold_update`` bound for this call: the summary writer answers for it
_BOUND: ContextVar[Any] = ContextVar("memshift_bound_middleware", default=None)


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
        self._fold: FoldFn | None = None
        self._afold: Any = None
        self._plan: tuple[str, int, list[BaseMessage], FoldPlan] | None = None
        self._ready: FoldJob | None = None  # a background fold finished for this call's state
        self._folds = 0

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
        _, summary, window = split_summary(messages)
        return self._landing(summary, window) is not None or bool(
            self.policy.trigger_reason(window))

    def _determine_cutoff_index(self, messages: list[AnyMessage]) -> int:
        head, summary, window = split_summary(messages)
        ready = self._landing(summary, window)  # a background fold lands at its own cut
        plan = ready.plan if ready is not None else self.policy.plan_fold(window)
        self._plan = (summary, self._folds, window, plan)
        return plan.cutoff + (1 if head is not None and plan.cutoff else 0)

    def _landing(self, summary: str, window: list[BaseMessage]) -> FoldJob | None:
        """The finished background fold, if it summarized exactly this state's messages."""
        ready = self._ready
        if ready is not None and ready.same(summary, self._folds, window, ready.plan):
            return ready
        return None

    def _job(self, messages_to_summarize: list[AnyMessage]
             ) -> tuple[str, int, list[BaseMessage], FoldPlan]:
        """What to fold: the plan ``_determine_cutoff_index`` made, or (a subclass decided the
        cutoff its own way) exactly what stock hands over."""
        if self._plan is not None:
            return self._plan
        _, previous, folded = split_summary(messages_to_summarize)
        return previous, self._folds, folded, FoldPlan(len(folded), "forced")

    # -- the summary writer (upstream's ``summarizer=`` hook) -----------------------------
    def _write_summary(self, messages: list[AnyMessage], config: Any = None) -> str:
        bound = _BOUND.get()
        if bound is None:  # called on its own (stock's _create_summary): summarize them
            _, previous, folded = split_summary(messages)
            return self._hooks().summarize(previous, folded)
        assert bound._fold is not None, "fold_update binds the fold function"
        summary = bound._fold(*bound._job(messages))
        if summary is None:
            raise _Declined
        return summary

    async def _awrite_summary(self, messages: list[AnyMessage], config: Any = None) -> str:
        bound = _BOUND.get()
        if bound is None:
            _, previous, folded = split_summary(messages)
            return await self._hooks().asummarize(previous, folded)
        assert bound._afold is not None, "afold_update binds the async fold function"
        summary = await bound._afold(*bound._job(messages))
        if summary is None:
            raise _Declined
        return summary

    # -- one fold (the stock before_model / abefore_model, on a bound copy) -----------------
    def _bound(self, state: dict[str, Any], fold: FoldFn | None, afold: Any,
               ready: FoldJob | None = None) -> Any:
        """A copy bound to one call (concurrent calls share nothing)."""
        bound = copy.copy(self)
        bound._fold, bound._afold, bound._plan, bound._ready = fold, afold, None, ready
        bound._folds = int(state.get("memshift_folds") or 0)
        return bound

    @staticmethod
    def _counted(bound: Any, update: dict[str, Any] | None) -> dict[str, Any] | None:
        if update:  # the fold count travels with the state (summarizer calls survive restarts)
            update["memshift_folds"] = bound._folds + 1
        return update

    def fold_update(self, state: dict[str, Any], fold: FoldFn,
                    ready: FoldJob | None = None) -> dict[str, Any] | None:
        """The stock ``before_model`` update with ``fold`` writing the summary, plus the
        fold count (``ready``: a background fold to land, cut where it was planned)."""
        bound = self._bound(state, fold, None, ready)
        token = _BOUND.set(bound)
        try:
            return self._counted(bound, SummarizationMiddleware.before_model(
                bound, state, None))  # type: ignore[arg-type]
        except _Declined:
            return None
        finally:
            _BOUND.reset(token)

    async def afold_update(self, state: dict[str, Any], afold: Any,
                           ready: FoldJob | None = None) -> dict[str, Any] | None:
        """``fold_update`` through the stock ``abefore_model`` (an async fold function)."""
        bound = self._bound(state, None, afold, ready)
        token = _BOUND.set(bound)
        try:
            return self._counted(bound, await SummarizationMiddleware.abefore_model(
                bound, state, None))  # type: ignore[arg-type]
        except _Declined:
            return None
        finally:
            _BOUND.reset(token)

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

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record the agent's turn in the transcript (and keep checkpoints bounded)."""
        self._hooks().after_agent(split_summary(state["messages"])[2])
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        await self._hooks().aafter_agent(split_summary(state["messages"])[2])
        return None


class MiddlewareBackend(MemoryBackend):
    name = "middleware"

    def __init__(self, *, llm: BaseChatModel | None = None, hooks: AgentHooks | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        model = llm if isinstance(llm, BaseChatModel) else SummarizerChatModel(
            summarizer=None, token_counter=self.policy.counter)
        self.middleware = MemshiftSummarizationMiddleware(self.policy, model, hooks)
        builder = StateGraph(MemshiftState)
        builder.add_node(FOLD_NODE, lambda state: {})
        builder.add_edge(START, FOLD_NODE)
        builder.add_edge(FOLD_NODE, END)
        self.graph = builder.compile()

    @staticmethod
    def config(thread_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id}}

    def _graph(self, saver: Any) -> Any:
        return self.graph.copy({"checkpointer": saver})

    # -- I/O: one checkpoint read, one checkpoint write ------------------------------------------
    def read(self, tx: Tx) -> tuple[dict[str, Any], int]:
        with self.store.guard("read checkpoint"), _decoding(tx):
            snapshot = self._graph(self.store.checkpoints.saver(tx)).get_state(
                self.config(tx.thread_id))
        return dict(snapshot.values or {}), int((snapshot.metadata or {}).get("step", -1))

    async def aread(self, tx: Tx) -> tuple[dict[str, Any], int]:
        saver = await self.store.checkpoints.asaver(tx)
        if saver is None:  # nothing to wait for
            return self.read(tx)
        with self.store.guard("read checkpoint"), _decoding(tx):
            snapshot = await self._graph(saver).aget_state(self.config(tx.thread_id))
        return dict(snapshot.values or {}), int((snapshot.metadata or {}).get("step", -1))

    def write(self, tx: Tx, writes: dict[str, Any]) -> None:
        saver = self.store.checkpoints.saver(tx)
        with self.store.guard("write checkpoint"):
            if writes.get("delete"):
                saver.delete_thread(tx.thread_id)
                return
            self._graph(saver).update_state(self.config(tx.thread_id), writes["update"],
                                            as_node=FOLD_NODE)
        if writes["retain"]:
            self.store.run(tx, self.store.checkpoints.retain)

    async def awrite(self, tx: Tx, writes: dict[str, Any]) -> None:
        saver = await self.store.checkpoints.asaver(tx)
        if saver is None:  # nothing to wait for
            return self.write(tx, writes)
        with self.store.guard("write checkpoint"):
            if writes.get("delete"):
                await saver.adelete_thread(tx.thread_id)
                return
            await self._graph(saver).aupdate_state(self.config(tx.thread_id), writes["update"],
                                                   as_node=FOLD_NODE)
        if writes["retain"]:
            await self.store.checkpoints.aretain(tx)

    # -- behaviour -------------------------------------------------------------------------------
    def step(self, state: tuple[dict[str, Any], int], turn: Sequence[BaseMessage],
             fold: FoldFn) -> tuple[dict[str, Any] | None, bool]:
        values, step = state
        current = {**values, "messages": [*values.get("messages", []), *turn]}
        update = self.middleware.fold_update(current, fold)
        if update is None and not turn:
            return None, False
        # retention every `retain_every` checkpoint writes (a fold's too): amortized and
        # bounded (`keep` + `retain_every` <= 20 checkpoints), not a prune per save; this
        # write is the thread's checkpoint number step + 2
        retain = (step + 2) % self.store.checkpoints.retain_every == 0
        return {"update": update or {"messages": list(turn)}, "retain": retain}, update is not None

    def view(self, thread_id: str, state: tuple[dict[str, Any], int]) -> MemoryView:
        values = state[0]
        head, summary, window = split_summary(values.get("messages", []))
        return MemoryView(thread_id=thread_id, summary=summary, messages=window,
                          folds=int(values.get("memshift_folds") or 0), summary_message=head,
                          backend=self.name)

    def holds(self, state: tuple[dict[str, Any], int]) -> bool:
        return bool(state[0].get("messages"))

    def clear_writes(self) -> dict[str, Any]:
        return {"delete": True}

    def restore_writes(self, record: ThreadRecord) -> dict[str, Any]:
        head = [build_summary_message(record.summary)] if record.summary else []
        return {"update": {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *head,
                                        *record.window],
                           "memshift_folds": record.folds},
                "retain": True}


@contextlib.contextmanager
def _decoding(tx: Tx) -> Iterator[None]:
    """A checkpoint row LangGraph cannot decode (``KeyError('channel_versions')``, bad JSON or
    msgpack) is the thread's ``CorruptDataError``, not a raw error naming nothing."""
    try:
        yield
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        if isinstance(exc, MemshiftError):
            raise
        raise corrupt(tx.thread_id, "checkpoints", "latest", exc) from None

