"""Every private LangChain / LangGraph detail memshift relies on, in one place.

Read this module when LangChain or LangGraph releases. ``check_upstream()`` runs when a
memory is built and fails, naming the installed versions, when a hook has gone; the spy
tests (``tests/test_upstream.py``) prove the stock entry points still call the overrides.
"""

from __future__ import annotations

import functools
import sqlite3
from importlib import metadata
from typing import Any

from adapters.errors import ConfigError

__all__ = [
    "build_summary_message",
    "format_block",
    "summary_call_config",
    "inmemory_undo",
    "mark_setup_done",
    "saver_cursor",
    "CLASSIC_HOOKS",
    "MIDDLEWARE_HOOKS",
    "SQLITE_CHECKPOINT_TABLES",
    "check_upstream",
    "inmemory_retain",
    "POSTGRES_RETAIN",
    "async_sqlite_saver_in_transaction",
    "sqlite_saver_in_transaction",
]

# Overridden methods the stock code must call (spy-tested).
MIDDLEWARE_HOOKS = ("_should_summarize", "_determine_cutoff_index", "_partition_messages",
                    "_build_new_messages", "_ensure_message_ids")
CLASSIC_HOOKS = ("prune", "predict_new_summary", "moving_summary_buffer")
# Saver internals used for retention and for joining memshift's transaction.
SQLITE_CHECKPOINT_TABLES = ("writes", "checkpoints")
_SAVER_ATTRS = {
    "langgraph.checkpoint.sqlite:SqliteSaver": ("cursor", "is_setup", "conn", "lock"),
    "langgraph.checkpoint.memory:InMemorySaver": ("storage", "writes", "blobs", "serde"),
}

_checked = False


def _versions() -> str:
    names = ("langchain", "langchain-classic", "langchain-core", "langgraph",
             "langgraph-checkpoint")
    found = []
    for name in names:
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def check_upstream() -> None:
    """Fail loudly, naming the installed versions, when a relied-on hook is missing."""
    global _checked
    if _checked:
        return
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_classic.memory import ConversationSummaryBufferMemory

    missing = [f"SummarizationMiddleware.{h}" for h in MIDDLEWARE_HOOKS
               if not hasattr(SummarizationMiddleware, h)]
    fields = getattr(ConversationSummaryBufferMemory, "model_fields", {})
    missing += [f"ConversationSummaryBufferMemory.{h}" for h in CLASSIC_HOOKS
                if not hasattr(ConversationSummaryBufferMemory, h) and h not in fields]
    for target, attrs in _SAVER_ATTRS.items():
        module, _, cls_name = target.partition(":")
        try:
            cls = getattr(__import__(module, fromlist=[cls_name]), cls_name)
        except ImportError:
            continue  # an optional extra that is not installed
        probe = cls.__new__(cls)
        if module.endswith("memory"):
            probe.__init__()
        missing += [f"{cls_name}.{a}" for a in attrs
                    if not hasattr(cls, a) and not hasattr(probe, a) and a not in ("conn", "lock",
                                                                                    "is_setup")]
    if missing:
        raise ConfigError(
            f"memshift relies on {', '.join(missing)}, missing in the installed versions "
            f"({_versions()}); install the versions pinned by memshift")
    _checked = True


# -- SummarizationMiddleware -----------------------------------------------------------------
def summary_call_config() -> Any:
    """The config stock ``SummarizationMiddleware`` gives its summary model call
    (``metadata={"lc_source": "summarization", ...}``, the ``nostream`` tag): LangGraph's
    ``stream_mode="messages"`` and ``astream_events`` then carry no summary tokens, and a trace
    marks the call as stock marks it. Private (``_summary_config``): a copy each time."""
    from langchain.agents.middleware.summarization import _summary_config

    return _summary_config()


def format_block(block: Any) -> str | None:
    """A content block as stock ``SummarizationMiddleware`` shows it to its summarizer
    (``get_buffer_string(format="xml")``): a URL image as ``<image url="…" />``, base64 data
    left out (``None``). Private (``_format_content_block_xml``)."""
    from langchain_core.messages.utils import _format_content_block_xml

    return _format_content_block_xml(block)


def build_summary_message(summary: str) -> Any:
    """The exact summary message stock ``SummarizationMiddleware`` writes."""
    from langchain.agents.middleware import SummarizationMiddleware

    return SummarizationMiddleware._build_new_messages(summary)[0]


# -- savers: setup done elsewhere, SQL cursors ---------------------------------------------------
def mark_setup_done(saver: Any) -> Any:
    """Tell a SQLite saver its tables exist (created under memshift's file lock): its own
    ``setup()`` runs ``executescript``, which would COMMIT an open transaction."""
    saver.is_setup = True
    return saver


def saver_cursor(saver: Any) -> Any:
    """A cursor context on a ``SqliteSaver`` or ``PostgresSaver`` (legacy sources page
    thread ids with SQL: ``list()`` holds the saver's lock for the whole iteration)."""
    return saver.cursor() if type(saver).__name__ == "SqliteSaver" else saver._cursor()


# -- SQLite: SqliteSaver inside memshift's transaction --------------------------------------
def sqlite_saver_in_transaction(conn: sqlite3.Connection) -> Any:
    """A ``SqliteSaver`` on ``conn`` that neither runs setup (executescript would COMMIT)
    nor commits after each call: memshift's transaction commits once."""
    return mark_setup_done(_in_transaction_class()(conn))


@functools.cache
def _in_transaction_class() -> type:
    """Defined once, on first use (the SQLite extra is optional)."""
    from contextlib import contextmanager

    from langgraph.checkpoint.sqlite import SqliteSaver

    from adapters.stores.tx_saver import ReadOnce

    class _InTransaction(ReadOnce, SqliteSaver):
        @contextmanager
        def cursor(self, transaction: bool = True) -> Any:
            with self.lock:
                cur = self.conn.cursor()
                try:
                    yield cur
                finally:
                    cur.close()
    return _InTransaction


def async_sqlite_saver_in_transaction(conn: Any) -> Any:
    """An ``AsyncSqliteSaver`` on ``conn`` whose per-call ``commit`` is a no-op (it calls
    ``conn.commit()`` after each write): memshift's transaction commits once."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from adapters.stores.tx_saver import read_once

    return mark_setup_done(read_once(AsyncSqliteSaver)(_NoCommit(conn)))


class _NoCommit:
    """The connection, minus ``commit``."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def commit(self) -> None:
        """The transaction's owner commits."""


# -- PostgreSQL: retention as one statement in the save's transaction ----------------------
POSTGRES_RETAIN = (
    # Keep the newest %(keep)s root checkpoints of %(thread_id)s, their writes and the blobs
    # they reference (PostgresSaver's tables; its prune runs ~15 statements). One statement:
    # every part sees the same snapshot, so blobs are kept if a *kept* checkpoint names them.
    "WITH kept AS (SELECT checkpoint_id, checkpoint FROM checkpoints "
    "WHERE thread_id = %(thread_id)s AND checkpoint_ns = '' "
    "ORDER BY checkpoint_id DESC LIMIT %(keep)s), "
    "w AS (DELETE FROM checkpoint_writes WHERE thread_id = %(thread_id)s "
    "AND checkpoint_ns = '' AND checkpoint_id NOT IN (SELECT checkpoint_id FROM kept)), "
    "c AS (DELETE FROM checkpoints WHERE thread_id = %(thread_id)s "
    "AND checkpoint_ns = '' AND checkpoint_id NOT IN (SELECT checkpoint_id FROM kept)) "
    "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %(thread_id)s "
    "AND b.checkpoint_ns = '' AND NOT EXISTS (SELECT 1 FROM kept k "
    "WHERE k.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
)


# -- InMemorySaver ---------------------------------------------------------------------------
def inmemory_undo(saver: Any, thread_id: str) -> Any:
    """A function that removes the root checkpoints of ``thread_id`` added after this call
    (a failed in-memory transaction rolls its checkpoint write back)."""
    before = set(saver.storage.get(thread_id, {}).get("", {}))

    def undo() -> None:
        checkpoints = saver.storage.get(thread_id, {}).get("", {})
        for checkpoint_id in set(checkpoints) - before:
            checkpoints.pop(checkpoint_id, None)
            saver.writes.pop((thread_id, "", checkpoint_id), None)
    return undo


def inmemory_retain(saver: Any, thread_id: str, keep: int) -> None:
    """Keep the newest root checkpoints of a thread, their writes and their blobs."""
    checkpoints = saver.storage.get(thread_id, {}).get("")
    if not checkpoints or len(checkpoints) <= keep:
        return
    for checkpoint_id in sorted(checkpoints)[:-keep]:
        checkpoints.pop(checkpoint_id, None)
        saver.writes.pop((thread_id, "", checkpoint_id), None)
    live: set[tuple] = set()
    for serialized, _meta, _parent in checkpoints.values():
        versions = saver.serde.loads_typed(serialized).get("channel_versions", {})
        live.update((thread_id, "", ch, v) for ch, v in versions.items())
    for key in [k for k in list(saver.blobs)  # a snapshot: other threads write meanwhile
                if k[0] == thread_id and k[1] == "" and k not in live]:
        saver.blobs.pop(key, None)
