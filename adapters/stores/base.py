"""The store seams, split by concern.

- ``Store``: the core — transactions (the per-thread lock lives exactly as long as its
  transaction), the thread log (append-only transcript, fold records), error translation;
- ``ClassicState`` (``store.classic``): a classic thread's running summary, fold count and
  verbatim window;
- ``Checkpoints`` (``store.checkpoints``): the LangGraph saver (bound to a transaction for
  memshift's writes, and a standalone one for ``create_agent``) and checkpoint retention;
- ``Placements`` (the store is one): which backend serves each thread;
- ``Reads`` (the store is one): transcripts, fold records and thread ids, read outside a
  transaction.

The optional concerns are detected by presence (``capabilities``); what needs one that a store
lacks is refused with a ``ConfigError`` (``require``). ``compat.testing.StoreContract`` checks a
store against every concern it implements and reports the rest.

Every write is one transaction (``begin`` … ``commit``/``rollback``, or the
``transaction(thread_id)`` context manager): one connection, the thread's lock held for
exactly that transaction. The summarizer is never called inside one (the engine commits the
turn first and folds afterwards). Each I/O method has an async twin; the concern methods
take a transaction and are run by ``Store.run`` / ``Store.arun``, so SQL is written once
(SQLAlchemy runs it on the async driver without threads).
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from adapters.errors import StoreError
from adapters.io import IO

__all__ = ["CAPABILITIES", "Checkpoints", "ClassicSnapshot", "ClassicState", "Placement",
           "Placements", "Reads", "Store", "Tx", "capabilities", "in_transaction", "require",
           "store_io"]


class Tx:
    """An open transaction on one store, for one thread. Stores subclass it."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.saver: Any = None  # the checkpoint saver joined to this transaction, made once


@dataclass
class ClassicSnapshot:
    """A classic thread as one transaction sees it. ``rows`` are opaque row keys, one per
    window message, so a fold can delete exactly the prefix it summarized. ``kept``: the
    window's messages are objects the store keeps and never edits (as a store that
    ``shares_messages`` hands out), so what is computed from them may be kept by identity."""

    summary: str = ""
    folds: int = 0
    window: list[BaseMessage] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)
    kept: bool = False


@dataclass(frozen=True)
class Placement:
    """Which backend serves a thread (staged cutover): authoritative once written."""

    backend: str
    version: int
    since: float  # time.time() of the last change
    pinned: bool = False


class ClassicState(ABC):
    """Where a classic thread's summary and window live (stock never persists the summary)."""

    @abstractmethod
    def read(self, tx: Tx) -> ClassicSnapshot:
        """The thread's summary, fold count and window inside ``tx``."""

    @abstractmethod
    def append(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        """Append to the window (a later read gives the new rows' keys)."""

    @abstractmethod
    def fold(self, tx: Tx, summary: str, folds: int, drop: Sequence[Any]) -> None:
        """Write the new summary and delete the folded prefix (rows ``drop``)."""

    @abstractmethod
    def replace(self, tx: Tx, summary: str, folds: int, window: Sequence[BaseMessage]) -> None:
        """Overwrite summary and window (restore, migration, rollback)."""

    @abstractmethod
    def clear(self, tx: Tx) -> None:
        """Forget summary and window (the transcript stays)."""


class Checkpoints(ABC):
    """LangGraph checkpoints of middleware threads."""

    keep: int = 4  # checkpoints kept per thread by retention
    # (tx, config) -> (placement, get_tuple(config)) in one statement, where a store has it
    get_placed: Callable[[Tx, Any], tuple[Placement | None, Any]] | None = None
    bound: int = 20  # at most this many root checkpoints per thread between retentions

    @property
    def retain_every(self) -> int:
        """Checkpoint writes between retentions: as rare as the bound allows (a retention is
        one statement on PostgreSQL); with ``keep`` at or over the bound, every ``keep``."""
        return self.bound - self.keep if self.keep < self.bound else max(1, self.keep)

    @abstractmethod
    def saver(self, tx: Tx) -> BaseCheckpointSaver:
        """A saver whose reads and writes happen inside ``tx``."""

    async def asaver(self, tx: Tx) -> BaseCheckpointSaver | None:
        """An async saver inside ``tx``; ``None`` when the sync saver does no I/O (memory)."""
        return None

    @property
    @abstractmethod
    def checkpointer(self) -> BaseCheckpointSaver:
        """A standalone saver for ``create_agent`` (its own connections)."""

    @abstractmethod
    def retain(self, tx: Tx) -> None:
        """Keep the newest ``keep`` root-namespace checkpoints of the thread (and what they use)."""

    async def aretain(self, tx: Tx) -> None:
        """``retain`` on the async driver (in memory there is nothing to wait for)."""
        self.retain(tx)

    # -- optional thread operations: ``memory.checkpointer`` offers LangGraph's
    # ``copy_thread`` / ``delete_for_runs`` / ``prune`` for those named in ``operations``; each
    # runs through ``Store.run``/``arun`` in a transaction of the thread (its lock held) --------
    operations: frozenset[str] = frozenset()

    def prune_latest(self, tx: Tx) -> None:
        """``prune(keep_latest)``: the newest checkpoint of each namespace of the thread
        (``DeltaStateError`` for a thread with ``DeltaChannel`` state)."""
        raise NotImplementedError

    def uses_delta(self, tx: Tx) -> bool:
        """Whether the thread's checkpoints carry LangGraph ``DeltaChannel`` state."""
        return False

    def delete_runs(self, tx: Tx, run_ids: Sequence[str]) -> None:
        """Remove the thread's checkpoints of ``run_ids``, their writes and unused blobs."""
        raise NotImplementedError

    def run_threads(self, tx: Tx, run_ids: Sequence[str]) -> list[str]:
        """The threads with a checkpoint of one of ``run_ids`` (any thread: a read)."""
        raise NotImplementedError

    def copy_from(self, tx: Tx, source: str) -> None:
        """Every checkpoint, write and blob of ``source`` under the transaction's thread."""
        raise NotImplementedError

    def erase(self, tx: Tx) -> None:
        """Delete every checkpoint of the thread, its writes and blobs (erasure)."""
        raise StoreError("this store cannot erase a thread's checkpoints")

    def close(self) -> None:
        """Release the standalone checkpointer's connections."""

    async def aclose(self) -> None:
        """Release this event loop's async checkpointer, if any."""


class Store(ABC):
    """Persistence for one store URL. Thread ids are data: never paths, never SQL."""

    url: str  # redacted: never carries a password
    persistent: bool = True  # state outlives the process (the in-memory store's does not)
    read_only: bool = False  # every write is refused (threads are served where they live)
    # writes and deferred reads wait in a queue and travel with the next read (PostgreSQL):
    # a deferred read must then be answered through ``deferred_placement``
    batches: bool = False
    shares_messages: bool = False  # reads hand out stored objects: copy before giving them away
    classic: ClassicState
    checkpoints: Checkpoints
    lock_stripes = 256  # in-process part of a thread lock: bounded memory for any number of threads

    def __init__(self) -> None:
        self._stripes = [threading.Lock() for _ in range(self.lock_stripes)]

    # -- transactions --------------------------------------------------------------------
    @abstractmethod
    def begin(self, thread_id: str, write: bool = True) -> Tx:
        """Open a transaction; a write one takes the thread's lock first thing."""

    @abstractmethod
    def commit(self, tx: Tx) -> None:
        """Commit and release the connection and the lock (also when the commit fails)."""

    @abstractmethod
    def rollback(self, tx: Tx) -> None:
        """Roll back and release; never raises (the connection may be gone)."""

    async def abegin(self, thread_id: str, write: bool = True) -> Tx:
        return self.begin(thread_id, write)

    async def acommit(self, tx: Tx) -> None:
        self.commit(tx)

    async def arollback(self, tx: Tx) -> None:
        self.rollback(tx)

    def run(self, tx: Tx, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a concern method ``fn(tx, *args)`` inside ``tx``."""
        return fn(tx, *args)

    async def arun(self, tx: Tx, fn: Callable[..., Any], *args: Any) -> Any:
        """The async twin of ``run`` (in memory there is no I/O to wait for)."""
        return fn(tx, *args)

    @contextmanager
    def transaction(self, thread_id: str, write: bool = True) -> Iterator[Tx]:
        """``begin`` … ``commit``, or ``rollback`` on any error (sync code paths)."""
        tx = self.begin(thread_id, write)
        try:
            yield tx
        except BaseException:
            self.rollback(tx)
            raise
        self.commit(tx)

    def snapshot(self, thread_id: str) -> Any:
        """A read-only, consistent view of one thread (no lock)."""
        return self.transaction(thread_id, write=False)

    def _stripe(self, thread_id: str) -> threading.Lock:
        """Sync writers of one thread in this process queue here, not on the database lock."""
        from adapters.stores.url import stripe_of

        return self._stripes[stripe_of(thread_id, self.lock_stripes)]

    def adopt(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        """``messages`` are new objects nobody else holds: the writes of ``tx`` may keep them
        as they are (a store that holds message objects need not copy them). Not I/O."""

    # -- thread log ----------------------------------------------------------------------
    @abstractmethod
    def append_transcript(self, tx: Tx, messages: Sequence[BaseMessage]) -> None:
        """Append to the thread's transcript (message ids are unique per thread)."""

    @abstractmethod
    def known_ids(self, tx: Tx, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the thread's transcript holds."""

    @abstractmethod
    def last_ids(self, tx: Tx, n: int) -> list[str]:
        """The ids of the thread's newest ``n`` transcript messages, oldest first."""

    @abstractmethod
    def append_fold(self, tx: Tx, record: dict[str, Any]) -> None:
        """Persist one fold record, in the transaction that writes the state it describes."""

    def erase(self, tx: Tx, placement: bool) -> int:
        """Delete everything of the thread in this store — transcript, both backends' state
        (every retained checkpoint), fold records, and with ``placement`` its placement, the
        original of a long id (``Reads.original_ids``) and its shadow evidence
        (``adapters.stores.evidence``) — in ``tx``. Gives the number of transcript messages
        deleted. Stores that cannot erase say so (``StoreError``), never half-erase."""
        raise StoreError(f"{type(self).__name__} cannot erase threads")

    @abstractmethod
    def transcript_in(self, tx: Tx) -> list[BaseMessage]:
        """The thread's transcript inside ``tx`` (run through ``run``/``arun``)."""

    # -- errors and lifetime ---------------------------------------------------------------
    @contextmanager
    def guard(self, what: str = "store operation") -> Iterator[None]:
        """Translate driver errors into ``StoreError`` (SQL stores); no-op in memory."""
        yield

    def close(self) -> None:
        """Release connections."""
        self.checkpoints.close()

    async def aclose(self) -> None:
        """Release this event loop's async connections."""
        await self.checkpoints.aclose()


class Placements(ABC):
    """A concern: where each thread lives (which backend serves it), one record per thread,
    read and written inside the thread's transactions. Every memory asks it on each call; a
    store without it runs no memory (``capabilities``)."""

    @abstractmethod
    def placement(self, tx: Tx) -> Placement | None:
        """Which backend serves the thread, if recorded."""

    @abstractmethod
    def set_placement(self, tx: Tx, placement: Placement) -> None:
        """Record (or change) the thread's placement."""

    def defer_placement(self, tx: Tx) -> Any:
        """Ask for the thread's placement now, read the answer with ``deferred_placement``
        later in ``tx``: a store that batches sends the question with the transaction's own
        next read (one round trip). By default it is read at once."""
        return self.placement(tx)

    def deferred_placement(self, tx: Tx, token: Any) -> Placement | None:
        """The answer to ``defer_placement``."""
        return token

    @abstractmethod
    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        """(backend, pinned, threads, threads moved at least once) over the store."""


class Reads(ABC):
    """A concern: the queries that read a store outside a thread's transaction (transcripts,
    fold records, thread listing: audits, migrations, ``memory.transcript``)."""

    @abstractmethod
    def transcript(self, thread_id: str) -> list[BaseMessage]:
        """Every message ever saved on the thread, in order; ``[]`` for an unknown thread."""

    @abstractmethod
    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's fold records, oldest first."""

    @abstractmethod
    def thread_ids(self) -> list[str]:
        """Threads with a transcript, in first-seen order."""

    def iter_thread_ids(self) -> Iterator[str]:
        """Threads with a transcript, streamed (SQL stores page through them)."""
        return iter(self.thread_ids())

    def original_ids(self, thread_ids: Sequence[str]) -> dict[str, str]:
        """The id the application passed for each of ``thread_ids`` that is the key of a
        long id (``adapters.thread_keys``) whose original this store recorded; listings
        show it. Ids the stores keep as they are are not in the answer. A store that
        records no originals lists the keys (this default)."""
        return {}


CAPABILITIES = ("log", "classic", "checkpoints", "placements", "reads")


def capabilities(store: Store) -> set[str]:
    """The concerns a store implements, detected by presence (as LangGraph's
    checkpoint-conformance detects a saver's): the thread log always; ``classic`` (a
    ``ClassicState`` as ``store.classic``: the classic backend), ``checkpoints`` (a
    ``Checkpoints`` as ``store.checkpoints``: the middleware backend), ``placements`` and
    ``reads`` (the store is also a ``Placements`` / ``Reads``)."""
    found = {"log"}
    if isinstance(getattr(store, "classic", None), ClassicState):
        found.add("classic")
    if isinstance(getattr(store, "checkpoints", None), Checkpoints):
        found.add("checkpoints")
    if isinstance(store, Placements):
        found.add("placements")
    if isinstance(store, Reads):
        found.add("reads")
    return found


def require(store: Store, capability: str, why: str) -> Any:
    """``store``, or a ``ConfigError`` naming the concern it lacks, before anything runs on it
    (typed ``Any``: the caller uses the concern's methods)."""
    if capability not in capabilities(store):
        from adapters.errors import ConfigError

        raise ConfigError(f"{type(store).__name__} does not implement the {capability!r} store "
                          f"concern, which {why} needs (compat.testing.StoreContract reports "
                          "what a store implements)")
    return store


def store_io(store: Store, tx: Tx, fn: Callable[..., Any], *args: Any) -> Any:
    """The I/O request (see ``adapters.io``) that runs the concern method ``fn(tx, *args)``
    through ``store.run`` or ``store.arun``."""
    return IO(store.run, store.arun, tx, fn, *args)


def in_transaction(store: Store, thread_id: str, body: Callable[[Tx], Any],
                   write: bool = True, single: bool = False) -> Any:
    """Steps (see ``adapters.io``) that run ``body(tx)`` (itself steps) in one transaction
    (``single``: a read of one statement, where ``Checkpoints.get_placed`` is offered)."""
    begin = (store.begin, store.abegin) if not single else (
        functools.partial(store.begin, single=True), functools.partial(store.abegin, single=True))
    tx = yield IO(*begin, thread_id, write)
    try:
        result = yield from body(tx)
    except GeneratorExit:
        raise
    except BaseException:
        yield IO(store.rollback, store.arollback, tx)
        raise
    yield IO(store.commit, store.acommit, tx)
    return result
