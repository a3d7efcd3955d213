"""One exception hierarchy for memshift, shared by the facade and every backend.

Backend and store errors are translated into these at the adapter boundary
(``raise ... from exc``). Where the stock classic memory raises ``ValueError``
the memshift error is also a ``ValueError`` so existing ``except ValueError``
clauses keep working.
"""

from __future__ import annotations

__all__ = [
    "MemshiftError",
    "ConfigError",
    "UnknownArgumentError",
    "ThreadIdRequired",
    "InvalidThreadId",
    "InputKeyError",
    "ContentError",
    "SummarizerError",
    "StoreError",
    "BackendConflictError",
    "ThreadElsewhere",
    "MismatchError",
    "DeltaStateError",
]


class MemshiftError(Exception):
    """Root of every error memshift raises on purpose."""


class ConfigError(MemshiftError, ValueError):
    """A policy, backend name, store URL or other setting is invalid."""


class UnknownArgumentError(MemshiftError, TypeError):
    """A constructor got a keyword it does not know (never silently ignored)."""


class ThreadIdRequired(MemshiftError, ValueError):
    """No thread id was given and none is bound: memshift never falls back to a shared thread."""


class InvalidThreadId(MemshiftError, ValueError):
    """A thread id that is not a non-empty string."""


class InputKeyError(MemshiftError, ValueError):
    """Input/output keys are missing or ambiguous (stock classic raises ValueError here too)."""


class ContentError(MemshiftError, ValueError):
    """A message whose content memshift cannot store as text."""


class SummarizerError(MemshiftError):
    """The summarizer failed after its retries. The turn is stored; the fold is retried later."""

    def __init__(self, message: str, *, thread_id: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.attempts = attempts


class StoreError(MemshiftError):
    """The store (database) failed or is unreachable. Messages never contain passwords."""


class DeltaStateError(StoreError, NotImplementedError):
    """An operation would break a thread's LangGraph ``DeltaChannel`` state (its values are
    rebuilt from older checkpoints): refused, nothing changed. A ``NotImplementedError`` too, as
    upstream's ``PostgresSaver.prune`` raises for such threads."""


class ThreadElsewhere(MemshiftError):
    """The thread lives on the other backend and this memory was told not to move it
    (``move_on_touch=False``). Nothing was read or written; the message names the thread,
    where it lives, and the command that moves it."""

    def __init__(self, message: str, *, thread_id: str, lives_on: str, wanted: str) -> None:
        super().__init__(message)
        self.thread_id, self.lives_on, self.wanted = thread_id, lives_on, wanted


class MismatchError(MemshiftError):
    """Shadow with ``raise_on_mismatch=True`` (tests): the candidate's view differs from the
    primary's, or gave none in time."""


class BackendConflictError(MemshiftError, ImportError):
    """The import name ``adapters`` resolves to a different distribution than memshift's."""
