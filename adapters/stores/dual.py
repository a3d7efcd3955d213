"""One checkpointer object for ``create_agent`` that works for ``invoke`` and ``ainvoke``.

LangGraph's SQL savers are either sync (``SqliteSaver``, ``PostgresSaver``) or async
(``AsyncSqliteSaver``, ``AsyncPostgresSaver``, bound to one event loop). ``DualSaver``
sends sync calls to the sync saver and async calls to an async saver made for the running
loop, over the same tables.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["DualSaver"]

# only what both savers of every store implement (copy_thread, delete_for_runs and prune run
# in memshift's transactions: adapters.stores.placed)
_SYNC = ("get_tuple", "list", "put", "put_writes", "delete_thread",
         "get_delta_channel_history", "get_next_version")
_ASYNC = ("aget_tuple", "aput", "aput_writes", "adelete_thread", "aget_delta_channel_history")


class DualSaver(BaseCheckpointSaver):
    def __init__(self, sync: BaseCheckpointSaver,
                 make_async: Callable[[], Awaitable[tuple[BaseCheckpointSaver, Callable[[], Awaitable[None]]]]]) -> None:
        super().__init__(serde=sync.serde)
        self.sync = sync
        self._make_async = make_async
        self._async: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    async def async_saver(self) -> BaseCheckpointSaver:
        """The async saver of the running event loop (made on first use)."""
        loop = asyncio.get_running_loop()
        if loop not in self._async:
            self._async[loop] = await self._make_async()
        return self._async[loop][0]

    async def aclose(self) -> None:
        entry = self._async.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[1]()

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in (await self.async_saver()).alist(config, **kwargs):
            yield item


def _sync(name: str) -> Callable[..., Any]:
    def method(self: DualSaver, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.sync, name)(*args, **kwargs)
    method.__name__ = name
    return method


def _async(name: str) -> Callable[..., Any]:
    async def method(self: DualSaver, *args: Any, **kwargs: Any) -> Any:
        return await getattr(await self.async_saver(), name)(*args, **kwargs)
    method.__name__ = name
    return method


for _name in _SYNC:
    setattr(DualSaver, _name, _sync(_name))
for _name in _ASYNC:
    setattr(DualSaver, _name, _async(_name))
