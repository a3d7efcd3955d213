"""Legacy histories: where a thread lived before memshift, kept whole.

Two legacy shapes, each a *location* of its threads:

- a ``BaseChatMessageHistory`` handed over as ``chat_memory=`` (SQL, Redis, file,
  in-memory…). With no ``store=``, memshift keeps its state where it survives a restart: a
  ``SQLChatMessageHistory``'s own database (memshift's tables beside ``message_store``); an
  in-memory history stays in memory; any other persistent history needs ``store=`` (a
  ``ConfigError`` says so) — never a persistent history paired with an in-memory memory in
  silence. A persistent history is written through by default: every new turn reaches it
  *before* memshift's transaction, so the stock class, swapped back, sees every turn; a
  crash between the two leaves the turn in the history only. Each first touch of the thread
  imports what the history holds and memshift does not (that turn, or turns the stock class
  added while it was swapped back), so nothing is lost either way and nothing is summarized
  twice;
- a stock ``SQLChatMessageHistory`` table in the store's database (``message_store`` or
  ``legacy_table=``): each thread is adopted at its first touch.

Adoption is the migration path for one thread: stable message ids, the summary rebuilt with
the memory's policy (stock never persisted it), one transaction that only writes if the thread
is still empty, and a fold record with trigger ``adopted``.
"""

from __future__ import annotations

from dataclasses import replace

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import BaseMessage

from adapters import Store, ThreadRecord, open_store
from adapters.errors import ConfigError, ContentError

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["LegacyAdopter", "history_store", "history_thread", "is_persistent", "legacy_adopter",
           "shared_store", "held", "legacy_sessions"]

DEFAULT_LEGACY_TABLE = "message_store"
logger = logging.getLogger("memshift")


def is_persistent(history: BaseChatMessageHistory) -> bool:
    """Whether a history outlives the process (anything but the in-memory one)."""
    return not isinstance(history, InMemoryChatMessageHistory)


def history_thread(history: BaseChatMessageHistory) -> str | None:
    """The thread a history is: its ``session_id`` (SQL, Redis, MongoDB…), or its file's
    path for a ``FileChatMessageHistory``; ``None`` when it names none."""
    session = getattr(history, "session_id", None)
    if isinstance(session, str) and session:
        return session
    path = getattr(history, "file_path", None)
    return f"file:{os.path.abspath(os.fspath(path))}" if path is not None else None


def history_store(history: BaseChatMessageHistory) -> str | None:
    """The store URL memshift uses for a ``chat_memory=`` history when none is named: the
    history's own SQL database, or ``None`` (in memory) for a history that lives in memory.
    Any other persistent history is refused: its thread would not survive a restart."""
    if not is_persistent(history):
        return None
    engine = getattr(history, "engine", None)  # SQLChatMessageHistory, sync or async
    if engine is None and getattr(history, "async_engine", None) is not None:
        engine = history.async_engine.sync_engine  # type: ignore[attr-defined]
    url = getattr(engine, "url", None)
    if url is not None and hasattr(url, "get_backend_name"):
        backend = url.get_backend_name()
        if backend == "sqlite":
            database = url.database or ""
            if not database or database == ":memory:" or "mode=memory" in database:
                return None  # an in-memory SQLite history lives as long as the process
            return "sqlite:///" + database  # an absolute path gives sqlite:////path
        if backend == "postgresql":
            return url.set(drivername="postgresql").render_as_string(hide_password=False)
    raise ConfigError(
        f"chat_memory is a {type(history).__name__}, which outlives this process, but no "
        "store was named: memshift's summary and window would live in memory only and be "
        "lost at exit. Name where they live: SummaryMemory(..., store='sqlite:///memshift.db' "
        "or 'postgresql://...'), or set MEMSHIFT_STORE (store='memory' keeps them in this "
        "process on purpose)")


_SHARED: dict[str, Store] = {}
_SHARED_LOCK = threading.Lock()


def shared_store(url: str, create_schema: bool = True) -> Store:
    """One store per database for memories built on their history's database: an app that
    builds a memory per request opens the database once, not once per request."""
    with _SHARED_LOCK:
        store = _SHARED.get(url)
        if store is None:
            store = _SHARED[url] = open_store(url, create_schema=create_schema)
        return store


class LegacyAdopter:
    """A thread's legacy location: read it (stable ids), write turns through, clear it."""

    checked_size = 100_000  # threads remembered as checked by this memory

    def __init__(self, read: Callable[[str], list[BaseMessage]],
                 write: Callable[[str, list[BaseMessage]], None] | None,
                 clear: Callable[[str], None] | None, name: str, reconcile: bool,
                 append: Callable[[str, list[BaseMessage]], None] | None = None) -> None:
        self.read, self.write, self.wipe, self.name = read, write, clear, name
        self.append = append or write  # erasure rewrites a history whether or not it writes through
        self.reconcile = reconcile  # import what the history holds and memshift does not
        self._checked: OrderedDict[str, None] = OrderedDict()

    def ensure(self, memory: SummaryMemory, thread_id: str) -> None:
        """At the thread's first touch: adopt it if memshift holds nothing, else import the
        turns the legacy history holds and memshift does not."""
        if thread_id in self._checked:
            return
        from compat._turns import stable_ids

        legacy = stable_ids(thread_id, self.read(thread_id))
        if legacy:
            store = memory.backend_impl.locate(thread_id, move=False).store
            with store.guard("compare with the legacy history"), store.snapshot(thread_id) as tx:
                held = store.known_ids(tx, [m.id for m in legacy if m.id])
                empty = not held and not store.last_ids(tx, 1)
            if empty:
                _import(memory, thread_id, legacy, self.name)
            elif self.reconcile:
                _catch_up(memory, thread_id, [m for m in legacy if m.id not in held], self.name)
        self._checked[thread_id] = None
        if len(self._checked) > self.checked_size:
            self._checked.popitem(last=False)

    def before_save(self, thread_id: str, turn: list[BaseMessage], policy: Any) -> None:
        """Written through: the turn reaches the legacy history first, with the ids memshift
        will store (set now, in place: the turn is owned) and as copies of its own."""
        if self.write is None:
            return
        from adapters.view import detach, new_id, set_id

        policy.check_sizes(turn)  # refused here, or the history would hold it
        for message in turn:
            if message.id is None:
                set_id(message, new_id())
        self.write(thread_id, [detach(m) for m in turn])

    def after_agent_turn(self, thread_id: str, window: list[BaseMessage]) -> None:
        """An agent's turn (``memory.middleware`` inside ``create_agent``) written through: the
        window's messages the history does not hold yet, in order (the summary message is not
        in the window; what a fold removed was written through on its own turn). Reads the
        history once a turn, as a per-request stock history does."""
        if self.write is None:
            return
        from compat._turns import stable_ids
        from adapters.view import detach

        held = {m.id for m in stable_ids(thread_id, self.read(thread_id))}
        new = [detach(m) for m in window if m.id is not None and m.id not in held]
        if new:
            self.write(thread_id, new)

    def clear(self, thread_id: str) -> None:
        """``memory.clear()`` clears the written-through history too, as stock's does."""
        if self.write is not None and self.wipe is not None:
            self.wipe(thread_id)


def _import(memory: SummaryMemory, thread_id: str, legacy: list[BaseMessage], name: str) -> None:
    from compat._rebuild import rebuild_fold_record, rebuild_record

    start = time.perf_counter()
    # no summarizer call: the request sees the history as the stock class showed it, and the
    # thread's first fold summarizes what lies beyond the window at once (stock's one call)
    record = rebuild_record(memory, thread_id, legacy, fold=False)
    fold = rebuild_fold_record(thread_id, legacy, record, memory.active_policy,
                               trigger=f"adopted from {name}", summarizer="rebuild",
                               backend=memory.backend_name, started=start)
    fold = replace(fold, summarizer_calls=0)
    # written only if the thread is still empty: a concurrent first touch adopts it once
    memory.backend_impl.restore(ThreadRecord(thread_id, record.summary, record.window,
                                             record.folds, legacy),
                                expect_last_id="", fold_record=fold)


def _catch_up(memory: SummaryMemory, thread_id: str, missing: list[BaseMessage],
              name: str) -> None:
    """Turns in the legacy history that memshift does not hold, saved in order with their
    ids (a second catch-up of the same turns stores nothing)."""
    from compat._turns import as_messages, split_turns

    if not missing:
        return
    logger.info("importing %d message(s) found only in the legacy %s", len(missing), name)
    for turn in split_turns(missing):
        try:  # through the engine: the turn came from the history, it does not go back
            memory.backend_impl.save(thread_id, as_messages(turn))
        except ContentError as exc:  # one unstorable legacy turn never blocks the thread
            logger.warning("a legacy turn was not imported: %s", exc)


def legacy_adopter(memory: SummaryMemory, store: Store,
                   own_thread: str) -> LegacyAdopter | None:
    """The adopter a memory's settings ask for, or ``None`` (``own_thread``: the thread of an
    unbound memory on the in-memory store). Refuses, with the command to run, a store holding
    stock tables when ``LegacyConfig(adopt=False)``."""
    from compat.config import LegacyConfig

    config = memory.legacy or LegacyConfig()
    history = config.history
    if history is not None:
        target = memory.thread_id or own_thread

        def read_history(thread_id: str) -> list[BaseMessage]:
            return list(history.messages) if thread_id == target else []

        def write(thread_id: str, turn: list[BaseMessage]) -> None:
            if thread_id == target:
                history.add_messages(turn)

        def wipe(thread_id: str) -> None:
            if thread_id == target:
                history.clear()
        through = config.write if config.write is not None else is_persistent(history)
        return LegacyAdopter(read_history, write if through else None, wipe,
                             type(history).__name__, reconcile=through, append=write)
    engine = getattr(store, "engine", None)
    if engine is None:
        if config.table is not None:
            raise ConfigError("legacy_table= needs a SQL store (sqlite:/// or postgresql://)")
        return None
    from sqlalchemy import inspect

    table = config.table or DEFAULT_LEGACY_TABLE
    with store.guard("look for legacy tables"):
        present = inspect(engine).has_table(table)
    if not present:
        if config.table is not None:
            raise ConfigError(f"legacy_table={table!r} is not in {memory.store_url}")
        return None
    if not config.adopt:
        raise ConfigError(
            f"{memory.store_url} holds stock chat histories in {table!r}, which this memory "
            f"would not see (adopt_legacy=False). Migrate them first: memshift migrate --from "
            f"classic --from-store URL --table {table} --to {memory.backend_name} --to-store URL; "
            "or drop adopt_legacy=False to adopt each thread at first touch")
    return _table_adopter(store, engine, table, bool(config.write))


def legacy_histories(memory: SummaryMemory, stores: list[Store],
                     thread_id: str) -> list[LegacyAdopter]:
    """Every stock history that may hold the thread, for erasure: the ``chat_memory=`` history,
    or the legacy table in each SQL store's database — whatever ``adopt_legacy`` says (a
    history memshift would refuse to adopt still holds the user's text)."""
    from compat.config import LegacyConfig

    config = memory.legacy or LegacyConfig()
    if config.history is not None:
        adopter = legacy_adopter(memory, stores[0], thread_id)
        return [adopter] if adopter is not None else []
    from sqlalchemy import inspect

    table = config.table or DEFAULT_LEGACY_TABLE
    found, seen = [], set()
    for store in stores:
        engine = getattr(store, "engine", None)
        if engine is None or str(engine.url) in seen:
            continue
        seen.add(str(engine.url))
        with store.guard("look for legacy tables"):
            present = inspect(engine).has_table(table)
        if present:
            found.append(_table_adopter(store, engine, table, bool(config.write)))
    return found


def _table_adopter(store: Any, engine: Any, table: str, write_back: bool) -> LegacyAdopter:
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    def history(thread_id: str) -> Any:
        return SQLChatMessageHistory(session_id=thread_id, connection=engine, table_name=table)

    def read(thread_id: str) -> list[BaseMessage]:
        with store.guard("read legacy history"):
            return list(history(thread_id).messages)

    def write(thread_id: str, turn: list[BaseMessage]) -> None:
        with store.guard("append legacy history"):
            history(thread_id).add_messages(turn)

    def wipe(thread_id: str) -> None:
        with store.guard("clear legacy history"):
            history(thread_id).clear()
    return LegacyAdopter(read, write if write_back else None, wipe, f"table {table}",
                         reconcile=write_back, append=write)


def explicit_memory_store_warning(history: BaseChatMessageHistory) -> None:
    """A persistent history with ``store='memory'`` named on purpose: said once, not silent."""
    logger.warning("chat_memory is a %s (persistent) but store='memory': memshift's summary "
                   "and window for it are lost when this process exits", type(history).__name__)


def legacy_sessions(engine: Any, table: str) -> list[str]:
    """The sessions a stock ``SQLChatMessageHistory`` table holds, in id order (read only)."""
    from sqlalchemy import column, select, table as sql_table

    rows = sql_table(table, column("session_id"))
    with engine.connect() as conn:
        query = select(rows.c.session_id).distinct().order_by(rows.c.session_id)
        return [str(r[0]) for r in conn.execute(query)]


def held(store: Store, thread_id: str) -> bool:
    """Whether memshift's store holds the thread (adopted, or saved since): what a first
    touch checks before it adopts."""
    with store.snapshot(thread_id) as tx:
        return bool(store.last_ids(tx, 1))
