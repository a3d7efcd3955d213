"""One exception hierarchy for memshift, shared by the facade and every backend.

Backend and store errors are translated into these at the adapter boundary
(``raise ... from exc``). Where the stock classic memory raises ``ValueError``
the memshift error is also a ``ValueError`` so existing ``except ValueError``
clauses keep working.
"""

from __future__ import annotations

from adapters.secrets import scrub

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
    "CheckpointPruned",
    "CorruptDataError",
]


class MemshiftError(Exception):
    """Root of every error memshift raises on purpose. A message that quotes a URL or a
    ``password=`` pair shows it redacted, whichever code built the message: the last line of
    defence behind the stores' own redaction (``adapters.secrets``)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(_redacted(a) for a in args))


def _redacted(arg: object) -> object:
    if not isinstance(arg, str) or ("://" not in arg and "=" not in arg):
        return arg
    return scrub(arg)


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


class CorruptDataError(StoreError):
    """A stored row does not decode (a window, transcript, fold record, placement or checkpoint
    row): one thread's problem. Names the thread, the table and the row; other threads work."""

    def __init__(self, thread_id: str | None, table: str, row: object, detail: str) -> None:
        self.thread_id, self.table, self.row = thread_id, table, row
        super().__init__(f"thread {thread_id!r}: row {row!r} of {table} does not decode "
                         f"({detail}); the thread's other rows and every other thread are "
                         "unaffected")


def corrupt(thread_id: str | None, table: str, row: object, exc: BaseException
            ) -> CorruptDataError:
    """The error for one undecodable row (the cause's type and first line, no row content)."""
    first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
    return CorruptDataError(thread_id, table, row, f"{type(exc).__name__}: {first}".rstrip(": "))


class DeltaStateError(StoreError, NotImplementedError):
    """An operation would break a thread's LangGraph ``DeltaChannel`` state (its values are
    rebuilt from older checkpoints): refused, nothing changed. A ``NotImplementedError`` too, as
    upstream's ``PostgresSaver.prune`` raises for such threads."""

    @classmethod
    def for_prune(cls, thread_id: str) -> DeltaStateError:
        return cls(f"prune(strategy='keep_latest') would break the DeltaChannel state of "
                   f"thread {thread_id!r}; nothing was pruned")


class CheckpointPruned(MemshiftError, LookupError):
    """A checkpoint id this thread's saver wrote and retention has since pruned (a listing
    handed it out before later turns): reading, replaying or forking it would start from
    nothing, so it is refused instead of answering ``None``."""

    def __init__(self, thread_id: str, checkpoint_id: str, keep: int | None) -> None:
        self.thread_id, self.checkpoint_id = thread_id, checkpoint_id
        kept = f"keep_checkpoints={keep}" if keep is not None else "keep_checkpoints"
        super().__init__(
            f"checkpoint {checkpoint_id!r} of thread {thread_id!r} was pruned by retention "
            f"(the store keeps the newest turns' checkpoints, {kept}): replay or fork from a "
            "checkpoint listed since the thread's last turn, or keep more history with "
            "?keep_checkpoints=N on the store URL")


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
