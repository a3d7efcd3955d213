"""One implementation, two thin drivers.

The engine's logic (the save path, the fold, retries) is written once, as generators that
*yield* the I/O they need: an ``IO`` pairs the blocking call with its async twin. ``run_sync``
performs each request with the blocking driver, ``run_async`` awaits the async one (async
database drivers, ``ainvoke`` on chat models). Errors raised by a request are thrown back
into the generator at the point that asked for it, so ``try``/``except`` in the logic work
the same under both drivers. Nothing is copied between a sync and an async body.

Every request names the methods it runs where it is made — ``yield IO(self.backend.read,
self.backend.aread, tx)`` — so "go to definition" on either reaches the method in one hop, and
an error raised there carries that method's frames and, above them, the ``yield`` line of the
logic that asked for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["IO", "Steps", "run_async", "run_sync", "wait_future"]

T = TypeVar("T")


class IO:
    """One I/O request: ``sync()`` blocks, ``async_()`` awaits; both give the same result."""

    __slots__ = ("sync_fn", "async_fn", "args")

    def __init__(self, sync_fn: Callable[..., Any], async_fn: Callable[..., Awaitable[Any]],
                 *args: Any) -> None:
        self.sync_fn, self.async_fn, self.args = sync_fn, async_fn, args

    def sync(self) -> Any:
        return self.sync_fn(*self.args)

    async def async_(self) -> Any:
        return await self.async_fn(*self.args)


Steps = Generator[IO, Any, T]


def run_sync(steps: Steps[T]) -> T:
    """Drive ``steps`` with blocking I/O."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = request.sync(), None
        except BaseException as exc:  # handed back to the logic that asked
            value, error = None, exc


async def run_async(steps: Steps[T]) -> T:
    """Drive ``steps`` with async I/O (cancellation is thrown in like any error, so
    transactions still roll back)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = await request.async_(), None
        except BaseException as exc:  # handed back to the logic that asked
            value, error = None, exc


def wait_future(future: Future[Any], timeout: float | None = None) -> IO:
    """Waiting for a ``concurrent.futures.Future`` (work on another thread) as a request: it
    blocks, or it is awaited without blocking the loop; ``TimeoutError`` after ``timeout``."""
    return IO(_wait_future, _await_future, future, timeout)


def _wait_future(future: Future[Any], timeout: float | None) -> Any:
    return future.result(timeout=timeout)


async def _await_future(future: Future[Any], timeout: float | None) -> Any:
    import asyncio

    return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

