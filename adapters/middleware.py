"""Middleware backend: the real ``SummarizationMiddleware`` on a LangGraph checkpointer.

``save`` runs a one-node graph whose node is the middleware's own ``before_model``,
compiled with the store's checkpointer; ``load`` reads the checkpoint. The thread is
stored raw in the root namespace, so ``create_agent(model, middleware=[mw],
checkpointer=same)`` continues it.

Overrides (private API, pinned versions; the contract suite catches drift):
``_should_summarize`` / ``_determine_cutoff_index`` follow the memshift policy
(turn cuts, the summary message never counted, no ``usage_metadata`` trigger, ``>``
not ``>=``); ``trim_tokens_to_summarize=None`` (the stock 4000 silently drops the old
summary); the summary text comes from the shared summarization routine.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from typing import Any, NotRequired, cast

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from adapters.base import MemoryBackend
from adapters.errors import SummarizerError
from adapters.policy import FoldPlan
from adapters.redaction import default_redactor, redact_messages
from adapters.summarizer import SummarizerChatModel
from adapters.view import MemoryView

__all__ = [
    "FOLD_NODE",
    "SUMMARY_PREFIX",
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
    return SummarizationMiddleware._build_new_messages(summary)[0]


class MemshiftSummarizationMiddleware(SummarizationMiddleware):
    """``SummarizationMiddleware`` driven by a memshift policy and summarization routine."""

    state_schema = MemshiftState

    def __init__(self, backend: MiddlewareBackend, model: BaseChatModel) -> None:
        policy = backend.policy
        trigger: Any = ("tokens", policy.max_tokens) if policy.max_tokens else (
            "messages", policy.max_messages)
        keep: Any = ("tokens", policy.keep_tokens) if policy.keep_tokens else (
            "messages", policy.keep_messages)
        super().__init__(
            model,
            trigger=trigger,  # documentation only: _should_summarize is the policy's
            keep=keep,
            token_counter=cast(Any, policy.counter),
            trim_tokens_to_summarize=None,
            summarizer=self._summarize_messages,
        )
        self._backend = backend
        self._fold = threading.local()  # the fold in progress on this thread (plan, window)

    # -- policy overrides ------------------------------------------------------------
    def _should_summarize(self, messages: list[AnyMessage], total_tokens: int) -> bool:
        _, _, window = split_summary(messages)
        return bool(self._backend.policy.trigger_reason(window))

    def _determine_cutoff_index(self, messages: list[AnyMessage]) -> int:
        head, _, window = split_summary(messages)
        plan = self._backend.policy.plan_fold(window)
        self._fold.window, self._fold.plan = window, plan
        return plan.cutoff + (1 if head is not None and plan.cutoff else 0)

    def _summarize_messages(self, messages: list[AnyMessage]) -> str:
        _, summary, folded = split_summary(messages)
        window = getattr(self._fold, "window", None) or folded
        plan = getattr(self._fold, "plan", None) or FoldPlan(len(folded), "forced")
        version = int(getattr(self._fold, "folds", 0)) + 1
        return self._backend.fold(_current_thread() or "", summary, window, plan, version)

    # -- folding ---------------------------------------------------------------------
    def fold_update(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """The stock ``before_model`` update, plus the fold count."""
        self._fold.folds = int(state.get("memshift_folds") or 0)
        self._fold.window = self._fold.plan = None
        try:
            update = SummarizationMiddleware.before_model(self, state, None)  # type: ignore[arg-type]
        finally:
            self._fold.window = self._fold.plan = None
        if update:
            update["memshift_folds"] = self._fold.folds + 1
        return update

    def _guarded_fold(self, state: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.fold_update(state)
        except SummarizerError as exc:
            self._backend.defer_or_raise(exc)
            return None

    # -- inside create_agent ------------------------------------------------------------
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Fold before the model call; the pending question is the newest turn and stays."""
        return self._guarded_fold(state)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        # the summarizer and the store are synchronous: keep them off the event loop
        return await asyncio.to_thread(self.before_model, state, runtime)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record the agent's turn in the transcript and fold as a memory ``save`` would."""
        thread_id = _current_thread()
        if thread_id is None:
            return self._guarded_fold(state)
        store = self._backend.store
        with store.lock(thread_id):
            _, _, window = split_summary(state["messages"])
            policy = self._backend.policy
            if policy.redact_transcript:
                window = redact_messages(window, policy.redactor or default_redactor)
            store.append_transcript(thread_id, window)
            store.retain(thread_id)  # agent runs stay bounded like memory saves
            return self._guarded_fold(state)

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)


def _current_thread() -> str | None:
    try:
        return get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a graph run
        return None


class MiddlewareBackend(MemoryBackend):
    name = "middleware"

    def __init__(self, *, llm: BaseChatModel | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        model = llm if isinstance(llm, BaseChatModel) else SummarizerChatModel(
            summarizer=self.summarizer, token_counter=self.policy.counter
        )
        self.middleware = MemshiftSummarizationMiddleware(self, model)
        self._errors: dict[str, BaseException] = {}
        builder = StateGraph(MemshiftState)
        builder.add_node(FOLD_NODE, self._fold_node)
        builder.add_edge(START, FOLD_NODE)
        builder.add_edge(FOLD_NODE, END)
        self.graph = builder.compile(checkpointer=self.store.checkpointer)

    @property
    def checkpointer(self) -> Any:
        return self.store.checkpointer

    @staticmethod
    def config(thread_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id}}

    def _fold_node(self, state: MemshiftState, config: RunnableConfig) -> dict[str, Any]:
        # A failure inside the node would leave the checkpoint mid-step (next=(node,));
        # catch it, finish the step with the turn stored, and raise after the run.
        try:
            return self.middleware.fold_update(dict(state)) or {}
        except SummarizerError as exc:
            self._errors[config["configurable"]["memshift_call"]] = exc
            return {}

    def _state(self, thread_id: str) -> dict[str, Any]:
        snapshot = self.graph.get_state(self.config(thread_id))
        return dict(snapshot.values or {})

    def load(self, thread_id: str) -> MemoryView:
        values = self._state(thread_id)
        head, summary, window = split_summary(values.get("messages", []))
        return MemoryView(
            thread_id=thread_id,
            summary=summary,
            messages=[m.model_copy(deep=True) for m in window],
            folds=int(values.get("memshift_folds") or 0),
            summary_message=head.model_copy(deep=True) if head is not None else None,
            backend=self.name,
        )

    def _save(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        call = uuid.uuid4().hex
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "memshift_call": call}}
        try:
            turn: Any = {"messages": [m.model_copy(deep=True) for m in messages]}
            self.graph.invoke(turn, config)
        finally:
            error = self._errors.pop(call, None)
            self.store.retain(thread_id)  # also when the fold failed: retention is not optional
        if error is not None:
            raise error

    def clear(self, thread_id: str) -> None:
        with self.store.lock(thread_id):
            self.store.checkpointer.delete_thread(thread_id)

    def restore(self, thread_id: str, summary: str, window: Sequence[BaseMessage], folds: int) -> None:
        head = [build_summary_message(summary)] if summary else []
        with self.store.lock(thread_id):
            self.graph.update_state(
                self.config(thread_id),
                {
                    "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *head,
                                 *(m.model_copy(deep=True) for m in window)],
                    "memshift_folds": folds,
                },
                as_node=FOLD_NODE,
            )
            self.store.retain(thread_id)
