"""``memory.checkpointer``'s thread operations — LangGraph's ``copy_thread``,
``delete_for_runs`` and ``prune`` — each in memshift transactions of each thread (its lock
held), where the store implements them (``Checkpoints.operations``).

A module of its own because it is a seam of its own: ``adapters.stores.placed`` claims threads
and writes checkpoints; this is what the saver offers on whole threads. The operations come as
mixins so a saver class has a method only when it implements it (LangGraph's
checkpoint-conformance suite detects capabilities by the methods a class overrides).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from adapters.errors import ConfigError, DeltaStateError
from adapters.io import Steps, run_async, run_sync
from adapters.stores.base import Store, Tx, in_transaction, store_io
from adapters.thread_keys import storage_id

__all__ = ["MIXINS", "OPERATIONS", "PRUNE_STRATEGIES", "ThreadOperations"]

OPERATIONS = ("copy_thread", "delete_for_runs", "prune")
PRUNE_STRATEGIES = ("keep_latest", "delete")


class ThreadOperations:
    """The steps of the operations, over the saver's ``store`` and ``engine`` (claims, clears)."""

    store: Store
    engine: Any

    def _each(self, thread_ids: Sequence[str], fn: Callable[..., Any], *args: Any) -> Steps[None]:
        store = self.store
        for thread_id in thread_ids:
            def body(tx: Tx) -> Steps[None]:
                yield store_io(store, tx, fn, *args)
            yield from in_transaction(store, thread_id, body)

    def _read(self, thread_id: str, fn: Callable[..., Any], *args: Any) -> Steps[Any]:
        store = self.store

        def body(tx: Tx) -> Steps[Any]:
            return (yield store_io(store, tx, fn, *args))
        return (yield from in_transaction(store, thread_id, body, write=False))

    def _copy_steps(self, source: str, target: str) -> Steps[None]:
        if source == target:
            return
        store, checkpoints = self.store, self.store.checkpoints
        yield from self.engine.claim_steps(target, "middleware")
        transcript = yield from self._read(source, store.transcript_in)

        def body(tx: Tx) -> Steps[None]:
            if (yield store_io(store, tx, store.last_ids, 1)):
                raise ConfigError(f"copy_thread: thread {target!r} already has a transcript; "
                                  "copy into a new thread id (or delete_thread it first)")
            yield store_io(store, tx, checkpoints.copy_from, source)
            if transcript:
                yield store_io(store, tx, store.append_transcript, transcript)
        yield from in_transaction(store, target, body)

    def _runs_steps(self, run_ids: Sequence[str]) -> Steps[None]:
        runs = [str(r) for r in run_ids]
        if not runs:
            return
        checkpoints = self.store.checkpoints
        threads = yield from self._read("", checkpoints.run_threads, runs)
        yield from self._each(threads, checkpoints.delete_runs, runs)

    def _prune_steps(self, thread_ids: Sequence[str], strategy: str) -> Steps[None]:
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"Unknown prune strategy: {strategy!r}")
        threads = [storage_id(str(t)) for t in thread_ids]
        if strategy == "delete":
            for thread_id in threads:
                yield from self.engine.clear_steps(thread_id)
            return
        checkpoints = self.store.checkpoints
        for thread_id in threads:  # nothing is pruned when one thread would be refused
            if (yield from self._read(thread_id, checkpoints.uses_delta)):
                raise DeltaStateError.for_prune(thread_id)
        yield from self._each(threads, checkpoints.prune_latest)


# -- the operations, as mixins: a class has a method only when it implements it ---------------
class _Copy:
    def copy_thread(self: Any, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint and write of one thread (and its transcript) under a new one."""
        run_sync(self._copy_steps(storage_id(source_thread_id), storage_id(target_thread_id)))

    async def acopy_thread(self: Any, source_thread_id: str, target_thread_id: str) -> None:
        await run_async(self._copy_steps(storage_id(source_thread_id),
                                         storage_id(target_thread_id)))


class _Runs:
    def delete_for_runs(self: Any, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints (and writes) of ``run_ids``, each thread in its transaction."""
        run_sync(self._runs_steps(run_ids))

    async def adelete_for_runs(self: Any, run_ids: Sequence[str]) -> None:
        await run_async(self._runs_steps(run_ids))


class _Prune:
    def prune(self: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """LangGraph's ``prune``: ``keep_latest`` keeps each namespace's newest checkpoint
        (``DeltaStateError`` for ``DeltaChannel`` threads, nothing pruned), ``delete`` clears."""
        run_sync(self._prune_steps(thread_ids, strategy))

    async def aprune(self: Any, thread_ids: Sequence[str], *,
                     strategy: str = "keep_latest") -> None:
        await run_async(self._prune_steps(thread_ids, strategy))


MIXINS = {"copy_thread": _Copy, "delete_for_runs": _Runs, "prune": _Prune}
