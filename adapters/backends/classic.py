"""Classic backend: the real ``ConversationSummaryBufferMemory``, one per call, fixed.

Fixes over stock (each measured in DESIGN.md): counts with the policy's offline counter
instead of ``llm.get_num_tokens_from_messages``; folds through an explicit store
operation (stock ``prune()`` pops a *copy*, so persistent histories never shrink);
persists the running summary per thread; never splits a tool-call pair; never loses a
message when the summarizer fails (the turn is committed before any fold).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import PrivateAttr

from adapters.backends.base import FoldFn, MemoryBackend
from adapters.stores.base import ClassicSnapshot, ClassicState, Tx
from adapters.summarizer import SummarizerChatModel
from adapters.view import MemoryView, ThreadRecord

__all__ = ["ClassicBackend", "PolicySummaryBufferMemory"]


class TxWindow(BaseChatMessageHistory):
    """The thread's window inside one transaction, as a real chat history."""

    def __init__(self, state: ClassicState, tx: Tx, snapshot: ClassicSnapshot) -> None:
        self.state, self.tx, self.snapshot = state, tx, snapshot

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return list(self.snapshot.window)  # a copy: stock prune() pops what it gets

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        rows = self.state.append(self.tx, messages)
        self.snapshot.window.extend(messages)
        self.snapshot.rows.extend(rows)

    def clear(self) -> None:
        self.state.clear(self.tx)
        self.snapshot.window.clear()
        self.snapshot.rows.clear()


class PolicySummaryBufferMemory(ConversationSummaryBufferMemory):
    """``ConversationSummaryBufferMemory`` whose prune follows a memshift policy and folds
    through the function the engine handed in."""

    _fold: Any = PrivateAttr(default=None)
    _policy: Any = PrivateAttr(default=None)
    _folds: int = PrivateAttr(default=0)
    folded: bool = False

    def prune(self) -> None:
        """Fold per the policy; the summary and the shorter window are written together."""
        history = self.chat_memory
        window = list(history.messages)  # a copy: never mutate what a getter returned
        plan = self._policy.plan_fold(window)
        if not plan.cutoff or self._fold is None:
            return
        summary = self._fold(self.moving_summary_buffer, self._folds, window, plan)
        if summary is None:
            return
        assert isinstance(history, TxWindow)
        snapshot = history.snapshot
        history.state.fold(history.tx, summary, self._folds + 1, snapshot.rows[: plan.cutoff])
        del snapshot.window[: plan.cutoff], snapshot.rows[: plan.cutoff]
        self.moving_summary_buffer = summary
        self._folds += 1
        self.folded = True

    async def aprune(self) -> None:
        self.prune()


class ClassicBackend(MemoryBackend):
    name = "classic"

    def __init__(self, *, llm: BaseLanguageModel | None = None,
                 summary_message_cls: type[BaseMessage] = SystemMessage, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summary_message_cls = summary_message_cls
        # The stock class validates llm as a BaseLanguageModel; folds never call it.
        self.llm = llm if isinstance(llm, BaseLanguageModel) else SummarizerChatModel(
            summarizer=None, token_counter=self.policy.counter)

    def memory_for(self, tx: Tx, fold: FoldFn | None = None) -> PolicySummaryBufferMemory:
        """A real classic memory over the thread's window and summary inside ``tx``."""
        snapshot = self.store.classic.read(tx)
        memory = PolicySummaryBufferMemory(
            llm=self.llm,
            chat_memory=TxWindow(self.store.classic, tx, snapshot),
            moving_summary_buffer=snapshot.summary,
            max_token_limit=self.policy.max_tokens or 2000,
            prompt=self.policy.prompt,
            human_prefix=self.human_prefix,
            ai_prefix=self.ai_prefix,
            summary_message_cls=self.summary_message_cls,
            return_messages=True,
        )
        memory._fold, memory._policy, memory._folds = fold, self.policy, snapshot.folds
        return memory

    def load(self, tx: Tx) -> MemoryView:
        memory = self.memory_for(tx)
        buffer = memory.load_memory_variables({})[memory.memory_key]
        summary = memory.moving_summary_buffer
        head, window = (buffer[0], buffer[1:]) if summary else (None, buffer)
        return MemoryView(thread_id=tx.thread_id, summary=summary, messages=window,
                          folds=memory._folds, summary_message=head, backend=self.name)

    def save(self, tx: Tx, turn: Sequence[BaseMessage], fold: FoldFn) -> bool:
        memory = self.memory_for(tx, fold)
        if turn:
            memory.chat_memory.add_messages(list(turn))
        memory.prune()
        return memory.folded

    def clear(self, tx: Tx) -> None:
        self.store.classic.clear(tx)

    def restore(self, tx: Tx, record: ThreadRecord) -> None:
        self.store.classic.replace(tx, record.summary, record.folds, record.window)
