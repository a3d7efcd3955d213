"""``migrate(source, target)``: move threads between backends and stores, verified.

Per thread: transcript first (idempotent by message id), then summary + window + fold
count in one backend write. Re-running skips threads that are already identical, so a
crashed migration is finished by running it again; rollback is the same call reversed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from adapters import ThreadRecord, compare_views
from adapters.view import MemoryView, message_signature
from compat._rebuild import rebuild_record
from compat.memory import SummaryMemory
from compat.sources import SourceThread, as_source

__all__ = ["MigrationReport", "migrate"]


@dataclass
class MigrationReport:
    """What happened to each thread. ``ok`` is false when anything failed."""

    source: str
    target: str
    dry_run: bool = False
    migrated: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary_rows(self) -> list[tuple[str, int]]:
        return [("migrated" if not self.dry_run else "would migrate", len(self.migrated)),
                ("skipped", len(self.skipped)), ("failed", len(self.failed)),
                ("verified", len(self.verified)), ("summary rebuilt", len(self.rebuilt))]


def _record_view(record: ThreadRecord) -> MemoryView:
    return MemoryView(record.thread_id, record.summary, list(record.window), record.folds)


def _differences(target: SummaryMemory, record: ThreadRecord) -> list[str]:
    diffs = compare_views(_record_view(record), target.load(record.thread_id))
    have = {message_signature(m) + (m.id,) for m in target.transcript(record.thread_id)}
    missing = [m for m in record.transcript if message_signature(m) + (m.id,) not in have]
    if missing:
        diffs.append(f"transcript misses {len(missing)} message(s)")
    return diffs


def migrate(
    source: Any,
    target: SummaryMemory,
    threads: Iterable[str] | None = None,
    *,
    verify: bool = True,
    dry_run: bool = False,
    on_thread: Callable[[str, str], None] | None = None,
) -> MigrationReport:
    """Carry each thread's transcript, running summary and window from source to target.

    ``source`` is a ``SummaryMemory`` or a ``ThreadSource`` (``ClassicHistorySource``,
    ``GraphSource``). ``threads`` limits the run (default: every thread, streamed).
    ``on_thread(thread_id, outcome)`` is called after each thread (progress bars).
    """
    src = as_source(source)
    report = MigrationReport(source=src.name, target=f"memshift {target.backend_name} "
                                                     f"({target.store_url})", dry_run=dry_run)
    for thread_id in threads if threads is not None else src.iter_thread_ids():
        outcome = _migrate_one(src.read, target, thread_id, report, verify=verify, dry_run=dry_run)
        if on_thread is not None:
            on_thread(thread_id, outcome)
    return report


def _migrate_one(read: Callable[[str], SourceThread | None], target: SummaryMemory,
                 thread_id: str, report: MigrationReport, *, verify: bool, dry_run: bool) -> str:
    try:
        found = read(thread_id)
        if found is None:
            report.skipped.append((thread_id, "not found in the source"))
            return "skipped"
        record = found.record
        if found.note:
            report.notes[thread_id] = found.note
        if found.rebuild:
            record = rebuild_record(target, record.thread_id, record.transcript)
            report.rebuilt.append(thread_id)
        if not _differences(target, record):
            report.skipped.append((thread_id, "already migrated (identical)"))
            if verify:
                report.verified.append(thread_id)
            return "skipped"
        if dry_run:
            report.migrated.append(thread_id)
            return "would migrate"
        target.restore_thread(record)
        report.migrated.append(thread_id)
        if verify:
            diffs = _differences(target, record)
            if diffs:
                report.failed.append((thread_id, "verification: " + "; ".join(diffs)))
                return "failed"
            report.verified.append(thread_id)
        return "migrated"
    except Exception as exc:  # one bad thread never stops the run; the report says why
        report.failed.append((thread_id, f"{type(exc).__name__}: {exc}"))
        return "failed"
