"""Checkpoint savers joined to one memshift transaction, and what reads each checkpoint once.

``joined_get`` / ``joined_put`` (and their async twins) run one saver call inside a memshift
transaction of the thread, on the store's saver joined to it (``Checkpoints.saver``): its
snapshot, its lock. ``memory.checkpointer`` reads a run's checkpoint with the placement
(``placed_get``: in one statement where the store can) and writes a run's input checkpoint
with the placement check and retention that way (on PostgreSQL as one message, where a
guard statement that finds the thread moved aborts it all: ``Moved``).

A middleware step reads the thread's checkpoint (``get_state``) and then writes through
``update_state``, which reads the same checkpoint again before it writes. Inside one write
transaction, under the thread's lock, nothing else can change it in between, so the second
read is answered from the first. Any write forgets what was read. The saver lives exactly
as long as its transaction (``Tx.saver``), so nothing outlives the lock.
"""

from __future__ import annotations

import functools
from typing import Any

from langgraph.checkpoint.base import get_checkpoint_id

__all__ = ["Moved", "ReadOnce", "ajoined_get", "ajoined_put", "aplaced_get", "joined_get",
           "joined_put", "placed_get", "read_once"]


class Moved(Exception):
    """Inside a transaction: the thread no longer lives where this process claimed it.
    ``placement``: where it lives now, when ``known`` (a guard statement that aborted its
    transaction says only that it moved)."""

    def __init__(self, placement: Any = None, known: bool = True) -> None:
        self.placement, self.known = placement, known


def joined_get(store: Any, tx: Any, config: Any) -> Any:
    """``get_tuple(config)`` inside ``tx`` (``store``: a ``Store`` with checkpoints)."""
    with store.guard("read checkpoint"):
        return store.checkpoints.saver(tx).get_tuple(config)


async def ajoined_get(store: Any, tx: Any, config: Any) -> Any:
    saver = await store.checkpoints.asaver(tx)
    if saver is None:  # the sync saver does no I/O
        return joined_get(store, tx, config)
    with store.guard("read checkpoint"):
        return await saver.aget_tuple(config)


def placed_get(store: Any, tx: Any, config: Any) -> tuple[Any, Any]:
    """The thread's placement and ``get_tuple(config)`` inside ``tx``: one statement where
    the store reads both at once (``Checkpoints.get_placed``), else one after the other."""
    if (both := store.checkpoints.get_placed) is not None:
        return store.run(tx, both, config)
    return store.run(tx, store.placement), joined_get(store, tx, config)


async def aplaced_get(store: Any, tx: Any, config: Any) -> tuple[Any, Any]:
    if (both := store.checkpoints.get_placed) is not None:
        return await store.arun(tx, both, config)
    return await store.arun(tx, store.placement), await ajoined_get(store, tx, config)


def joined_put(store: Any, tx: Any, *args: Any) -> Any:
    """``put(config, checkpoint, metadata, new_versions)`` inside ``tx``."""
    with store.guard("write checkpoint"):
        return store.checkpoints.saver(tx).put(*args)


async def ajoined_put(store: Any, tx: Any, *args: Any) -> Any:
    saver = await store.checkpoints.asaver(tx)
    if saver is None:
        return joined_put(store, tx, *args)
    with store.guard("write checkpoint"):
        return await saver.aput(*args)


def _key(config: Any) -> tuple:
    conf = config.get("configurable", {})
    return conf.get("thread_id"), conf.get("checkpoint_ns", ""), get_checkpoint_id(config)


class ReadOnce:
    """Mix in before a saver class: ``get_tuple`` once per checkpoint until a write."""

    _read: dict[tuple, Any]

    def _memo(self) -> dict[tuple, Any]:
        memo = self.__dict__.get("_read")
        if memo is None:
            memo = self.__dict__["_read"] = {}
        return memo

    def get_tuple(self, config: Any) -> Any:
        memo, key = self._memo(), _key(config)
        if key not in memo:
            memo[key] = super().get_tuple(config)  # type: ignore[misc]
        return memo[key]

    async def aget_tuple(self, config: Any) -> Any:
        memo, key = self._memo(), _key(config)
        if key not in memo:
            memo[key] = await super().aget_tuple(config)  # type: ignore[misc]
        return memo[key]

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self._memo().clear()
        return super().put(*args, **kwargs)  # type: ignore[misc]

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        self._memo().clear()
        return await super().aput(*args, **kwargs)  # type: ignore[misc]

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:
        self._memo().clear()
        return super().put_writes(*args, **kwargs)  # type: ignore[misc]

    async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
        self._memo().clear()
        return await super().aput_writes(*args, **kwargs)  # type: ignore[misc]

    def delete_thread(self, *args: Any, **kwargs: Any) -> Any:
        self._memo().clear()
        return super().delete_thread(*args, **kwargs)  # type: ignore[misc]

    async def adelete_thread(self, *args: Any, **kwargs: Any) -> Any:
        self._memo().clear()
        return await super().adelete_thread(*args, **kwargs)  # type: ignore[misc]


@functools.cache
def read_once(cls: type) -> type:
    """``cls`` with :class:`ReadOnce` mixed in (one class per saver class)."""
    return type(f"ReadOnce{cls.__name__}", (ReadOnce, cls), {})
