"""Checkpoint savers joined to one memshift transaction read each checkpoint once.

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

__all__ = ["ReadOnce", "read_once"]


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
