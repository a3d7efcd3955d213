"""Where migrated threads come from: memshift stores and the legacy shapes users have.

Each source yields thread ids (streaming) and reads one thread with the real
LangChain/LangGraph API: a ``SummaryMemory``; a stock classic chat-history table
(``SQLChatMessageHistory``; the summary was never persisted, so it is rebuilt); a
LangGraph checkpointer holding the seed tutorials' rolling-summary graph
(``summary`` + ``messages``) or a stock ``create_agent`` + ``SummarizationMiddleware``
thread (the summary is the tagged HumanMessage).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from adapters import ThreadRecord
from adapters.middleware import split_summary
from compat.memory import SummaryMemory

__all__ = [
    "ClassicHistorySource",
    "GraphSource",
    "MemorySource",
    "SourceThread",
    "ThreadSource",
    "as_source",
    "stable_ids",
]

_ID_NAMESPACE = uuid.UUID("6d656d73-6869-6674-2d6d-696772617465")


@dataclass(frozen=True)
class SourceThread:
    record: ThreadRecord
    rebuild: bool = False  # the summary must be rebuilt from the transcript
    note: str = ""


@runtime_checkable
class ThreadSource(Protocol):
    name: str

    def iter_thread_ids(self) -> Iterator[str]: ...

    def read(self, thread_id: str) -> SourceThread | None: ...


def stable_ids(thread_id: str, messages: list[BaseMessage]) -> list[BaseMessage]:
    """Give id-less messages a deterministic id, so re-running a migration duplicates nothing."""
    out = []
    for index, message in enumerate(messages):
        if message.id is None:
            message = message.model_copy()
            message.id = str(uuid.uuid5(_ID_NAMESPACE, f"{thread_id}\x00{index}\x00{message.type}"
                                                       f"\x00{message.content}"))
        out.append(message)
    return out


class MemorySource:
    """A memshift ``SummaryMemory`` (either backend, any store)."""

    def __init__(self, memory: SummaryMemory) -> None:
        self.memory = memory
        self.name = f"memshift {memory.backend_name} ({memory.store_url})"

    def iter_thread_ids(self) -> Iterator[str]:
        return self.memory.iter_thread_ids()

    def read(self, thread_id: str) -> SourceThread | None:
        view = self.memory.load(thread_id)
        transcript = self.memory.transcript(thread_id)
        if not transcript and not view.messages and not view.summary:
            return None
        return SourceThread(ThreadRecord(thread_id, view.summary, view.messages, view.folds,
                                         transcript))


class ClassicHistorySource:
    """A stock classic store: ``SQLChatMessageHistory`` rows, no persisted summary."""

    def __init__(self, url: str, table: str = "message_store") -> None:
        from sqlalchemy import create_engine

        self.url, self.table = url, table
        self.engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1)
                                    .replace("postgres://", "postgresql+psycopg://", 1))
        self.name = f"stock classic history ({table})"

    def iter_thread_ids(self, batch: int = 1000) -> Iterator[str]:
        from sqlalchemy import column, select, table

        rows = table(self.table, column("session_id"))
        last: str | None = None
        while True:
            query = select(rows.c.session_id).distinct().order_by(rows.c.session_id).limit(batch)
            if last is not None:
                query = query.where(rows.c.session_id > last)
            with self.engine.connect() as conn:
                ids = [r[0] for r in conn.execute(query)]
            yield from ids
            if len(ids) < batch:
                return
            last = ids[-1]

    def read(self, thread_id: str) -> SourceThread | None:
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        history = SQLChatMessageHistory(session_id=thread_id, connection=self.engine,
                                        table_name=self.table)
        messages = stable_ids(thread_id, history.messages)
        if not messages:
            return None
        return SourceThread(ThreadRecord(thread_id, "", messages, 0, messages), rebuild=True,
                            note="summary rebuilt from the stored history (stock classic "
                                 "memory never persisted it)")

    def close(self) -> None:
        self.engine.dispose()


class GraphSource:
    """Threads on a LangGraph checkpointer, read without their graph.

    Recognises the rolling-summary graph (``state[summary_key]`` + ``messages``) and stock
    ``SummarizationMiddleware`` threads (leading tagged summary HumanMessage).
    """

    def __init__(self, checkpointer: Any, summary_key: str = "summary") -> None:
        self.checkpointer = checkpointer
        self.summary_key = summary_key
        self.name = f"LangGraph checkpointer ({type(checkpointer).__name__})"

    def iter_thread_ids(self, batch: int = 1000) -> Iterator[str]:
        """SQL savers are paged by thread id; others are listed once (a saver's ``list``
        holds its lock while iterating, so reading threads inside it would deadlock)."""
        kind = type(self.checkpointer).__name__
        if kind not in ("SqliteSaver", "PostgresSaver"):
            seen = dict.fromkeys(t.config["configurable"]["thread_id"]
                                 for t in self.checkpointer.list(None))
            yield from seen
            return
        mark = "?" if kind == "SqliteSaver" else "%s"
        last = ""
        while True:
            query = (f"SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > {mark} "
                     f"ORDER BY thread_id LIMIT {int(batch)}")
            with self.checkpointer.cursor() if kind == "SqliteSaver" else \
                    self.checkpointer._cursor() as cur:
                cur.execute(query, (last,))
                rows = cur.fetchall()
            page = [r["thread_id"] if isinstance(r, dict) else r[0] for r in rows]
            yield from page
            if len(page) < batch:
                return
            last = page[-1]

    def read(self, thread_id: str) -> SourceThread | None:
        tup = self.checkpointer.get_tuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        if tup is None:
            return None
        values = tup.checkpoint.get("channel_values", {})
        head, summary, window = split_summary(list(values.get("messages", [])))
        if head is None:
            summary = str(values.get(self.summary_key) or "")
        window = stable_ids(thread_id, window)
        folds = int(values.get("memshift_folds") or (1 if summary else 0))
        return SourceThread(ThreadRecord(thread_id, summary, window, folds, window),
                            note="history before the retained window is not in the source; "
                                 "the transcript starts at the window")


def as_source(source: Any) -> ThreadSource:
    if isinstance(source, SummaryMemory):
        return MemorySource(source)
    if isinstance(source, ThreadSource):
        return source
    raise TypeError(f"cannot migrate from {type(source).__name__}: pass a SummaryMemory or a "
                    "ThreadSource (ClassicHistorySource, GraphSource)")
