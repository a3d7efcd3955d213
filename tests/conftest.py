"""Shared fixtures: the backend x store matrix and a real PostgreSQL server.

PostgreSQL: ``MEMSHIFT_TEST_PG_DSN`` names a server (``.ci/run`` starts one with
``.ci/pg.sh`` and exports it); otherwise, where the server binaries are installed, the
session starts a throwaway cluster itself. ``MEMSHIFT_REQUIRE_PG=1`` (set by CI) turns
a missing server into a failure instead of a skip.
"""

from __future__ import annotations

import glob
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ["classic", "middleware"]
STORES = ["memory", "sqlite", "postgres"]
PG_SH = ROOT / ".ci" / "pg.sh"

os.environ.setdefault("MEMSHIFT_CACHE_DIR", str(ROOT / ".cache"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMSHIFT_BACKEND", "MEMSHIFT_STORE", "MEMSHIFT_SHADOW_SAMPLE", "MEMSHIFT_SHADOW_LOG"):
        monkeypatch.delenv(name, raising=False)


class PgServer:
    def __init__(self, dsn: str, restart: Callable[[], None] | None) -> None:
        self.dsn = dsn
        self.restart = restart

    def admin(self):  # a psycopg autocommit connection to the server's default database
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True)

    def database_url(self, name: str) -> str:
        return urlsplit(self.dsn)._replace(path=f"/{name}").geturl()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    dsn = os.environ.get("MEMSHIFT_TEST_PG_DSN")
    started = False
    if not dsn:
        can_start = os.geteuid() == 0 and glob.glob("/usr/lib/postgresql/*/bin/postgres")
        if not can_start:
            message = ("no PostgreSQL: set MEMSHIFT_TEST_PG_DSN or install the server "
                       "(apt-get install postgresql); .ci/run does both")
            if os.environ.get("MEMSHIFT_REQUIRE_PG") == "1":
                pytest.fail(message)
            pytest.skip(message)
        env = {**os.environ, "MEMSHIFT_PGDATA": "/tmp/memshift-pg-pytest", "MEMSHIFT_PGPORT": "54331"}
        dsn = subprocess.run([str(PG_SH), "start"], env=env, check=True, capture_output=True,
                             text=True).stdout.strip()
        started = True

        def restart() -> None:
            subprocess.run([str(PG_SH), "restart"], env=env, check=True)
    else:
        command = os.environ.get("MEMSHIFT_TEST_PG_RESTART")
        restart = (lambda: subprocess.run(command, shell=True, check=True)) if command else None  # type: ignore[assignment]
    yield PgServer(dsn, restart)
    if started:
        subprocess.run([str(PG_SH), "stop"], env=env, check=False)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database per test, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with pg_server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.database_url(name)
    with pg_server.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``fresh_store(kind)``: a new, empty store URL of that kind on every call."""
    databases: list[str] = []

    def make(kind: str) -> str:
        if kind == "memory":
            return "memory"
        if kind == "sqlite":
            return f"sqlite:///{tmp_path}/{uuid.uuid4().hex[:8]}.db"
        server: PgServer = request.getfixturevalue("pg_server")
        name = f"t_{uuid.uuid4().hex[:12]}"
        with server.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        databases.append(name)
        return server.database_url(name)

    yield make
    if databases:
        server = request.getfixturevalue("pg_server")
        with server.admin() as conn:
            for name in databases:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
