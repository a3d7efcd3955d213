"""Stores by URL: ``memory`` (default), ``sqlite:///path.db``, ``postgresql://...``."""

from __future__ import annotations

from adapters.errors import ConfigError
from adapters.stores.base import Checkpoints, ClassicSnapshot, ClassicState, Store, Tx
from adapters.stores.memory import MemoryStore
from adapters.stores.url import redact_url, split_query, sqlalchemy_url

__all__ = [
    "Checkpoints", "ClassicSnapshot", "ClassicState", "MemoryStore", "Store", "Tx", "open_store",
    "redact_url", "sqlalchemy_url",
]


def open_store(url: str | Store | None, *, create_schema: bool = True) -> Store:
    """Open the store a URL names. Errors never show a password.

    ``memory`` | ``sqlite:///path.db`` | ``postgresql://user:pw@host/db``; an optional
    ``?keep_checkpoints=N`` sets checkpoint retention. ``create_schema=False`` (or
    ``?create_schema=0``) runs no DDL: a SQL store whose schema is missing or older than this
    memshift's is refused with a ``StoreError`` (``memshift schema upgrade`` creates it).
    """
    if isinstance(url, Store):
        return url
    if url is None:
        url = "memory"
    if not isinstance(url, str):
        raise ConfigError(f"store must be a URL string or a Store, got {type(url).__name__}")
    redacted = redact_url(url)
    base, _, query = url.partition("?")
    postgres = base.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))
    sqlite = base.startswith("sqlite://")
    options, params = split_query(query, redacted, postgres, sqlite)
    create = create_schema and bool(options.pop("create_schema", 1))
    if base in ("memory", "memory://"):
        return MemoryStore(**options)
    if sqlite:
        from adapters.stores.sqlite import SqliteStore

        return SqliteStore(base, create_schema=create, **options)
    if postgres:
        from adapters.stores.postgres import PostgresStore

        return PostgresStore(base.replace("postgresql+psycopg://", "postgresql://", 1), redacted,
                             params=params, create_schema=create, **options)
    raise ConfigError(
        f"unsupported store URL {redacted!r}: use 'memory', 'sqlite:///path.db' "
        "or 'postgresql://user@host/db'"
    )
