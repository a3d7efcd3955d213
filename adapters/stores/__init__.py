"""Stores by URL: ``memory`` (default), ``sqlite:///path.db``, ``postgresql://...``."""

from __future__ import annotations

from adapters.errors import ConfigError
from adapters.stores.base import ClassicRecord, Store
from adapters.stores.memory import MemoryStore

__all__ = ["ClassicRecord", "MemoryStore", "Store", "open_store", "redact_url"]


def redact_url(url: str) -> str:
    """The URL with any password replaced, safe for logs and errors."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable store url>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def open_store(url: str | Store | None) -> Store:
    """Open the store a URL names. Unknown schemes get an error that never shows a password."""
    if isinstance(url, Store):
        return url
    if url is None or url == "memory" or url == "memory://":
        return MemoryStore()
    if not isinstance(url, str):
        raise ConfigError(f"store must be a URL string or a Store, got {type(url).__name__}")
    raise ConfigError(
        f"unsupported store URL {redact_url(url)!r}: use 'memory', 'sqlite:///path.db' "
        "or 'postgresql://user@host/db'"
    )
