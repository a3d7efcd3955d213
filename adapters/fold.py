"""The fold: what a summary costs and what it leaves behind, written once.

``Folder`` is what the engine (a fold after a saved turn) and the agent hooks (a fold inside a
``create_agent`` step) both receive: the job the real class asked for (``FoldJob``), the
summarizer call (redaction of what is sent and of the reply, chunks, retries, a timeout per
attempt — ``adapters.overflow`` / ``adapters.summarizer``), the fold record, the backoff of a
thread whose fold failed, the policy's defer-or-raise, and the structured preferences kept per
user; ``FoldRecord`` is what every fold leaves (persisted with the store, logged without
text). It never holds a lock or a transaction: its steps that write (a record) open their own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from adapters.telemetry import TELEMETRY
from adapters.errors import StoreError, SummarizerError
from adapters import ledger
from adapters.fold_check import verdict
from adapters.io import Steps
from adapters.overflow import summarize_in_chunks
from adapters.policy import MAX_RETRY_BACKOFF, FoldPlan, MemoryPolicy
from adapters.redaction import default_redactor, redact_messages
from adapters.stores.base import Store, Tx, in_transaction, store_io
from adapters.structured import parse_rendered
from adapters.summarizer import DeterministicSummarizer, Summarizer, summarizer_name
from adapters.tokens import for_summarizer
from adapters.view import detach, message_signature, new_message

__all__ = ["FoldJob", "FoldRecord", "Folder", "comparable", "planner"]

logger = logging.getLogger("memshift")
FALLBACK = DeterministicSummarizer(max_chars=4000)  # bounded, offline, never fails

TURN_COMMITTED = ("memshift: the turn was committed before the summarizer was interrupted; "
                  "the fold is recorded as failed and retried on the next save. Do not save the "
                  "turn again.")
record_logger = logging.getLogger("memshift.folds")
_PLAIN = frozenset({str, int, float, bool, type(None)})

# (previous summary, folds so far, whole window, plan) -> new summary, or None: not now
FoldFn = Callable[[str, int, Sequence[BaseMessage], FoldPlan], "str | None"]


@dataclass(frozen=True)
class FoldRecord:
    """What one fold did, persisted with the store (in the transaction of the state it
    describes) and logged without text."""

    thread_id: str
    version: int  # the summary version this fold produced (or tried to)
    trigger: str  # e.g. "tokens=431>400", "messages=7>6", "resummarize"
    messages_before: int
    messages_kept: int
    folded: int
    folded_first_id: str | None
    folded_last_id: str | None
    summary_tokens: int
    summarizer: str
    prompt_version: str
    duration_ms: float
    error: str | None = None
    backend: str = ""
    policy: dict[str, Any] | None = None  # MemoryPolicy.recorded(): the rule this fold followed
    # a migration's record: the source's (count, newest id) and the state written (a re-run
    # skips the thread while both still match: ``compat.migration``)
    source: dict[str, Any] | None = None
    # a background fold past the policy's lag bound: what the save that waited for it saw
    # (``window`` > ``bound``, in ``unit``), and whether the fold ``landed`` within the wait
    lag: dict[str, Any] | None = None
    summarizer_calls: int | None = None  # a rebuild's (adoption): the calls it took
    at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    def as_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)``: every field, the policy copied (without asdict's
        recursive walk over every value: a fold writes one record)."""
        out = dict(self.__dict__)
        policy = self.policy
        if policy is not None:  # plain values (what MemoryPolicy.recorded holds): one level
            out["policy"] = dict(policy) if all(
                type(v) in _PLAIN for v in policy.values()) else deepcopy(policy)
        return out

    def log(self) -> None:
        """INFO carries numbers only: never message or summary text (the metrics too)."""
        TELEMETRY.fold(self)
        if self.error:
            record_logger.warning("fold failed thread=%r version=%d trigger=%s folded=%d error=%s",
                           self.thread_id, self.version, self.trigger, self.folded,
                           self.error.split(":")[0])
        else:
            record_logger.info("fold thread=%r version=%d trigger=%s folded=%d kept=%d summary_tokens=%d "
                        "duration_ms=%.1f", self.thread_id, self.version, self.trigger, self.folded,
                        self.messages_kept, self.summary_tokens, self.duration_ms)


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the fields that differ between equivalent backends (timing, backend
    name, and message ids, which each memory assigns to id-less messages itself)."""
    skip = ("at", "duration_ms", "backend", "folded_first_id", "folded_last_id", "source", "lag")
    return {k: v for k, v in record.items() if k not in skip}


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

    def heads(self, window: Sequence[BaseMessage]) -> bool:
        """Whether the messages this job folds are still the head of ``window`` (turns may
        have landed after them: a fold commits on the prefix it summarized)."""
        cutoff = self.plan.cutoff
        return 0 < cutoff < len(window) and _keys(window[:cutoff]) == _keys(self.folded)

    def lands_on(self, summary: str, folds: int, window: Sequence[BaseMessage]) -> bool:
        """The compare-and-set of a fold's commit: the same summary and fold count, and the
        folded messages still head the window."""
        return (summary, folds) == (self.summary, self.folds) and self.heads(window)


def _keys(messages: Sequence[BaseMessage]) -> list[tuple]:
    return [(m.id, *message_signature(m)) for m in messages]


def planner() -> tuple[list[FoldJob], FoldFn]:
    """A fold function that only records what the real class asks for ("not now")."""
    planned: list[FoldJob] = []

    def plan(summary: str, folds: int, window: Sequence[BaseMessage], p: FoldPlan) -> None:
        planned.append(FoldJob(summary, folds, tuple(window), p))
        return None
    return planned, plan


class Folder:
    """The fold routine of one backend over one store (``records``: this side writes fold
    records and preferences; a shadow candidate leaves them to the primary)."""

    failures_size = 100_000  # threads whose backoff this process remembers

    def __init__(self, *, policy: MemoryPolicy, summarizer: Summarizer, store: Store,
                 backend: str, records: bool = True) -> None:
        self.policy, self.summarizer, self.store = policy, summarizer, store
        self.backend, self.records = backend, records
        self.clock: Callable[[], float] = time.monotonic  # injectable (backoff tests)
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()

    # -- backoff ------------------------------------------------------------------------------
    def backing_off(self, thread_id: str) -> bool:
        """A fold that failed is not tried again before its backoff ends (per process)."""
        state = self._failures.get(thread_id)
        return state is not None and self.clock() < state[1]

    def failed(self, thread_id: str) -> None:
        """Exponential backoff with jitter, capped, across saves."""
        count = self._failures.pop(thread_id, (0, 0.0))[0] + 1
        delay = min(MAX_RETRY_BACKOFF, self.policy.retry_backoff * 2 ** (count - 1))
        self._failures[thread_id] = (count, self.clock() + delay * (0.5 + random.random() / 2))
        if len(self._failures) > self.failures_size:  # bounded memory for any number of threads
            self._failures.popitem(last=False)

    def succeeded(self, thread_id: str) -> None:
        self._failures.pop(thread_id, None)

    def exhausted(self, thread_id: str) -> bool:
        """``max_failed_folds`` folds in a row failed: the window is held by the fallback."""
        limit = self.policy.max_failed_folds
        state = self._failures.get(thread_id)
        return limit is not None and state is not None and state[0] >= limit

    def fallback(self, thread_id: str, job: FoldJob, error: str) -> tuple[str, FoldRecord]:
        """A fold without the summarizer, when it keeps failing: the previous summary, a marker
        and the first sentence of each folded message (offline, bounded). The window stays at
        the policy's size; every folded message stays in the transcript, and
        ``memshift resummarize`` rebuilds the summary once the summarizer works again."""
        folded = redact_messages(for_summarizer(job.folded), self.policy.redactor)
        marker = (f"[memshift: {len(folded)} messages folded without the summarizer, which "
                  "failed; they are in the transcript]")
        previous = ledger.split(job.summary)[0] if self.policy.keep_specifics else job.summary
        text = self.carry(job.summary, FALLBACK.summarize(f"{previous}\n{marker}".strip(),
                                                          folded), folded)
        record = dataclasses.replace(self.record(thread_id, job, text, None, 0.0),
                                     summarizer="fallback",
                                     trigger=f"fallback ({error})"[:300])
        logger.warning("fold %d of a thread used the offline fallback: the summarizer failed %d "
                       "time(s) in a row (the messages stay in the transcript)", job.folds + 1,
                       self._failures.get(thread_id, (0, 0.0))[0])
        return text, record

    # -- the summary --------------------------------------------------------------------------
    def summarize_steps(self, thread_id: str, job: FoldJob) -> Steps[tuple[str, FoldRecord]]:
        """Redact what is sent, summarize with retries and a timeout per attempt (in chunks
        when the input is too large), check the reply (``adapters.fold_check``). No lock, no
        transaction. A failure or a rejected reply is recorded (in its own transaction) and
        raised: nothing is replaced."""
        policy = self.policy
        start = time.perf_counter()
        try:
            folded = job.folded  # stored objects may be shared: the summarizer gets copies
            if self.store.shares_messages:
                folded = tuple(detach(m) for m in folded)
            sent = redact_messages(for_summarizer(folded), policy.redactor)
            # with keep_specifics the summarizer sees the summary without its ledger
            previous = ledger.split(job.summary)[0] if policy.keep_specifics else job.summary
            text = yield from summarize_in_chunks(self.summarizer, policy, previous, sent,
                                                  thread_id)
            if policy.redactor is not None:  # the reply too: a model may echo or invent secrets
                text = policy.redactor(text)
            carried = self.carry(job.summary, text, sent)
            # fail closed: a reply that is no summary of this fold replaces nothing
            rejected = verdict(text, policy, previous, sent, job.window[job.plan.cutoff:],
                               carried[len(text):]) if policy.check_summaries else None
            if rejected is not None:
                raise SummarizerError(str(rejected), thread_id=thread_id,
                                      attempts=1) from rejected
            text = carried
        except (SummarizerError, KeyboardInterrupt, SystemExit) as exc:
            interrupted = not isinstance(exc, SummarizerError)
            error = f"interrupted: {type(exc).__name__}" if interrupted else str(exc)
            record = self.record(thread_id, job, "", error, time.perf_counter() - start)
            record.log()
            if self.records:
                try:
                    yield from self.record_steps(thread_id, record)
                except StoreError:  # the fold failed already; its record is best effort
                    logger.warning("could not record a failed fold")
            if interrupted:  # the caller must not store the turn again: it is committed
                exc.add_note(TURN_COMMITTED)
                exc.memshift_turn_committed = True  # type: ignore[union-attr]
            raise
        return text, self.record(thread_id, job, text, None, time.perf_counter() - start)

    def carry(self, previous: str, text: str, folded: Sequence[BaseMessage]) -> str:
        """``text`` with the specifics ledger (``adapters.ledger``) when the policy keeps one."""
        if not self.policy.keep_specifics:
            return text
        return ledger.carry(previous, text, folded, budget=self.policy.max_specifics_tokens,
                            counter=self.policy.count)

    def record(self, thread_id: str, job: FoldJob, text: str, error: str | None,
               seconds: float) -> FoldRecord:
        folded, policy = job.folded, self.policy
        return FoldRecord(
            thread_id=thread_id, version=job.folds + 1, trigger=job.plan.reason or "forced",
            messages_before=len(job.window), messages_kept=len(job.window) - len(folded),
            folded=len(folded), folded_first_id=folded[0].id if folded else None,
            folded_last_id=folded[-1].id if folded else None,
            summary_tokens=policy.count([new_message(SystemMessage, text)]) if text else 0,
            summarizer=summarizer_name(self.summarizer),
            prompt_version=policy.prompt_version, policy=policy.recorded(),
            duration_ms=round(seconds * 1000, 3), error=error, backend=self.backend)

    def lag_record(self, thread_id: str, job: FoldJob, lag: dict[str, Any]) -> FoldRecord:
        """What a save past the lag bound leaves when the fold in flight (``job``) has not
        landed within the time bound: the save returned without it (its turn is stored; the
        fold lands, or is planned again, later). Written once per fold in flight."""
        error = (f"lag bound exceeded: the window is {lag['window']} {lag['unit']}, past "
                 f"{lag['bound']} (the trigger plus the lag allowed); the fold in flight for "
                 f"{lag['in_flight_ms'] / 1000:.1f} s has not landed and the save returned "
                 "without it")
        return dataclasses.replace(
            self.record(thread_id, job, "", error, lag["waited_ms"] / 1000), trigger="lag",
            messages_before=lag["messages"], messages_kept=lag["messages"], folded=0,
            folded_first_id=None, folded_last_id=None, lag=lag)

    def record_steps(self, thread_id: str, record: FoldRecord) -> Steps[None]:
        """The record in a transaction of its own."""
        def body(tx: Tx) -> Steps[None]:
            yield from self.record_in(tx, record)
        yield from in_transaction(self.store, thread_id, body)

    def record_in(self, tx: Tx, record: FoldRecord) -> Steps[None]:
        """The record inside ``tx`` (with the state it describes)."""
        if self.records:
            yield store_io(self.store, tx, self.store.append_fold, record.as_dict())

    # -- after a fold -------------------------------------------------------------------------
    def defer_or_raise(self, exc: SummarizerError) -> None:
        """The policy's answer to a failed fold: raise, or log (no message text) and go on.
        The turn is stored either way; the fold is retried on the next save."""
        if self.policy.on_summary_error == "raise":
            raise exc
        logger.warning("summary fold deferred (turn stored, retried on the next save): %s",
                       str(exc).split(":")[0])

    def applied(self, thread_id: str, summary: str, record: FoldRecord) -> None:
        """A fold committed: log it, keep the structured preferences it carries."""
        record.log()
        store = self.policy.preferences_store
        if store is None or not self.records:
            return
        # LangGraph namespaces refuse ".": encode it (and "%") so distinct users stay distinct
        user = self.policy.user_id(thread_id).replace("%", "%25").replace(".", "%2E")
        for item in parse_rendered(summary).preferences:
            key = item.key or hashlib.sha256(item.value.lower().encode()).hexdigest()[:16]
            store.put(("memshift", "preferences", user), key,
                      {"value": item.value, "thread_id": thread_id, "version": record.version})

    def for_transcript(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """What the transcript stores of ``messages`` (scrubbed with ``redact_transcript``)."""
        if self.policy.redact_transcript:
            return redact_messages(messages, self.policy.redactor or default_redactor)
        return list(messages)

