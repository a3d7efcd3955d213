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
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from adapters.backends import BACKENDS, MemoryBackend
from adapters.backends.base import FoldFn
from adapters.errors import ConfigError, StoreError, SummarizerError
from adapters.folds import FoldRecord
from adapters.policy import FoldPlan, MemoryPolicy
from adapters.redaction import default_redactor, redact_messages
from adapters.stores.base import Store
from adapters.structured import parse_rendered
from adapters.summarizer import Summarizer, run_summarizer, summarizer_name
from adapters.view import MemoryView, ThreadRecord, message_signature

__all__ = ["FoldJob", "MemoryEngine"]

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


class _Timed:
    """A summarizer whose every call gives up after ``timeout`` seconds (the call itself
    runs on a daemon thread: a hung provider cannot hold the caller)."""

    def __init__(self, inner: Summarizer, timeout: float) -> None:
        self.inner, self.timeout = inner, timeout

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = self.inner.summarize(summary, messages)
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="memshift-summarizer", daemon=True).start()
        if not done.wait(self.timeout):
            raise TimeoutError(f"summarizer gave no answer within {self.timeout:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]


class MemoryEngine:
    """One backend over one store, with the transcript, folds, records and locks."""

    def __init__(self, backend: str, *, policy: MemoryPolicy, summarizer: Summarizer,
                 store: Store, llm: Any = None, human_prefix: str = "Human",
                 ai_prefix: str = "AI", summary_message_cls: type[BaseMessage] = SystemMessage,
                 owns_transcript: bool = True) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"unknown backend {backend!r}; use one of {sorted(BACKENDS)}")
        self.policy, self.summarizer, self.store = policy, summarizer, store
        self.owns_transcript = owns_transcript  # a shadow candidate leaves it to the primary
        extra: dict[str, Any] = {"llm": llm}
        if backend == "classic":
            extra["summary_message_cls"] = summary_message_cls
        else:
            extra["hooks"] = _AgentHooks(self)
        self.backend: MemoryBackend = BACKENDS[backend](
            policy=policy, store=store, human_prefix=human_prefix, ai_prefix=ai_prefix, **extra)

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def middleware(self) -> Any:
        return getattr(self.backend, "middleware", None)

    # -- reads -----------------------------------------------------------------------------
    def load(self, thread_id: str) -> MemoryView:
        with self.store.snapshot(thread_id) as tx, self.store.guard("load"):
            return self.backend.load(tx)

    # -- the save path ---------------------------------------------------------------------
    def save(self, thread_id: str, turn: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Store one turn, then fold if the real class asks for it. Returns the turn as
        stored (ids may have been renewed). Raises ``SummarizerError`` only when the policy
        says ``on_summary_error="raise"``; the turn is committed either way."""
        planned: list[FoldJob] = []

        def plan(summary: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan) -> None:
            planned.append(FoldJob(summary, folds, tuple(window), p))
            return None

        stored = list(turn)
        with self.store.transaction(thread_id) as tx:
            if self.owns_transcript:
                if self._is_retry(tx, stored):
                    return stored
                stored = self._fresh_ids(tx, stored)
                self.store.append_transcript(tx, self._for_transcript(stored))
            self.backend.save(tx, stored, plan)
        self._fold(thread_id, planned[-1] if planned else None)
        return stored

    def _is_retry(self, tx: Any, turn: list[BaseMessage]) -> bool:
        """A client retrying a turn that did commit (same ids, in order, newest): no-op."""
        ids = [m.id for m in turn]
        if not ids or any(i is None for i in ids):
            return False
        known = self.store.known_ids(tx, ids)  # type: ignore[arg-type]
        return len(known) == len(ids) and self.store.last_ids(tx, len(ids)) == ids

    def _fresh_ids(self, tx: Any, turn: list[BaseMessage]) -> list[BaseMessage]:
        """A message id the thread has seen (or the turn repeats) gets a new id: LangGraph's
        reducer would otherwise replace the earlier message and the transcript skip it."""
        taken = self.store.known_ids(tx, [m.id for m in turn if m.id is not None])
        out, seen = [], set()
        for message in turn:
            if message.id is None or message.id in taken or message.id in seen:
                message = message.model_copy()
                message.id = str(uuid.uuid4())
            seen.add(message.id)
            out.append(message)
        return out

    def _for_transcript(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        if self.policy.redact_transcript:
            return redact_messages(messages, self.policy.redactor or default_redactor)
        return list(messages)

    def _fold(self, thread_id: str, job: FoldJob | None) -> None:
        for _ in range(FOLD_ATTEMPTS):
            if job is None:
                return
            try:
                summary, record = self.summarize(thread_id, job)
            except SummarizerError as exc:
                self.defer_or_raise(exc)
                return
            replanned: list[FoldJob] = []

            def apply(prev: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan,
                      job: FoldJob = job, summary: str = summary) -> str | None:
                if job.same(prev, folds, window, p):
                    return summary
                replanned.append(FoldJob(prev, folds, tuple(window), p))
                return None

            try:
                with self.store.transaction(thread_id) as tx:
                    applied = self.backend.save(tx, [], apply)
                    if applied and self.owns_transcript:
                        self.store.append_fold(tx, record.as_dict())
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

    # -- the fold routine ----------------------------------------------------------------------
    def summarize(self, thread_id: str, job: FoldJob) -> tuple[str, FoldRecord]:
        """Redact what is sent, summarize with retries and a timeout per attempt. No lock,
        no transaction. A failure is recorded (in its own transaction) and raised."""
        policy = self.policy
        sent = redact_messages(job.folded, policy.redactor)
        start = time.perf_counter()
        error: str | None = None
        text = ""
        try:
            text = run_summarizer(_Timed(self.summarizer, policy.summary_timeout), job.summary,
                                  sent, retries=policy.summary_retries, thread_id=thread_id,
                                  max_tokens=policy.max_summary_tokens, counter=policy.counter)
        except SummarizerError as exc:
            error = str(exc)
            raise
        finally:
            record = self._record(thread_id, job, text, error, time.perf_counter() - start)
            if error is not None and self.owns_transcript:
                record.log()
                try:
                    with self.store.transaction(thread_id) as tx:
                        self.store.append_fold(tx, record.as_dict())
                except Exception:  # the fold failed already; its record is best effort
                    logger.warning("could not record a failed fold", exc_info=True)
        return text, record

    def _record(self, thread_id: str, job: FoldJob, text: str, error: str | None,
                seconds: float) -> FoldRecord:
        folded = job.folded
        return FoldRecord(
            thread_id=thread_id, version=job.folds + 1, trigger=job.plan.reason or "forced",
            messages_before=len(job.window), messages_kept=len(job.window) - len(folded),
            folded=len(folded), folded_first_id=folded[0].id if folded else None,
            folded_last_id=folded[-1].id if folded else None,
            summary_tokens=self.policy.count([SystemMessage(text)]) if text else 0,
            summarizer=summarizer_name(self.summarizer),
            prompt_version=self.policy.prompt_version,
            duration_ms=round(seconds * 1000, 3), error=error, backend=self.name)

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

    # -- whole-thread writes ---------------------------------------------------------------------
    def clear(self, thread_id: str) -> None:
        with self.store.transaction(thread_id) as tx:
            self.backend.clear(tx)

    def restore(self, record: ThreadRecord, *, expect_last_id: str | None = None,
                fold_record: FoldRecord | None = None) -> bool:
        """Write transcript (idempotent by message id), summary and window in one
        transaction. With ``expect_last_id`` it is a compare-and-set: nothing is written
        (and ``False`` returned) when the transcript grew since that message."""
        with self.store.transaction(record.thread_id) as tx:
            if expect_last_id is not None and self.store.last_ids(tx, 1) != [expect_last_id]:
                return False
            if self.owns_transcript:
                self.store.append_transcript(tx, self._for_transcript(record.transcript))
            self.backend.restore(tx, record)
            if fold_record is not None:
                self.store.append_fold(tx, fold_record.as_dict())
        return True

    def close(self) -> None:
        self.backend.close()


class _AgentHooks:
    """The middleware's view of the engine inside ``create_agent`` runs."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def agent_fold(self) -> FoldFn:
        """Inside an agent step the checkpointer writes the state: summarize now (no memshift
        lock or transaction is open) and record the fold."""
        engine, thread_id = self.engine, _run_thread()

        def fold(summary: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan) -> str | None:
            tid = thread_id or ""
            try:
                text, record = engine.summarize(tid, FoldJob(summary, folds, tuple(window), p))
            except SummarizerError as exc:
                engine.defer_or_raise(exc)
                return None
            if thread_id is not None and engine.owns_transcript:
                with engine.store.transaction(thread_id) as tx:
                    engine.store.append_fold(tx, record.as_dict())
            record.log()
            return text
        return fold

    def after_agent(self, window: Sequence[BaseMessage]) -> None:
        """The agent's turn reaches the transcript; checkpoints stay bounded."""
        thread_id, engine = _run_thread(), self.engine
        if thread_id is None:
            return
        with engine.store.transaction(thread_id) as tx:
            if engine.owns_transcript:
                engine.store.append_transcript(tx, engine._for_transcript(window))
            engine.store.checkpoints.retain(tx)


def _run_thread() -> str | None:
    """The thread id of the LangGraph run we are called from, if any."""
    from langgraph.config import get_config

    try:
        return get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a graph run
        return None
