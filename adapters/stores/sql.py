"""SQL stores (SQLite, PostgreSQL): shared tables through SQLAlchemy Core.

Tables (created before LangChain's, all statements parameterised):
- ``memshift_transcript``: append-only raw messages, unique per (thread, message id);
- ``memshift_window``: the classic verbatim window, the very table the real
  ``SQLChatMessageHistory`` reads and appends to;
- ``memshift_classic``: the running summary and fold count per thread, which stock
  ``ConversationSummaryBufferMemory`` never persists.
A classic fold (summary written, folded rows deleted) is one transaction.
"""

from __future__ import annotations

import json
import re
import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from sqlalchemy import (
    BigInteger, Column, Index, Integer, MetaData, Table, Text, UniqueConstraint, delete, func,
    select,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from adapters.errors import ConfigError, StoreError
from adapters.stores.base import ClassicRecord, Store
from adapters.view import message_signature

__all__ = ["SqlStore"]

WINDOW_TABLE = "memshift_window"
_ID = BigInteger().with_variant(Integer, "sqlite")  # SQLite autoincrements INTEGER keys only

metadata = MetaData()
transcript_table = Table(
    "memshift_transcript", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("message_id", Text, nullable=False),
    Column("message", Text, nullable=False),
    UniqueConstraint("thread_id", "message_id", name="uq_memshift_transcript_message"),
    Index("ix_memshift_transcript_thread", "thread_id", "id"),
)
window_table = Table(  # same columns as SQLChatMessageHistory's model
    WINDOW_TABLE, metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_id", Text),
    Column("message", Text),
    Index("ix_memshift_window_session", "session_id", "id"),
)
folds_table = Table(
    "memshift_folds", metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("record", Text, nullable=False),
    Index("ix_memshift_folds_thread", "thread_id", "id"),
)
classic_table = Table(
    "memshift_classic", metadata,
    Column("thread_id", Text, primary_key=True),
    Column("summary", Text, nullable=False, default=""),
    Column("folds", Integer, nullable=False, default=0),
)

_PASSWORD_IN_TEXT = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def scrub_password(text: str, password: str | None = None) -> str:
    """Remove a password from driver text: URL userinfo, and the literal if known."""
    text = _PASSWORD_IN_TEXT.sub(r"\1***@", text)
    return text.replace(password, "***") if password else text


def _dump(message: BaseMessage) -> str:
    return json.dumps(message_to_dict(message), ensure_ascii=False)


def _load(raw: str) -> BaseMessage:
    return messages_from_dict([json.loads(raw)])[0]


class SqlStore(Store):
    """Shared SQL behaviour; subclasses bring the engine, checkpointer and locks."""

    history_cache_size = 256
    _secret: str | None = None  # a password to scrub from driver messages

    def __init__(self, url: str, engine: Engine) -> None:
        super().__init__()
        self.url = url
        self.engine = engine
        self._histories: OrderedDict[str, BaseChatMessageHistory] = OrderedDict()
        self._histories_guard = threading.Lock()
        with self.guard("create tables"):
            metadata.create_all(engine)

    # -- errors ----------------------------------------------------------------------
    translated: tuple[type[BaseException], ...] = (SQLAlchemyError,)

    @contextmanager
    def guard(self, what: str = "store operation") -> Iterator[None]:
        """Translate driver errors into ``StoreError`` (the password never appears)."""
        try:
            yield
        except StoreError:
            raise
        except self.translated as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            detail = scrub_password(detail, self._secret)[:300]
            raise StoreError(f"{what} failed on {self.url}: {type(exc).__name__}: {detail}") from exc

    # -- transcript ------------------------------------------------------------------
    @abstractmethod
    def _dialect_insert(self, table: Table) -> Any:
        """The dialect's INSERT construct (it has ``on_conflict_do_nothing/_update``)."""

    def _insert_ignore(self, table: Table) -> Any:
        return self._dialect_insert(table).on_conflict_do_nothing()

    def _upsert_classic(self, conn: Connection, thread_id: str, summary: str, folds: int) -> None:
        stmt = self._dialect_insert(classic_table).values(
            thread_id=thread_id, summary=summary, folds=folds)
        conn.execute(stmt.on_conflict_do_update(
            index_elements=["thread_id"], set_={"summary": summary, "folds": folds}))

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        with self.guard("read transcript"), self.engine.connect() as conn:
            rows = conn.execute(
                select(transcript_table.c.message)
                .where(transcript_table.c.thread_id == thread_id)
                .order_by(transcript_table.c.id)
            ).scalars()
            return [_load(r) for r in rows]

    def append_transcript(self, thread_id: str, messages: Sequence[BaseMessage]) -> int:
        rows = [{"thread_id": thread_id, "message_id": m.id, "message": _dump(m)}
                for m in messages if m.id is not None]
        if not rows:
            return 0
        with self.guard("append transcript"), self.engine.begin() as conn:
            result = conn.execute(self._insert_ignore(transcript_table), rows)
            return max(result.rowcount or 0, 0)

    def known_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        with self.guard("read transcript ids"), self.engine.connect() as conn:
            rows = conn.execute(select(transcript_table.c.message_id).where(
                transcript_table.c.thread_id == thread_id,
                transcript_table.c.message_id.in_(list(ids)))).scalars()
            return set(rows)

    def thread_ids(self) -> list[str]:
        with self.guard("list threads"), self.engine.connect() as conn:
            first = func.min(transcript_table.c.id)
            rows = conn.execute(
                select(transcript_table.c.thread_id, first).group_by(transcript_table.c.thread_id)
                .order_by(first)
            )
            return [r[0] for r in rows]

    def iter_thread_ids(self, batch: int = 1000) -> Iterator[str]:
        """Thread ids in id order, a page at a time (flat memory for any number of threads)."""
        last: str | None = None
        while True:
            query = (select(transcript_table.c.thread_id).distinct()
                     .order_by(transcript_table.c.thread_id).limit(batch))
            if last is not None:
                query = query.where(transcript_table.c.thread_id > last)
            with self.guard("list threads"), self.engine.connect() as conn:
                page = [r[0] for r in conn.execute(query)]
            yield from page
            if len(page) < batch:
                return
            last = page[-1]

    # -- fold records ----------------------------------------------------------------------
    def append_fold(self, record: dict[str, Any]) -> None:
        with self.guard("fold record"), self.engine.begin() as conn:
            conn.execute(folds_table.insert(), {"thread_id": record["thread_id"],
                                                "record": json.dumps(record, ensure_ascii=False)})

    def fold_records(self, thread_id: str) -> list[dict[str, Any]]:
        with self.guard("read fold records"), self.engine.connect() as conn:
            rows = conn.execute(select(folds_table.c.record)
                                .where(folds_table.c.thread_id == thread_id)
                                .order_by(folds_table.c.id)).scalars()
            return [json.loads(r) for r in rows]

    # -- classic -------------------------------------------------------------------------
    def classic_history(self, thread_id: str) -> BaseChatMessageHistory:
        """A real ``SQLChatMessageHistory`` on the window table (cached per thread)."""
        with self._histories_guard:
            history = self._histories.get(thread_id)
            if history is not None:
                self._histories.move_to_end(thread_id)
        if history is None:
            try:
                from langchain_community.chat_message_histories import SQLChatMessageHistory
            except ImportError as exc:
                raise ConfigError(
                    "SQL stores need langchain-community: pip install 'memshift[sqlite]' "
                    "or 'memshift[postgres]'") from exc

            with self.guard("open chat history"):
                history = SQLChatMessageHistory(
                    session_id=thread_id, connection=self.engine, table_name=WINDOW_TABLE)
            with self._histories_guard:
                self._histories[thread_id] = history
                if len(self._histories) > self.history_cache_size:
                    self._histories.popitem(last=False)
        return _GuardedHistory(history, self)

    def classic_record(self, thread_id: str) -> ClassicRecord:
        with self.guard("read summary"), self.engine.connect() as conn:
            row = conn.execute(
                select(classic_table.c.summary, classic_table.c.folds)
                .where(classic_table.c.thread_id == thread_id)
            ).first()
        return ClassicRecord(summary=row[0], folds=row[1]) if row else ClassicRecord()

    def classic_fold(
        self, thread_id: str, summary: str, folds: int, window: Sequence[BaseMessage]
    ) -> None:
        with self.guard("fold"), self.engine.begin() as conn:
            rows = conn.execute(
                select(window_table.c.id, window_table.c.message)
                .where(window_table.c.session_id == thread_id).order_by(window_table.c.id)
            ).all()
            stored = [message_signature(_load(r[1])) + (_load(r[1]).id,) for r in rows]
            wanted = [message_signature(m) + (m.id,) for m in window]
            drop = len(rows) - len(wanted)
            if drop >= 0 and stored[drop:] == wanted:
                doomed = [r[0] for r in rows[:drop]]  # a fold removes a prefix: delete it
                if doomed:
                    conn.execute(delete(window_table).where(window_table.c.id.in_(doomed)))
            else:  # a restore: replace the whole window
                conn.execute(delete(window_table).where(window_table.c.session_id == thread_id))
                if window:
                    conn.execute(window_table.insert(), [
                        {"session_id": thread_id, "message": _dump(m)} for m in window])
            self._upsert_classic(conn, thread_id, summary, folds)

    def classic_clear(self, thread_id: str) -> None:
        with self.guard("clear"), self.engine.begin() as conn:
            conn.execute(delete(window_table).where(window_table.c.session_id == thread_id))
            conn.execute(delete(classic_table).where(classic_table.c.thread_id == thread_id))

    def close(self) -> None:
        self.engine.dispose()


class _GuardedHistory(BaseChatMessageHistory):
    """The real history, with driver errors translated at the store boundary."""

    def __init__(self, inner: BaseChatMessageHistory, store: SqlStore) -> None:
        self.inner, self.store = inner, store

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        with self.store.guard("read window"):
            return self.inner.messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        with self.store.guard("append window"):
            self.inner.add_messages(messages)

    def clear(self) -> None:
        with self.store.guard("clear window"):
            self.inner.clear()
