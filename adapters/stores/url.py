"""Store URLs: parsing, redaction, and the hash that maps a thread id to a lock.

Redaction does not trust :func:`urllib.parse.urlsplit`: a password with an unencoded
``@ : / ? #`` or ``%`` splits there in the wrong place and half of it ends up in the
"host" or the fragment. The userinfo is everything up to the *last* ``@`` instead, so
redaction errs on the side of masking too much. :func:`scrub` removes every form of the
secret (raw, percent-decoded, percent-encoded) from driver text before it reaches an error.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from pathlib import Path
from collections.abc import Mapping
from urllib.parse import (
    SplitResult, parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit,
)

from adapters.errors import ConfigError

__all__ = [
    "lock_key", "parse_options", "driver_params", "split_query", "LIBPQ_PARAMS", "redact_url", "scrub", "scrub_cause", "secret_forms",
    "split_url", "sqlalchemy_url", "stripe_of",
]

_SECRET_KEYS = ("password", "passwd", "pwd", "pass", "secret", "token", "key", "sslpassword")
_CONNINFO_KEYS = ("password", "passwd", "pwd", "sslpassword")
_MASK = "***"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$", re.S)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")
# libpq ``key=value`` conninfo (and the same shape in driver messages): quoted or bare values
_KEYVALUE = re.compile(
    r"(?i)\b(" + "|".join(_CONNINFO_KEYS) + r")(\s*=\s*)"
    r"('(?:\\.|[^'\\])*'?|\"(?:\\.|[^\"\\])*\"?|\S+)")
_WITHHELD = ("(driver message withheld: the store URL's password holds an unencoded "
            "'@', ':', '/', '?' or '#'; percent-encode it, e.g. urllib.parse.quote(pw, safe=''))")


def _split(url: str) -> tuple[str, str | None, str | None, str] | None:
    """``(scheme, user, password, rest)``, the userinfo ending at the last ``@``;
    ``None`` when ``url`` has no scheme (a libpq ``key=value`` DSN, say)."""
    match = _SCHEME.match(url)
    if match is None:
        return None
    scheme, rest = match.groups()
    if "@" not in rest:
        return scheme, None, None, rest
    userinfo, host = rest.rsplit("@", 1)
    user, colon, password = userinfo.partition(":")
    return scheme, user, (password if colon else None), host


def _query_secrets(tail: str) -> list[str]:
    """Raw values of secret-looking query parameters in ``host/db?query``."""
    _, sep, query = tail.partition("?")
    if not sep:
        return []
    values: list[str] = []
    secret = False
    for piece in re.split(r"[&;]", query):
        key, eq, value = piece.partition("=")
        if eq:
            secret = unquote_plus(key).strip().lower() in _SECRET_KEYS
            if secret:
                values.append(value)
        elif secret:  # an unencoded '&' inside the secret value: the rest of it
            values.append(piece)
    return values


def _mask_query(tail: str) -> str:
    base, sep, query = tail.partition("?")
    if not sep or not _query_secrets(tail):
        return tail
    out: list[str] = []
    secret = False
    for piece in re.split(r"([&;])", query):
        key, eq, _ = piece.partition("=")
        if piece in ("&", ";"):
            out.append(piece)
        elif eq:
            secret = unquote_plus(key).strip().lower() in _SECRET_KEYS
            out.append(f"{key}={_MASK}" if secret else piece)
        else:
            out.append(_MASK if secret and piece else piece)
    return base + "?" + "".join(out)


def _unquote_conninfo(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def _mask_pairs(text: str) -> str:
    return _KEYVALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)


def redact_url(url: str) -> str:
    """The URL (or libpq ``key=value`` DSN) with every password masked: userinfo up to the
    last ``@``, secret-looking query values, ``password=`` pairs. Safe for logs and errors."""
    parts = _split(url)
    if parts is None:
        return _mask_pairs(url)
    scheme, user, password, tail = parts
    tail = _mask_pairs(_mask_query(tail))
    if user is None:
        return scheme + tail
    return f"{scheme}{user}{'' if password is None else ':' + _MASK}@{tail}"


def show_url(url: str) -> str:
    """A store URL as it may be shown: passwords masked, the slashes of a SQLite URL kept as
    they were typed."""
    shown = redact_url(url)
    if url.startswith("sqlite:///") and not shown.startswith("sqlite:///"):
        shown = "sqlite://" + shown.removeprefix("sqlite:")
    return shown


def kind_of(url: str) -> str:
    """``memory`` | ``sqlite`` | ``postgresql`` (of a URL the command line has checked)."""
    if url in ("memory", "memory://"):
        return "memory"
    return "sqlite" if url.startswith("sqlite:") else "postgresql"


def sqlite_path(url: str) -> Path:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db`` (as the store)."""
    base = url.partition("?")[0]
    return Path(base.removeprefix("sqlite://")[1:])


def _naive_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _ambiguous(url: str | None) -> bool:
    """Would a standard URL parser (and so the driver) split the password elsewhere?"""
    parts = _split(url) if url else None
    if url is None or parts is None or parts[2] is None:
        return False
    return _naive_password(url) != parts[2]


def _raw_secrets(url: str) -> list[str]:
    parts = _split(url)
    if parts is None:
        pairs = [m.group(3) for m in _KEYVALUE.finditer(url)]
        return pairs + [_unquote_conninfo(v) for v in pairs]
    _, _, password, tail = parts
    pairs = [m.group(3) for m in _KEYVALUE.finditer(tail)]
    return [s for s in (password, _naive_password(url), *_query_secrets(tail), *pairs) if s]


def secret_forms(url: str | None) -> list[str]:
    """Every spelling of the URL's secrets a driver might echo, longest first: raw,
    percent-decoded (also ``+`` as space, and again: the password may hold ``%xx`` text
    itself), percent-encoded (upper and lower hex), backslash-escaped."""
    if not url:
        return []
    forms: set[str] = set()
    for raw in _raw_secrets(url):
        plain, frontier = {raw}, {raw}
        for _ in range(3):
            frontier = {f(p) for p in frontier for f in (unquote, unquote_plus)} - plain
            plain |= frontier
        encoded = {f(p, safe=s) for p in plain for f in (quote, quote_plus) for s in ("", "/")}
        encoded |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e) for e in encoded}
        every = plain | encoded
        forms |= every | {repr(f)[1:-1] for f in every}
    return sorted((f for f in forms if f.strip()), key=len, reverse=True)


def scrub(text: str, url: str | None = None) -> str:
    """``text`` (a driver message) without the password of ``url`` in any form, and with
    any URL or ``password=`` pair it quotes redacted. When the URL's password holds
    unencoded delimiters the driver saw pieces of it as host, port or path: the message is
    withheld then, since no substring test can tell which of its words are the secret."""
    if _ambiguous(url):
        return _WITHHELD
    for form in secret_forms(url):
        text = text.replace(form, _MASK)
    return _mask_pairs(_URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text))


def _chain(exc: BaseException) -> list[BaseException]:
    """The exceptions ``traceback.format_exception`` shows for ``exc``."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        nxt = current.__cause__
        if nxt is None and not current.__suppress_context__:
            nxt = current.__context__
        current = nxt
    return seen


def scrub_cause(exc: BaseException, url: str | None) -> BaseException | None:
    """``exc`` as the cause to chain (``raise ... from scrub_cause(exc, url)``), or ``None``
    when a message in its chain would show the password: a cause is for debugging, not a leak."""
    if _ambiguous(url):
        return None
    for link in _chain(exc):
        shown = "".join(traceback.format_exception_only(type(link), link))
        if scrub(shown, url) != shown:
            return None
    return exc


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
