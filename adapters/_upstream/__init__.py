"""Every private LangChain / LangGraph detail memshift relies on, in one package.

Read it when LangChain or LangGraph releases: ``middleware`` (stock
``SummarizationMiddleware``'s helpers), ``savers`` (LangGraph savers inside memshift's
transaction, their DDL), ``postgres`` (``PostgresSaver``'s read and write as statements
memshift sends), ``inmemory`` (``InMemorySaver``'s storage), ``runs`` (a run's
checkpointer in its config), ``otel`` (OpenTelemetry's stand-ins). This module checks that the hooks are there:
``check_upstream()`` runs when a memory is built (``check_middleware_upstream()`` when it
first builds its middleware) and fails, naming the installed versions, when a hook has gone;
the spy tests (``tests/test_upstream.py``) prove the stock entry points still call the
overrides. Everything is importable from here (``from adapters._upstream import ...``).
"""

from __future__ import annotations

from importlib import metadata

from adapters._upstream.inmemory import (
    DELTA_METADATA_KEYS, delta_metadata, inmemory_copy, inmemory_delete_runs, inmemory_drop,
    inmemory_erase, inmemory_prune_latest, inmemory_retain, inmemory_run_threads, inmemory_undo,
    inmemory_uses_delta,
)
from adapters._upstream.middleware import (
    REMOVE_ALL_MESSAGES, build_summary_message, format_block, normalize_trigger,
    summary_call_config, validate_context_size,
)
from adapters._upstream.otel import otel_sdk_installed
from adapters._upstream.postgres import postgres_get_tuple_with, postgres_put_statements
from adapters._upstream.runs import run_checkpointer
from adapters._upstream.savers import (
    async_sqlite_saver_in_transaction, daemon_aiosqlite, mark_setup_done,
    postgres_saver_migrations, saver_cursor, sqlite_get_tuple_with, sqlite_saver_in_transaction,
    sqlite_saver_setup_sql,
)
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
    "sqlite_get_tuple_with",
    "postgres_get_tuple_with",
    "postgres_put_statements",
    "postgres_saver_migrations",
    "sqlite_saver_setup_sql",
    "otel_sdk_installed",
    "run_checkpointer",
    "inmemory_erase",
    "check_classic_upstream",
]

# Overridden methods the stock code must call (spy-tested).
MIDDLEWARE_HOOKS = ("_should_summarize", "_determine_cutoff_index", "_partition_messages",
                    "_build_new_messages", "_ensure_message_ids", "_normalize_trigger",
                    "_validate_context_size")
CLASSIC_HOOKS = ("prune", "predict_new_summary", "moving_summary_buffer")
# Saver internals used for retention and for joining memshift's transaction.
_SAVER_ATTRS = {
    "langgraph.checkpoint.sqlite:SqliteSaver": ("cursor", "is_setup", "conn", "lock"),
    "langgraph.checkpoint.memory:InMemorySaver": ("storage", "writes", "blobs", "serde"),
    "langgraph.checkpoint.postgres:PostgresSaver": (
        "_cursor", "_load_checkpoint_tuple", "_migrate_pending_sends", "SELECT_SQL",
        "SELECT_PENDING_SENDS_SQL"),
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
