"""Shadow: write to both engines, serve the primary, compare at read, never hurt the primary.

After GitHub Scientist: the primary's results and exceptions are the caller's; the
candidate engine runs on one background worker (its writes keep their order) fed by a
bounded queue (overflow is dropped and counted), shares no lock or transaction with the
primary, and everything it does wrong is recorded as a mismatch, never raised. A read never
waits for it: the candidate's view is compared on its worker, behind the writes queued before
the read, against a snapshot of the primary's (``raise_on_mismatch=True`` waits and raises, for
tests). Every candidate failure is recorded — an exception, and a candidate fold that failed
(the save itself succeeds: the fold's backoff starting is the sign) — and a circuit breaker
turns the candidate off for a cool-down after ``breaker_failures`` of them in a row: only a
candidate write that did its whole job ends a run (a successful load says nothing about the
writes, and a save whose fold is held by its backoff says nothing either way).
Sampling is per thread (a thread is mirrored completely or not at all), so views stay
comparable. What is recorded and how: ``adapters.shadow_record`` (and, in the store the
fleet shares, for rollout guards: ``adapters.shadow_evidence``); the candidate's worker:
``adapters.shadow_queue``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.diff_classes import Rules
from adapters.engine import MemoryEngine
from adapters.errors import MismatchError
from adapters.io import Steps, wait_future
from adapters.protocol import Engine, Guard, Location
from adapters.shadow_evidence import EvidenceSink
from adapters.shadow_queue import CandidateQueue
from adapters.shadow_record import Mismatch, MismatchLog, read_log  # noqa: F401 (re-exported)
from adapters.stores.base import Placement, Store, Tx
from adapters.stores.evidence import EvidenceLog
from adapters.telemetry import TELEMETRY
from adapters.view import MemoryView, ThreadRecord, detach

__all__ = ["Mismatch", "ShadowEngine", "read_log"]


class ShadowEngine(Engine):
    """``primary`` serves (any engine: the facade's is a router, so the thread is served
    where its placement says); ``candidate`` is a one-backend mirror that is compared. A
    thread is mirrored only while the primary serves it from its own backend."""

    name = "shadow"

    def __init__(self, *, primary: Engine, candidate: MemoryEngine, sample: float = 1.0,
                 on_mismatch: Callable[[Mismatch], None] | None = None,
                 log_path: str | None = None, timeout: float = 5.0, max_queue: int = 1000,
                 breaker_failures: int = 5, breaker_cooldown: float = 60.0,
                 max_recorded: int = 10_000, raise_on_mismatch: bool = False,
                 rules: Rules | None = None) -> None:
        self.primary, self.candidate_backend = primary, candidate
        self.rules = rules or Rules()
        self.raise_on_mismatch = raise_on_mismatch
        self.sample, self.timeout = sample, timeout
        home = self.store  # the primary's: the store the fleet shares
        self.evidence = EvidenceSink(home) if isinstance(home, EvidenceLog) and \
            not home.read_only else None
        self.log = MismatchLog(on_mismatch=on_mismatch, log_path=log_path,
                               max_recorded=max_recorded,
                               store=self.evidence.add if self.evidence else None)
        self.breaker_failures, self.breaker_cooldown = breaker_failures, breaker_cooldown
        self.compared = self.dropped = 0
        self._failures = 0
        self._disabled_until = 0.0
        self._guard = threading.Lock()
        self.candidates = CandidateQueue(
            max_queue, after=self.evidence.flush if self.evidence else lambda: None)
        self._queue = self.candidates.queue  # (its bound: tests shrink it)

    # -- what the protocol asks of every engine -----------------------------------------------
    policy = property(lambda self: self.primary.policy)
    store = property(lambda self: self.primary.leaves()[0].store)

    @property
    def summarizer(self) -> Any:  # type: ignore[override]
        return self.primary.summarizer

    @summarizer.setter
    def summarizer(self, value: Any) -> None:  # both sides always share one summarizer
        self.primary.summarizer = self.candidate_backend.summarizer = value

    @property
    def mismatches(self) -> list[Mismatch]:
        return self.log.mismatches

    @property
    def classes(self) -> Counter[tuple[str, bool]]:
        """Mismatches per (class, ignored)."""
        return self.log.classes

    @property
    def clock(self) -> Callable[[], float]:
        """The fold backoff's clock (injectable in tests), shared by every side."""
        return self.leaves()[0].clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        for leaf in self.leaves():
            leaf.clock = value

    def leaves(self) -> list[MemoryEngine]:
        return [*self.primary.leaves(), self.candidate_backend]

    def stores(self) -> list[Store]:
        seen: dict[int, Store] = {id(s): s for s in self.primary.stores()}
        seen.setdefault(id(self.candidate_backend.store), self.candidate_backend.store)
        return list(seen.values())

    def homes(self) -> list[Store]:
        return self.primary.homes()

    def middleware_engine(self) -> MemoryEngine | None:
        return self.primary.middleware_engine() or self.candidate_backend.middleware_engine()

    def serving(self, thread_id: str) -> str:
        return self.primary.serving(thread_id)

    def locate_steps(self, thread_id: str, move: bool = True) -> Steps[Location]:
        return (yield from self.primary.locate_steps(thread_id, move))

    def claim_steps(self, thread_id: str, backend: str) -> Steps[Location]:
        return (yield from self.primary.claim_steps(thread_id, backend))

    def view_in(self, tx: Tx) -> Steps[MemoryView]:
        return (yield from self.primary.view_in(tx))

    def desired(self, thread_id: str) -> str:
        return self.primary.desired(thread_id)

    def place_steps(self, thread_id: str) -> Steps[Placement | None]:
        return (yield from self.primary.place_steps(thread_id))

    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        return self.primary.placement_counts()

    def placement_of(self, thread_id: str) -> Placement | None:
        return self.primary.placement_of(thread_id)

    def pin(self, thread_id: str, backend: str) -> Placement:
        return self.primary.pin(thread_id, backend)

    def unpin(self, thread_id: str) -> Placement | None:
        return self.primary.unpin(thread_id)

    def engines(self) -> list[Engine]:
        return [self.primary, self.candidate_backend]

    def _mirrored(self, thread_id: str) -> bool:
        """The candidate mirrors this thread: sampled, the breaker closed, and the primary
        serving it from its own backend (a thread that lives on the candidate's backend is
        the real thing there, not a mirror)."""
        return self.sampled(thread_id) and self.enabled and \
            self.primary.serving(thread_id) == self.primary.name

    # -- sampling, breaker, recording -------------------------------------------------------
    def sampled(self, thread_id: str) -> bool:
        if self.sample >= 1:
            return True
        digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:4], "big") / 2**32 < self.sample

    @property
    def enabled(self) -> bool:
        return time.monotonic() >= self._disabled_until

    def _outcome(self, thread_id: str, ok: bool) -> None:
        """A failure lengthens the run (and trips the breaker at ``breaker_failures``); a
        candidate write that did its whole job ends it."""
        with self._guard:
            self._failures = 0 if ok else self._failures + 1
            tripped = self._failures >= self.breaker_failures
            if tripped:
                self._failures, self._disabled_until = 0, time.monotonic() + self.breaker_cooldown
        if tripped:
            self._record(thread_id, "candidate_disabled", [
                f"{self.breaker_failures} consecutive candidate failures: off for "
                f"{self.breaker_cooldown:g} s"])

    def _failed(self, thread_id: str, what: str) -> None:
        """One candidate failure: recorded, and counted by the breaker."""
        self._record(thread_id, "candidate_error", [what])
        self._outcome(thread_id, False)

    def _record(self, thread_id: str, kind: str, diff: list[str],
                timings: dict[str, float] | None = None, cls: str = "",
                ignored: bool = False) -> None:
        self.log.record(thread_id, kind, diff, timings, cls, ignored, self.policy.redactor)

    def forget_mismatches(self, thread_id: str) -> int:
        """Drop the thread's recorded mismatches (erasure: their diffs quote its text)."""
        if self.evidence is not None:  # (its rows in the store go with ``Store.erase``)
            self.evidence.forget(thread_id)
        return self.log.forget(thread_id) + self.primary.forget_mismatches(thread_id)

    # -- the candidate worker ----------------------------------------------------------------
    def _submit(self, thread_id: str, what: str, fn: Callable[[], Any]) -> Future | None:
        future = self.candidates.submit(thread_id, fn)
        if future is None:
            self.dropped += 1
            TELEMETRY.drop()
            self._record(thread_id, "candidate_dropped", [f"{what}: candidate queue full"])
        return future

    def _candidate_write(self, thread_id: str, what: str, fn: Callable[[], Any]) -> None:
        """Queue a candidate write; its failure is recorded when it happens, never raised. A
        fold the candidate's policy defers does not raise: its failure shows as the backoff
        that begins during the write."""
        folder = self.candidate_backend.folder

        def guarded() -> None:
            held = folder.backing_off(thread_id)  # a fold that failed before: not tried now
            try:
                fn()
            except Exception as exc:
                self._failed(thread_id, f"{what}: {type(exc).__name__}: {exc}")
                return
            if not held and folder.backing_off(thread_id):
                self._failed(thread_id, f"{what}: the candidate's fold failed (turn stored, "
                                        "fold deferred)")
            elif not held and not folder.exhausted(thread_id):
                self._outcome(thread_id, True)
        self._submit(thread_id, what, guarded)

    # -- the engine API (steps, composed from the primary's) ----------------------------------
    def load_steps(self, thread_id: str, detached: bool = True,
                   guard: Guard | None = None) -> Steps[MemoryView]:
        """The primary's view, at once: the candidate's view is read and compared on the
        candidate's worker (after the writes queued before it), against a snapshot of this
        one. With ``raise_on_mismatch`` the load waits for the verdict (tests)."""
        start = time.perf_counter()
        view = yield from self.primary.load_steps(thread_id, detached, guard)
        primary_ms = (time.perf_counter() - start) * 1000
        if not self._mirrored(thread_id):
            return view
        snapshot = replace(view, messages=[detach(m) for m in view.messages])
        future = self._submit(thread_id, "load",
                              lambda: self._compare(thread_id, snapshot, primary_ms))
        if future is None or not self.raise_on_mismatch:
            return view
        try:
            diffs = yield wait_future(future, self.timeout)
        except TimeoutError:
            future.cancel()
            raise MismatchError(f"shadow: the candidate gave no view of {thread_id!r} within "
                                f"{self.timeout:g} s") from None
        if diffs:
            raise MismatchError(f"shadow: {thread_id!r} differs: " + "; ".join(diffs))
        return view

    def _compare(self, thread_id: str, primary: MemoryView, primary_ms: float) -> list[str]:
        """On the candidate's worker: its view of the thread against the primary's snapshot.
        What goes wrong is recorded, never raised into a request."""
        began = time.perf_counter()
        try:
            if self.policy.fold == "background":  # compare settled states: both folds landed
                for leaf in (*self.primary.leaves(), *self.candidate_backend.leaves()):
                    leaf.settle(thread_id, self.timeout)
                primary = self.primary.load(thread_id)  # the load's snapshot may predate it
            other = self.candidate_backend.load(thread_id)
        except Exception as exc:
            self._failed(thread_id, f"load: {type(exc).__name__}: {exc}")
            return [f"candidate error: {type(exc).__name__}"]
        if self.evidence is not None:  # (a success here does not end a run of failed writes)
            self.evidence.compared(thread_id, self.log.turns.get(thread_id, 0))
        timings = {"primary_ms": round(primary_ms, 3),
                   "candidate_ms": round((time.perf_counter() - began) * 1000, 3)}
        with self._guard:
            self.compared += 1
        verdict = self.rules.judge(primary, other)
        if verdict.diffs:
            self._record(thread_id, "view", verdict.diffs, timings, verdict.cls, verdict.ignored)
        return [] if verdict.ignored else verdict.diffs

    def save_steps(self, thread_id: str, turn: list[BaseMessage], fold: bool = True,
                   guard: Guard | None = None) -> Steps[list[BaseMessage]]:
        self.log.saw_turn(thread_id)
        stored: list[BaseMessage] | None = None
        try:
            stored = yield from self.primary.save_steps(thread_id, turn, fold, guard)
        finally:  # the candidate sees every turn the primary stored, even when its fold failed
            # (a plain list: the candidate's store keeps its own copies, never the primary's)
            if self._mirrored(thread_id):
                mirrored = list(stored if stored is not None else turn)
                self._candidate_write(thread_id, "save",
                                      lambda: self.candidate_backend.save(thread_id, mirrored, fold))
        return stored

    def clear_steps(self, thread_id: str) -> Steps[None]:
        yield from self.primary.clear_steps(thread_id)
        if self._mirrored(thread_id):
            self._candidate_write(thread_id, "clear",
                                  lambda: self.candidate_backend.clear(thread_id))

    def prune_steps(self, thread_id: str) -> Steps[None]:
        yield from self.primary.prune_steps(thread_id)
        if self._mirrored(thread_id):  # the mirror folds too, or the views drift apart
            self._candidate_write(thread_id, "prune",
                                  lambda: self.candidate_backend.prune(thread_id))

    def restore_steps(self, record: ThreadRecord, expect_last_id: str | None = None,
                      fold_record: Any = None, also: Guard | None = None) -> Steps[bool]:
        """The primary's restore steps; when they commit, the candidate's restore is queued
        behind its pending saves and waited for (up to ``timeout``)."""
        if not (yield from self.primary.restore_steps(record, expect_last_id, fold_record, also)):
            return False
        # Through the queue, after the candidate's pending saves: run inline, a save still
        # queued would land on top of the rebuilt state.
        future = self._submit(record.thread_id, "restore",
                              lambda: self.candidate_backend.restore(record))
        if future is None:
            return True
        try:
            yield wait_future(future, self.timeout)
        except Exception as exc:  # recorded and counted, never raised
            self._failed(record.thread_id, f"restore: {type(exc).__name__}: {exc}")
        return True

    def drain(self, timeout: float | None = None) -> None:
        """Wait until the candidate has done everything queued so far (and both sides'
        background folds)."""
        self.primary.drain(timeout)
        self.candidates.drain(timeout)
        self.candidate_backend.drain(timeout)

    async def adrain(self) -> None:
        """Both sides' background folds that are tasks of this loop (the candidate's queue
        drains with ``drain``)."""
        await self.primary.adrain()
        await self.candidate_backend.adrain()

    def close(self, drain: bool = True, timeout: float | None = None) -> None:
        """``drain=True`` waits (up to ``timeout`` seconds, default the shadow timeout: a hung
        candidate never holds up a shutdown) for the queued candidate writes;
        ``drain=False`` drops them (a running one finishes on its own). Whatever is dropped
        is recorded as a ``candidate_dropped`` mismatch per thread, with its count: nothing
        is lost in silence."""
        timeout = self.timeout if timeout is None else timeout
        for thread_id, count in self.candidates.stop(drain, timeout).items():
            self.dropped += count
            self._record(thread_id, "candidate_dropped", [
                f"close(drain={drain}): {count} queued candidate write(s) dropped"])
        if self.evidence is not None:  # what the worker had no turn to write
            self.evidence.flush()
        self.primary.close(drain)
        self.candidate_backend.close(drain)
