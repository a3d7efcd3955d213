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

import hashlib
import logging
import os
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from adapters.backends import BACKENDS, MemoryBackend
from adapters.backends.base import FoldFn
from adapters.errors import ConfigError, StoreError, SummarizerError
from adapters.folds import FoldRecord
from adapters.io import IO, Steps
from adapters.policy import MAX_RETRY_BACKOFF, FoldPlan, MemoryPolicy
from adapters.redaction import default_redactor, redact_messages
from adapters.protocol import Engine, Guard, Location, as_list, done
from adapters.stores.base import Placement, Store, Tx, in_transaction
from adapters.structured import parse_rendered
from adapters.overflow import summarize_in_chunks
from adapters.summarizer import Summarizer, summarizer_name
from adapters.tokens import for_summarizer
from adapters.view import (MemoryView, OwnedTurn, ThreadRecord, detach, message_signature,
                           new_message, set_id, with_id)

__all__ = ["FoldJob", "Guard", "MemoryEngine", "as_list"]

logger = logging.getLogger("memshift")

FOLD_ATTEMPTS = 3  # plan -> summarize -> compare-and-set rounds before a fold is deferred


@dataclass(frozen=True)
class FoldJob:
    """A fold the real class asked for: what to summarize, onto which summary."""

    summary: str
    folds: int
    window: tuple[BaseMessage, ...]
    plan: FoldPlan

    @property
    def folded(self) -> tuple[BaseMessage, ...]:
        return self.window[: self.plan.cutoff]

    def same(self, summary: str, folds: int, window: Sequence[BaseMessage], plan: FoldPlan) -> bool:
        return (summary, folds) == (self.summary, self.folds) and _keys(
            window[: plan.cutoff]) == _keys(self.folded)


def _keys(messages: Sequence[BaseMessage]) -> list[tuple]:
    return [(m.id, *message_signature(m)) for m in messages]


class MemoryEngine(Engine):
    """One backend over one store, with the transcript, folds, records and locks."""

    def __init__(self, backend: str, *, policy: MemoryPolicy, summarizer: Summarizer,
                 store: Store, llm: Any = None, human_prefix: str = "Human",
                 ai_prefix: str = "AI", summary_message_cls: type[BaseMessage] = SystemMessage,
                 owns_transcript: bool = True) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"unknown backend {backend!r}; use one of {sorted(BACKENDS)}")
        self.policy, self.summarizer, self.store = policy, summarizer, store
        self.owns_transcript = owns_transcript  # a shadow candidate leaves it to the primary
        self.clock: Callable[[], float] = time.monotonic  # injectable (backoff tests)
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()
        extra: dict[str, Any] = {"llm": llm}
        if backend == "classic":
            extra["summary_message_cls"] = summary_message_cls
        else:
            from adapters.agent_hooks import AgentHooks

            extra["hooks"] = AgentHooks(self)
        self.backend: MemoryBackend = BACKENDS[backend](
            policy=policy, store=store, human_prefix=human_prefix, ai_prefix=ai_prefix, **extra)
        self.name = self.backend.name

    @property
    def middleware(self) -> Any:
        return getattr(self.backend, "middleware", None)

    # -- the protocol: what this one-backend engine is --------------------------------------
    def leaves(self) -> list[MemoryEngine]:
        return [self]

    def stores(self) -> list[Store]:
        return [self.store]

    def middleware_engine(self) -> MemoryEngine | None:
        return self if self.name == "middleware" else None

    def close(self, drain: bool = True) -> None:
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
        planned, plan = _planner()
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
                stored = _fresh_ids(turn, known, owned)
                if owned:  # the store may keep these very objects: nobody else holds them
                    self.store.adopt(tx, stored)
                yield self._run(tx, self.store.append_transcript, self._for_transcript(stored))
            yield from self._step(tx, stored, plan)
            if check is not None:
                yield from check()
            return stored

        self.policy.check_sizes(turn)
        stored = yield from in_transaction(self.store, thread_id, body)
        if stored is None:
            return turn
        if fold and planned:  # nothing planned: _fold would return at once
            yield from self._fold(thread_id, planned[-1])
        return stored

    def prune_steps(self, thread_id: str) -> Steps[None]:
        planned, plan = _planner()

        def body(tx: Tx) -> Steps[bool]:
            return (yield from self._step(tx, [], plan))
        yield from in_transaction(self.store, thread_id, body, write=False)
        yield from self._fold(thread_id, planned[-1] if planned else None)

    def _for_transcript(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        if self.policy.redact_transcript:
            return redact_messages(messages, self.policy.redactor or default_redactor)
        return list(messages)

    def _backing_off(self, thread_id: str) -> bool:
        """A fold that failed is not tried again before its backoff ends (per process)."""
        state = self._failures.get(thread_id)
        return state is not None and self.clock() < state[1]

    def _failed(self, thread_id: str) -> None:
        """Exponential backoff with jitter, capped, across saves."""
        count = self._failures.pop(thread_id, (0, 0.0))[0] + 1
        delay = min(MAX_RETRY_BACKOFF, self.policy.retry_backoff * 2 ** (count - 1))
        self._failures[thread_id] = (count, self.clock() + delay * (0.5 + random.random() / 2))
        if len(self._failures) > 100_000:  # bounded memory for any number of threads
            self._failures.popitem(last=False)

    def _fold(self, thread_id: str, job: FoldJob | None) -> Steps[None]:
        if job is not None and self._backing_off(thread_id):
            logger.debug("fold skipped: the last one failed and its backoff has not ended")
            return
        for _ in range(FOLD_ATTEMPTS):
            if job is None:
                return
            try:
                summary, record = yield from self._summarize(thread_id, job)
            except SummarizerError as exc:
                self._failed(thread_id)
                self.defer_or_raise(exc)
                return
            self._failures.pop(thread_id, None)
            replanned: list[FoldJob] = []

            def apply(prev: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan,
                      job: FoldJob = job, summary: str = summary) -> str | None:
                if job.same(prev, folds, window, p):
                    return summary
                replanned.append(FoldJob(prev, folds, tuple(window), p))
                return None

            def body(tx: Tx, record: FoldRecord = record) -> Steps[bool]:
                applied = yield from self._step(tx, [], apply)
                if applied and self.owns_transcript:
                    yield self._run(tx, self.store.append_fold, record.as_dict())
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
                record.log()
                self._remember_preferences(thread_id, summary, record.version)
                return
            job = replanned[-1] if replanned else None
        if job is not None:
            logger.info("fold deferred: the thread kept changing during %d attempts", FOLD_ATTEMPTS)

    def _summarize(self, thread_id: str, job: FoldJob) -> Steps[tuple[str, FoldRecord]]:
        """Redact what is sent, summarize with retries and a timeout per attempt (in chunks when
        the input is too large). No lock, no transaction. A failure is recorded (in its own
        transaction) and raised."""
        policy = self.policy
        start = time.perf_counter()
        try:
            folded = job.folded  # stored objects may be shared: the summarizer gets copies
            if self.store.shares_messages:
                folded = tuple(detach(m) for m in folded)
            text = yield from summarize_in_chunks(
                self.summarizer, policy, job.summary,
                redact_messages(for_summarizer(folded), policy.redactor), thread_id)
            if policy.redactor is not None:  # the reply too: a model may echo or invent secrets
                text = policy.redactor(text)
        except SummarizerError as exc:
            record = self._record(thread_id, job, "", str(exc), time.perf_counter() - start)
            record.log()
            if self.owns_transcript:
                try:
                    yield from self._append_record(thread_id, record)
                except StoreError:  # the fold failed already; its record is best effort
                    logger.warning("could not record a failed fold")
            raise
        return text, self._record(thread_id, job, text, None, time.perf_counter() - start)

    def _append_record(self, thread_id: str, record: FoldRecord) -> Steps[None]:
        def body(tx: Tx) -> Steps[None]:
            yield self._run(tx, self.store.append_fold, record.as_dict())
        yield from in_transaction(self.store, thread_id, body)

    def _record(self, thread_id: str, job: FoldJob, text: str, error: str | None,
                seconds: float) -> FoldRecord:
        folded = job.folded
        return FoldRecord(
            thread_id=thread_id, version=job.folds + 1, trigger=job.plan.reason or "forced",
            messages_before=len(job.window), messages_kept=len(job.window) - len(folded),
            folded=len(folded), folded_first_id=folded[0].id if folded else None,
            folded_last_id=folded[-1].id if folded else None,
            summary_tokens=self.policy.count([new_message(SystemMessage, text)]) if text else 0,
            summarizer=summarizer_name(self.summarizer),
            prompt_version=self.policy.prompt_version, policy=self.policy.recorded(),
            duration_ms=round(seconds * 1000, 3), error=error, backend=self.name)

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
            if self.owns_transcript:
                yield self._run(tx, self.store.append_transcript,
                                self._for_transcript(record.transcript))
            yield IO(self.backend.write, self.backend.awrite, tx,
                     self.backend.restore_writes(record))
            if fold_record is not None:
                yield self._run(tx, self.store.append_fold, fold_record.as_dict())
            if also is not None:  # more writes that must commit with this state (a placement)
                check = yield from also(tx)
                if check is not None:
                    yield from check()
            return True
        return (yield from in_transaction(self.store, record.thread_id, body))

    # -- the fold routine's policy ------------------------------------------------------------
    def defer_or_raise(self, exc: SummarizerError) -> None:
        """The policy's answer to a failed fold: raise, or log (no message text) and go on.
        The turn is stored either way; the fold is retried on the next save."""
        if self.policy.on_summary_error == "raise":
            raise exc
        logger.warning("summary fold deferred (turn stored, retried on the next save): %s",
                       str(exc).split(":")[0])

    def _remember_preferences(self, thread_id: str, summary: str, version: int) -> None:
        """Structured preferences outlive the thread: one item per key, per user."""
        store = self.policy.preferences_store
        if store is None or not self.owns_transcript:
            return
        # LangGraph namespaces refuse ".": encode it (and "%") so distinct users stay distinct
        user = self.policy.user_id(thread_id).replace("%", "%25").replace(".", "%2E")
        for item in parse_rendered(summary).preferences:
            key = item.key or hashlib.sha256(item.value.lower().encode()).hexdigest()[:16]
            store.put(("memshift", "preferences", user), key,
                      {"value": item.value, "thread_id": thread_id, "version": version})


def _planner() -> tuple[list[FoldJob], FoldFn]:
    """A fold function that only records what the real class asks for ("not now")."""
    planned: list[FoldJob] = []

    def plan(summary: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan) -> None:
        planned.append(FoldJob(summary, folds, tuple(window), p))
        return None
    return planned, plan


def new_id() -> str:
    """A random (version 4) UUID as a string, like ``str(uuid.uuid4())`` at 40% of its cost
    (``uuid.UUID`` validates and converts in Python)."""
    x = os.urandom(16).hex()
    return f"{x[:8]}-{x[8:12]}-4{x[13:16]}-{_VARIANT[int(x[16], 16) & 3]}{x[17:20]}-{x[20:]}"


_VARIANT = "89ab"  # RFC 4122 variant: the top two bits of byte 8 are 10


def _fresh_ids(turn: list[BaseMessage], taken: set[str], owned: bool = False) -> list[BaseMessage]:
    """A message id the thread has seen (or the turn repeats) gets a new id: LangGraph's
    reducer would otherwise replace the earlier message and the transcript skip it. The
    caller's messages are copied first; an owned turn's are changed in place."""
    out, seen = [], set()
    for message in turn:
        if message.id is None or message.id in taken or message.id in seen:
            if owned:
                set_id(message, new_id())
            else:
                message = with_id(message, new_id())  # a copy: the caller's message is untouched
        seen.add(message.id)
        out.append(message)
    return out
