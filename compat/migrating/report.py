"""``MigrationReport``: what a migration did to each thread (``compat.migration``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar, overload

from compat.migrating.ids import IdTable, Notes, Outcomes, ThreadIds

__all__ = ["ALREADY", "ATTEMPTS", "CHANGED", "MigrationReport", "NOT_FOUND", "TARGET_NEWER",
           "ThreadIds"]

ALREADY = "already migrated (identical)"
NOT_FOUND = "not found in the source"
TARGET_NEWER = "target newer (it moved on since it was migrated: kept as it is)"
CHANGED = "changed during migration"
ATTEMPTS = 3  # compare-and-set rounds against a target that is being written


L = TypeVar("L", ThreadIds, Outcomes, Notes)


class _Field(Generic[L]):
    """A report's per-thread list (or notes): assigning any iterable (mapping) stores it
    compactly."""

    def __init__(self, kind: Callable[[IdTable, Any], L]) -> None:
        self.kind: Callable[[IdTable, Any], L] = kind

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, report: None, owner: type | None = None) -> _Field[L]: ...
    @overload
    def __get__(self, report: MigrationReport, owner: type | None = None) -> L: ...

    def __get__(self, report: MigrationReport | None,
                owner: type | None = None) -> L | _Field[L]:
        return self if report is None else report.__dict__[self.name]

    def __set__(self, report: MigrationReport, values: Iterable[Any]) -> None:
        report.__dict__[self.name] = self.kind(report.ids, values)


class MigrationReport:
    """What happened to each thread. ``ok`` is false when anything failed.

    The per-thread lists read like lists (``len``, iteration, ``in``, ``==``, ``append``)
    and are stored compactly (``compat.migrating.ids``): a run's memory stays flat in the
    number of threads it reports on."""

    migrated = _Field(ThreadIds)  # written (dry run: would be written)
    skipped = _Field(Outcomes)
    failed = _Field(Outcomes)
    verified = _Field(ThreadIds)  # re-read and identical to the source
    rebuilt = _Field(ThreadIds)  # migrated with a summary rebuilt from history
    changed = _Field(ThreadIds)  # the source moved on after the last copy
    caught_up = _Field(ThreadIds)  # re-copied by the delta pass
    # skipped by a re-run's fingerprint: unchanged on both sides since this source's migration
    fingerprinted = _Field(ThreadIds)
    notes = _Field(Notes)  # thread -> its source's note
    # (thread, "<table>: <what was not carried>"): a record of the thread that does not decode
    # (``compat.migrating.folds``); its state may still have moved
    incomplete = _Field(Outcomes)

    def __init__(self, source: str, target: str, dry_run: bool = False, *,
                 migrated: Iterable[str] = (), skipped: Iterable[tuple[str, str]] = (),
                 failed: Iterable[tuple[str, str]] = (), verified: Iterable[str] = (),
                 rebuilt: Iterable[str] = (), changed: Iterable[str] = (),
                 caught_up: Iterable[str] = (), fingerprinted: Iterable[str] = (),
                 notes: Mapping[str, str] | None = None,
                 incomplete: Iterable[tuple[str, str]] = ()) -> None:
        self.source, self.target, self.dry_run = source, target, dry_run
        self.ids = IdTable()
        self.migrated, self.skipped, self.failed = migrated, skipped, failed
        self.verified, self.rebuilt, self.changed = verified, rebuilt, changed
        self.caught_up, self.fingerprinted = caught_up, fingerprinted
        self.notes = notes or {}
        self.incomplete = incomplete

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MigrationReport):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name)
                   for name in ("source", "target", "dry_run", *_FIELDS))

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return (f"MigrationReport(source={self.source!r}, target={self.target!r}, "
                f"dry_run={self.dry_run}, counts={self.counts()})")

    @property
    def ok(self) -> bool:
        """Nothing failed, every thread the run copied is what its source holds, and it
        carried all of each thread's records."""
        return not self.failed and not self.changed and not self.incomplete

    def forget(self, thread_ids: str | Iterable[str]) -> None:
        """Drop the threads' outcomes (the delta pass copies them again): one pass over each
        list for all of them, not one per thread (10,000 caught-up threads of a 100,000-thread
        run would otherwise cost ~10^9 comparisons)."""
        gone = {thread_ids} if isinstance(thread_ids, str) else set(thread_ids)
        for kept in (self.migrated, self.verified, self.rebuilt, self.fingerprinted,
                     self.skipped, self.failed, self.notes, self.incomplete):
            kept.drop(gone)

    @property
    def total(self) -> int:
        return len(self.migrated) + len(self.skipped) + len(self.failed)

    def counts(self) -> dict[str, int]:
        """Outcomes (they add up to ``total``) and the separate facts about those threads."""
        reasons = self.skipped_by_reason()
        return {"total": self.total, "migrated": len(self.migrated),
                "skipped": len(self.skipped), "failed": len(self.failed),
                "verified": len(self.verified), "rebuilt": len(self.rebuilt),
                "target_newer": reasons.get(TARGET_NEWER, 0),
                "changed_during_migration": len(self.changed),
                "caught_up": len(self.caught_up), "unchanged_since_migrated":
                len(self.fingerprinted), "incomplete": len(self.incomplete)}

    def skipped_by_reason(self) -> dict[str, int]:
        return self.skipped.by_reason()

    def summary_rows(self) -> list[tuple[str, int]]:
        return [("migrated" if not self.dry_run else "would migrate", len(self.migrated)),
                ("skipped", len(self.skipped)), ("failed", len(self.failed)),
                ("verified", len(self.verified)), ("summary rebuilt", len(self.rebuilt)),
                ("changed during migration", len(self.changed)),
                ("incomplete", len(self.incomplete))]


# the per-thread fields, as declared (``__eq__`` compares them all)
_FIELDS = tuple(name for name, value in vars(MigrationReport).items() if isinstance(value, _Field))
