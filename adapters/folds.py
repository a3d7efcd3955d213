"""Fold records: what every fold did, persisted with the store, logged without text."""

from __future__ import annotations

import logging
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["FoldRecord", "comparable"]

logger = logging.getLogger("memshift.folds")
_PLAIN = frozenset({str, int, float, bool, type(None)})


@dataclass(frozen=True)
class FoldRecord:
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
        """INFO carries numbers only: never message or summary text."""
        if self.error:
            logger.warning("fold failed thread=%r version=%d trigger=%s folded=%d error=%s",
                           self.thread_id, self.version, self.trigger, self.folded,
                           self.error.split(":")[0])
        else:
            logger.info("fold thread=%r version=%d trigger=%s folded=%d kept=%d summary_tokens=%d "
                        "duration_ms=%.1f", self.thread_id, self.version, self.trigger, self.folded,
                        self.messages_kept, self.summary_tokens, self.duration_ms)


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the fields that differ between equivalent backends (timing, backend
    name, and message ids, which each memory assigns to id-less messages itself)."""
    skip = ("at", "duration_ms", "backend", "folded_first_id", "folded_last_id")
    return {k: v for k, v in record.items() if k not in skip}
