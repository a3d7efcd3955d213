"""Shadow backend: write to both, serve the primary, compare at read, never fail on the candidate.

After GitHub Scientist: the primary's results and exceptions are the caller's; the
candidate runs on a single background worker (so its writes keep their order), bounded
by a timeout, and everything it does wrong is recorded as a mismatch, never raised.
Reads compare the two views. Sampling is per thread (a thread is mirrored completely
or not at all), so views stay comparable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.base import MemoryBackend
from adapters.view import MemoryView, compare_views

__all__ = ["Mismatch", "ShadowBackend"]

logger = logging.getLogger("memshift.shadow")


@dataclass(frozen=True)
class Mismatch:
    thread_id: str
    turn: int  # saves seen on the thread by this process
    kind: str  # "view" | "candidate_error" | "candidate_timeout"
    diff: list[str]
    at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())


class ShadowBackend(MemoryBackend):
    name = "shadow"

    def __init__(
        self,
        *,
        primary: MemoryBackend,
        candidate: MemoryBackend,
        sample: float = 1.0,
        on_mismatch: Callable[[Mismatch], None] | None = None,
        log_path: str | None = None,
        timeout: float = 5.0,
        max_recorded: int = 10_000,
    ) -> None:
        self.primary, self.candidate_backend = primary, candidate
        candidate.record_folds = False  # one store, one set of fold records: the primary's
        super().__init__(policy=primary.policy, summarizer=primary.summarizer, store=primary.store,
                         human_prefix=primary.human_prefix, ai_prefix=primary.ai_prefix)
        self.sample, self.on_mismatch, self.log_path = sample, on_mismatch, log_path
        self.timeout, self.max_recorded = timeout, max_recorded
        self.mismatches: list[Mismatch] = []
        self.compared = 0
        self._turns: dict[str, int] = {}
        self._guard = threading.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memshift-shadow")

    @property  # type: ignore[override]
    def summarizer(self) -> Any:
        return self.primary.summarizer

    @summarizer.setter
    def summarizer(self, value: Any) -> None:  # both sides always share one summarizer
        self.primary.summarizer = value
        self.candidate_backend.summarizer = value

    # -- sampling and recording ----------------------------------------------------------
    def sampled(self, thread_id: str) -> bool:
        if self.sample >= 1:
            return True
        digest = hashlib.sha256(thread_id.encode()).digest()
        return int.from_bytes(digest[:4], "big") / 2**32 < self.sample

    def _record(self, thread_id: str, kind: str, diff: list[str]) -> None:
        redactor = self.policy.redactor  # diffs quote conversation text: scrub it like the rest
        if redactor is not None:
            diff = [redactor(d) for d in diff]
        mismatch = Mismatch(thread_id, self._turns.get(thread_id, 0), kind, diff)
        with self._guard:
            if len(self.mismatches) < self.max_recorded:
                self.mismatches.append(mismatch)
        logger.info("shadow mismatch (%s) on a thread at turn %d", kind, mismatch.turn)
        if self.log_path:
            try:
                with open(self.log_path, "a", encoding="utf-8") as log:
                    log.write(json.dumps(asdict(mismatch), ensure_ascii=False) + "\n")
            except OSError:
                logger.exception("cannot write the shadow log")
        if self.on_mismatch is not None:
            try:
                self.on_mismatch(mismatch)
            except Exception:  # a broken publisher never breaks a request
                logger.exception("on_mismatch callback failed")

    def _candidate(self, thread_id: str, what: str, fn: Callable[[], Any]) -> Any:
        """Run on the candidate worker; errors and timeouts are recorded, never raised."""
        future = self._worker.submit(fn)
        try:
            return future.result(timeout=self.timeout)
        except FutureTimeout:
            self._record(thread_id, "candidate_timeout", [f"{what} took longer than {self.timeout}s"])
        except Exception as exc:
            self._record(thread_id, "candidate_error", [f"{what}: {type(exc).__name__}: {exc}"])
        return None

    # -- the backend contract -------------------------------------------------------------
    def load(self, thread_id: str) -> MemoryView:
        view = self.primary.load(thread_id)
        if self.sampled(thread_id):
            other = self._candidate(thread_id, "load",
                                    lambda: self.candidate_backend.load(thread_id))
            if other is not None:
                self.compared += 1
                diffs = compare_views(view, other)
                if diffs:
                    self._record(thread_id, "view", diffs)
        return view

    def save(self, thread_id: str, messages: Sequence[BaseMessage],
             on_locked: Callable[[], None] | None = None) -> None:
        with self._guard:
            self._turns[thread_id] = self._turns.get(thread_id, 0) + 1
        mirror = self.sampled(thread_id)
        try:
            self.primary.save(thread_id, messages, on_locked)
        finally:  # the candidate sees every turn the primary stored, even when its fold failed
            if mirror:
                self._candidate(thread_id, "save",
                                lambda: self.candidate_backend.save(thread_id, messages))

    def _save(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:  # pragma: no cover
        raise NotImplementedError("ShadowBackend.save coordinates both backends itself")

    def clear(self, thread_id: str) -> None:
        self.primary.clear(thread_id)
        self._candidate(thread_id, "clear", lambda: self.candidate_backend.clear(thread_id))

    def restore(self, thread_id: str, summary: str, window: Sequence[BaseMessage], folds: int) -> None:
        """Runs the candidate inline: callers (migration, resummarize) may hold the thread's
        lock, which the candidate worker would wait for."""
        self.primary.restore(thread_id, summary, window, folds)
        try:
            self.candidate_backend.restore(thread_id, summary, window, folds)
        except Exception as exc:  # recorded, never raised
            self._record(thread_id, "candidate_error", [f"restore: {type(exc).__name__}: {exc}"])

    def close(self) -> None:
        """Return at once: queued candidate work is cancelled, a running task finishes."""
        self._worker.shutdown(wait=False, cancel_futures=True)
