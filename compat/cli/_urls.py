"""Store URL mistakes, answered in one line with the right form and the extra to install.

Checked before anything is opened: a source that does not exist is an error (never
created), a missing driver names ``pip install 'memshift[...]'``, and no message shows a
password.
"""

from __future__ import annotations

import importlib
import re
from urllib.parse import urlsplit

from adapters.errors import ConfigError
from adapters.stores.url import kind_of, sqlite_path, url_problem
from compat.cli._common import show_url

__all__ = ["SQLITE_FORM", "POSTGRES_FORM", "check_url", "kind_of", "sqlite_path"]

SQLITE_FORM = "sqlite:///path/to/file.db"
POSTGRES_FORM = "postgresql://user@host/db"
_FORMS = f"{SQLITE_FORM} or {POSTGRES_FORM}"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # two characters at least: not C:\\
_CONNINFO = re.compile(r"(?:^|\s)[A-Za-z_]+\s*=")  # libpq's host=... dbname=... form
_EXTRAS = {
    "sqlite": (("sqlalchemy", "langgraph.checkpoint.sqlite", "aiosqlite"), "sqlite"),
    "postgresql": (("psycopg", "psycopg_pool", "sqlalchemy", "langgraph.checkpoint.postgres"),
                   "postgres"),
}


def _sqlite_for(path: str) -> str:
    return "sqlite:///" + path  # an absolute path gives the four slashes itself


def check_url(url: str, option: str, *, must_exist: bool) -> str:
    """``url`` if it is a store URL memshift can open, else ``ConfigError`` (one line)."""
    shown = show_url(url)
    if url in ("memory", "memory://"):
        return url
    match = _SCHEME.match(url)
    scheme = match.group(1).lower() if match else ""
    if not scheme and _CONNINFO.search(url):  # never echoed: its password may hold spaces
        raise ConfigError(f"{option} looks like a libpq key=value connection string (not "
                          f"shown: it may hold a password); memshift takes a URL: "
                          f"{POSTGRES_FORM}, the password percent-encoded "
                          "(urllib.parse.quote(password, safe=''))")
    if not scheme:
        raise ConfigError(f"{option} {shown!r} is a file path, not a store URL: write "
                          f"{_sqlite_for(url)} (the form is {SQLITE_FORM}; four slashes for an "
                          "absolute path)")
    if scheme not in ("sqlite", "postgresql", "postgres", "postgresql+psycopg"):
        hint = " (MySQL is not supported)" if scheme.startswith(("mysql", "mariadb")) else ""
        raise ConfigError(f"{option} {shown!r}: unsupported store scheme {scheme!r}{hint}; a "
                          f"store URL is {_FORMS}")
    problem = url_problem(url)
    if problem is not None:  # a driver would quote (a piece of) the password back
        raise ConfigError(f"{option} {shown!r}: {problem}")
    _check_options(url, option, shown)
    if scheme == "sqlite":
        return _check_sqlite(url, option, shown, must_exist)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"{option} {shown!r} is not a valid URL ({exc}); the form is "
                          f"{POSTGRES_FORM}") from None
    if "://" not in url or not parts.hostname and not parts.path.strip("/"):
        raise ConfigError(f"{option} {shown!r} names no server and no database: write "
                          f"{POSTGRES_FORM}")
    if not parts.path.strip("/"):
        raise ConfigError(f"{option} {shown!r} names no database: write {POSTGRES_FORM}")
    try:
        parts.port  # noqa: B018 - parses the port
    except ValueError:
        raise ConfigError(f"{option} {shown!r}: the port is not a number in 0..65535; the "
                          "form is postgresql://user@host:5432/db") from None
    _need_extra("postgresql", option)
    return url


def _check_options(url: str, option: str, shown: str) -> None:
    """Only memshift's own store option is allowed (as ``open_store`` will insist)."""
    from adapters.stores.url import parse_options

    try:
        parse_options(url.partition("?")[2], shown, postgres=url.startswith("postgres"),
                      sqlite=url.startswith("sqlite"))
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _check_sqlite(url: str, option: str, shown: str, must_exist: bool) -> str:
    rest = url.partition("?")[0][len("sqlite:"):]
    if not rest.startswith("//"):
        name = rest.lstrip("/")
        raise ConfigError(f"{option} {shown!r} is missing slashes: write {_sqlite_for(name)} "
                          f"(relative) or sqlite:////{name} (absolute); the form is "
                          f"{SQLITE_FORM}")
    if not rest.startswith("///"):
        name = rest[2:]
        raise ConfigError(f"{option} {shown!r} has two slashes, so {name.split('/')[0]!r} reads "
                          f"as a host: write {_sqlite_for(name)} (the form is {SQLITE_FORM})")
    path = sqlite_path(url)
    if str(path) in ("", ".", "/"):
        raise ConfigError(f"{option} {shown!r} names no file: write {SQLITE_FORM}")
    _need_extra("sqlite", option)
    if path.is_dir():
        raise ConfigError(f"{option} {shown!r} is a directory, not a SQLite file")
    if must_exist and not path.exists():
        raise ConfigError(f"{option} {shown!r}: no such SQLite file {str(path)!r} "
                          f"(resolved to {str(path.resolve())!r}); a source is never created")
    return url


def _need_extra(kind: str, option: str) -> None:
    modules, extra = _EXTRAS[kind]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            top = module.split(".")[0]
            raise ConfigError(f"{option}: {kind} stores need {top!r}, which is not installed: "
                              f"pip install 'memshift[{extra}]'") from None
