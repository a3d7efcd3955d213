"""Adopting legacy conversations at first touch: no migration step, never an empty memory
in silence.

Two legacy shapes: a ``BaseChatMessageHistory`` handed over as ``chat_memory=`` (SQL, Redis,
file, in-memory…), and a stock ``SQLChatMessageHistory`` table (``message_store`` or
``legacy_table=``) in the database the store URL names. The first time a thread is touched
and memshift holds nothing for it, its legacy messages are imported through the same path as
``memshift migrate``: stable message ids, the summary rebuilt with the memory's policy (stock
never persisted it), one transaction that only writes if the thread is still empty, and a fold
record with trigger ``adopted``. With ``legacy_write=True`` every new turn is also appended to
the legacy history, so flipping back to the old code loses nothing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from adapters import ThreadRecord
from adapters.errors import ConfigError

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["LegacyAdopter", "legacy_adopter"]

DEFAULT_LEGACY_TABLE = "message_store"


class LegacyAdopter:
    checked_size = 100_000  # threads remembered as checked in this process

    def __init__(self, read: Callable[[str], list[BaseMessage]],
                 write: Callable[[str, list[BaseMessage]], None] | None, name: str) -> None:
        self.read, self.write, self.name = read, write, name
        self._checked: OrderedDict[str, None] = OrderedDict()

    def ensure(self, memory: SummaryMemory, thread_id: str) -> None:
        """Import the thread's legacy messages if memshift holds nothing for it yet."""
        if thread_id in self._checked:
            return
        store = memory._store
        with store.snapshot(thread_id) as tx:
            empty = not store.last_ids(tx, 1)
        if empty and (legacy := self.read(thread_id)):
            _import(memory, thread_id, legacy, self.name)
        self._checked[thread_id] = None
        if len(self._checked) > self.checked_size:
            self._checked.popitem(last=False)

    def after_save(self, thread_id: str, turn: list[BaseMessage]) -> None:
        if self.write is not None:
            self.write(thread_id, turn)


def _import(memory: SummaryMemory, thread_id: str, legacy: list[BaseMessage], name: str) -> None:
    from compat._rebuild import rebuild_fold_record, rebuild_record
    from compat.sources import stable_ids

    start = time.perf_counter()
    messages = stable_ids(thread_id, legacy)
    record = rebuild_record(memory, thread_id, messages)  # summarizer runs here: no lock held
    fold = rebuild_fold_record(thread_id, messages, record, memory.active_policy,
                               trigger=f"adopted from {name}", summarizer="rebuild",
                               backend=memory.backend_name, started=start)
    # written only if the thread is still empty: a concurrent first touch adopts it once
    memory._backend.restore(ThreadRecord(thread_id, record.summary, record.window, record.folds,
                                         messages), expect_last_id="", fold_record=fold)


def legacy_adopter(memory: SummaryMemory) -> LegacyAdopter | None:
    """The adopter a memory's settings ask for, or ``None``. Refuses, with the command to run,
    a store holding stock tables when ``adopt_legacy=False``."""
    history = memory.legacy_history
    if history is not None:
        target = memory.thread_id or memory._private_thread

        def read_history(thread_id: str) -> list[BaseMessage]:
            return list(history.messages) if thread_id == target else []
        write = (lambda _tid, turn: history.add_messages(turn)) if memory.legacy_write else None
        return LegacyAdopter(read_history, write, type(history).__name__)
    engine = getattr(memory._store, "engine", None)
    if engine is None:
        if memory.legacy_table is not None:
            raise ConfigError("legacy_table= needs a SQL store (sqlite:/// or postgresql://)")
        return None
    from sqlalchemy import inspect

    table = memory.legacy_table or DEFAULT_LEGACY_TABLE
    with memory._store.guard("look for legacy tables"):
        present = inspect(engine).has_table(table)
    if not present:
        if memory.legacy_table is not None:
            raise ConfigError(f"legacy_table={table!r} is not in {memory.store_url}")
        return None
    if not memory.adopt_legacy:
        raise ConfigError(
            f"{memory.store_url} holds stock chat histories in {table!r}, which this memory "
            f"would not see (adopt_legacy=False). Migrate them first: memshift migrate --from "
            f"classic --from-store URL --table {table} --to {memory.backend_name} --to-store URL; "
            "or drop adopt_legacy=False to adopt each thread at first touch")
    return _table_adopter(memory._store, engine, table, memory.legacy_write)


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
    return LegacyAdopter(read, write if write_back else None, f"table {table}")
