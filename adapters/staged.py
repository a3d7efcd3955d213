"""Staged cutover: both backends serve live traffic, each thread from exactly one of them.

A thread's backend is decided once, by ``route(thread_id)`` or a stable hash of its id
against ``rollout``, and recorded in the store (``Placement``: backend, version, since,
pinned). The record is authoritative. When the configuration asks for the other backend, the
next touch moves the thread: its state is copied through the same restore path as
``migrate`` and the placement changes *in the same transaction*, which also checks that no turn
landed meanwhile (transcript compare-and-set) and that nobody moved it first (version
compare-and-set). A crash mid-move leaves the thread on its old backend, intact.

Saves check, inside their own transaction, that the thread still belongs to the backend they
write to; a thread is therefore never written by both backends for one turn.

Rolling deploys: a process follows any placement record newer than its own configuration
(``config_since``), so two processes with different ``rollout`` values never move one thread
back and forth; a thread changes backend at most once per configuration change.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.engine import MemoryEngine, as_list
from adapters.errors import ConfigError, MemshiftError
from adapters.io import IO, Steps, run_async, run_sync
from adapters.stores.base import Placement, Tx, in_transaction, store_io
from adapters.view import MemoryView, ThreadRecord

__all__ = ["PlacementChanged", "StagedEngine", "share_of"]

ATTEMPTS = 5


class PlacementChanged(MemshiftError):
    """The thread moved between deciding where it lives and writing to it (retried)."""


def share_of(thread_id: str) -> float:
    """A stable number in [0, 1) for a thread id: the rollout compares against it."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class StagedEngine:
    name = "staged"

    def __init__(self, *, classic: Any, middleware: MemoryEngine, rollout: float = 0.0,
                 route: Callable[[str], str] | None = None,
                 config_since: float | None = None) -> None:
        if not 0 <= rollout <= 1:
            raise ConfigError(f"rollout must be within [0, 1], got {rollout}")
        self.engines: dict[str, Any] = {"classic": classic, "middleware": middleware}
        self.rollout, self.route = rollout, route
        self.config_since = time.time() if config_since is None else config_since
        self.store = middleware.store  # placements live with the middleware side
        self.same_store = classic.store is middleware.store
        self.moves = 0

    # -- what the facade reads off an engine ---------------------------------------------
    @property
    def mismatches(self) -> list[Any]:
        """Shadow mismatches of the classic cohort (``shadow_sample``), else ``[]``."""
        return list(getattr(self.engines["classic"], "mismatches", []))

    policy = property(lambda self: self.engines["classic"].policy)
    backend = property(lambda self: self.engines["classic"].backend)

    @property
    def summarizer(self) -> Any:
        return self.engines["classic"].summarizer

    @summarizer.setter
    def summarizer(self, value: Any) -> None:
        for engine in self.engines.values():
            engine.summarizer = value

    # -- the decision ------------------------------------------------------------------------
    def desired(self, thread_id: str) -> str:
        if self.route is not None:
            backend = self.route(thread_id)
            if backend not in self.engines:
                raise ConfigError(f"route() returned {backend!r}; use 'classic' or 'middleware'")
            return backend
        return "middleware" if share_of(thread_id) < self.rollout else "classic"

    def _run(self, tx: Tx, fn: Callable[..., Any], *args: Any) -> IO:
        return store_io(self.store, tx, fn, *args)

    def _read(self, thread_id: str) -> Steps[Placement | None]:
        def body(tx: Tx) -> Steps[Placement | None]:
            return (yield self._run(tx, self.store.placement))
        return (yield from in_transaction(self.store, thread_id, body, write=False))

    def _origin(self, thread_id: str) -> Steps[str]:
        """Where an unrecorded thread lives now: stored before staging began, or new."""
        classic = yield from self.engines["classic"]._load(thread_id)
        if classic.messages or classic.summary:
            return "classic"
        middleware = yield from self.engines["middleware"]._load(thread_id)
        return "middleware" if middleware.messages or middleware.summary else \
            self.desired(thread_id)

    def _place(self, thread_id: str, want: str | None = None, pin: bool | None = None) -> Steps[Placement]:
        """The thread's placement after applying this configuration (moving it if due)."""
        for _ in range(ATTEMPTS):
            current = yield from self._read(thread_id)
            if current is None:
                first = Placement((yield from self._origin(thread_id)), 1, time.time())

                def record(tx: Tx, first: Placement = first) -> Steps[None]:
                    if (yield self._run(tx, self.store.placement)) is None:
                        yield self._run(tx, self.store.set_placement, first)
                yield from in_transaction(self.store, thread_id, record)
                continue
            target = want or self.desired(thread_id)
            if want is None and (current.pinned or current.since > self.config_since):
                return current  # a pin, or a newer process's decision: follow the record
            if current.backend == target and (pin is None or current.pinned == pin):
                return current
            try:
                moved = yield from self._move(thread_id, current, target,
                                              current.pinned if pin is None else pin)
            except PlacementChanged:
                continue
            if moved is not None:
                return moved
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def _move(self, thread_id: str, current: Placement, to: str,
              pinned: bool) -> Steps[Placement | None]:
        new = Placement(to, current.version + 1, time.time(), pinned)
        if current.backend != to:
            source, target = self.engines[current.backend], self.engines[to]
            # transcript first: a turn that commits between the two reads is then newer than
            # the last id checked below, and the move is retried instead of dropping it
            transcript = yield from self._transcript(source.store, thread_id)
            view = yield from source._load(thread_id)
            record = ThreadRecord(thread_id, view.summary, view.messages, view.folds, transcript)
            last = transcript[-1].id if transcript and transcript[-1].id else ""
            wrote = yield from target._restore(record, last if self.same_store else None, None,
                                               self._swap(current, new))
            if not wrote:  # a turn landed meanwhile: read again
                return None
            self.moves += 1
            return new
        yield from in_transaction(self.store, thread_id, self._swap(current, new))
        return new

    @staticmethod
    def _transcript(store: Any, thread_id: str) -> Steps[list[BaseMessage]]:
        def body(tx: Tx) -> Steps[list[BaseMessage]]:
            return (yield store_io(store, tx, store.transcript_in))
        return (yield from in_transaction(store, thread_id, body, write=False))

    def _swap(self, expected: Placement, new: Placement) -> Callable[[Tx], Steps[None]]:
        """Steps that change the placement only if it is still ``expected``."""
        def steps(tx: Tx) -> Steps[None]:
            if (yield self._run(tx, self.store.placement)) != expected:
                raise PlacementChanged("another process changed the placement first")
            yield self._run(tx, self.store.set_placement, new)
        return steps

    def _guard(self, placement: Placement) -> Callable[[Tx], Steps[None]] | None:
        """Inside a save's transaction: the thread still belongs to this backend."""
        if not self.same_store:
            return None

        def steps(tx: Tx) -> Steps[None]:
            now = yield self._run(tx, self.store.placement)
            if now is None or (now.backend, now.version) != (placement.backend, placement.version):
                raise PlacementChanged("the thread moved while this turn was being saved")
        return steps

    # -- the engine API ---------------------------------------------------------------------
    def _load(self, thread_id: str) -> Steps[MemoryView]:
        placement = yield from self._place(thread_id)
        return (yield from self.engines[placement.backend]._load(thread_id))

    def _save(self, thread_id: str, turn: list[BaseMessage], fold: bool = True) -> Steps[list[BaseMessage]]:
        for _ in range(ATTEMPTS):
            placement = yield from self._place(thread_id)
            engine = self.engines[placement.backend]
            try:
                return (yield from engine._save(thread_id, turn, fold, self._guard(placement)))
            except PlacementChanged:
                continue
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def load(self, thread_id: str) -> MemoryView:
        return run_sync(self._load(thread_id))

    async def aload(self, thread_id: str) -> MemoryView:
        return await run_async(self._load(thread_id))

    def save(self, thread_id: str, turn: Sequence[BaseMessage], fold: bool = True) -> list[BaseMessage]:
        return run_sync(self._save(thread_id, as_list(turn), fold))

    async def asave(self, thread_id: str, turn: Sequence[BaseMessage],
                    fold: bool = True) -> list[BaseMessage]:
        return await run_async(self._save(thread_id, as_list(turn), fold))

    def place(self, thread_id: str) -> Placement:
        """Apply this configuration to one thread now (an eager move)."""
        return run_sync(self._place(thread_id))

    def pin(self, thread_id: str, backend: str) -> Placement:
        if backend not in self.engines:
            raise ConfigError(f"pin to 'classic' or 'middleware', not {backend!r}")
        return run_sync(self._place(thread_id, want=backend, pin=True))

    def unpin(self, thread_id: str) -> Placement:
        """The rollout decides again from the next touch on."""
        current = run_sync(self._read(thread_id))
        if current is None or not current.pinned:
            return current or run_sync(self._place(thread_id))
        released = Placement(current.backend, current.version + 1, 0.0, False)
        run_sync(in_transaction(self.store, thread_id, self._swap(current, released)))
        return released

    def placement_of(self, thread_id: str) -> Placement | None:
        return run_sync(self._read(thread_id))

    def clear(self, thread_id: str) -> None:
        self.engines[self.place(thread_id).backend].clear(thread_id)

    async def aclear(self, thread_id: str) -> None:
        placement = await run_async(self._place(thread_id))
        await self.engines[placement.backend].aclear(thread_id)

    def restore(self, record: ThreadRecord, **kwargs: Any) -> bool:
        return self.engines[self.place(record.thread_id).backend].restore(record, **kwargs)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
