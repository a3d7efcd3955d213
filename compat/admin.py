"""Operations on a memory that are not memory: the library side of the command line.

Each function takes a ``SummaryMemory`` and uses only what it exposes (its engine, store URL,
policy); the ``memshift`` commands call these very functions (as Alembic's commands are
``alembic.command`` functions). Placements (``pin``, ``unpin``, ``placement``), whole-state
writes (``restore_thread``), summaries rebuilt from the transcript (``rebuild``,
``resummarize``), fold records (``summary_history``), thread listing (``thread_ids``,
``iter_thread_ids``, ``iter_listed_threads``, ``last_transcript_id``), conversations out as
replay lines
(``export_conversations``, ``missing_threads``), opening a store read-only
(``open_read_only``), ``reopen``, erasure (``forget``: ``compat.erasure``) and releasing a
finished event loop's connections (``arelease``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, SystemMessage

from adapters import MemoryPolicy, MemoryView, ThreadRecord, compare_views
from adapters.errors import ConfigError, StoreError
from adapters.fold import FoldRecord
from adapters.stores.base import Placement, require
from adapters.thread_keys import is_key, storage_id
from compat._turns import check_thread_id

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["MissingThreads", "Rebuild", "arelease", "export_conversations", "forget",
           "iter_listed_threads", "iter_thread_ids", "last_transcript_id", "missing_threads", "open_read_only", "pin",
           "placement", "read_only_memory", "rebuild", "reopen", "restore_thread",
           "resummarize", "summary_history", "thread_ids", "unpin"]

_NAMED_PAGE = 500  # listed ids whose originals (long ids) are asked for in one read


# -- placements -------------------------------------------------------------------------------
def pin(memory: SummaryMemory, thread_id: str, backend: str) -> Placement:
    """Serve the thread from ``backend`` whatever the flag or rollout (moved now)."""
    return memory.backend_impl.pin(check_thread_id(thread_id), backend)


def unpin(memory: SummaryMemory, thread_id: str) -> Placement | None:
    """Let the flag or rollout decide the thread again from its next touch."""
    return memory.backend_impl.unpin(check_thread_id(thread_id))


def placement(memory: SummaryMemory, thread_id: str) -> Placement | None:
    """Where the thread lives (backend, version, since, pinned); ``None`` before its first
    save."""
    return memory.backend_impl.placement_of(check_thread_id(thread_id))


def forget(memory: SummaryMemory, thread_id: str, match: str | None = None,
           **options: Any) -> Any:
    """Erase the thread, or its messages holding ``match``, everywhere the memory keeps it
    (``compat.erasure.forget``: options ``dry_run``, ``shadow_logs``, ``llm``, ``compact``)."""
    from compat.erasure import forget as erase

    return erase(memory, thread_id, match, **options)


async def arelease(memory: SummaryMemory) -> None:
    """Close this event loop's async connections of the memory's stores, before a loop ends
    that the memory outlives (one ``asyncio.run`` per request); the memory stays usable.
    ``async with memory`` / ``memory.aclose()`` do it at the end of the memory's life."""
    for store in memory.backend_impl.stores():
        await store.aclose()


# -- whole states -----------------------------------------------------------------------------
def restore_thread(memory: SummaryMemory, record: ThreadRecord,
                   fold_record: FoldRecord | None = None,
                   expect_last_id: str | None = None) -> bool:
    """Write a thread's transcript (idempotent by message id), summary and window in one
    transaction, with ``fold_record`` (what produced this summary: a backup, a migration):
    the state and its record commit together. ``expect_last_id``: a compare-and-set —
    written only if the thread's newest transcript message is still that one (``""``: only if
    it has none). Gives whether it wrote."""
    check_thread_id(record.thread_id)
    if fold_record is not None and fold_record.thread_id != record.thread_id:
        raise ConfigError(f"the fold record is for thread {fold_record.thread_id!r}, the "
                          f"state for {record.thread_id!r}; nothing was written")
    return memory.backend_impl.restore(record, expect_last_id=expect_last_id,
                                       fold_record=fold_record)


@dataclass
class Rebuild:
    """A thread's memory rebuilt from its transcript, beside what is stored (not written)."""

    thread_id: str
    policy: MemoryPolicy
    before: MemoryView
    record: ThreadRecord
    fold: FoldRecord
    last_id: str

    @property
    def changed(self) -> bool:
        after = MemoryView(self.thread_id, self.record.summary, list(self.record.window),
                           self.record.folds)
        return bool(compare_views(self.before, after))

    def tokens(self) -> dict[str, Any]:
        """Before → after: folds, summary tokens, window messages, memory tokens (what the
        memory adds to a prompt), and the delta."""
        def count(summary: str, window: list[BaseMessage]) -> tuple[int, int]:
            head = [SystemMessage(summary)] if summary else []
            return self.policy.count(head), self.policy.count(head + list(window))
        sb, mb = count(self.before.summary, self.before.messages)
        sa, ma = count(self.record.summary, list(self.record.window))
        return {"folds": [self.before.folds, self.record.folds], "summary_tokens": [sb, sa],
                "window_messages": [len(self.before.messages), len(self.record.window)],
                "memory_tokens": [mb, ma], "delta_tokens": ma - mb}


def rebuild(memory: SummaryMemory, thread_id: str, *, policy: MemoryPolicy | None = None,
            llm: Any = None) -> Rebuild | None:
    """The thread's summary rebuilt from the raw transcript with ``policy`` (default: the
    memory's) and ``llm`` (default: the memory's summarizer); ``None`` for a thread with no
    transcript. Runs the summarizer, with no lock held; writes nothing."""
    from adapters.summarizer import summarizer_name
    from compat._rebuild import rebuild_fold_record, rebuild_record, summarizer_for

    tid = check_thread_id(thread_id)
    policy = policy or memory.active_policy
    summarizer = summarizer_for(memory, policy, llm)
    start = time.perf_counter()
    where = memory.backend_impl.locate(tid, move=False)
    transcript = require(where.store, "reads", "a rebuild").transcript(tid)
    if not transcript:
        return None
    before = memory.load(tid)
    record = rebuild_record(memory, tid, transcript, policy, summarizer, backend=where.backend)
    fold = rebuild_fold_record(tid, transcript, record, policy, trigger="resummarize",
                               summarizer=summarizer_name(summarizer),
                               backend=memory.backend_name, started=start)
    return Rebuild(tid, policy, before, record, fold, transcript[-1].id or "")


def resummarize(memory: SummaryMemory, thread_id: str, llm: Any = None,
                policy: MemoryPolicy | None = None, attempts: int = 3, *,
                only_changed: bool = False) -> MemoryView:
    """Rebuild the running summary from the raw transcript (after a summarizer or prompt
    change) and write it with its fold record in one compare-and-set transaction: if a turn
    was saved meanwhile it is rebuilt again. ``only_changed``: leave a thread whose rebuild
    equals what is stored. Gives the thread's view afterwards."""
    for _ in range(attempts):
        plan = rebuild(memory, thread_id, policy=policy, llm=llm)
        if plan is None or (only_changed and not plan.changed):
            return plan.before if plan is not None else memory.load(thread_id)
        if memory.backend_impl.restore(plan.record, expect_last_id=plan.last_id,
                                       fold_record=plan.fold):
            return memory.load(thread_id)
    raise StoreError(f"resummarize gave up after {attempts} attempts: the thread kept "
                     "receiving turns; retry when it is quiet")


# -- reading ----------------------------------------------------------------------------------
def summary_history(memory: SummaryMemory, thread_id: str) -> list[dict[str, Any]]:
    """Every fold of the thread, oldest first: version, trigger, what was folded and kept,
    summary tokens, summarizer, prompt version, duration, error."""
    store = require(memory.backend_impl.home_of(tid := check_thread_id(thread_id)), "reads",
                    "summary_history")
    with store.guard("summary_history"):
        return store.fold_records(tid)


def iter_thread_ids(memory: SummaryMemory) -> Iterator[str]:
    """Every thread with a transcript in the memory's stores, streamed, each once, by the id
    the stores keep: a long id's key (``adapters.thread_keys``), which every memory operation
    takes too (``iter_listed_threads`` gives the id the application passed beside it)."""
    return (kept for kept, _ in iter_listed_threads(memory))


def iter_listed_threads(memory: SummaryMemory) -> Iterator[tuple[str, str]]:
    """``(kept, shown)`` for every thread with a transcript, streamed, each once: the id the
    stores keep (for the memory's operations and its engines) and the id the application
    passed (for people: listings, reports). They differ only for a long id whose original
    was recorded; listing it lets this process record the original wherever it writes the
    thread next (a migration's target, another store of a rollout)."""
    homes = [require(s, "reads", "listing threads") for s in memory.backend_impl.homes()]
    return _listed(homes, homes[0].iter_thread_ids() if len(homes) == 1 else _unique(homes))


def _listed(homes: list[Any], ids: Iterator[str]) -> Iterator[tuple[str, str]]:
    page: list[str] = []
    for thread_id in ids:
        page.append(thread_id)
        if len(page) == _NAMED_PAGE:
            yield from _named(homes, page)
            page = []
    yield from _named(homes, page)


def _unique(homes: list[Any]) -> Iterator[str]:
    seen: set[str] = set()
    for store in homes:
        for thread_id in store.iter_thread_ids():
            if thread_id not in seen:
                seen.add(thread_id)
                yield thread_id


def thread_ids(memory: SummaryMemory) -> list[str]:
    """Every thread with a transcript in the memory's stores, in first-seen order, named as
    the application named it (a long id, not the key it is kept under)."""
    homes = [require(s, "reads", "listing threads") for s in memory.backend_impl.homes()]
    if len(homes) > 1:
        return [shown for _, shown in iter_listed_threads(memory)]
    with homes[0].guard("thread_ids"):
        ids = homes[0].thread_ids()
    return [shown for _, shown in _named(homes, ids)]


def _named(homes: list[Any], ids: list[str]) -> list[tuple[str, str]]:
    names = _originals(homes, ids)
    return [(t, names.get(t, t)) for t in ids]


def _originals(homes: list[Any], ids: Sequence[str]) -> dict[str, str]:
    """The originals of the long ids among ``ids`` (no read when there is none). Each is
    checked against its key (a row naming another thread is not shown), which also lets
    this process record it where it writes the thread (``thread_keys.original_of``)."""
    if not any(is_key(t) for t in ids):
        return {}
    found: dict[str, str] = {}
    for store in homes:
        with store.guard("listing threads"):
            recorded = store.original_ids(ids)
        found.update((key, original) for key, original in recorded.items()
                     if storage_id(original) == key)
    return found


def last_transcript_id(memory: SummaryMemory, thread_id: str) -> str | None:
    """The id of the thread's newest transcript message where it lives (one small read)."""
    store = memory.backend_impl.home_of(thread_id)
    with store.guard("read the transcript's newest id"), store.snapshot(thread_id) as tx:
        ids = store.last_ids(tx, 1)
    return ids[0] if ids else None


# -- conversations out ------------------------------------------------------------------------
def missing_threads(memory: SummaryMemory, thread_ids: Iterable[str]) -> dict[str, str]:
    """The threads of ``thread_ids`` that hold no transcript where they live, each with why
    (one small read per thread; ``{}`` when every one has turns to export)."""
    missing = {}
    for tid in thread_ids:
        if last_transcript_id(memory, check_thread_id(tid)) is not None:
            continue
        where = placement(memory, tid)
        missing[tid] = (f"has a placement ({where.backend}) but no turn was ever saved"
                        if where is not None else "is not in the store (no turn of it was saved)")
    return missing


def export_conversations(memory: SummaryMemory, threads: Sequence[str] | None = None, *,
                         sample: int | None = None, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Replay lines (``compat.conversations.message_line``) of whole transcripts, thread by
    thread, each in saved order, read where the thread lives: ``threads`` (in that order,
    each once; a thread without a transcript is a ``ConfigError`` before any line), else
    every thread of the store. ``sample``: N of them, chosen by a hash of ``seed`` and each
    id (the same N for the same seed and threads, whatever the listing order). Reads only."""
    listed = list(dict.fromkeys(threads)) if threads is not None else None
    if listed is not None and (missing := missing_threads(memory, listed)):
        raise MissingThreads(missing)  # here, before the first line is asked for
    return _export_lines(memory, listed, sample, seed)


class MissingThreads(ConfigError):
    """Listed threads that hold no transcript: ``missing`` maps each to why."""

    def __init__(self, missing: dict[str, str]) -> None:
        super().__init__("; ".join(f"thread {t!r} {why}" for t, why in missing.items()))
        self.missing = missing


def _export_lines(memory: SummaryMemory, listed: list[str] | None, sample: int | None,
                  seed: int) -> Iterator[dict[str, Any]]:
    from compat.conversations import message_line

    def threads() -> Iterator[tuple[str, str]]:  # (kept, shown): lines name the shown id
        return ((t, t) for t in listed) if listed is not None else iter_listed_threads(memory)

    chosen = _sample((shown for _, shown in threads()), sample, seed)
    for tid, shown in threads():
        if chosen is not None and shown not in chosen:
            continue
        transcript = memory.transcript(tid)
        if not transcript:  # listed by the store, yet empty: never exported as a thread
            raise ConfigError(f"thread {shown!r} has no transcript where it lives")
        for message in transcript:
            yield message_line(shown, message)


def _sample(ids: Iterable[str], n: int | None, seed: int) -> set[str] | None:
    import hashlib
    import heapq

    if n is None:
        return None
    if n < 1:
        raise ConfigError(f"a sample is at least 1 thread, got {n}")

    def rank(tid: str) -> bytes:
        return hashlib.blake2b(f"{seed}\0{tid}".encode(), digest_size=16).digest()
    return set(heapq.nsmallest(n, ids, key=rank))


# -- opening ----------------------------------------------------------------------------------
def open_read_only(store: str, backend: str = "classic", **kwargs: Any) -> SummaryMemory:
    """A memory that reads an existing SQLite or PostgreSQL store and can never write to it
    (reports, dashboards and audits beside the live app): loads, histories, transcripts, fold
    records and thread ids work, every write raises ``StoreError``; each thread is served where
    it lives and never moved. SQLite opens with ``mode=ro`` (a missing file stays missing),
    PostgreSQL sessions with ``default_transaction_read_only=on``; no schema is created."""
    from adapters.stores.readonly import open_read_only as open_store
    from adapters.stores.url import kind_of, show_url
    from compat.memory import SummaryMemory

    if backend not in ("classic", "middleware"):
        raise ConfigError(f"a read-only memory reads with 'classic' or 'middleware', got {backend!r}")
    if not isinstance(store, str) or kind_of(store) == "memory":
        raise ConfigError("a read-only memory needs a sqlite:/// or postgresql:// URL: an "
                          "in-memory store has nothing to read")
    opened = open_store(store)
    if opened is None:
        raise StoreError(f"{show_url(store)} holds no memshift tables: nothing to read")
    return SummaryMemory(backend=backend, store=opened, **kwargs)


def read_only_memory(backend: str, url: str, *, snapshot: bool = False,
                     **kwargs: Any) -> SummaryMemory | None:
    """``open_read_only``, or ``None`` for a store that holds no memshift tables (a dry run
    against a target that does not exist yet); ``snapshot``: SQLite ``immutable=1`` when no
    ``-wal`` file exists, so nothing at all appears beside the file."""
    from adapters.stores.readonly import open_read_only as open_store
    from compat.memory import SummaryMemory

    store = open_store(url, snapshot=snapshot)
    if store is None:
        return None
    return SummaryMemory(backend=backend, store=store, **kwargs)


def reopen(memory: SummaryMemory) -> SummaryMemory:
    """A new memory with this one's configuration and its own connection to the same store."""
    return type(memory)(**{name: getattr(memory, name) for name in memory.model_fields_set})
