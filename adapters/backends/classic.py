"""Classic backend: the real ``ConversationSummaryBufferMemory``, one per call, fixed.

Fixes over stock (each measured in DESIGN.md): counts with the policy's offline counter
instead of ``llm.get_num_tokens_from_messages``; folds through an explicit store
operation (stock ``prune()`` pops a *copy*, so persistent histories never shrink);
persists the running summary per thread; never splits a tool-call pair; never loses a
message when the summarizer fails (the turn is committed before any fold).

The real class and the chat history it steps over live in ``classic_memory``, imported on
first use: a process on the middleware side never defines a ``BaseChatMessageHistory``
subclass (langchain-core deprecates that class; see the guide).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, SystemMessage

from adapters import _upstream
from adapters.backends.base import FoldFn, MemoryBackend
from adapters.backends.classic_state import ClassicWrites, WindowCounts
from adapters.stores.base import ClassicSnapshot, Tx
from adapters.stores.quick import keeps_messages
from adapters.view import MemoryView, ThreadRecord, detach

if TYPE_CHECKING:
    from langchain_core.language_models import BaseLanguageModel

    from adapters.backends.classic_memory import PolicySummaryBufferMemory

__all__ = ["ClassicBackend", "ClassicWrites", "WindowCounts"]


class ClassicBackend(MemoryBackend):
    name = "classic"

    def __init__(self, *, llm: Any = None,
                 summary_message_cls: type[BaseMessage] = SystemMessage, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summary_message_cls = summary_message_cls
        self._local = threading.local()
        # window counts kept by identity: every window of a store that shares its messages;
        # the windows a store's quick path keeps (``ClassicSnapshot.kept``: fewer of them)
        shares = self.store.shares_messages
        kept = shares or keeps_messages(self.store)
        self._counts = WindowCounts(self.policy.count, 4096 if shares else 1024) \
            if kept and self.policy.additive else None
        self._llm = llm

    @cached_property
    def llm(self) -> BaseLanguageModel:
        """What the real classic memory is given as ``llm``: the application's model, or a
        stand-in (the stock class validates ``llm`` as a ``BaseLanguageModel``; folds never
        call it). Built on first use: a chat model class imports LangChain's runnables."""
        from adapters.summarizer_model import model_or_stand_in

        return model_or_stand_in(self._llm, self.policy.counter, chat=False)

    def memory_for(self, snapshot: ClassicSnapshot, writes: ClassicWrites | None = None,
                   fold: FoldFn | None = None) -> PolicySummaryBufferMemory:
        """The real classic memory over a thread's snapshot. One instance per OS thread (a
        step never awaits, so no two steps share it at once), pointed at each step's state."""
        memory = getattr(self._local, "memory", None)
        if memory is None:
            _upstream.check_classic_upstream()
            from adapters.backends.classic_memory import PolicySummaryBufferMemory

            memory = self._local.memory = PolicySummaryBufferMemory.build(
                llm=self.llm, policy=self.policy, counts=self._counts,
                shares=self.store.shares_messages,
                human_prefix=self.human_prefix, ai_prefix=self.ai_prefix,
                summary_message_cls=self.summary_message_cls)
        return memory.step(snapshot, writes or ClassicWrites(), fold)

    # -- I/O ---------------------------------------------------------------------------------
    def read(self, tx: Tx) -> ClassicSnapshot:
        return self.store.run(tx, self.store.classic.read)

    async def aread(self, tx: Tx) -> ClassicSnapshot:
        return await self.store.arun(tx, self.store.classic.read)

    def write(self, tx: Tx, writes: ClassicWrites) -> None:
        self.store.run(tx, self._apply, writes)

    async def awrite(self, tx: Tx, writes: ClassicWrites) -> None:
        await self.store.arun(tx, self._apply, writes)

    def _apply(self, tx: Tx, writes: ClassicWrites) -> None:
        state = self.store.classic
        if writes.clear:
            state.clear(tx)
        if writes.replace is not None:
            state.replace(tx, *writes.replace)
            return
        state.append(tx, writes.append)
        if writes.fold is not None:
            state.fold(tx, *writes.fold)

    # -- behaviour -----------------------------------------------------------------------------
    def step(self, state: ClassicSnapshot, turn: Sequence[BaseMessage],
             fold: FoldFn) -> tuple[ClassicWrites | None, bool]:
        writes = ClassicWrites()
        memory = self.memory_for(state, writes, fold)
        if turn:
            memory.chat_memory.add_messages(list(turn))
        memory.prune()
        changed = bool(writes.append or writes.fold or writes.replace or writes.clear)
        return (writes if changed else None), writes.folded

    def view(self, thread_id: str, state: ClassicSnapshot, detached: bool = True) -> MemoryView:
        memory = self.memory_for(state)
        buffer = memory.load_memory_variables({})[memory.memory_key]
        summary = memory.moving_summary_buffer
        head, window = (buffer[0], buffer[1:]) if summary else (None, buffer)
        if detached and self.store.shares_messages:  # the view is the caller's to edit, the
            window = [detach(m) for m in window]  # store is not
        return MemoryView(thread_id=thread_id, summary=summary, messages=window,
                          folds=state.folds, summary_message=head, backend=self.name)

    def holds(self, state: ClassicSnapshot) -> bool:
        return bool(state.window or state.summary)

    def shared_view(self, thread_id: str, state: ClassicSnapshot) -> MemoryView:
        return self.view(thread_id, state, detached=False)

    def clear_writes(self) -> ClassicWrites:
        return ClassicWrites(clear=True)

    def restore_writes(self, record: ThreadRecord) -> ClassicWrites:
        return ClassicWrites(replace=(record.summary, record.folds, list(record.window)))
