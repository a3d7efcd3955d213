"""Secrets in store URLs: redaction, and scrubbing every form of a password from driver text.

Redaction does not trust :func:`urllib.parse.urlsplit`: a password with an unencoded
``@ : / ? #`` or ``%`` splits there in the wrong place and half of it ends up in the
"host" or the fragment. The userinfo is everything up to the *last* ``@`` instead, so
redaction errs on the side of masking too much. :func:`scrub` removes every form of the
secret (raw, percent-decoded, partly decoded, percent-encoded, and each piece a parser could
split it into) from driver text before it reaches an error. A URL no parser reads as its
author meant (:func:`url_problem`) is refused before a driver sees it, and a driver message
about it is withheld: the driver quotes the token it choked on, which is the password.

This module imports nothing of memshift's, so :mod:`adapters.errors` can use it directly.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

__all__ = ["redact_url", "show_url", "scrub", "scrub_cause", "secret_forms", "url_problem"]

_SECRET_KEYS = ("password", "passwd", "pwd", "pass", "secret", "token", "key", "sslpassword")
_CONNINFO_KEYS = ("password", "passwd", "pwd", "sslpassword")
_MASK = "***"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$", re.S)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")
# libpq ``key=value`` conninfo (and the same shape in driver messages): quoted or bare values
_PAIR = r"(?i)\b(" + "|".join(_CONNINFO_KEYS) + r")(\s*=\s*)('(?:\\.|[^'\\])*'?|\"(?:\\.|[^\"\\])*\"?|\S+"
_KEYVALUE = re.compile(_PAIR + ")")
# in a whole conninfo string an unquoted space does not end a password libpq then refuses:
# mask up to the next ``key=``
_DSN_KEYVALUE = re.compile(_PAIR + r"(?:[ \t]+(?![A-Za-z_]+\s*=)[^\s=]+)*)")
_ENCODE = "percent-encode it, e.g. urllib.parse.quote(password, safe='')"
_DELIMITERS = "an unencoded '@', ':', '/', '?' or '#'"
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_RAW_DELIMITER = re.compile(r"[@/?#]")
# where a parser (ours, urllib's, libpq's) may cut a password into pieces it then quotes
_CUTS = re.compile(r"[@:/?#&=,;\s'\"\\]+")
_MIN_PIECE = 3  # shorter pieces are masked only as part of a longer form


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
    return _KEYVALUE.sub(lambda m: m.group(0) if m.group(3).startswith(_MASK) else
                         f"{m.group(1)}{m.group(2)}{_MASK}", text)


def redact_url(url: str) -> str:
    """The URL (or libpq ``key=value`` DSN) with every password masked: userinfo up to the
    last ``@``, secret-looking query values, ``password=`` pairs. Safe for logs and errors."""
    parts = _split(url)
    if parts is None:
        return _DSN_KEYVALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", url)
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
        pairs = [m.group(3) for m in _DSN_KEYVALUE.finditer(url)]
        return pairs + [_unquote_conninfo(v) for v in pairs]
    _, _, password, tail = parts
    pairs = [m.group(3) for m in _KEYVALUE.finditer(tail)]
    return [s for s in (password, _naive_password(url), *_query_secrets(tail), *pairs) if s]


def _partly_decoded(raw: str) -> set[str]:
    """``raw`` with its valid ``%XX`` escapes decoded up to (or from) each one: what a
    driver that stops at a bad escape may have decoded by then."""
    escapes = [m.start() for m in re.finditer(r"%[0-9A-Fa-f]{2}", raw)][:16]
    out = set()
    for cut in escapes:
        out |= {unquote(raw[:cut]) + raw[cut:], raw[:cut] + unquote(raw[cut:])}
    return out


def _pieces(form: str) -> set[str]:
    """The pieces a parser could cut ``form`` into at URL and conninfo delimiters."""
    return {p for p in _CUTS.split(form) if len(p) >= _MIN_PIECE}


def secret_forms(url: str | None) -> list[str]:
    """Every spelling of the URL's secrets a driver might echo, longest first: raw,
    percent-decoded (also ``+`` as space, and again: the password may hold ``%xx`` text
    itself), partly decoded, percent-encoded (upper and lower hex), backslash-escaped, and
    every piece of three characters or more a parser could cut these into at a delimiter."""
    if not url:
        return []
    forms: set[str] = set()
    for raw in _raw_secrets(url):
        plain, frontier = {raw}, {raw}
        for _ in range(3):
            frontier = {f(p) for p in frontier for f in (unquote, unquote_plus)} - plain
            plain |= frontier
        plain |= {part for p in plain for part in _partly_decoded(p)}
        encoded = {f(p, safe=s) for p in plain for f in (quote, quote_plus) for s in ("", "/")}
        encoded |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e) for e in encoded}
        every = plain | encoded
        every |= {repr(f)[1:-1] for f in every}
        forms |= every | {p for f in plain for p in _pieces(f)}
    return sorted((f for f in forms if f.strip()), key=len, reverse=True)


def url_problem(url: str | None) -> str | None:
    """Why no parser would read ``url``'s password as its author meant, or ``None``: the
    password holds an unencoded delimiter (``@ : / ? #``: a parser splits there) or a ``%``
    that starts no ``%XX`` escape (libpq refuses the URL and quotes the password). Said
    without the secret, as every error about such a URL must be."""
    parts = _split(url) if url else None
    if parts is None:
        return None
    _, user, password, _ = parts
    # urllib splits the userinfo at the last '@', libpq at the first, or at a '/' before it
    try:
        urlsplit(url)
    except ValueError:  # not a URL at all (an unclosed '['): said as such where it is parsed
        return None
    if password is not None and (_ambiguous(url) or _RAW_DELIMITER.search(password)):
        return f"its password holds {_DELIMITERS}; {_ENCODE}"
    for what, value in (("user name", user), ("password", password)):
        if value and _BAD_ESCAPE.search(value):
            return (f"its {what} holds a '%' that does not start a %XX escape; {_ENCODE} "
                    "(a literal '%' is %25)")
    return None


def scrub(text: str, url: str | None = None) -> str:
    """``text`` (a driver message) without the password of ``url`` in any form, and with
    any URL or ``password=`` pair it quotes redacted. When the URL's password holds
    unencoded delimiters the driver saw pieces of it as host, port or path, and when it holds a
    bad ``%`` escape the driver quotes it: the message is withheld then, and what is wrong
    with the URL said instead (:func:`url_problem`)."""
    problem = url_problem(url)
    if problem is not None:
        return f"(driver message withheld: the store URL {problem})"
    for form in secret_forms(url):
        text = text.replace(form, _MASK)
    return _mask_pairs(_URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text))


def _links(exc: BaseException) -> list[BaseException]:
    """Every exception reachable from ``exc``: causes and contexts, suppressed or not (code
    that holds an error can walk to any of them)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        link = todo.pop()
        if link is not None and all(link is not e for e in seen):
            seen.append(link)
            todo += [link.__cause__, link.__context__]
    return seen


def _shown(link: BaseException) -> str:
    try:
        return "".join(traceback.format_exception_only(type(link), link)) + repr(link.args)
    except Exception:  # a driver error whose __str__ fails: nothing it could show
        return ""


def scrub_cause(exc: BaseException, url: str | None) -> BaseException | None:
    """``exc`` as the cause to chain (``raise ... from scrub_cause(exc, url)``), or ``None``
    when a message in its chain would show the password: a cause is for debugging, not a leak.

    Either way every exception reachable from ``exc`` whose text shows the secret has its
    ``args`` scrubbed in place: a ``raise`` inside the ``except`` block that caught ``exc``
    still keeps it as ``__context__``, where ``repr`` or a debugger would find it."""
    if not url:
        return exc
    problem = url_problem(url)
    leaked = False
    for link in _links(exc):
        shown = _shown(link)
        if problem is None and scrub(shown, url) == shown:
            continue
        leaked = True
        link.args = tuple(scrub(a, url) if isinstance(a, str) else
                          "(withheld)" if isinstance(a, (bytes, Mapping, tuple, list)) else a
                          for a in link.args)
    return None if leaked else exc
