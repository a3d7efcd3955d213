"""``migrate(source, target)``: move threads between backends and stores, verified.

Per thread: transcript, summary, window and fold count in one transaction, with a fold record
(trigger ``migrated``) that carries the policy the thread follows, so the policy travels with
the data. The write is a move, with a move's guarantees:

- a compare-and-set on the target: written only if the target's newest transcript message
  is still the one read, and never over a target that has moved on since it was migrated (a
  newer turn there, or more folds of the same transcript): that thread is ``skipped (target
  newer)``, so re-running a migration after the cutover loses nothing;
- a source written during the run: after the pass, a delta pass re-copies every thread whose
  source moved past what the target holds; a thread that moved again after that is reported
  ``changed during migration`` and is not counted as verified.

Re-running skips threads that are already identical, so a crashed migration is finished by
running it again; rollback is the same call reversed. On a SQL target a re-run reads a page
of threads at a time (``compat.migrating.pages``): a thread a verified migration of this
source left exactly as it is on both sides costs no read of its own.

Every thread ends as exactly one of migrated, skipped or failed. ``rebuilt``, ``verified``
and ``changed`` are separate facts about those threads: a rebuilt thread's summary was
recomputed from its stored history (stock classic memory never persisted one), a verified
thread was re-read from the target and found identical to the source, a changed one received
turns in the source after its last copy, an incomplete one has a record (a fold record) that
does not decode: its state moves, and the run names what it did not carry and fails
(``compat.migrating.folds``).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage

from adapters import MemoryPolicy, ThreadRecord, compare_views
from adapters.view import MemoryView, message_signature
from compat._rebuild import rebuild_fold_record, rebuild_record
from compat.memory import SummaryMemory
from compat.admin import last_transcript_id
from compat.sources import SourceThread, ThreadSource, as_source
from compat import admin
from compat.migrating.folds import Gaps, history_gaps, policy_or_gap
from compat.migrating.pages import behind_page, check_page, page_store, pages, read_page
from compat.migrating.report import (  # the report's names stay importable from here
    ALREADY, ATTEMPTS, CHANGED, NOT_FOUND, TARGET_NEWER, MigrationReport,  # noqa: F401
)

__all__ = ["MigrationReport", "migrate"]

logger = logging.getLogger("memshift.migrate")


def _record_view(record: ThreadRecord) -> MemoryView:
    return MemoryView(record.thread_id, record.summary, list(record.window), record.folds)


def _differences(target: SummaryMemory | None, record: ThreadRecord,
                 have: list[BaseMessage] | None = None) -> list[str]:
    if target is None:  # a dry run against a store that does not exist yet
        return ["not on the target"]
    if have is None:
        have = target.transcript(record.thread_id)
    held = {message_signature(m) + (m.id,) for m in have}
    missing = [m for m in record.transcript if message_signature(m) + (m.id,) not in held]
    if missing and not held:  # not on the target at all: no need to read its (empty) state
        return [f"transcript misses {len(missing)} message(s)"]
    diffs = compare_views(_record_view(record), target.load(record.thread_id))
    if missing:
        diffs.append(f"transcript misses {len(missing)} message(s)")
    return diffs


def _target_newer(have: list[BaseMessage], record: ThreadRecord,
                  target: SummaryMemory) -> bool:
    """The target moved on since it was migrated: its newest message is not in the source,
    or it holds the source's very transcript with more folds than the source."""
    if not have:
        return False
    source_ids = [m.id for m in record.transcript]
    if have[-1].id not in set(source_ids):
        return True
    return [m.id for m in have] == source_ids and \
        target.load(record.thread_id).folds > record.folds


def _source_last_id(src: ThreadSource, thread_id: str) -> str | None:
    """The id of the source thread's newest message: a source's own ``last_id`` when it has
    one (two small reads), else read from the thread."""
    last_id = getattr(src, "last_id", None)  # an optional capability of a source
    if last_id is not None:
        return last_id(thread_id)
    found = src.read(thread_id)
    return found.record.transcript[-1].id if found and found.record.transcript else None


class _Again:
    """The ids of a run, for the delta pass: the given collection, the source's listing, or
    the ids a one-shot iterator yielded."""

    def __init__(self, threads: Iterable[str] | None, src: ThreadSource) -> None:
        self.src, self.given = src, threads
        self.seen: list[str] | None = None
        if threads is not None and iter(threads) is threads:  # one-shot: remember its ids
            self.seen = []

    def first(self) -> Iterator[str]:
        ids = self.given if self.given is not None else self.src.iter_thread_ids()
        for thread_id in ids:
            if self.seen is not None:
                self.seen.append(thread_id)
            yield thread_id

    def again(self) -> Iterable[str]:
        if self.seen is not None:
            return self.seen
        return self.given if self.given is not None else self.src.iter_thread_ids()


def _state_hash(summary: str, folds: int, window: Sequence[BaseMessage]) -> str:
    digest = hashlib.sha256(f"{folds}\x00{summary}".encode())
    for m in window:
        digest.update(repr((m.id, *message_signature(m))).encode())
    return digest.hexdigest()


Fingerprint = Callable[[str], "tuple[int, str] | None"]  # a source's (count, newest id)


def fingerprint_of(record: ThreadRecord) -> dict[str, Any] | None:
    """What a migrated record remembers: the source's size and newest id, the state written,
    and a token naming this write (its verification confirms the mark by it). The store adds
    the state stamp its transaction leaves (``adapters.stores.marks``)."""
    if not record.transcript:
        return None
    return {"count": len(record.transcript), "last_id": record.transcript[-1].id,
            "state": _state_hash(record.summary, record.folds, record.window),
            "token": uuid.uuid4().hex, "verified": False}


def unchanged(target: SummaryMemory, thread_id: str, source: str, read: Fingerprint) -> bool:
    """A re-run's cheap check, before any read of the source thread or rebuild: the target's
    newest fold record is this source's migration, the source still has the same number of
    messages and newest id, and the target still holds the very state written (so the
    earlier run's verification holds)."""
    records = admin.summary_history(target, thread_id)
    mark = records[-1].get("source") if records else None
    if not isinstance(mark, dict) or records[-1].get("trigger") != f"migrated from {source}":
        return False
    if read(thread_id) != (mark.get("count"), mark.get("last_id")):
        return False
    view = target.load(thread_id)
    return last_transcript_id(target, thread_id) == mark.get("last_id") and \
        _state_hash(view.summary, view.folds, view.messages) == mark.get("state")


def migrate(
    source: Any,
    target: SummaryMemory | None,
    threads: Iterable[str] | None = None,
    *,
    verify: bool = True,
    dry_run: bool = False,
    on_thread: Callable[[str, str], None] | None = None,
    policy_for: Callable[[str], MemoryPolicy | None] | None = None,
) -> MigrationReport:
    """Carry each thread's transcript, running summary and window from source to target.

    ``source`` is a ``SummaryMemory`` or a ``ThreadSource`` (``ClassicHistorySource``,
    ``GraphSource``). ``threads`` limits the run (default: every thread, streamed).
    ``on_thread(thread_id, outcome)`` is called after each thread (progress bars).
    ``policy_for(thread_id)`` is the policy a thread follows: rebuilds use it and the
    thread's ``migrated`` fold record carries it (default: the target's policy; ``None``:
    the target's policy for rebuilds and no policy in the record). ``target=None`` is only
    for dry runs against a store that does not exist yet: every thread found would migrate.
    """
    if target is None and not dry_run:
        raise ValueError("migrate needs a target unless dry_run=True")
    src = as_source(source)
    fingerprint = getattr(src, "fingerprint", None)  # an optional capability of a source
    name = f"memshift {target.backend_name} ({target.store_url})" if target is not None \
        else "empty target (nothing there yet)"
    report = MigrationReport(source=src.name, target=name, dry_run=dry_run)
    if policy_for is None:
        policy_for = (lambda _tid: target.active_policy) if target is not None else \
            (lambda _tid: None)
    ids = _Again(threads, src)
    store = page_store(target) if fingerprint is not None else None
    gaps = history_gaps(src)
    for page in pages(ids.first()):
        check = _check(src, store, page)
        read = read_page(src, [t for t in page if check is None or t not in check.unchanged])
        confirms: dict[str, str] = {}
        for thread_id in page:
            if check is not None and thread_id in check.unchanged:
                outcome = _fingerprinted(report, thread_id, verify)
            else:
                outcome = _migrate_one(
                    read, target, thread_id, report, verify=verify, dry_run=dry_run,
                    policy_for=policy_for, fingerprint=fingerprint, paged=store is not None,
                    pending=check.pending.get(thread_id) if check is not None else None,
                    empty=check is not None and thread_id not in check.on_target,
                    confirms=confirms, gaps=gaps)
            if on_thread is not None:
                on_thread(thread_id, outcome)
        if not dry_run:  # these marks count from now on
            _confirm(store, confirms)
    if target is not None and not dry_run:
        _delta(src, target, ids, report, verify=verify, policy_for=policy_for,
               fingerprint=fingerprint, store=store, gaps=gaps)
    return report


def _check(src: ThreadSource, store: Any, page: list[str]) -> Any:
    """The page check, or ``None``: every thread of the page then goes the full path (and a
    store that cannot be read fails each thread with its own precise error)."""
    if store is None:
        return None
    try:
        return check_page(src, store, page, f"migrated from {src.name}")
    except Exception:
        return None


def _confirm(store: Any, confirms: dict[str, str]) -> None:
    """Confirm the verified threads' marks; a store error leaves them unconfirmed (the next
    re-run compares those threads in full), never fails the run after its writes."""
    if not confirms or store is None:
        return
    try:
        store.confirm_marks(confirms)
    except Exception as exc:
        logger.warning("migration marks of %d verified thread(s) not confirmed (a re-run "
                       "compares them in full): %s", len(confirms), type(exc).__name__)


def _fingerprinted(report: MigrationReport, thread_id: str, verify: bool) -> str:
    """Unchanged on both sides since a verified migration: nothing read, nothing rebuilt."""
    report.skipped.append((thread_id, ALREADY))
    if verify:
        report.verified.append(thread_id)
    report.fingerprinted.append(thread_id)
    return "skipped"


def _behind(src: ThreadSource, target: SummaryMemory, thread_id: str) -> bool:
    """The source holds a newer message than the target."""
    try:
        source_last = _source_last_id(src, thread_id)
        return source_last is not None and source_last != last_transcript_id(target, thread_id)
    except Exception:  # a thread that cannot be read now is judged by its earlier outcome
        return False


def _behind_in(src: ThreadSource, target: SummaryMemory, store: Any,
               page: list[str]) -> list[str]:
    """The page's threads whose source holds a newer message than the target: one read of
    each side for the page where both can, else thread by thread."""
    if store is not None:
        try:
            found = behind_page(src, store, page)
        except Exception:  # judged thread by thread (a thread that cannot be read now
            found = None  # keeps its earlier outcome)
        if found is not None:
            return found
    return [t for t in page if _behind(src, target, t)]


def _delta(src: ThreadSource, target: SummaryMemory, ids: _Again, report: MigrationReport,
           *, verify: bool, policy_for: Callable[[str], MemoryPolicy | None],
           fingerprint: Fingerprint | None = None, store: Any = None,
           gaps: Gaps | None = None) -> None:
    """Threads written in the source during the run: copied again once, then any that moved
    on once more are reported ``changed during migration`` (not verified)."""
    settled = {t for t, r in report.skipped if r in (TARGET_NEWER, NOT_FOUND)}
    settled.update(t for t, _ in report.failed)
    behind = [t for page in pages(ids.again()) for t in _behind_in(src, target, store, page)
              if t not in settled]
    confirms: dict[str, str] = {}
    report.forget(behind)
    for thread_id in behind:
        _migrate_one(src.read, target, thread_id, report, verify=verify, dry_run=False,
                     policy_for=policy_for, fingerprint=fingerprint, paged=True,
                     confirms=confirms, gaps=gaps)
        report.caught_up.append(thread_id)
    _confirm(store, confirms)
    report.changed.extend(t for t in behind if _behind(src, target, t))
    if report.changed:
        report.verified.drop(set(report.changed))


def _migrate_one(read: Callable[[str], SourceThread | None], target: SummaryMemory | None,
                 thread_id: str, report: MigrationReport, *, verify: bool, dry_run: bool,
                 policy_for: Callable[[str], MemoryPolicy | None],
                 fingerprint: Fingerprint | None = None, paged: bool = False,
                 pending: str | None = None, empty: bool = False,
                 confirms: dict[str, str] | None = None, gaps: Gaps | None = None) -> str:
    """One thread the full way. ``paged``: fingerprints are the page check's (never judged
    here: a page that could not be checked goes the full path);
    ``pending``: the token of this source's mark, unverified, that a comparison finding the
    thread identical confirms; ``empty``: the page read found no transcript on the target
    (the first attempt writes without reading it: the write's compare-and-set still checks);
    ``confirms``: where a verified thread's mark token goes (confirmed a page at a time);
    ``gaps``: what the thread's records let the run not carry (reported, never a mark)."""
    try:
        started = time.perf_counter()
        if target is not None and fingerprint is not None and not paged and \
                unchanged(target, thread_id, report.source, fingerprint):
            return _fingerprinted(report, thread_id, verify)
        found = read(thread_id)
        if found is None:
            report.skipped.append((thread_id, NOT_FOUND))
            return "skipped"
        record = found.record
        if found.note:
            report.notes.add(thread_id, found.note)
        policy, gap = policy_or_gap(policy_for, thread_id, target)
        gap = (gaps(thread_id) if gaps is not None else None) or gap
        if gap is not None:  # the state still moves; the run names what it did not carry
            report.incomplete.append((thread_id, gap))
            confirms = None  # nor is its mark trusted by a re-run
        if found.rebuild and target is not None:
            record = rebuild_record(target, record.thread_id, record.transcript, policy)
        for attempt in range(ATTEMPTS):
            known_empty = empty and attempt == 0
            have = target.transcript(thread_id) if target is not None and not known_empty \
                else []
            if target is not None and _target_newer(have, record, target):
                report.skipped.append((thread_id, TARGET_NEWER))
                return "skipped"
            if target is not None and not _differences(target, record, have):
                report.skipped.append((thread_id, ALREADY))
                if verify:
                    report.verified.append(thread_id)
                    if pending and confirms is not None:
                        confirms[thread_id] = pending
                return "skipped"
            if dry_run:
                report.migrated.append(thread_id)
                if found.rebuild:
                    report.rebuilt.append(thread_id)
                return "would migrate"
            assert target is not None
            last = have[-1].id if have and have[-1].id else ""
            mark = fingerprint_of(record) if fingerprint is not None else None
            if _write(target, record, policy, report.source, started, last, mark):
                break
        else:  # the target kept receiving turns while it was being written
            report.failed.append((thread_id, "the target kept changing during the migration; "
                                             "re-run when it is quiet"))
            return "failed"
        if verify:
            diffs = _differences(target, record)
            if diffs:
                report.failed.append((thread_id, "verification: " + "; ".join(diffs)))
                return "failed"
            report.verified.append(thread_id)
            if mark is not None and confirms is not None:  # counts once confirmed
                confirms[thread_id] = mark["token"]
        report.migrated.append(thread_id)
        if found.rebuild:
            report.rebuilt.append(thread_id)
        return "migrated"
    except Exception as exc:  # one bad thread never stops the run; the report says why
        report.failed.append((thread_id, f"{type(exc).__name__}: {exc}"))
        return "failed"


def _write(target: SummaryMemory, record: ThreadRecord, policy: MemoryPolicy | None,
           source: str, started: float, expect_last_id: str,
           mark: dict[str, Any] | None = None) -> bool:
    """Transcript, state and a ``migrated`` fold record in one transaction (a shadow or
    staged target writes them through its own restore), only if the target's newest
    transcript message is still ``expect_last_id``."""
    fold = rebuild_fold_record(record.thread_id, record.transcript, record,
                               policy or target.active_policy, trigger=f"migrated from {source}",
                               summarizer="migration", backend=target.backend_name,
                               started=started)
    if mark is not None:
        fold = replace(fold, source=mark)
    if policy is None:  # nothing says which policy the thread follows: record none
        fold = replace(fold, policy=None)
    return admin.restore_thread(target, record, fold_record=fold, expect_last_id=expect_last_id)
