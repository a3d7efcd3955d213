"""Store URLs: parsing, redaction, and the hash that maps a thread id to a lock."""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from adapters.errors import ConfigError

__all__ = ["lock_key", "parse_options", "redact_url", "sqlalchemy_url", "stripe_of"]

_SECRET_KEYS = ("password", "passwd", "pwd", "pass", "secret", "token", "key", "sslpassword")


def redact_url(url: str) -> str:
    """The URL with any password replaced (userinfo and secret-looking query values),
    safe for logs and errors."""
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


def parse_options(query: str, redacted: str) -> dict[str, int]:
    """``?keep_checkpoints=N``: the only store option."""
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


def lock_key(thread_id: str) -> int:
    """A signed 64-bit key for a thread id (PostgreSQL advisory locks take bigint)."""
    return int.from_bytes(hashlib.blake2b(thread_id.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "big", signed=True)


def stripe_of(thread_id: str, stripes: int) -> int:
    """Which in-process lock stripe a thread id maps to."""
    return lock_key(thread_id) % stripes
