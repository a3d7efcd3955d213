"""Where migrated threads come from: memshift stores and the legacy shapes users have.

Each source yields thread ids (streaming) and reads one thread with the real
LangChain/LangGraph API: a ``SummaryMemory``; a stock classic chat-history table
(``SQLChatMessageHistory``; the summary was never persisted, so it is rebuilt); a
LangGraph checkpointer holding the seed tutorials' rolling-summary graph
(``summary`` + ``messages``) or a stock ``create_agent`` + ``SummarizationMiddleware``
thread (the summary is the tagged HumanMessage).
"""

from __future__ import annotations

import functools

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from adapters import ThreadRecord
from adapters.stores import sqlalchemy_url
from adapters._upstream import delta_metadata, saver_cursor
from adapters.errors import DeltaStateError
from adapters.backends.middleware import split_summary
from compat._turns import stable_id, stable_ids
from compat.memory import SummaryMemory

__all__ = [
    "ClassicHistorySource",
    "GraphSource",
    "MemorySource",
    "SourceThread",
    "SummaryMemorySource",
    "ThreadSource",
    "as_source",
    "stable_id",
    "stable_ids",
]



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


class MemorySource:
    """A memshift ``SummaryMemory`` (either backend, any store)."""

    def __init__(self, memory: SummaryMemory) -> None:
        self.memory = memory
        self.name = f"memshift {memory.backend_name} ({memory.store_url})"

    def iter_thread_ids(self) -> Iterator[str]:
        from compat.admin import iter_thread_ids

        return iter_thread_ids(self.memory)

    def last_id(self, thread_id: str) -> str | None:
        """The newest message's id (what a delta pass compares), without reading the thread."""
        from compat.admin import last_transcript_id

        return last_transcript_id(self.memory, thread_id)

    def read(self, thread_id: str) -> SourceThread | None:
        view = self.memory.load(thread_id)
        transcript = self.memory.transcript(thread_id)
        if not transcript and not view.messages and not view.summary:
            return None
        return SourceThread(ThreadRecord(thread_id, view.summary, view.messages, view.folds,
                                         transcript))


class ClassicHistorySource:
    """A stock classic store: ``SQLChatMessageHistory`` rows, no persisted summary."""

    def __init__(self, url: str, table: str = "message_store", engine: Any = None) -> None:
        """``engine``: an SQLAlchemy engine to read through (the CLI passes a read-only one)."""
        from sqlalchemy import create_engine

        self.url, self.table = url, table
        self.engine = engine if engine is not None else create_engine(sqlalchemy_url(url))
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

    def last_id(self, thread_id: str) -> str | None:
        """The newest message's (stable) id from two small queries, not the whole history."""
        found = self.fingerprint(thread_id)
        return found[1] if found else None

    def fingerprint(self, thread_id: str) -> tuple[int, str] | None:
        """(messages, the newest message's stable id) in one small query, its SQL built once."""
        import json

        from langchain_core.messages import messages_from_dict

        with self.engine.connect() as conn:
            row = conn.execute(self._fingerprint_sql, {"tid": thread_id}).first()
        if row is None or not row[0]:
            return None
        count = int(row[0])
        return count, stable_id(thread_id, count - 1, messages_from_dict([json.loads(str(row[1]))])[0])

    def fingerprints(self, thread_ids: list[str]) -> dict[str, tuple[int, str]]:
        """``fingerprint`` of each listed thread the table holds, in one query for the page."""
        import json

        from langchain_core.messages import messages_from_dict

        with self.engine.connect() as conn:
            rows = conn.execute(self._fingerprints_sql, {"ids": list(thread_ids)}).all()
        found = {}
        for tid, n, raw in rows:
            try:
                newest = messages_from_dict([json.loads(str(raw))])[0]
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # no fingerprint: reading the thread says precisely what is wrong
            found[tid] = (int(n), stable_id(tid, int(n) - 1, newest))
        return found

    @functools.cached_property
    def _fingerprints_sql(self) -> Any:
        from sqlalchemy import bindparam, column, func, select, table

        rows = table(self.table, column("id"), column("session_id"), column("message"))
        stats = (select(rows.c.session_id, func.count().label("n"), func.max(rows.c.id).label("top"))
                 .where(rows.c.session_id.in_(bindparam("ids", expanding=True)))
                 .group_by(rows.c.session_id).subquery())
        return select(stats.c.session_id, stats.c.n, rows.c.message).join_from(
            stats, rows, rows.c.id == stats.c.top)

    @functools.cached_property
    def _fingerprint_sql(self) -> Any:
        from sqlalchemy import bindparam, column, func, select, table

        rows = table(self.table, column("id"), column("session_id"), column("message"))
        mine = rows.c.session_id == bindparam("tid")
        newest = select(rows.c.message).where(mine).order_by(rows.c.id.desc()).limit(1)
        return select(func.count(), newest.scalar_subquery()).select_from(rows).where(mine)

    def read(self, thread_id: str) -> SourceThread | None:
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        history = SQLChatMessageHistory(session_id=thread_id, connection=self.engine,
                                        table_name=self.table)
        return self._thread(thread_id, history.messages)

    def read_many(self, thread_ids: list[str]) -> dict[str, SourceThread]:
        """``read`` of each listed thread the table holds, in one query for the page: rows
        decoded as ``SQLChatMessageHistory.messages`` decodes them (its default converter)."""
        import json

        from langchain_core.messages import messages_from_dict

        found: dict[str, list[BaseMessage]] = {}
        with self.engine.connect() as conn:
            for tid, raw in conn.execute(self._read_many_sql, {"ids": list(thread_ids)}):
                found.setdefault(tid, []).append(messages_from_dict([json.loads(raw)])[0])
        return {tid: thread for tid, messages in found.items()
                if (thread := self._thread(tid, messages)) is not None}

    @functools.cached_property
    def _read_many_sql(self) -> Any:
        from sqlalchemy import bindparam, column, select, table

        rows = table(self.table, column("id"), column("session_id"), column("message"))
        return (select(rows.c.session_id, rows.c.message)
                .where(rows.c.session_id.in_(bindparam("ids", expanding=True)))
                .order_by(rows.c.session_id, rows.c.id))

    @staticmethod
    def _thread(thread_id: str, history: list[BaseMessage]) -> SourceThread | None:
        messages = stable_ids(thread_id, history)
        if not messages:
            return None
        return SourceThread(ThreadRecord(thread_id, "", messages, 0, messages), rebuild=True,
                            note="summary rebuilt from the stored history (stock classic "
                                 "memory never persisted it)")

    def close(self) -> None:
        self.engine.dispose()


DEFAULT_SUMMARY_PREFIXES = ("【对话摘要】", "Conversation summary:", "Summary of the conversation:")


class SummaryMemorySource(ClassicHistorySource):
    """Threads kept by stock ``ConversationSummaryMemory``: its chat-history table, plus the
    running summaries if the app saved them (stock keeps ``buffer`` on the object only).
    With a summary: it is taken as is and the window is empty, as the stock memory shows it.
    Without: the summary is rebuilt from the history with the target's policy (use
    ``MemoryPolicy.summary_only()`` to keep the stock shape)."""

    def __init__(self, url: str, table: str = "message_store",
                 summaries: dict[str, str] | None = None, engine: Any = None) -> None:
        super().__init__(url, table, engine)
        self.summaries = dict(summaries or {})
        self.name = f"stock ConversationSummaryMemory history ({table})"

    def fingerprint(self, thread_id: str) -> tuple[int, str] | None:
        """A thread with a given summary has none: the summaries file may have changed since
        (a re-run compares it in full)."""
        return None if thread_id in self.summaries else super().fingerprint(thread_id)

    def fingerprints(self, thread_ids: list[str]) -> dict[str, tuple[int, str]]:
        return super().fingerprints([t for t in thread_ids if t not in self.summaries])

    def read(self, thread_id: str) -> SourceThread | None:
        return self._with_summary(thread_id, super().read(thread_id))

    def read_many(self, thread_ids: list[str]) -> dict[str, SourceThread]:
        found = super().read_many(thread_ids)
        return {t: thread for t in found if (thread := self._with_summary(t, found[t]))}

    def _with_summary(self, thread_id: str, found: SourceThread | None) -> SourceThread | None:
        summary = self.summaries.get(thread_id)
        if found is None or summary is None:
            return found
        record = found.record
        return SourceThread(ThreadRecord(thread_id, summary, [], 1 if summary else 0,
                                         record.transcript),
                            note="summary taken as stored; ConversationSummaryMemory keeps no "
                                 "verbatim window")


class GraphSource:
    """Threads on a LangGraph checkpointer, read without their graph.

    ``summary_in="auto"`` recognises, in order: stock ``SummarizationMiddleware`` threads
    (leading tagged summary HumanMessage); a summary kept in the messages themselves, as the
    LangGraph.js summary node of the seed tutorial writes it (an ``AIMessage`` starting
    with ``【对话摘要】`` or another of ``summary_prefixes``); the rolling-summary graph
    (``state[summary_key]`` + ``messages``). ``"state"`` / ``"messages"`` force one shape.

    ``graph``: the compiled graph that wrote the threads. Needed when its channels are
    LangGraph ``DeltaChannel``s (the checkpoint holds deltas, the graph rebuilds the value);
    without it such a thread is refused with ``DeltaStateError``, never read as empty.
    """

    def __init__(self, checkpointer: Any, summary_key: str = "summary",
                 summary_in: str = "auto",
                 summary_prefixes: tuple[str, ...] = DEFAULT_SUMMARY_PREFIXES,
                 graph: Any = None) -> None:
        if summary_in not in ("auto", "state", "messages"):
            raise ValueError(f"summary_in must be auto, state or messages, got {summary_in!r}")
        from adapters.stores.dual import DualSaver

        if isinstance(checkpointer, DualSaver):  # memshift's own: read through the sync side
            checkpointer = checkpointer.sync
        self.checkpointer = checkpointer
        self.graph = graph
        self.summary_key = summary_key
        self.summary_in = summary_in
        self.summary_prefixes = tuple(summary_prefixes)
        self.name = f"LangGraph checkpointer ({type(checkpointer).__name__})"

    def _summary_in_messages(self, messages: list[BaseMessage]) -> tuple[str, list[BaseMessage]] | None:
        """The newest prefixed summary message and every other message, or ``None``."""
        found = None
        for index, message in enumerate(messages):
            text = message.content if isinstance(message.content, str) else ""
            prefix = next((p for p in self.summary_prefixes if text.lstrip().startswith(p)), None)
            if prefix is not None and message.type in ("ai", "system", "human"):
                found = (index, text.lstrip()[len(prefix):].strip())
        if found is None:
            return None
        index, summary = found
        rest = [m for i, m in enumerate(messages) if i != index and not (
            isinstance(m.content, str) and m.content.lstrip().startswith(self.summary_prefixes))]
        return summary, rest

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
            with saver_cursor(self.checkpointer) as cur:
                cur.execute(query, (last,))
                rows = cur.fetchall()
            page = [r["thread_id"] if isinstance(r, dict) else r[0] for r in rows]
            yield from page
            if len(page) < batch:
                return
            last = page[-1]

    def read(self, thread_id: str) -> SourceThread | None:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        tup = self.checkpointer.get_tuple(config)
        if tup is None:
            return None
        values = tup.checkpoint.get("channel_values", {})
        if delta_metadata(tup.metadata):
            if self.graph is None:
                raise DeltaStateError(
                    f"thread {thread_id!r}: its checkpoints hold LangGraph DeltaChannel deltas, "
                    "which only its graph can rebuild; pass GraphSource(checkpointer, "
                    "graph=<the compiled graph>)")
            values = dict(self.graph.get_state(config).values)
        messages = list(values.get("messages", []))
        head, summary, window = split_summary(messages)
        in_messages = None if head is not None or self.summary_in == "state" else \
            self._summary_in_messages(messages)
        if in_messages is not None:
            summary, window = in_messages
        elif head is None:
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
