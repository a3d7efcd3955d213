"""Erasure: a user's right to be forgotten, reaching every copy memshift keeps.

``forget(memory, thread_id)`` deletes the thread from every store the memory uses — the
transcript, both backends' state (the classic window and summary, every retained LangGraph
checkpoint with its writes and blobs), fold records, the placement — and from shadow logs and
a live shadow's recorded mismatches. ``forget(..., match=TEXT)`` removes only the messages
whose text contains ``TEXT``: the thread's memory is rebuilt from the rest of its transcript
(the summarizer runs first, with no lock held), then one transaction of the thread's home
store deletes everything it held and writes the rebuilt transcript, state and an audit fold
record together, compare-and-set on the newest message (a turn saved meanwhile makes it start
again). Copies in other stores are deleted first. On SQLite the file is then compacted
(``VACUUM`` and an emptied write-ahead log), so the bytes are gone from disk, not only from
the tables. The audit (a run-log row on SQL stores, the fold record) names the thread by a
hash and never holds the erased text. The run-log row is started before anything is erased
and finished after the compaction: a run cut off in between (killed, a lost connection) stays
``running``, and the next ``forget`` of the thread finishes its work — the compaction, even
when nothing is left to erase — and marks it ``interrupted``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from adapters.errors import ConfigError, StoreError
from adapters.stores.base import Placements, Store, require
from adapters.telemetry import thread_hash
from compat._adopt import legacy_histories
from compat._stock import forget_rendered
from compat._turns import check_thread_id, stable_ids

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["ForgetReport", "NothingToForget", "forget", "thread_hash"]

logger = logging.getLogger("memshift.erasure")
ATTEMPTS = 3
COMPACT_ATTEMPTS = 8  # about 13 s of backoff in all


class NothingToForget(ConfigError):
    """No store of the memory holds the thread: nothing was erased (a mistyped id must not
    look like a served erasure request)."""


@dataclass
class ForgetReport:
    thread: str  # thread_hash(thread_id)
    whole: bool  # the whole thread (no match), or the matching messages
    dry_run: bool
    messages_removed: int = 0
    messages_kept: int = 0
    legacy_messages: int = 0  # in a stock history (chat_memory=, message_store): held / erased
    stores: int = 0  # stores that held something of the thread
    rebuilt_folds: int | None = None  # the rebuilt summary's folds (match), else None
    shadow_lines_removed: int = 0
    mismatches_removed: int = 0
    compacted: list[str] = field(default_factory=list)
    completed_interrupted: int = 0  # earlier runs on this thread that were cut off, finished

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def text_of(message: BaseMessage) -> str:
    """Everything of a message a match can be found in: its text parts and tool-call args."""
    content = message.content
    parts = [content] if isinstance(content, str) else [
        p if isinstance(p, str) else json.dumps(p, ensure_ascii=False) for p in content]
    if isinstance(message, AIMessage) and message.tool_calls:
        parts.append(json.dumps([c.get("args") for c in message.tool_calls], ensure_ascii=False))
    return "\n".join(parts)


def forget(memory: SummaryMemory, thread_id: str, match: str | None = None, *,
           dry_run: bool = False, shadow_logs: Iterable[str] = (), llm: Any = None,
           compact: bool = True) -> ForgetReport:
    """Erase the thread, or (``match``) the messages containing ``match``, everywhere the
    memory keeps it (module docstring). ``NothingToForget`` when no store holds the thread."""
    tid = check_thread_id(thread_id)
    if match is not None and not match:
        raise ConfigError("match must be a non-empty text (omit it to forget the whole thread)")
    engine = memory.backend_impl
    if not dry_run:  # a shadow's queued writes and background folds land first, not after
        memory.drain(memory.active_policy.summary_timeout)
    where = engine.locate(tid, move=False)
    home = require(where.store, "reads", "forget")
    others = [s for s in engine.stores() if s is not home]
    legacies = legacy_histories(memory, [home, *others], tid)
    report = ForgetReport(thread_hash(tid), match is None, dry_run)
    logs = _shadow_logs(memory, shadow_logs)
    journal = _Journal(home, report)
    try:
        for _ in range(ATTEMPTS):
            transcript = home.transcript(tid)
            olds = [stable_ids(tid, legacy.read(tid)) for legacy in legacies]
            old = [m for messages in olds for m in messages]
            held = [s for s in (home, *others)
                    if _holds(s, tid, s is home and bool(transcript))]
            if not held and not old:
                if not dry_run and journal.interrupted():
                    break  # an earlier run erased it and was cut off: finish its compaction
                raise NothingToForget(f"no store of this memory holds thread {tid!r}; nothing "
                                      "was erased")
            report.stores, report.legacy_messages = len(held), len(old)
            if not dry_run:
                journal.begin()  # before anything is erased: a cut-off run stays visible
            if match is None:
                report.messages_removed = len(transcript)
                if not dry_run:
                    for legacy, messages in zip(legacies, olds):
                        if messages and legacy.wipe is not None:
                            legacy.wipe(tid)  # first: an erased thread is never adopted again
                    for store in sorted(held, key=lambda s: s is home):  # the home last
                        _erase(store, tid, placement=True)
                break
            gone = _gone(transcript, match)
            kept = [m for m in transcript if m.id not in gone]
            report.messages_removed, report.messages_kept = len(gone), len(kept)
            old_gone = [_gone(messages, match) for messages in olds]
            report.legacy_messages = sum(len(g) for g in old_gone)
            if dry_run:
                break
            for legacy, messages, gone_there in zip(legacies, olds, old_gone):
                if gone_there:
                    _rewrite_legacy(legacy, tid,
                                    [m for m in messages if m.id not in gone_there])
            for store in others:
                if store in held:
                    _erase(store, tid, placement=False)
            if not transcript or not gone:
                break
            if not kept:
                _erase(home, tid, placement=False)
                break
            if _rewrite(memory, where, tid, transcript, kept, report, llm):
                break
        else:
            raise StoreError(f"forget gave up after {ATTEMPTS} attempts: the thread kept "
                             "receiving turns; retry when it is quiet")
        if not dry_run:
            report.shadow_lines_removed = sum(_scrub_log(path, tid, match) for path in logs)
            report.mismatches_removed = engine.forget_mismatches(tid)
            forget_rendered(tid)  # no string rendering of it stays in this process either
            stores = held or [home, *others]  # (finishing a cut-off run: wherever it erased)
            compacted = [s for s in stores if hasattr(s, "compact")] if compact else []
            report.compacted = [s.url for s in compacted]
            for store in compacted:
                _compact(store)
            journal.finish()  # last: a run cut off before here is finished by the next one
    except BaseException as exc:
        journal.fail(exc)
        raise
    return report


def _gone(messages: Sequence[BaseMessage], match: str) -> set[str]:
    """The ids of the messages holding ``match``, with the other half of each tool call
    they take part in (a call without its result, or a result without its call, is a
    history no provider accepts)."""
    gone = {m.id for m in messages if m.id and match in text_of(m)}
    calls: dict[str, str] = {}  # tool call id -> the AI message that made it
    for m in messages:
        if isinstance(m, AIMessage) and m.id:
            for call in m.tool_calls:
                if (call_id := call.get("id")) is not None:
                    calls[call_id] = m.id
    for m in messages:  # a result that goes takes its call along
        if m.id in gone and isinstance(m, ToolMessage) and m.tool_call_id in calls:
            gone.add(calls[m.tool_call_id])
    for m in messages:  # a call that goes takes every result of it along
        if isinstance(m, ToolMessage) and calls.get(m.tool_call_id) in gone and m.id:
            gone.add(m.id)
    return gone


def _rewrite_legacy(legacy: Any, tid: str, kept: list[BaseMessage]) -> None:
    """The stock history without the erased messages, the rest with the ids memshift gave
    them (so the next touch finds nothing to import again)."""
    if legacy.wipe is None or legacy.append is None:
        raise StoreError("the legacy history of this thread cannot be rewritten; nothing of "
                         "it was erased")
    legacy.wipe(tid)
    if kept:
        legacy.append(tid, kept)


def _holds(store: Store, tid: str, has_transcript: bool) -> bool:
    """Whether the store keeps anything of the thread (transcript, placement, state)."""
    if has_transcript:
        return True
    with store.guard("forget"), store.transaction(tid, write=False) as tx:
        classic = store.classic.read(tx)
        placed = isinstance(store, Placements) and store.placement(tx) is not None
        if placed or classic.window or classic.summary:
            return True
        saver = store.checkpoints.saver(tx)
        return saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}) is not None


def _erase(store: Store, tid: str, placement: bool) -> int:
    with store.guard("forget"), store.transaction(tid) as tx:
        return store.erase(tx, placement)


def _rewrite(memory: SummaryMemory, where: Any, tid: str, transcript: Sequence[BaseMessage],
             kept: list[BaseMessage], report: ForgetReport, llm: Any) -> bool:
    """The rebuilt thread replaces what the home store held, in one compare-and-set
    transaction with its audit fold record; ``False`` when a turn arrived meanwhile."""
    from adapters.summarizer import summarizer_name
    from compat._rebuild import rebuild_fold_record, rebuild_record, summarizer_for

    policy = memory.active_policy
    summarizer = summarizer_for(memory, policy, llm)
    started = time.perf_counter()
    record = rebuild_record(memory, tid, kept, policy, summarizer, backend=where.backend)
    audit = rebuild_fold_record(tid, kept, record, policy, trigger="forget",
                                summarizer=summarizer_name(summarizer),
                                backend=where.backend, started=started)
    report.rebuilt_folds = record.folds
    return bool(where.engine.restore(replace(record, replace=True),
                                     expect_last_id=transcript[-1].id or "", fold_record=audit))


def _shadow_logs(memory: SummaryMemory, extra: Iterable[str]) -> list[str]:
    paths = [*extra]
    configured = memory.shadow.log if memory.shadow is not None else None
    for path in (configured, os.environ.get("MEMSHIFT_SHADOW_LOG")):
        if path and path not in paths:
            paths.append(path)
    return [p for p in paths if Path(p).is_file()]


def _scrub_log(path: str, tid: str, match: str | None) -> int:
    """Rewrite a shadow log without the thread's lines (a diff may quote any of its text,
    cut at 80 characters: every line of the thread goes, and any other line holding
    ``match``). In place, under the lock the shadow takes to append: a line written by
    another process meanwhile waits, then lands after the rewrite."""
    removed = 0
    with open(path, "r+", encoding="utf-8", errors="surrogateescape") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        kept = []
        for line in log:
            try:
                entry = json.loads(line)
                mine = isinstance(entry, dict) and entry.get("thread_id") == tid
            except ValueError:
                mine = False
            if mine or tid in line or (match is not None and match in line):
                removed += 1
            else:
                kept.append(line)
        if removed:
            log.seek(0)
            log.writelines(kept)
            log.truncate()
            log.flush()
            os.fsync(log.fileno())
    return removed


def _compact(store: Any) -> None:
    """Compact, retried while another process keeps the file busy (a writer between its
    transactions lets the checkpoint through)."""
    for attempt in range(COMPACT_ATTEMPTS):
        try:
            store.compact()
            return
        except StoreError:
            if attempt == COMPACT_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2 ** attempt)


class _Journal:
    """The erasure's audit row in the thread's home store (SQL stores): started ``running``
    before anything is erased, finished ``ok`` after the compaction. A run cut off in between
    leaves its row ``running``; the next ``forget`` of the thread finds it, finishes the work
    (the compaction) and marks it ``interrupted``. The row names the thread by its hash and
    holds counts, never text."""

    def __init__(self, home: Store, report: ForgetReport) -> None:
        from compat.runlog import RunLog

        self.report = report
        self.runlog = RunLog.of_store(home)
        self.run_id: str | None = None
        self._earlier: list[tuple[str, str]] | None = None

    def interrupted(self) -> bool:
        """Whether an earlier forget of this thread was cut off before it finished."""
        if self._earlier is None:
            self._earlier = [] if self.runlog is None else self.runlog.unfinished(
                "forget ", suffix=self.report.thread)
            self.report.completed_interrupted = len(self._earlier)
        return bool(self._earlier)

    def begin(self) -> None:
        if self.run_id is not None or self.runlog is None:
            return
        self.interrupted()
        what = "thread" if self.report.whole else "matching messages"
        self.run_id = self.runlog.start(f"forget {what} {self.report.thread}", source=None,
                                        target=self.runlog.shown, shard=None, policy=None)

    def finish(self) -> None:
        report = self.report
        logger.info("forget thread=%s whole=%s removed=%d kept=%d stores=%d", report.thread,
                    report.whole, report.messages_removed, report.messages_kept, report.stores)
        if self.runlog is None:
            return
        self.begin()  # (finishing a cut-off run: this run's own row)
        assert self.run_id is not None
        for run_id, status in self._earlier or ():
            self.runlog.finish(run_id, "interrupted" if status == "running" else status,
                               {"completed_by": self.run_id})
        self.runlog.finish(self.run_id, "ok", report.as_dict())

    def fail(self, exc: BaseException) -> None:
        """A run that stopped on an error says so (a later run still finishes its work)."""
        if self.runlog is None or self.run_id is None:
            return
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        try:
            self.runlog.finish(self.run_id, status, {**self.report.as_dict(),
                                                     "error": type(exc).__name__})
        except StoreError:
            logger.warning("forget thread=%s: could not record that the run %s",
                           self.report.thread, status)
