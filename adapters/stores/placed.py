"""``memory.checkpointer``: the store's LangGraph saver, asking where a thread lives first.

``create_agent`` reads a thread through its checkpointer (``get_tuple`` at the start of every
run, ``list`` for the history) and writes it with ``put``. A thread that still lives on the
classic backend has no checkpoint there, so the agent would see an empty memory in silence.
This saver claims the thread for the middleware backend before each of those calls: the
router moves it (its compare-and-set move, one transaction) if it lives on classic, or raises
``ThreadElsewhere`` when the memory was told not to move threads. Everything else goes
straight to the saver underneath.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["PlacedSaver"]

_PASS = ("put_writes", "delete_thread", "delete_for_runs", "copy_thread", "prune",
         "get_delta_channel_history", "get_next_version")
_APASS = ("aput_writes", "adelete_thread", "adelete_for_runs", "acopy_thread", "aprune",
          "aget_delta_channel_history")


def _thread(config: Any) -> str | None:
    if not config:
        return None
    tid = (config.get("configurable") or {}).get("thread_id")
    return tid if isinstance(tid, str) and tid else None


class PlacedSaver(BaseCheckpointSaver):
    """Claims threads for ``middleware`` through ``engine`` before the saver sees them;
    ``touch(thread_id)`` runs first (the memory's adoption of a legacy history)."""

    def __init__(self, inner: BaseCheckpointSaver, engine: Any,
                 touch: Callable[[str], Any] | None = None) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.engine, self.touch = inner, engine, touch

    def _claim(self, config: Any) -> None:
        if (tid := _thread(config)) is not None:
            if self.touch is not None:
                self.touch(tid)
            self.engine.claim(tid, "middleware")

    async def _aclaim(self, config: Any) -> None:
        if (tid := _thread(config)) is not None:
            if self.touch is not None:
                self.touch(tid)
            await self.engine.aclaim(tid, "middleware")

    def get_tuple(self, config: Any) -> Any:
        self._claim(config)
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: Any) -> Any:
        await self._aclaim(config)
        return await self.inner.aget_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        self._claim(config)
        return self.inner.list(config, **kwargs)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        await self._aclaim(config)
        async for item in self.inner.alist(config, **kwargs):
            yield item

    def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        self._claim(config)
        return self.inner.put(config, *args, **kwargs)

    async def aput(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        await self._aclaim(config)
        return await self.inner.aput(config, *args, **kwargs)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def _passing(name: str) -> Any:
    def method(self: PlacedSaver, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)
    method.__name__ = name
    return method


def _apassing(name: str) -> Any:
    async def method(self: PlacedSaver, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.inner, name)(*args, **kwargs)
    method.__name__ = name
    return method


for _name in _PASS:
    setattr(PlacedSaver, _name, _passing(_name))
for _name in _APASS:
    setattr(PlacedSaver, _name, _apassing(_name))
