"""Middleware backend: the real ``SummarizationMiddleware`` on a LangGraph checkpointer.

``save`` reads the thread's checkpoint, runs the stock ``before_model`` over the stored
messages plus the new turn, and writes one checkpoint with ``update_state`` through a
saver bound to the engine's transaction. The thread is stored raw in the root namespace,
so ``create_agent(model, middleware=[mw], checkpointer=same)`` continues it.

The middleware subclass and the graph live in ``adapters.backends.agent_middleware`` and
are built on first use: importing ``langchain.agents`` costs about 1.5 s, which a command
that never reads or writes a checkpoint (a re-run of a finished migration) does not pay, nor
a classic memory asking whether this side holds a thread (``holds_in``: a saver lookup).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig

from adapters import _upstream
from adapters.backends.base import FoldFn, MemoryBackend
from adapters.backends.middleware_parts import (
    FOLD_NODE,
    SUMMARY_PREFIX,
    AgentHooks,
    build_summary_message,
    split_summary,
)
from adapters.errors import MemshiftError, corrupt
from adapters.stores.base import Tx
from adapters.view import MemoryView, ThreadRecord

if TYPE_CHECKING:
    from adapters.backends.agent_middleware import MemshiftSummarizationMiddleware

__all__ = [
    "FOLD_NODE",
    "SUMMARY_PREFIX",
    "AgentHooks",
    "MiddlewareBackend",
    "split_summary",
]


class MiddlewareBackend(MemoryBackend):
    name = "middleware"

    def __init__(self, *, llm: Any = None, hooks: AgentHooks | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._agent_llm, self._agent_hooks = llm, hooks

    @cached_property
    def middleware(self) -> MemshiftSummarizationMiddleware:
        """The real ``SummarizationMiddleware`` subclass this backend folds through."""
        _upstream.check_middleware_upstream()
        from adapters.backends.agent_middleware import MemshiftSummarizationMiddleware
        from adapters.summarizer_model import model_or_stand_in

        model = model_or_stand_in(self._agent_llm, self.policy.counter, chat=True)
        return MemshiftSummarizationMiddleware(self.policy, model, self._agent_hooks)

    @cached_property
    def graph(self) -> Any:
        from adapters.backends.agent_middleware import fold_graph

        return fold_graph()

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

    # -- what the placement guard asks of this side: a saver lookup, no graph ------------------
    def holds_in(self, tx: Tx) -> bool:
        """A thread without a checkpoint holds nothing (what ``get_state`` would say: empty
        values), so asking needs no graph; one with a checkpoint is read as a load reads it."""
        with self.store.guard("read checkpoint"), _decoding(tx):
            found = self.store.checkpoints.saver(tx).get_tuple(self.config(tx.thread_id))
        return found is not None and self.holds(self.read(tx))

    async def aholds_in(self, tx: Tx) -> bool:
        saver = await self.store.checkpoints.asaver(tx)
        if saver is None:  # nothing to wait for
            return self.holds_in(tx)
        with self.store.guard("read checkpoint"), _decoding(tx):
            found = await saver.aget_tuple(self.config(tx.thread_id))
        return found is not None and self.holds(await self.aread(tx))

    def clear_writes(self) -> dict[str, Any]:
        return {"delete": True}

    def restore_writes(self, record: ThreadRecord) -> dict[str, Any]:
        head = [build_summary_message(record.summary)] if record.summary else []
        return {"update": {"messages": [RemoveMessage(id=_upstream.REMOVE_ALL_MESSAGES), *head,
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

