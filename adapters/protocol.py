"""The engine protocol: what the facade and every wrapper may call on an engine.

Three engines implement it: ``MemoryEngine`` (one backend over one store), ``StagedEngine``
(both backends; each thread served by the one its placement names — also what a fixed
``backend="classic"`` or ``"middleware"`` is, at rollout 0.0 or 1.0) and ``ShadowEngine``
(a primary that serves, a candidate that is compared). An engine writes its logic once, as
*step builders* (``adapters.io``): ``load_steps``, ``save_steps``... A wrapper composes the
steps of the engines it wraps, never their underscore members. The blocking and async
drivers are written here, once, for every engine.

A missing step builder fails at construction (``abstractmethod``), so a wrapper can never
ship without one of the operations the facade calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from adapters.telemetry import observed
from adapters.io import Steps, run_async, run_sync
from adapters.view import MemoryView, OwnedTurn, ThreadRecord

if TYPE_CHECKING:
    from adapters.engine import MemoryEngine
    from adapters.fold import FoldRecord
    from adapters.policy import MemoryPolicy
    from adapters.stores.base import Placement, Store, Tx

__all__ = ["Check", "Engine", "Guard", "Location", "as_list", "done", "open_guard"]

# A guard: steps run first inside a transaction (may raise). It may give back a *check*:
# steps the transaction runs last, before it commits, when the guard has queued a read whose
# answer travels with the transaction's own first read (one round trip, not two).
Check = Callable[[], Steps[None]]
Guard = Callable[["Tx"], Steps["Check | None"]]


def open_guard(guard: Guard | None, tx: Tx) -> Steps[Check | None]:
    """Run ``guard`` (if any) at the start of ``tx``; give its check (run it before commit)."""
    if guard is None:
        return None
    return (yield from guard(tx))


@dataclass(frozen=True)
class Location:
    """Where a thread lives: the backend and the one-backend engine serving it, its store
    (transcript and fold records are there), and the placement record, if any."""

    backend: str
    engine: MemoryEngine
    store: Store
    placement: Placement | None = None


def done(value: Any) -> Steps[Any]:
    """Steps that do no I/O and give ``value``."""
    return value
    yield  # pragma: no cover - makes this a generator


def as_list(turn: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The turn as a list an engine may hold: an ``OwnedTurn`` as it is, anything else copied
    (a plain list stays the caller's)."""
    return turn if type(turn) is OwnedTurn else list(turn)


class Engine(ABC):
    """One declared contract for every engine (see the module docstring)."""

    name: str
    policy: MemoryPolicy  # the policy the serving side follows
    summarizer: Any  # the summary writer (settable: both sides of a wrapper share it)

    # -- what every engine is made of -----------------------------------------------------
    @abstractmethod
    def leaves(self) -> list[MemoryEngine]:
        """The one-backend engines inside (itself for a ``MemoryEngine``)."""

    @abstractmethod
    def stores(self) -> list[Store]:
        """Every distinct store this engine writes (transcripts live in each)."""

    @abstractmethod
    def homes(self) -> list[Store]:
        """The stores holding this engine's transcripts and fold records (a shadow
        candidate's mirror holds none)."""

    def forget_mismatches(self, thread_id: str) -> int:
        """Drop the thread's recorded shadow mismatches (erasure: their diffs quote its
        text); how many. Only a shadow records any; a router asks its sides."""
        return 0

    def home_of(self, thread_id: str) -> Store:
        """The store holding the thread's transcript: where it lives now (a staged engine on
        two stores has one of each). Nothing is moved to find out."""
        homes = self.homes()
        return homes[0] if len(homes) == 1 else self.locate(thread_id, move=False).store

    @abstractmethod
    def middleware_engine(self) -> MemoryEngine | None:
        """The middleware side that ``create_agent`` continues, if there is one."""

    @property
    def mismatches(self) -> list[Any]:
        """Recorded shadow divergences (``[]`` for an engine that compares nothing)."""
        return []

    def drain(self, timeout: float | None = None) -> None:
        """Wait for queued background work (a shadow candidate's writes, background folds);
        none by default."""

    async def adrain(self) -> None:
        """``drain`` for an event loop: background folds that are tasks of this loop."""

    @abstractmethod
    def close(self, drain: bool = True) -> None:
        """Release what the engine holds. ``drain=False``: drop queued background work."""

    # -- step builders (the logic, written once) -------------------------------------------
    @abstractmethod
    def load_steps(self, thread_id: str, detached: bool = True,
                   guard: Guard | None = None) -> Steps[MemoryView]:
        """The thread's view (``guard`` runs first inside its read transaction).
        ``detached=False``: the caller only reads it (it may share the store's messages)."""

    @abstractmethod
    def save_steps(self, thread_id: str, turn: list[BaseMessage], fold: bool = True,
                   guard: Guard | None = None) -> Steps[list[BaseMessage]]:
        """Store one turn (``guard`` runs first inside its transaction), then fold if due.
        Gives the turn as stored."""

    @abstractmethod
    def clear_steps(self, thread_id: str) -> Steps[None]:
        """Forget the thread's summary and window (the transcript stays)."""

    @abstractmethod
    def prune_steps(self, thread_id: str) -> Steps[None]:
        """Fold now if the window is over the policy's limit (stock ``prune()``)."""

    @abstractmethod
    def restore_steps(self, record: ThreadRecord, expect_last_id: str | None = None,
                      fold_record: FoldRecord | None = None,
                      also: Guard | None = None) -> Steps[bool]:
        """Write transcript, summary and window in one transaction (``also``: more writes
        that commit with it). With ``expect_last_id`` a compare-and-set on the transcript:
        ``False`` and nothing written when it grew since that message."""

    @abstractmethod
    def locate_steps(self, thread_id: str, move: bool = True) -> Steps[Location]:
        """Where the thread lives now, moving it first if this configuration says so
        (``move=False``: where it lives, nothing written)."""

    @abstractmethod
    def claim_steps(self, thread_id: str, backend: str) -> Steps[Location]:
        """Make the thread live on ``backend`` (moved now if it lives elsewhere), for a path
        that can only read that backend: the agent's checkpointer claims ``middleware``."""

    def serving(self, thread_id: str) -> str:
        """The backend that served the thread's last call in this process (a hint: the
        placement record decides). A one-backend engine always serves its own."""
        return self.name

    @abstractmethod
    def view_in(self, tx: Tx) -> Steps[MemoryView]:
        """The serving side's view of ``tx``'s thread, inside ``tx`` (for guards)."""

    @abstractmethod
    def desired(self, thread_id: str) -> str:
        """The backend this configuration wants for the thread."""

    @abstractmethod
    def place_steps(self, thread_id: str) -> Steps[Placement | None]:
        """Apply this configuration to the thread now (an eager move); its placement."""

    @abstractmethod
    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        """(backend, pinned, threads, threads moved at least once) over the placement store."""

    @abstractmethod
    def placement_of(self, thread_id: str) -> Placement | None:
        """The thread's placement record (``None``: not recorded, or no placements)."""

    @abstractmethod
    def pin(self, thread_id: str, backend: str) -> Placement:
        """Serve the thread from ``backend`` whatever the configuration (moved now)."""

    @abstractmethod
    def unpin(self, thread_id: str) -> Placement | None:
        """Let the configuration decide the thread again."""

    # -- the drivers (the same for every engine) -------------------------------------------
    # (``observed``: timed and traced when OpenTelemetry is installed, the bare steps if not)
    def load(self, thread_id: str, detached: bool = True) -> MemoryView:
        return run_sync(observed("load", self, thread_id, self.load_steps(thread_id, detached)))

    async def aload(self, thread_id: str, detached: bool = True) -> MemoryView:
        return await run_async(observed("load", self, thread_id,
                                        self.load_steps(thread_id, detached)))

    def save(self, thread_id: str, turn: Sequence[BaseMessage], fold: bool = True,
             guard: Guard | None = None) -> list[BaseMessage]:
        return run_sync(observed("save", self, thread_id,
                                 self.save_steps(thread_id, as_list(turn), fold, guard)))

    async def asave(self, thread_id: str, turn: Sequence[BaseMessage], fold: bool = True,
                    guard: Guard | None = None) -> list[BaseMessage]:
        return await run_async(observed("save", self, thread_id,
                                        self.save_steps(thread_id, as_list(turn), fold, guard)))

    def clear(self, thread_id: str) -> None:
        run_sync(self.clear_steps(thread_id))

    async def aclear(self, thread_id: str) -> None:
        await run_async(self.clear_steps(thread_id))

    def prune(self, thread_id: str) -> None:
        run_sync(self.prune_steps(thread_id))

    async def aprune(self, thread_id: str) -> None:
        await run_async(self.prune_steps(thread_id))

    def restore(self, record: ThreadRecord, *, expect_last_id: str | None = None,
                fold_record: FoldRecord | None = None, also: Guard | None = None) -> bool:
        return run_sync(self.restore_steps(record, expect_last_id, fold_record, also))

    async def arestore(self, record: ThreadRecord, *, expect_last_id: str | None = None,
                       fold_record: FoldRecord | None = None,
                       also: Guard | None = None) -> bool:
        return await run_async(self.restore_steps(record, expect_last_id, fold_record, also))

    def locate(self, thread_id: str, move: bool = True) -> Location:
        return run_sync(self.locate_steps(thread_id, move))

    def place(self, thread_id: str) -> Placement | None:
        return run_sync(self.place_steps(thread_id))

    def claim(self, thread_id: str, backend: str) -> Location:
        return run_sync(self.claim_steps(thread_id, backend))

    async def aclaim(self, thread_id: str, backend: str) -> Location:
        return await run_async(self.claim_steps(thread_id, backend))

    async def alocate(self, thread_id: str) -> Location:
        return await run_async(self.locate_steps(thread_id))
