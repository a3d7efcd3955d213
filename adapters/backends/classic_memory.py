"""The real ``ConversationSummaryBufferMemory`` as the classic backend drives it: a subclass
whose ``prune`` follows a memshift policy and folds through the engine's function, over a
chat history that is one step's snapshot. Imported on the classic side's first step only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from pydantic import PrivateAttr

from adapters.backends.base import FoldFn
from adapters.backends.classic_state import ClassicWrites, WindowCounts
from adapters.stores.base import ClassicSnapshot

__all__ = ["PolicySummaryBufferMemory", "StepWindow"]


class StepWindow(BaseChatMessageHistory):
    """The thread's window during one step, as a real chat history: reads come from the
    snapshot, writes are collected for the backend's ``write``."""

    def __init__(self, snapshot: ClassicSnapshot, writes: ClassicWrites) -> None:
        self.snapshot, self.writes = snapshot, writes

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return list(self.snapshot.window)  # a copy: stock prune() pops what it gets

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.snapshot.window.extend(messages)
        self.snapshot.rows.extend([None] * len(messages))  # not written yet
        self.writes.append.extend(messages)

    def clear(self) -> None:
        self.snapshot.window.clear()
        self.snapshot.rows.clear()
        self.writes.append.clear()
        self.writes.clear = True


class PolicySummaryBufferMemory(ConversationSummaryBufferMemory):
    """``ConversationSummaryBufferMemory`` whose prune follows a memshift policy and folds
    through the function the engine handed in."""

    # policy, window counts, whether every snapshot's messages are the store's own
    _bound: tuple[Any, WindowCounts | None, bool] = PrivateAttr(default=(None, None, False))
    _job: tuple[FoldFn | None, int] = PrivateAttr(default=(None, 0))  # fold function, folds

    @classmethod
    def build(cls, *, llm: Any, policy: Any, counts: WindowCounts | None, shares: bool,
              human_prefix: str, ai_prefix: str,
              summary_message_cls: type[BaseMessage]) -> PolicySummaryBufferMemory:
        """The real class, with ``model_construct`` (the inputs are memshift's own, already
        valid; the class's deprecation warning is about using it directly, which memshift
        exists to replace). ``step`` then points it at one thread's snapshot."""
        built = cls.model_construct(
            llm=llm, chat_memory=StepWindow(ClassicSnapshot(), ClassicWrites()),
            max_token_limit=policy.max_tokens or 2000, prompt=policy.prompt,
            human_prefix=human_prefix, ai_prefix=ai_prefix,
            summary_message_cls=summary_message_cls, return_messages=True)
        built._bound = (policy, counts, shares)
        built.moving_summary_buffer = ""  # set once as the class sets it (then by ``step``)
        return built

    def step(self, snapshot: ClassicSnapshot, writes: ClassicWrites,
             fold: FoldFn | None) -> PolicySummaryBufferMemory:
        """This instance over one step's snapshot (plain attribute assignments)."""
        window = self.chat_memory  # the instance's own StepWindow, pointed at this step
        assert isinstance(window, StepWindow)
        window.snapshot, window.writes = snapshot, writes
        # what ``self.moving_summary_buffer = ...`` and ``self._job = ...`` store, without
        # pydantic's ``__setattr__`` on every step (the class validates no assignment)
        self.__dict__["moving_summary_buffer"] = snapshot.summary
        self.__pydantic_private__["_job"] = (fold, snapshot.folds)  # type: ignore[index]
        return self

    def prune(self) -> None:
        """Fold per the policy; the summary and the shorter window are written together."""
        history = self.chat_memory
        window = list(history.messages)  # a copy: never mutate what a getter returned
        (policy, counts, shares), (fold, folds) = self._bound, self._job
        tokens = None
        assert isinstance(history, StepWindow)
        if counts is not None and policy.max_tokens is not None and \
                (shares or history.snapshot.kept):  # read rows have keys, this step's none
            rows = history.snapshot.rows
            tokens = counts(window, stored=len(rows) - rows.count(None))
        if not policy.trigger_reason(window, tokens):  # one count, like stock's prune;
            return  # plan_fold would answer "no cut" after counting message by message
        plan = policy.plan_fold(window)
        if not plan.cutoff or fold is None:
            return
        summary = fold(self.moving_summary_buffer, folds, window, plan)
        if summary is None:
            return
        assert isinstance(history, StepWindow)
        snapshot, writes = history.snapshot, history.writes
        dropped = snapshot.rows[: plan.cutoff]
        del snapshot.window[: plan.cutoff], snapshot.rows[: plan.cutoff]
        folds += 1
        self._job = (fold, folds)
        if None in dropped:  # the cut reaches messages of this step: write the result whole
            writes.append.clear()
            writes.replace = (summary, folds, list(snapshot.window))
        else:
            writes.fold = (summary, folds, dropped)
        self.moving_summary_buffer = summary
        writes.folded = True

    async def aprune(self) -> None:
        self.prune()
