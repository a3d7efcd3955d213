"""Every private LangChain / LangGraph detail memshift relies on, in one place.

Read this module when LangChain or LangGraph releases. ``check_upstream()`` runs when a
memory is built (``check_middleware_upstream()`` when it first builds its middleware) and
fails, naming the installed versions, when a hook has gone; the spy
tests (``tests/test_upstream.py``) prove the stock entry points still call the overrides.
"""

from __future__ import annotations

import functools
import sqlite3
from importlib import metadata
from typing import Any, cast

from adapters.errors import ConfigError

__all__ = [
    "build_summary_message",
    "format_block",
    "normalize_trigger",
    "validate_context_size",
    "summary_call_config",
    "inmemory_undo",
    "mark_setup_done",
    "daemon_aiosqlite",
    "saver_cursor",
    "CLASSIC_HOOKS",
    "MIDDLEWARE_HOOKS",
    "check_upstream",
    "check_middleware_upstream",
    "REMOVE_ALL_MESSAGES",
    "inmemory_retain",
    "inmemory_copy",
    "inmemory_delete_runs",
    "inmemory_drop",
    "inmemory_prune_latest",
    "inmemory_run_threads",
    "inmemory_uses_delta",
    "delta_metadata",
    "DELTA_METADATA_KEYS",
    "async_sqlite_saver_in_transaction",
    "sqlite_saver_in_transaction",
    "postgres_saver_migrations",
    "sqlite_saver_setup_sql",
    "otel_sdk_installed",
]

# Checkpoint metadata keys LangGraph writes for ``DeltaChannel`` state (upstream's
# ``PostgresSaver.prune`` refuses such threads by the same keys).
DELTA_METADATA_KEYS = frozenset({"counters_since_delta_snapshot", "delta_writes_versioned"})
# ``langgraph.graph.message.REMOVE_ALL_MESSAGES`` (public, but importing it loads
# ``langgraph.graph``): a copy, spy-tested against the installed value.
REMOVE_ALL_MESSAGES = "__remove_all__"
# Overridden methods the stock code must call (spy-tested).
MIDDLEWARE_HOOKS = ("_should_summarize", "_determine_cutoff_index", "_partition_messages",
                    "_build_new_messages", "_ensure_message_ids", "_normalize_trigger",
                    "_validate_context_size")
CLASSIC_HOOKS = ("prune", "predict_new_summary", "moving_summary_buffer")
# Saver internals used for retention and for joining memshift's transaction.
_SAVER_ATTRS = {
    "langgraph.checkpoint.sqlite:SqliteSaver": ("cursor", "is_setup", "conn", "lock"),
    "langgraph.checkpoint.memory:InMemorySaver": ("storage", "writes", "blobs", "serde"),
}

_checked = False
_checked_classic = False
_checked_middleware = False


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


def check_upstream(*, classic: bool = True) -> None:
    """Fail loudly, naming the installed versions, when a relied-on saver hook (and with
    ``classic``, a classic class hook: ``check_classic_upstream``) is missing. Run when a
    memory is built; the middleware's hooks: ``check_middleware_upstream``."""
    global _checked
    if classic:
        check_classic_upstream()
    if _checked:
        return
    missing: list[str] = []
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
    _fail_if(missing)
    _checked = True


def check_classic_upstream() -> None:
    """``check_upstream`` for ``ConversationSummaryBufferMemory``: run when a memory the
    classic backend serves is built, and before the real class is first built, because
    ``langchain_classic.memory`` imports LangChain's prompts and models (about a second)
    that a middleware memory which never touches a classic thread (a migration's target)
    does not need."""
    global _checked_classic
    if _checked_classic:
        return
    from langchain_classic.memory import ConversationSummaryBufferMemory

    fields = getattr(ConversationSummaryBufferMemory, "model_fields", {})
    _fail_if([f"ConversationSummaryBufferMemory.{h}" for h in CLASSIC_HOOKS
              if not hasattr(ConversationSummaryBufferMemory, h) and h not in fields])
    _checked_classic = True


def check_middleware_upstream() -> None:
    """``check_upstream`` for ``SummarizationMiddleware``: run when a memory first builds its
    middleware (its first save, or ``memory.middleware``), because importing
    ``langchain.agents`` costs about 1.5 s that a memory which never folds there (a re-run of
    a finished migration, a classic-only app) does not pay."""
    global _checked_middleware
    if _checked_middleware:
        return
    from langchain.agents.middleware import SummarizationMiddleware

    _fail_if([f"SummarizationMiddleware.{h}" for h in MIDDLEWARE_HOOKS
              if not hasattr(SummarizationMiddleware, h)])
    _checked_middleware = True


def _fail_if(missing: list[str]) -> None:
    if missing:
        raise ConfigError(
            f"memshift relies on {', '.join(missing)}, missing in the installed versions "
            f"({_versions()}); install the versions pinned by memshift")


# -- OpenTelemetry ---------------------------------------------------------------------------
def otel_sdk_installed() -> bool:
    """Whether an SDK (anything but the API's stand-in) is the global tracer or meter
    provider. The tracer's stand-in is public (``ProxyTracerProvider``); the meter's,
    ``_ProxyMeterProvider``, is private (spy-tested)."""
    from opentelemetry import metrics, trace
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) or \
        not isinstance(metrics.get_meter_provider(), _ProxyMeterProvider)


# -- SummarizationMiddleware -----------------------------------------------------------------
def summary_call_config() -> Any:
    """The config stock ``SummarizationMiddleware`` gives its summary model call
    (``metadata={"lc_source": "summarization", ...}``, the ``nostream`` tag): LangGraph's
    ``stream_mode="messages"`` and ``astream_events`` then carry no summary tokens, and a trace
    marks the call as stock marks it. Private (``_summary_config``): a copy each time."""
    from langchain.agents.middleware.summarization import _summary_config

    return _summary_config()


def normalize_trigger(trigger: Any) -> list[dict[str, Any]]:
    """Stock's reading of ``trigger=`` (a ``ContextSize`` tuple, a ``TriggerClause`` dict, or a
    list of them) as clauses: AND within one, OR across them; stock's own checks and messages
    (``ValueError``/``TypeError``). Private (``SummarizationMiddleware._normalize_trigger``,
    which uses ``self`` only for the static ``_validate_context_size``)."""
    from langchain.agents.middleware.summarization import SummarizationMiddleware

    return [dict(c) for c in SummarizationMiddleware._normalize_trigger(
        cast(Any, SummarizationMiddleware), trigger)]


def validate_context_size(size: Any, parameter: str) -> tuple[str, Any]:
    """Stock's check of a ``keep=`` tuple. Private (``_validate_context_size``)."""
    from langchain.agents.middleware.summarization import SummarizationMiddleware

    if not isinstance(size, tuple) or len(size) != 2:
        raise ValueError(f"{parameter} must be a (kind, value) tuple such as ('tokens', 3000), "
                         f"got {size!r}")
    kind, value = SummarizationMiddleware._validate_context_size(cast(Any, size), parameter)
    return kind, value


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


def daemon_aiosqlite(conn: Any) -> Any:
    """An ``aiosqlite`` connection (not yet awaited) whose worker thread does not keep the
    interpreter alive: a script that forgets ``arelease()`` still exits (SQLAlchemy's aiosqlite
    dialect does the same). Private (``Connection._thread``)."""
    conn._thread.daemon = True
    return conn


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


def inmemory_erase(saver: Any, thread_id: str) -> Any:
    """Remove every checkpoint, write and blob of ``thread_id`` from an ``InMemorySaver``;
    gives the function that puts them back (a failed transaction's undo)."""
    storage = saver.storage.pop(thread_id, None)
    writes = {k: saver.writes.pop(k) for k in [k for k in list(saver.writes) if k[0] == thread_id]}
    blobs = {k: saver.blobs.pop(k) for k in [k for k in list(saver.blobs) if k[0] == thread_id]}

    def undo() -> None:
        if storage is not None:
            saver.storage[thread_id] = storage
        saver.writes.update(writes)
        saver.blobs.update(blobs)
    return undo


def _versions_of(saver: Any, typed: Any) -> dict[str, Any]:
    return saver.serde.loads_typed(typed).get("channel_versions", {})


def _meta(saver: Any, entry: tuple) -> dict[str, Any]:
    return saver.serde.loads_typed(entry[1]) or {}


def _spaces(saver: Any, thread_id: str) -> list[tuple[str, list[tuple[str, tuple]]]]:
    """A snapshot of a thread's namespaces and checkpoints (``list`` of a dict is one C call:
    LangGraph's background writes to other keys cannot break it)."""
    spaces = saver.storage.get(thread_id)
    return [(ns, list(cps.items())) for ns, cps in list(spaces.items())] if spaces else []


def delta_metadata(metadata: Any) -> bool:
    """Whether a checkpoint's metadata says its channel values are ``DeltaChannel`` deltas
    (rebuilt by the graph from older checkpoints; the raw ``channel_values`` lack them)."""
    return bool(DELTA_METADATA_KEYS & (metadata or {}).keys())


def inmemory_uses_delta(saver: Any, thread_id: str) -> bool:
    """Whether a thread's checkpoints carry ``DeltaChannel`` state (its metadata keys)."""
    return any(delta_metadata(_meta(saver, entry))
               for _ns, entries in _spaces(saver, thread_id) for _cid, entry in entries)


def inmemory_drop(saver: Any, thread_id: str, doomed: Any) -> None:
    """Remove the checkpoints ``doomed(ns, checkpoint_id, entry)`` picks, their writes and the
    blobs they name that no remaining checkpoint names."""
    spaces = saver.storage.get(thread_id)
    gone: list[tuple[str, Any]] = []
    for ns, entries in _spaces(saver, thread_id):
        for checkpoint_id, entry in entries:
            if doomed(ns, checkpoint_id, entry):
                spaces[ns].pop(checkpoint_id, None)
                saver.writes.pop((thread_id, ns, checkpoint_id), None)
                gone.append((ns, entry[0]))
    if not gone:
        return
    live = {(ns, ch, v) for ns, entries in _spaces(saver, thread_id) for _c, entry in entries
            for ch, v in _versions_of(saver, entry[0]).items()}
    for ns, typed in gone:
        for ch, v in _versions_of(saver, typed).items():
            if (ns, ch, v) not in live:
                saver.blobs.pop((thread_id, ns, ch, v), None)


def inmemory_retain(saver: Any, thread_id: str, keep: int) -> None:
    """Whole turns: keep the newest ``keep`` root checkpoints and everything back to the start
    of the oldest one's turn (a root checkpoint not written by the loop: an input, an update, a
    fork); older root checkpoints and the subgraph calls of their turns go, with their writes
    and blobs. A thread with ``DeltaChannel`` state is kept whole."""
    root = sorted(dict(_spaces(saver, thread_id)).get("", []))
    if len(root) <= keep or inmemory_uses_delta(saver, thread_id):
        return
    cut = next((cid for cid, entry in reversed(root[:len(root) - keep + 1])
                if _meta(saver, entry).get("source") != "loop"), None)
    if cut is not None:
        inmemory_drop(saver, thread_id,
                      lambda ns, cid, _e: (ns == "" or ":" in ns) and cid < cut)


def inmemory_prune_latest(saver: Any, thread_id: str) -> None:
    """LangGraph's ``prune(strategy="keep_latest")``: the newest checkpoint of each namespace."""
    latest = {ns: max(cid for cid, _e in entries) for ns, entries in _spaces(saver, thread_id)
              if entries}
    inmemory_drop(saver, thread_id, lambda ns, cid, _e: cid != latest[ns])


def inmemory_delete_runs(saver: Any, thread_id: str, run_ids: set[str]) -> None:
    inmemory_drop(saver, thread_id,
                  lambda _ns, _cid, entry: _meta(saver, entry).get("run_id") in run_ids)


def inmemory_run_threads(saver: Any, run_ids: set[str]) -> list[str]:
    """Threads with a checkpoint of one of ``run_ids``."""
    return [thread_id for thread_id in list(saver.storage)
            if any(_meta(saver, entry).get("run_id") in run_ids
                   for _ns, entries in _spaces(saver, thread_id) for _c, entry in entries)]


def inmemory_copy(saver: Any, source: str, target: str) -> None:
    """LangGraph's ``copy_thread``: every checkpoint, write and blob of ``source`` under
    ``target`` (values are immutable serialized tuples: shared, not copied)."""
    for ns, entries in _spaces(saver, source):
        saver.storage[target][ns].update(entries)
        for checkpoint_id, _entry in entries:
            if (writes := saver.writes.get((source, ns, checkpoint_id))) is not None:
                saver.writes[(target, ns, checkpoint_id)] = dict(writes)
    for key in [k for k in list(saver.blobs) if k[0] == source]:
        saver.blobs[(target, *key[1:])] = saver.blobs[key]


# -- savers' own schema: what their setup() runs (for `memshift schema`) ----------------------
def postgres_saver_migrations() -> list[str]:
    """``PostgresSaver.MIGRATIONS``: LangGraph's DDL, one entry per version recorded in its
    ``checkpoint_migrations`` table (its ``setup()`` runs the ones past the recorded ``v``)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    return list(PostgresSaver.MIGRATIONS)


def sqlite_saver_setup_sql() -> list[str]:
    """The statements ``SqliteSaver.setup()`` runs, recorded by running it against a
    connection that only writes them down (its script is a literal inside the method)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class _Recorder:
        def __init__(self) -> None:
            self.statements: list[str] = []

        def executescript(self, script: str) -> None:
            self.statements += [s.strip() for s in script.split(";") if s.strip()]

        def execute(self, sql: str, *args: Any) -> None:
            self.statements.append(sql.strip())

        def commit(self) -> None:
            pass

    recorder = _Recorder()
    saver = SqliteSaver.__new__(SqliteSaver)
    saver.conn, saver.is_setup = recorder, False  # type: ignore[assignment]
    SqliteSaver.setup(saver)
    return recorder.statements
