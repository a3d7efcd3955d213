"""Stores by URL: ``memory`` (default), ``sqlite:///path.db``, ``postgresql://...``."""

from __future__ import annotations

from adapters.errors import ConfigError
from adapters.stores.base import ClassicRecord, Store
from adapters.stores.memory import MemoryStore

__all__ = ["ClassicRecord", "MemoryStore", "Store", "open_store", "redact_url", "sqlalchemy_url"]


_SECRET_KEYS = ("password", "passwd", "pwd", "pass", "secret", "token", "key", "sslpassword")


def redact_url(url: str) -> str:
    """The URL with any password replaced (userinfo and secret-looking query values),
    safe for logs and errors."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "<unparseable store url>"
    if any(k.lower() in _SECRET_KEYS for k, _ in query):
        masked = [(k, "***" if k.lower() in _SECRET_KEYS else v) for k, v in query]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    if parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[-1]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    return urlunsplit(parts)


def _options(query: str, redacted: str) -> dict[str, int]:
    from urllib.parse import parse_qsl

    options: dict[str, int] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key != "keep_checkpoints":
            raise ConfigError(f"unknown store option {key!r} in {redacted!r}")
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"keep_checkpoints must be a positive integer in {redacted!r}")
        options[key] = int(value)
    return options


def sqlalchemy_url(url: str) -> str:
    """A store URL as SQLAlchemy wants it: PostgreSQL through psycopg 3."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def open_store(url: str | Store | None) -> Store:
    """Open the store a URL names. Errors never show a password.

    ``memory`` | ``sqlite:///path.db`` | ``postgresql://user:pw@host/db``; an optional
    ``?keep_checkpoints=N`` sets checkpoint retention (memory and SQLite).
    """
    if isinstance(url, Store):
        return url
    if url is None:
        url = "memory"
    if not isinstance(url, str):
        raise ConfigError(f"store must be a URL string or a Store, got {type(url).__name__}")
    redacted = redact_url(url)
    base, _, query = url.partition("?")
    if base in ("memory", "memory://"):
        return MemoryStore(**_options(query, redacted))
    if base.startswith("sqlite://"):
        from adapters.stores.sqlite import SqliteStore

        return SqliteStore(base, **_options(query, redacted))
    if base.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        from adapters.stores.postgres import PostgresStore

        if query:
            raise ConfigError(f"postgresql stores take no options, got {redact_url(url)!r}")
        return PostgresStore(base.replace("postgresql+psycopg://", "postgresql://", 1), redacted)
    raise ConfigError(
        f"unsupported store URL {redact_url(url)!r}: use 'memory', 'sqlite:///path.db' "
        "or 'postgresql://user@host/db'"
    )
