"""``migrate(source, target)``: move threads between backends and stores, verified.

Per thread: transcript first (idempotent by message id), then summary + window + fold
count in one backend write, with a fold record (trigger ``migrated``) that carries the policy
the thread follows, so the policy travels with the data. Re-running skips threads that are
already identical, so a crashed migration is finished by running it again; rollback is the
same call reversed.

Every thread ends as exactly one of migrated, skipped or failed. ``rebuilt`` and
``verified`` are separate facts about those threads: a rebuilt thread's summary was
recomputed from its stored history (stock classic memory never persisted one), a verified
thread was re-read from the target and found identical to the source.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from adapters import MemoryPolicy, ThreadRecord, compare_views
from adapters.view import MemoryView, message_signature
from compat._rebuild import rebuild_fold_record, rebuild_record
from compat.memory import SummaryMemory
from compat.sources import SourceThread, as_source

__all__ = ["MigrationReport", "migrate"]

ALREADY = "already migrated (identical)"
NOT_FOUND = "not found in the source"


@dataclass
class MigrationReport:
    """What happened to each thread. ``ok`` is false when anything failed."""

    source: str
    target: str
    dry_run: bool = False
    migrated: list[str] = field(default_factory=list)  # written (dry run: would be written)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)  # re-read and identical to the source
    rebuilt: list[str] = field(default_factory=list)  # migrated with a summary rebuilt from history
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def total(self) -> int:
        return len(self.migrated) + len(self.skipped) + len(self.failed)

    def counts(self) -> dict[str, int]:
        """Outcomes (they add up to ``total``) and the two separate facts."""
        return {"total": self.total, "migrated": len(self.migrated),
                "skipped": len(self.skipped), "failed": len(self.failed),
                "verified": len(self.verified), "rebuilt": len(self.rebuilt)}

    def skipped_by_reason(self) -> dict[str, int]:
        return dict(Counter(reason for _, reason in self.skipped))

    def summary_rows(self) -> list[tuple[str, int]]:
        return [("migrated" if not self.dry_run else "would migrate", len(self.migrated)),
                ("skipped", len(self.skipped)), ("failed", len(self.failed)),
                ("verified", len(self.verified)), ("summary rebuilt", len(self.rebuilt))]


def _record_view(record: ThreadRecord) -> MemoryView:
    return MemoryView(record.thread_id, record.summary, list(record.window), record.folds)


def _differences(target: SummaryMemory | None, record: ThreadRecord) -> list[str]:
    if target is None:  # a dry run against a store that does not exist yet
        return ["not on the target"]
    have = {message_signature(m) + (m.id,) for m in target.transcript(record.thread_id)}
    missing = [m for m in record.transcript if message_signature(m) + (m.id,) not in have]
    if missing and not have:  # not on the target at all: no need to read its (empty) state
        return [f"transcript misses {len(missing)} message(s)"]
    diffs = compare_views(_record_view(record), target.load(record.thread_id))
    if missing:
        diffs.append(f"transcript misses {len(missing)} message(s)")
    return diffs


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
    name = f"memshift {target.backend_name} ({target.store_url})" if target is not None \
        else "empty target (nothing there yet)"
    report = MigrationReport(source=src.name, target=name, dry_run=dry_run)
    if policy_for is None:
        policy_for = (lambda _tid: target.active_policy) if target is not None else \
            (lambda _tid: None)
    for thread_id in threads if threads is not None else src.iter_thread_ids():
        outcome = _migrate_one(src.read, target, thread_id, report, verify=verify,
                               dry_run=dry_run, policy_for=policy_for)
        if on_thread is not None:
            on_thread(thread_id, outcome)
    return report


def _migrate_one(read: Callable[[str], SourceThread | None], target: SummaryMemory | None,
                 thread_id: str, report: MigrationReport, *, verify: bool, dry_run: bool,
                 policy_for: Callable[[str], MemoryPolicy | None]) -> str:
    try:
        started = time.perf_counter()
        found = read(thread_id)
        if found is None:
            report.skipped.append((thread_id, NOT_FOUND))
            return "skipped"
        record = found.record
        if found.note:
            report.notes[thread_id] = found.note
        policy = policy_for(thread_id)
        if found.rebuild and target is not None:
            record = rebuild_record(target, record.thread_id, record.transcript, policy)
        if target is not None and not _differences(target, record):
            report.skipped.append((thread_id, ALREADY))
            if verify:
                report.verified.append(thread_id)
            return "skipped"
        if dry_run:
            report.migrated.append(thread_id)
            if found.rebuild:
                report.rebuilt.append(thread_id)
            return "would migrate"
        assert target is not None
        _write(target, record, policy, report.source, started)
        if verify:
            diffs = _differences(target, record)
            if diffs:
                report.failed.append((thread_id, "verification: " + "; ".join(diffs)))
                return "failed"
            report.verified.append(thread_id)
        report.migrated.append(thread_id)
        if found.rebuild:
            report.rebuilt.append(thread_id)
        return "migrated"
    except Exception as exc:  # one bad thread never stops the run; the report says why
        report.failed.append((thread_id, f"{type(exc).__name__}: {exc}"))
        return "failed"


def _write(target: SummaryMemory, record: ThreadRecord, policy: MemoryPolicy | None,
           source: str, started: float) -> None:
    """Transcript, state and a ``migrated`` fold record in one transaction (a shadow or
    staged target writes them through its own restore)."""
    fold = rebuild_fold_record(record.thread_id, record.transcript, record,
                               policy or target.active_policy, trigger=f"migrated from {source}",
                               summarizer="migration", backend=target.backend_name,
                               started=started)
    if policy is None:  # nothing says which policy the thread follows: record none
        fold = replace(fold, policy=None)
    target.restore_thread(record, fold_record=fold)
