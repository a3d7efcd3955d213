"""``MigrationReport``: what a migration did to each thread (``compat.migration``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["ALREADY", "ATTEMPTS", "CHANGED", "MigrationReport", "NOT_FOUND", "TARGET_NEWER"]

ALREADY = "already migrated (identical)"
NOT_FOUND = "not found in the source"
TARGET_NEWER = "target newer (it moved on since it was migrated: kept as it is)"
CHANGED = "changed during migration"
ATTEMPTS = 3  # compare-and-set rounds against a target that is being written


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
    changed: list[str] = field(default_factory=list)  # the source moved on after the last copy
    caught_up: list[str] = field(default_factory=list)  # re-copied by the delta pass
    # skipped by a re-run's fingerprint: unchanged on both sides since this source's migration
    fingerprinted: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Nothing failed, and every thread the run copied is what its source holds."""
        return not self.failed and not self.changed

    def forget(self, thread_ids: str | Iterable[str]) -> None:
        """Drop the threads' outcomes (the delta pass copies them again): one pass over each
        list for all of them, not one per thread (10,000 caught-up threads of a 100,000-thread
        run would otherwise cost ~10^9 comparisons)."""
        gone = {thread_ids} if isinstance(thread_ids, str) else set(thread_ids)
        if not gone:
            return
        for name in ("migrated", "verified", "rebuilt", "fingerprinted"):
            setattr(self, name, [t for t in getattr(self, name) if t not in gone])
        self.skipped = [(t, r) for t, r in self.skipped if t not in gone]
        self.failed = [(t, r) for t, r in self.failed if t not in gone]

    @property
    def total(self) -> int:
        return len(self.migrated) + len(self.skipped) + len(self.failed)

    def counts(self) -> dict[str, int]:
        """Outcomes (they add up to ``total``) and the two separate facts."""
        reasons = self.skipped_by_reason()
        return {"total": self.total, "migrated": len(self.migrated),
                "skipped": len(self.skipped), "failed": len(self.failed),
                "verified": len(self.verified), "rebuilt": len(self.rebuilt),
                "target_newer": reasons.get(TARGET_NEWER, 0),
                "changed_during_migration": len(self.changed),
                "caught_up": len(self.caught_up), "unchanged_since_migrated":
                len(self.fingerprinted)}

    def skipped_by_reason(self) -> dict[str, int]:
        return dict(Counter(reason for _, reason in self.skipped))

    def summary_rows(self) -> list[tuple[str, int]]:
        return [("migrated" if not self.dry_run else "would migrate", len(self.migrated)),
                ("skipped", len(self.skipped)), ("failed", len(self.failed)),
                ("verified", len(self.verified)), ("summary rebuilt", len(self.rebuilt)),
                ("changed during migration", len(self.changed))]
