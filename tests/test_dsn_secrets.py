"""Malformed store DSNs never show any part of their password (issue 40, item 7).

A driver that cannot parse a DSN quotes the token it choked on (libpq: ``invalid
percent-encoded token: "p%zz"``), and a DSN that splits in the wrong place hands pieces of the
password to the driver as a host, a port or a path. Whatever the driver says, no exception
text, ``repr``, chained cause, log line or command output may hold the password or any three
characters of it: as written, percent-decoded, or partially decoded.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from urllib.parse import quote, unquote, unquote_plus

import pytest

from adapters.errors import MemshiftError
from compat import SummaryMemory
from tests._cli import run_memshift

pytest.importorskip("psycopg")

# (id, DSN with {tmp} for a folder, the password as written). Every password is made of
# letters no message memshift writes contains, so a three-character test is meaningful.
DSNS = [
    ("bad-escape", "postgresql://u:Qz%zz@127.0.0.1:1/db", "Qz%zz"),
    ("bad-escape-inside", "postgresql://u:Kw9p%zzVx8@127.0.0.1:1/db", "Kw9p%zzVx8"),
    ("trailing-percent", "postgresql://u:Jx7Wq%@127.0.0.1:1/db", "Jx7Wq%"),
    ("half-escape", "postgresql://u:Hq5Zj%4@127.0.0.1:1/db", "Hq5Zj%4"),
    ("unicode", "postgresql://u:ŴæßÖkq@127.0.0.1:1/db", "ŴæßÖkq"),
    ("unicode-bad-escape", "postgresql://u:Ŵæß%zzÖk@127.0.0.1:1/db", "Ŵæß%zzÖk"),
    ("not-utf8", "postgresql://u:Zv%E9Yq%zz@127.0.0.1:1/db", "Zv%E9Yq%zz"),
    ("partly-decodable", "postgres://u:Cv%zz%41Bn@127.0.0.1:1/db?sslmode=disable",
     "Cv%zz%41Bn"),
    ("quoted-encoded", "postgresql+psycopg://u:%27Tb%zz%22Wm@127.0.0.1:1/db", "%27Tb%zz%22Wm"),
    ("at-sign", "postgresql://u:Mkq@Tpv@127.0.0.1:1/db", "Mkq@Tpv"),
    ("at-sign-bad-escape", "postgresql://u:Mk@Tp%zz@127.0.0.1:1/db", "Mk@Tp%zz"),
    ("colon", "postgresql://u:Rbj:Wnk@127.0.0.1:1/db", "Rbj:Wnk"),
    ("slash", "postgresql://u:Gyq/Fxw@127.0.0.1:1/db", "Gyq/Fxw"),
    ("question", "postgresql://u:Lcw?Dvq@127.0.0.1:1/db", "Lcw?Dvq"),
    ("hash", "postgresql://u:Nhq#Bjw@127.0.0.1:1/db", "Nhq#Bjw"),
    ("space", "postgresql://u:Vqj Xwk@127.0.0.1:1/db", "Vqj Xwk"),
    ("quotes", "postgresql://u:Yp'Zk\"Qfw@127.0.0.1:1/db", "Yp'Zk\"Qfw"),
    ("empty-host", "postgresql://u:EwqTrk@/db", "EwqTrk"),
    ("port-out-of-range", "postgresql://u:UoqIpx@127.0.0.1:99999/db", "UoqIpx"),
    ("port-not-a-number", "postgresql://u:AqjSwv@127.0.0.1:xy/db", "AqjSwv"),
    ("keyvalue", "host=127.0.0.1 port=1 dbname=db user=u password=Dk%zzFj Wxq", "Dk%zzFj Wxq"),
    ("keyvalue-quoted", "host=127.0.0.1 port=1 password='Gh %zz\\'Jkv' dbname=db",
     "Gh %zz\\'Jkv"),
    ("sqlite-query", "sqlite:///{tmp}/a.db?password=Ol%zzPmq", "Ol%zzPmq"),
    ("sqlite-userinfo", "sqlite://u:Wx%zzQey@somehost/b.db", "Wx%zzQey"),
]


def _fragments(password: str) -> set[str]:
    """Every three-character piece of the password as written, decoded or partly decoded,
    and the whole of its percent-encoded and backslash-escaped spellings."""
    forms = {password, unquote(password), unquote_plus(password),
             password.replace("\\'", "'")}
    pieces = {f[i:i + 3] for f in forms for i in range(len(f) - 2)}
    whole = {quote(f, safe="") for f in forms} | {repr(f)[1:-1] for f in forms}
    return {p for p in pieces | whole if p.strip()}


def _assert_clean(text: str, password: str, where: str) -> None:
    shown = sorted(f for f in _fragments(password) if f in text)
    assert not shown, f"{where} shows part of the password {shown}: {text!r}"


def _links(exc: BaseException) -> list[BaseException]:
    """Every exception reachable from ``exc``: causes *and* contexts, suppressed or not."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        link = todo.pop()
        if link is not None and all(link is not e for e in out):
            out.append(link)
            todo += [link.__cause__, link.__context__]
    return out


def _assert_error_clean(exc: BaseException, password: str) -> None:
    _assert_clean("".join(traceback.format_exception(exc)), password, "the traceback")
    for link in _links(exc):
        _assert_clean(f"{link}\n{link!r}\n{link.args!r}", password,
                      f"{type(link).__name__} in the chain")


def _dsn(template: str, tmp_path: Path) -> str:
    return template.replace("{tmp}", str(tmp_path))


@pytest.mark.parametrize("backend", ["classic", "middleware"])
@pytest.mark.parametrize("name, template, password", DSNS, ids=[d[0] for d in DSNS])
def test_summary_memory_never_shows_the_password(name: str, template: str, password: str,
                                                 backend: str, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    memory = None
    try:
        memory = SummaryMemory(backend=backend, store=_dsn(template, tmp_path))
    except MemshiftError as exc:
        _assert_error_clean(exc, password)
        assert str(exc).strip(), "the error says nothing"
    else:  # only a SQLite URL with odd parts may open; then what it shows must be clean
        assert template.startswith("sqlite"), f"{name}: opened a store from a malformed DSN"
        _assert_clean(f"{memory!r} {memory.store_url}", password, "the memory")
        memory.close()
    _assert_clean(caplog.text, password, "the log")
    _assert_clean("\n".join(str(r.__dict__) for r in caplog.records), password, "log records")


@pytest.mark.parametrize("command", [["doctor"], ["schema", "status"], ["schema", "upgrade"]])
@pytest.mark.parametrize("name, template, password", DSNS, ids=[d[0] for d in DSNS])
def test_cli_never_shows_the_password(name: str, template: str, password: str,
                                      command: list[str], tmp_path: Path) -> None:
    for args in (["--store", _dsn(template, tmp_path)], ["--json", "--store",
                                                          _dsn(template, tmp_path)]):
        done = run_memshift(*command, *args)
        assert done.returncode in (0, 1, 2), (done.returncode, done.stderr)
        _assert_clean(done.stdout + "\n" + done.stderr, password, f"memshift {command[0]}")


@pytest.mark.parametrize("name, template, password", DSNS, ids=[d[0] for d in DSNS])
def test_migrate_never_shows_the_password(name: str, template: str, password: str,
                                          tmp_path: Path) -> None:
    """``compat.migrate`` takes memories, not URLs: the URLs reach it through the command."""
    source = f"sqlite:///{tmp_path}/src.db"
    SummaryMemory(backend="classic", store=source).close()
    done = run_memshift("migrate", "--from", "classic", "--from-store", source, "--to",
                        "middleware", "--to-store", _dsn(template, tmp_path))
    assert done.returncode in (0, 1, 2), (done.returncode, done.stderr)
    _assert_clean(done.stdout + "\n" + done.stderr, password, "memshift migrate")
