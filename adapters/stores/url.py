"""Store URLs: parsing, the options memshift and libpq read, and the hash that maps a thread id
to a lock. Redaction and scrubbing live in :mod:`adapters.secrets` (re-exported here)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from collections.abc import Mapping
from urllib.parse import SplitResult, parse_qsl, quote, urlencode, urlsplit

from adapters.errors import ConfigError
from adapters.secrets import (
    redact_url, scrub, scrub_cause, secret_forms, show_url, url_problem,
)

__all__ = [
    "lock_key", "parse_options", "driver_params", "split_query", "LIBPQ_PARAMS", "redact_url",
    "scrub", "scrub_cause", "secret_forms", "show_url", "split_url", "sqlalchemy_url", "stripe_of",
    "url_problem", "kind_of", "sqlite_path",
]

def kind_of(url: str) -> str:
    """``memory`` | ``sqlite`` | ``postgresql`` (of a URL the command line has checked)."""
    if url in ("memory", "memory://"):
        return "memory"
    return "sqlite" if url.startswith("sqlite:") else "postgresql"


def sqlite_path(url: str) -> Path:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db`` (as the store)."""
    base = url.partition("?")[0]
    return Path(base.removeprefix("sqlite://")[1:])


DEFAULT_CONNECT_TIMEOUT = 10  # seconds, unless the URL's connect_timeout says otherwise


def libpq_conninfo(url: str, params: Mapping[str, str] | None = None) -> str:
    """A PostgreSQL store URL as libpq reads it: ``postgres://`` and ``postgresql+psycopg://``
    spelled ``postgresql://``, memshift's own options dropped, libpq's ``params`` as its query
    (percent-encoded)."""
    base = url.partition("?")[0]
    for scheme in ("postgresql+psycopg://", "postgres://"):
        if base.startswith(scheme):
            base = "postgresql://" + base[len(scheme):]
    return f"{base}?{urlencode(params, quote_via=quote)}" if params else base


def split_url(url: str) -> SplitResult:
    """:func:`urlsplit`, but a URL it cannot parse (a password with ``[`` or ``]``, say) is a
    ``ConfigError`` that shows the redacted URL, not a ``ValueError`` quoting a piece of it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigError(f"cannot parse store URL {redact_url(url)!r}: percent-encode special "
                          "characters in the password (urllib.parse.quote(password, safe=''))"
                          ) from None
    return parts


# libpq connection parameters a PostgreSQL store URL may carry (passed to the driver as libpq
# reads them, sync and async); the values libpq would refuse late are checked here.
LIBPQ_PARAMS = frozenset({
    "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir", "sslsni",
    "sslnegotiation", "sslcompression", "ssl_min_protocol_version", "ssl_max_protocol_version",
    "requirepeer", "require_auth", "channel_binding", "gssencmode", "krbsrvname",
    "connect_timeout", "application_name", "fallback_application_name", "options",
    "target_session_attrs", "load_balance_hosts", "keepalives", "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout", "client_encoding",
})
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby",
                             "prefer-standby"),
    "keepalives": ("0", "1"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "load_balance_hosts": ("disable", "random"),
}
_NUMBERS = ("connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count",
            "tcp_user_timeout")


def parse_options(query: str, redacted: str, *, postgres: bool = False,
                  sqlite: bool = False) -> dict[str, int]:
    """memshift's own store option (``?keep_checkpoints=N``); with ``postgres``, libpq's
    connection parameters are allowed too (see :func:`driver_params`). A query holding ``@``
    is a password with an unencoded ``?``: say so, and never echo a key the redaction hid."""
    return split_query(query, redacted, postgres, sqlite)[0]


def driver_params(query: str, redacted: str) -> dict[str, str]:
    """The libpq parameters of a PostgreSQL store URL's query, checked."""
    return split_query(query, redacted, True)[1]


def split_query(query: str, redacted: str, postgres: bool,
                sqlite: bool = False) -> tuple[dict[str, int], dict[str, str]]:
    """A store URL's query read once: memshift's options and (PostgreSQL) libpq's parameters."""
    if "@" in query:
        raise ConfigError(f"store URL {redacted!r}: its password seems to hold an unencoded "
                          "'?'; percent-encode it (urllib.parse.quote(password, safe=''))")
    options: dict[str, int] = {}
    params: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        shown = repr(key) if key and key in redacted else "(not shown)"
        if key == "keep_checkpoints":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"keep_checkpoints must be a positive integer in {redacted!r}")
            options[key] = int(value)
        elif (sqlite or postgres) and key == "create_schema":
            if value not in ("0", "1"):
                raise ConfigError(f"create_schema must be 0 or 1 in {redacted!r}")
            options[key] = int(value)
        elif sqlite and key == "allow_symlinks":
            if value not in ("0", "1"):
                raise ConfigError(f"allow_symlinks must be 0 or 1 in {redacted!r}")
            options[key] = int(value)
        elif postgres and key in LIBPQ_PARAMS:
            if key in _CHOICES and value not in _CHOICES[key]:
                raise ConfigError(f"{key} must be one of {', '.join(_CHOICES[key])} in "
                                  f"{redacted!r}")
            if key in _NUMBERS and not value.isdigit():
                raise ConfigError(f"{key} must be a whole number of seconds (or a count) in "
                                  f"{redacted!r}")
            params[key] = value
        else:
            known = "keep_checkpoints" + (
                ", create_schema and libpq's connection parameters (sslmode, connect_timeout, "
                "application_name, ...)" if postgres else
                ", create_schema and allow_symlinks" if sqlite else "")
            raise ConfigError(f"unknown store option {shown} in {redacted!r}; the options are "
                              f"{known}")
    return options, params


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
