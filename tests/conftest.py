"""Shared fixtures: the backend x store matrix and a real PostgreSQL server.

PostgreSQL: ``MEMSHIFT_TEST_PG_DSN`` names a server (``.ci/run`` starts one with
``.ci/pg.sh`` and exports it); otherwise, where the server binaries are installed, the
session starts a throwaway cluster itself, on a free port and in a private temporary folder,
so two runs on one machine never share or delete each other's server.
``MEMSHIFT_REQUIRE_PG=1`` (set by CI) turns a missing server into a failure instead of a skip.
Every test that reaches PostgreSQL carries the ``postgres`` marker (added at collection), so
``pytest -m "not postgres"`` is the offline subset.
"""

from __future__ import annotations

import glob
import inspect
import os
import shutil
import socket
import subprocess
import tempfile
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
        home = tempfile.mkdtemp(prefix="memshift-pg-pytest-")
        os.chmod(home, 0o755)  # the server runs as `postgres` and must reach data/ (mode 700)
        env = {**os.environ, "MEMSHIFT_PGDATA": os.path.join(home, "data")}
        dsn = _start_private(env)
        started = True

        def restart() -> None:
            subprocess.run([str(PG_SH), "restart"], env=env, check=True)
    else:
        command = os.environ.get("MEMSHIFT_TEST_PG_RESTART")
        restart = (lambda: subprocess.run(command, shell=True, check=True)) if command else None  # type: ignore[assignment]
    yield PgServer(dsn, restart)
    if started:
        subprocess.run([str(PG_SH), "stop"], env=env, check=False)
        shutil.rmtree(home, ignore_errors=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_private(env: dict[str, str]) -> str:
    """Start the cluster on a port the kernel just handed out; retry if another process took
    it between the probe and the server's bind."""
    for _ in range(5):
        env["MEMSHIFT_PGPORT"] = str(_free_port())
        done = subprocess.run([str(PG_SH), "start"], env=env, capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.strip()
    raise RuntimeError(f"could not start a private PostgreSQL: {done.stderr[-2000:]}")


_PG_FIXTURES = {"pg_server", "pg_url"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that reaches PostgreSQL: through a fixture, a ``postgres`` param, or
    ``fresh_store("postgres")`` in its body."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (names & _PG_FIXTURES or any(_is_pg(value) for value in params.values())
                or _asks_pg(getattr(item, "function", None))):
            item.add_marker(pytest.mark.postgres)


def _is_pg(value: object) -> bool:
    if isinstance(value, tuple):
        return any(_is_pg(v) for v in value)
    return value == "postgres"


def _asks_pg(function: object) -> bool:
    try:
        return 'fresh_store("postgres")' in inspect.getsource(function)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False


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
