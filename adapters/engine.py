"""``MemoryEngine``: the one caller of backends, and the owner of what they share.

A save is two short transactions with the summarizer between them, never inside:

1. *The turn*: one transaction (the thread's lock lives exactly as long as it) checks for
   a retried turn, gives reused message ids fresh ones, appends the transcript and lets the
   backend's real class append the turn. The real class decides whether a fold is due;
   the fold function handed in only *plans* it ("not now") and the turn commits.
2. *The summary*: redact, summarize (retries, ``summary_timeout`` per attempt), no lock.
3. *The fold*: one transaction re-runs the real class on the current state with a fold
   function that answers only if the fold still applies (same previous summary, same fold
   count, and the folded messages still head the window): a compare-and-set on the prefix.
   Turns saved meanwhile do not void it: the real class cuts where the fold was planned
   (``fold_cuts.landing``) and they stay in the window, for one later fold. The state and
   its fold record commit together. If the thread's summary changed meanwhile (another
   writer folded it), the fold is planned again (bounded), else deferred.

Background folds (``MemoryPolicy(fold="background")``) keep one fold in flight per thread;
saves made meanwhile mark it and return, and its holder folds once more afterwards if the
window is still due (coalesced: what landed meanwhile is summarized once). A save waits only
when its window is past the lag bound, and then at most ``fold_slots.lag_seconds`` from the
start of the fold in flight; the fold record says so (``FoldRecord.lag``).

On a store whose classic state offers it (PostgreSQL), a classic turn on a thread this
process has just seen is one statement (``quick_save_steps``: a compare-and-set on what the
last load saw, the real class stepping on that state), the fold after it as above; any miss
takes the path above.

The logic is written once, as steps (``adapters.io``); ``save``/``asave`` and the other
pairs are the blocking and the async drivers of the same steps.
"""

from __future__ import annotations

import dataclasses
import logging
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
from adapters.fold_cuts import landing
from adapters.fold_schedule import FoldScheduling
from adapters.fold_slots import FoldSlots
from adapters.io import IO, Steps
from adapters.policy import FoldPlan, MemoryPolicy
from adapters.protocol import Engine, Guard, Location, as_list, done
from adapters.stores.base import Placement, Store, Tx, in_transaction
from adapters.stores.quick import QuickClassic
from adapters.summarizer import Summarizer
from adapters.view import MemoryView, OwnedTurn, ThreadRecord, fresh_ids, new_id  # noqa: F401 (new_id: re-exported)

__all__ = ["FoldJob", "Guard", "MemoryEngine", "as_list"]

logger = logging.getLogger("memshift")

FOLD_ATTEMPTS = 3  # plan -> summarize -> compare-and-set rounds before a fold is deferred


class MemoryEngine(FoldScheduling, Engine):
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
        state = getattr(store, "classic", None)  # the one-statement load and save, if offered
        self.quick: QuickClassic | None = state if backend == "classic" and owns_transcript \
            and isinstance(state, QuickClassic) else None
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
        """Whether this side holds anything of the transaction's thread (the backend's
        lookup: the middleware's builds no graph for a thread without checkpoints)."""
        return (yield IO(self.backend.holds_in, self.backend.aholds_in, tx))

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

    def quick_load_steps(self, thread_id: str, detached: bool,
                         accept: Callable[[Placement], bool]) -> Steps[MemoryView | None]:
        """The view in one statement (``adapters.stores.quick``) when the placement it reads
        is one ``accept`` serves here; ``None``: load the usual way."""
        quick = self.quick
        if quick is None:
            return None
        seen = yield IO(quick.quick_read, quick.aquick_read, thread_id, detached)
        if seen is None or not accept(seen.placement):
            return None
        if detached:
            return self.backend.view(thread_id, seen.snapshot)
        return self.backend.shared_view(thread_id, seen.snapshot)

    def quick_save_steps(self, thread_id: str, turn: list[BaseMessage], fold: bool,
                         accept: Callable[[Placement], bool]) -> Steps[list[BaseMessage] | None]:
        """The turn in one statement when the thread is still as the last quick load or save
        here saw it: the real class steps on that state (nothing is read back) and the fold it
        asks for runs after, as on the usual path. ``None``: nothing was written."""
        quick = self.quick
        seen = quick.seen(thread_id) if quick is not None else None
        if seen is None or seen.version is None or not accept(seen.placement) or \
                any(m.id is not None for m in turn):  # ids of the caller's: the usual checks
            return None
        self.policy.check_sizes(turn)
        stored = fresh_ids(turn, set())  # copies: a miss leaves the turn as it came
        planned, plan = planner()
        writes, _ = self.backend.step(seen.snapshot, stored, plan)
        if writes is None or writes.fold or writes.replace or writes.clear or \
                writes.append != stored:  # (only an append has one statement)
            return None
        if not (yield IO(quick.quick_append, quick.aquick_append, thread_id, seen,
                         self.folder.for_transcript(stored), stored)):
            return None
        if fold and planned:
            yield from self._after_turn(thread_id, planned[-1])
        return stored

    def clear_steps(self, thread_id: str) -> Steps[None]:
        yield from self._write_whole(thread_id, self.backend.clear_writes())

    def _step(self, tx: Tx, turn: Sequence[BaseMessage], fold: FoldFn,
              lands: FoldJob | None = None) -> Steps[bool]:
        """Read the state, let the real class act, write what it changed (``lands``: a fold
        being committed, cut where it was planned while its messages head the window)."""
        state = yield IO(self.backend.read, self.backend.aread, tx)
        if lands is None:
            writes, folded = self.backend.step(state, turn, fold)
        else:
            with landing(lands):  # no I/O and no await inside: the step is plain code
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

    def _fold(self, thread_id: str, job: FoldJob | None, owned: bool = False) -> Steps[None]:
        """Summarize with no lock held, then commit the fold with a compare-and-set: it
        lands if the thread's summary is the one it folded onto and the messages it folded
        still head the window (turns saved meanwhile stay after them). ``owned``: the fold of
        the thread's slot (a save past the lag bound may be waiting for it)."""
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
                if job.lands_on(prev, folds, window):
                    return summary
                with landing(None):  # the thread moved on: what it asks for now
                    replanned.append(FoldJob(prev, folds, tuple(window),
                                             self.policy.plan_fold(window)))
                return None

            def body(tx: Tx, record: FoldRecord = record, job: FoldJob = job) -> Steps[bool]:
                applied = yield from self._step(tx, [], apply, lands=job)
                if applied:  # the state and its record commit together
                    lag = self.slots.lagging(thread_id) if owned else None
                    if lag is not None:  # a save past the lag bound waited for this fold
                        record = dataclasses.replace(record, lag={**lag, "landed": True})
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
