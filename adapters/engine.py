"""``MemoryEngine``: the one caller of backends, and the owner of what they share.

A save is two short transactions with the summarizer between them, never inside:

1. *The turn*: one transaction (the thread's lock lives exactly as long as it) checks for
   a retried turn, gives reused message ids fresh ones, appends the transcript and lets the
   backend's real class append the turn. The real class decides whether a fold is due;
   the fold function handed in only *plans* it ("not now") and the turn commits.
2. *The summary*: redact, summarize (retries, ``summary_timeout`` per attempt), no lock.
3. *The fold*: one transaction re-runs the real class on the current state with a fold
   function that answers only if the thread still asks for the very fold that was
   summarized (same previous summary, same fold count, same folded messages): a
   compare-and-set. The state and its fold record commit together. If another save
   changed the thread meanwhile, the fold is planned again (bounded), else deferred.

The logic is written once, as steps (``adapters.io``); ``save``/``asave`` and the other
pairs are the blocking and the async drivers of the same steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from adapters.agent_hooks import FoldHooks
from adapters.backends import BACKENDS, MemoryBackend
from adapters.backends.base import FoldFn
from adapters.errors import ConfigError, StoreError, SummarizerError
from adapters.telemetry import TELEMETRY
from adapters.fold import FoldJob, Folder, planner
from adapters.fold import FoldRecord
from adapters.fold_slots import AgentFolds, FoldSlots, background_failed, over_lag
from adapters.io import IO, Steps, run_async, run_sync, wait_future
from adapters.policy import FoldPlan, MemoryPolicy
from adapters.protocol import Engine, Guard, Location, as_list, done
from adapters.stores.base import Placement, Store, Tx, in_transaction
from adapters.summarizer import Summarizer
from adapters.view import MemoryView, OwnedTurn, ThreadRecord, fresh_ids, new_id  # noqa: F401 (new_id: re-exported)
from adapters.workers import WorkersBusy, run_in_background

__all__ = ["FoldJob", "Guard", "MemoryEngine", "as_list"]

logger = logging.getLogger("memshift")

FOLD_ATTEMPTS = 3  # plan -> summarize -> compare-and-set rounds before a fold is deferred


class MemoryEngine(Engine):
    """One backend over one store, with the transcript, folds, records and locks."""

    def __init__(self, backend: str, *, policy: MemoryPolicy, summarizer: Summarizer,
                 store: Store, llm: Any = None, human_prefix: str = "Human",
                 ai_prefix: str = "AI", summary_message_cls: type[BaseMessage] = SystemMessage,
                 owns_transcript: bool = True) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"unknown backend {backend!r}; use one of {sorted(BACKENDS)}")
        self.policy, self.store = policy, store
        self.owns_transcript = owns_transcript  # a shadow candidate leaves it to the primary
        # the fold routine, shared with the agent hooks (neither imports the other's module)
        self.folder = Folder(policy=policy, summarizer=summarizer, store=store, backend=backend,
                             records=owns_transcript)
        extra: dict[str, Any] = {"llm": llm}
        self.hooks: FoldHooks | None = None
        if backend == "classic":
            extra["summary_message_cls"] = summary_message_cls
        else:
            extra["hooks"] = self.hooks = FoldHooks(self.folder, store)
        self.slots = FoldSlots()
        self.backend: MemoryBackend = BACKENDS[backend](
            policy=policy, store=store, human_prefix=human_prefix, ai_prefix=ai_prefix, **extra)
        self.name = self.backend.name
        TELEMETRY.watch(self)  # memshift.folds.pending

    @property
    def summarizer(self) -> Summarizer:  # type: ignore[override]
        return self.folder.summarizer

    @summarizer.setter
    def summarizer(self, value: Summarizer) -> None:
        self.folder.summarizer = value

    @property
    def clock(self) -> Callable[[], float]:
        """The fold backoff's clock (injectable in tests)."""
        return self.folder.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self.folder.clock = value

    @property
    def middleware(self) -> Any:
        return getattr(self.backend, "middleware", None)

    # -- the protocol: what this one-backend engine is --------------------------------------
    def leaves(self) -> list[MemoryEngine]:
        return [self]

    def stores(self) -> list[Store]:
        return [self.store]

    def homes(self) -> list[Store]:
        return [self.store] if self.owns_transcript else []

    def middleware_engine(self) -> MemoryEngine | None:
        return self if self.name == "middleware" else None

    def close(self, drain: bool = True) -> None:
        try:  # folds in flight: bounded, a hung provider never holds a shutdown past one
            if drain:  # summary timeout
                self.drain(self.policy.summary_timeout)
        except TimeoutError:
            logger.warning("closing with %d fold(s) still in flight (their turns are stored; "
                           "the next save plans them again)", self.pending_folds())
        self.backend.close()

    def locate_steps(self, thread_id: str, move: bool = True) -> Steps[Location]:
        return (yield from done(Location(self.name, self, self.store)))

    def claim_steps(self, thread_id: str, backend: str) -> Steps[Location]:
        if backend != self.name:
            raise ConfigError(f"this engine runs only {self.name!r}; it cannot serve a thread "
                              f"from {backend!r}")
        return (yield from self.locate_steps(thread_id))

    def desired(self, thread_id: str) -> str:
        return self.name

    def place_steps(self, thread_id: str) -> Steps[Placement | None]:
        return (yield from done(None))  # one backend, no placements: a router keeps them

    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        return []

    def placement_of(self, thread_id: str) -> Placement | None:
        return None

    def pin(self, thread_id: str, backend: str) -> Placement:
        raise ConfigError("a single-backend engine has no placements to pin")

    def unpin(self, thread_id: str) -> Placement | None:
        return None

    # -- steps -------------------------------------------------------------------------------
    def _run(self, tx: Tx, fn: Callable[..., Any], *args: Any) -> IO:
        """``store_io``, inlined: one call less on every step of the hot path."""
        return IO(self.store.run, self.store.arun, tx, fn, *args)

    def view_in(self, tx: Tx) -> Steps[MemoryView]:
        state = yield IO(self.backend.read, self.backend.aread, tx)
        return self.backend.view(tx.thread_id, state)

    def holds_in(self, tx: Tx) -> Steps[bool]:
        """Whether this side holds anything of the transaction's thread."""
        state = yield IO(self.backend.read, self.backend.aread, tx)
        return self.backend.holds(state)

    def load_steps(self, thread_id: str, detached: bool = True,
                   guard: Guard | None = None) -> Steps[MemoryView]:
        def body(tx: Tx) -> Steps[Any]:
            check = (yield from guard(tx)) if guard is not None else None
            state = yield IO(self.backend.read, self.backend.aread, tx)
            if check is not None:
                yield from check()
            return state
        state = yield from in_transaction(self.store, thread_id, body, write=False)
        if detached:
            return self.backend.view(thread_id, state)
        return self.backend.shared_view(thread_id, state)

    def clear_steps(self, thread_id: str) -> Steps[None]:
        yield from self._write_whole(thread_id, self.backend.clear_writes())

    def _step(self, tx: Tx, turn: Sequence[BaseMessage], fold: FoldFn) -> Steps[bool]:
        """Read the state, let the real class act, write what it changed."""
        state = yield IO(self.backend.read, self.backend.aread, tx)
        writes, folded = self.backend.step(state, turn, fold)
        if writes is not None:
            yield IO(self.backend.write, self.backend.awrite, tx, writes)
        return folded

    def save_steps(self, thread_id: str, turn: list[BaseMessage], fold: bool = True,
                   guard: Guard | None = None) -> Steps[list[BaseMessage]]:
        planned, plan = planner()
        owned = type(turn) is OwnedTurn

        def body(tx: Tx) -> Steps[list[BaseMessage] | None]:
            stored: list[BaseMessage] = turn
            # e.g. the placement says this backend serves the thread (checked before commit:
            # everything below is inside the transaction, so a refusal rolls it all back)
            check = (yield from guard(tx)) if guard is not None else None
            if self.owns_transcript:
                ids = [m.id for m in turn if m.id is not None]
                known = (yield self._run(tx, self.store.known_ids, ids)) if ids else set()
                if ids and len(ids) == len(turn) and set(ids) <= known and \
                        (yield self._run(tx, self.store.last_ids, len(ids))) == ids:
                    return None  # a client retrying a turn that did commit: no-op
                stored = fresh_ids(turn, known, owned)
                if owned:  # the store may keep these very objects: nobody else holds them
                    self.store.adopt(tx, stored)
                yield self._run(tx, self.store.append_transcript,
                                self.folder.for_transcript(stored))
            yield from self._step(tx, stored, plan)
            if check is not None:
                yield from check()
            return stored

        self.policy.check_sizes(turn)
        stored = yield from in_transaction(self.store, thread_id, body)
        if stored is None:
            return turn
        if fold and planned:  # nothing planned: no fold is due
            yield from self._after_turn(thread_id, planned[-1])
        return stored

    def prune_steps(self, thread_id: str) -> Steps[None]:
        yield from self._fold(thread_id, (yield from self._replan(thread_id)))

    def _replan(self, thread_id: str) -> Steps[FoldJob | None]:
        """The fold the real class asks for on the stored state now (``None``: not due)."""
        planned, plan = planner()

        def body(tx: Tx) -> Steps[bool]:
            return (yield from self._step(tx, [], plan))
        yield from in_transaction(self.store, thread_id, body, write=False)
        return planned[-1] if planned else None

    # -- one fold in flight per thread; inline or in the background (adapters.fold_slots) --
    def _after_turn(self, thread_id: str, job: FoldJob) -> Steps[None]:
        """The fold a committed turn asked for: run it here (inline), hand it to the
        background, or, when a fold of the thread is already in flight in this process,
        leave it to that one (it plans again once committed) — waiting for it first when a
        background window has run more than the lag bound past the policy."""
        in_flight = self.slots.take(thread_id)
        if in_flight is not None:
            if self.policy.fold == "background" and over_lag(self.policy, job.window):
                yield wait_future(in_flight)
                if (again := (yield from self._replan(thread_id))) is not None:
                    yield from self._after_turn(thread_id, again)
            return
        if self.policy.fold == "background":
            yield IO(self._spawn, self._aspawn, thread_id, job)
            return
        yield from self._owned_fold(thread_id, job)

    def _owned_fold(self, thread_id: str, job: FoldJob | None) -> Steps[None]:
        """Fold while holding the thread's slot, again while saves asked meanwhile; the slot
        is released however this ends."""
        try:
            while job is not None:
                yield from self._fold(thread_id, job)
                if not self.slots.again(thread_id):
                    return
                job = yield from self._replan(thread_id)
        finally:
            self.slots.release(thread_id)  # a no-op once again() released it

    def _spawn(self, thread_id: str, job: FoldJob) -> None:
        def work() -> None:
            try:
                run_sync(self._owned_fold(thread_id, job))
            except BaseException as exc:  # a worker must not raise; the turn is committed
                background_failed(exc)
        try:
            run_in_background(work)
        except WorkersBusy:
            self.slots.release(thread_id)
            logger.warning("background fold deferred: every background worker is busy (the "
                           "next save of the thread plans it again)")

    async def _aspawn(self, thread_id: str, job: FoldJob) -> None:
        task = asyncio.get_running_loop().create_task(
            run_async(self._owned_fold(thread_id, job)))
        self.slots.keep(task, background_failed)

    def drain(self, timeout: float | None = None) -> None:
        """Wait for this process's folds in flight (``fold="background"``), the agent's
        background summaries included (they land at the thread's next model call)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for pending in self._pending():
            pending.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def settle(self, thread_id: str, timeout: float | None = None) -> bool:
        """Wait for the thread's fold in flight; whether there was one."""
        return self.slots.settle(thread_id, timeout)

    async def adrain(self) -> None:
        for pending in self._pending():
            await pending.await_all()

    def pending_folds(self) -> int:
        return sum(p.count() for p in self._pending())

    def _pending(self) -> list[FoldSlots | AgentFolds]:
        return [self.slots] if self.hooks is None else [self.slots, self.hooks.folds]

    def _fold(self, thread_id: str, job: FoldJob | None) -> Steps[None]:
        """Summarize with no lock held, then commit the fold with a compare-and-set: it
        lands only if the thread still asks for the very fold that was summarized."""
        folder = self.folder
        held = job is not None and folder.backing_off(thread_id)
        if held and not folder.exhausted(thread_id):
            logger.debug("fold skipped: the last one failed and its backoff has not ended")
            return
        for _ in range(FOLD_ATTEMPTS):
            if job is None:
                return
            if held:  # failing for a while and backing off: hold the window without it
                summary, record = folder.fallback(thread_id, job, "backoff")
            else:
                try:
                    summary, record = yield from folder.summarize_steps(thread_id, job)
                except SummarizerError as exc:
                    folder.failed(thread_id)
                    if not folder.exhausted(thread_id):
                        folder.defer_or_raise(exc)
                        return
                    summary, record = folder.fallback(thread_id, job, type(exc).__name__)
                else:
                    folder.succeeded(thread_id)
            replanned: list[FoldJob] = []

            def apply(prev: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan,
                      job: FoldJob = job, summary: str = summary) -> str | None:
                if job.same(prev, folds, window, p):
                    return summary
                replanned.append(FoldJob(prev, folds, tuple(window), p))
                return None

            def body(tx: Tx, record: FoldRecord = record) -> Steps[bool]:
                applied = yield from self._step(tx, [], apply)
                if applied:  # the state and its record commit together
                    yield from folder.record_in(tx, record)
                return applied

            try:
                applied = yield from in_transaction(self.store, thread_id, body)
            except StoreError as exc:  # the turn is committed: this fold is simply not written
                if self.policy.on_summary_error == "raise":
                    raise
                logger.warning("summary fold deferred (turn stored, fold not written): %s",
                               str(exc).split(":")[0])
                return
            if applied:
                folder.applied(thread_id, summary, record)
                return
            job = replanned[-1] if replanned else None
        if job is not None:
            logger.info("fold deferred: the thread kept changing during %d attempts", FOLD_ATTEMPTS)

    def _write_whole(self, thread_id: str, writes: Any) -> Steps[None]:
        def body(tx: Tx) -> Steps[None]:
            yield IO(self.backend.write, self.backend.awrite, tx, writes)
        yield from in_transaction(self.store, thread_id, body)

    def restore_steps(self, record: ThreadRecord, expect_last_id: str | None = None,
                      fold_record: FoldRecord | None = None,
                      also: Guard | None = None) -> Steps[bool]:
        def body(tx: Tx) -> Steps[bool]:
            if expect_last_id is not None and (yield self._run(tx, self.store.last_ids, 1)) \
                    != ([expect_last_id] if expect_last_id else []):
                return False
            if record.replace and self.owns_transcript:  # a mirror leaves the store alone
                yield self._run(tx, self.store.erase, False)
            if self.owns_transcript:
                yield self._run(tx, self.store.append_transcript,
                                self.folder.for_transcript(record.transcript))
            yield IO(self.backend.write, self.backend.awrite, tx,
                     self.backend.restore_writes(record))
            if also is not None:  # more writes that must commit with this state (a placement)
                check = yield from also(tx)
                if check is not None:
                    yield from check()
            if fold_record is not None:
                fold = fold_record.as_dict()
                stamp = getattr(self.store, "stamp_in", None)  # SQL stores (adapters.stores.marks)
                if fold_record.source is not None and stamp is not None:  # a migration's mark:
                    fold["source"] = {**fold_record.source,  # the state this tx leaves
                                      "stamp": (yield self._run(tx, stamp, self.backend.name))}
                yield self._run(tx, self.store.append_fold, fold)
            return True
        return (yield from in_transaction(self.store, record.thread_id, body))
