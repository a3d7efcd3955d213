"""Shared fixtures: the backend x store matrix and a real PostgreSQL server.

PostgreSQL: ``MEMSHIFT_TEST_PG_DSN`` names a server (``.ci/run`` starts one with
``.ci/pg.sh`` and exports it); otherwise, where the server binaries are installed, the
session starts a throwaway cluster itself, on a free port and in a private temporary folder,
so two runs on one machine never share or delete each other's server.
``MEMSHIFT_REQUIRE_PG=1`` (set by CI) turns a missing server into a failure instead of a skip.
Every test that reaches PostgreSQL carries the ``postgres`` marker (added at collection), so
``pytest -m "not postgres"`` is the offline subset.

Field suites: the slow suites listed in ``FIELD`` below (LangChain's own tests, checkpoint
conformance on every store, the local model, the browser, multi-process and kill/SIGTERM fault
runs, single tests that take many seconds) and anything marked ``slow`` carry the ``field``
marker and are left out of a plain ``pytest`` run (reported as deselected, never skipped).
``pytest -m field`` runs exactly them; ``pytest --field`` (or ``MEMSHIFT_FIELD=1``) runs
everything; naming a test file or node id on the command line runs its field tests too, and any
``-m`` expression that mentions ``field`` decides by itself. ``.ci/run`` runs both halves.
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

# The field suites: what CI runs after the README's command (`pytest -m field`), because each
# needs something installed by .ci/run, starts processes and waits on them, or takes many
# seconds on its own. One entry per module (whole file) or per test function (every
# parametrization); seconds are one test's call time on a 2-CPU machine, measured with
# `--durations=0` (under load; a quiet machine takes about half). The contract suites (every
# backend x store, PostgreSQL included) stay in the default run: they are the core guarantees.
FIELD: dict[str, str] = {
    # -- what .ci/run installs --------------------------------------------------------------
    "tests/test_upstream_suite.py":
        "LangChain's own SummarizationMiddleware tests from the langchain sdist, in a child pytest",
    "tests/test_local_model.py":
        "a real small model: starts llama.cpp's server (SmolLM2-135M) and talks to it",
    "tests/test_report.py::test_report_renders_in_headless_chromium": "headless Chromium",
    "tests/test_report.py::test_report_is_readable_on_a_400_pixel_screen": "headless Chromium",
    # -- LangGraph checkpoint conformance on every store -------------------------------------
    "tests/test_checkpointer_ops.py::test_conformance_full_where_stock_is_full":
        "langgraph-checkpoint-conformance twice (memshift and the stock saver) per store: 4-6 s each",
    # -- subprocess fault runs: several processes at once, kill -9, SIGTERM, server restarts --
    "tests/test_sigterm.py::test_sigterm_stops_migrate_between_threads_and_the_next_run_resumes":
        "SIGTERM to a `memshift migrate` child, then a resumed run: 27 s",
    "tests/test_faults.py::test_terminated_connections_lose_no_returned_turn":
        "child writers while their PostgreSQL connections are terminated: 19-27 s",
    "tests/test_faults.py::test_four_processes_open_a_fresh_database_at_once":
        "four child processes race to create a schema: 24 s",
    "tests/test_durability.py::test_four_processes_three_threads_each":
        "four child writers (tests/_workers.py): 5-11 s",
    "tests/test_durability.py::test_killed_mid_save_loses_no_completed_turn":
        "kill -9 of a child writer mid-save: 3-6 s",
    "tests/test_durability.py::test_postgres_restart_between_saves":
        "restarts the PostgreSQL server under a live memory",
    "tests/test_staged.py::test_four_processes_while_the_rollout_changes":
        "four child processes while the rollout moves: 16-69 s",
    "tests/test_staged.py::test_a_rolling_deploy_never_ping_pongs_a_thread":
        "child processes on old and new rollout shares: 15-21 s",
    "tests/test_staged.py::test_kill_9_in_the_middle_of_eager_moves_leaves_every_thread_intact":
        "kill -9 of `memshift rollout move`, then a rerun: 14 s",
    "tests/test_seams.py::test_two_processes_with_different_flags_move_each_thread_at_most_once":
        "two child processes with opposite flags: 16-21 s",
    "tests/test_seams.py::test_kill_9_during_moves_on_first_touch_leaves_every_thread_whole":
        "kill -9 of a child moving threads: 12-18 s",
    "tests/test_cli_shard.py::test_two_parallel_shards_equal_one_unsharded_run":
        "two `memshift migrate --shard` children in parallel: 27 s",
    "tests/test_cli_shard.py::test_the_shard_example_splits_a_store_four_ways":
        "the shard example: four migrate children: 26 s",
    "tests/test_background_folds.py::test_a_process_killed_with_a_fold_pending_loses_nothing":
        "kill -9 of a child with a background fold pending: 5 s",
    "tests/test_forget_interrupted.py::test_a_killed_forget_is_finished_by_the_rerun_postgres":
        "a `forget` child killed at a chosen point, then a re-run, on PostgreSQL: 4 s each",
    "tests/test_forget_interrupted.py::test_forget_beside_a_concurrent_writer_completes":
        "five erasures beside a child process writing the same SQLite file: 15 s",
    "tests/test_fleet_evidence.py::"
    "test_advance_halts_on_mismatches_two_processes_recorded_with_no_shared_file":
        "two shadow app-server children on one store, then rollout advance twice: 19-30 s each",
    # -- single tests that take many seconds --------------------------------------------------
    "tests/test_faults.py::test_a_hung_summarizer_delays_no_other_thread":
        "waits out a hung summarizer per backend x store: 8-11 s each",
    "tests/test_upstream.py::test_importing_memshift_and_a_finished_migration_do_not_import_langchain_agents":
        "fresh interpreters importing memshift and running a migration: 10 s",
    "tests/test_examples.py::test_migrate_seed_graph": "runs an example script end to end: 9 s",
    "tests/test_examples.py::test_staged_cutover_of_the_bundled_conversation":
        "the 213-turn bundled conversation through a staged cutover: 8 s",
    "tests/test_strategies.py::test_replay_baselines_show_trim_losing_early_facts":
        "replays the bundled conversations under every baseline strategy: 8 s",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--field", action="store_true", default=False,
                     help="also run the field suites (tests marked `field`; MEMSHIFT_FIELD=1 "
                          "does the same); `-m field` runs only them")


def _is_field(item: pytest.Item) -> bool:
    if item.get_closest_marker("slow") is not None:
        return True
    path, _, rest = item.nodeid.partition("::")
    function = rest.split("[", 1)[0]
    return path in FIELD or f"{path}::{function}" in FIELD or item.nodeid in FIELD


def _named(config: pytest.Config) -> set[str]:
    """Test files the command line names (a file or a node id, not a folder): their field tests
    run, so `pytest tests/test_sigterm.py` runs all of it."""
    named = set()
    for arg in config.args:
        path = Path(arg.split("::", 1)[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        if path.suffix == ".py":
            try:
                named.add(path.resolve().relative_to(config.rootpath).as_posix())
            except ValueError:
                pass
    return named


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that reaches PostgreSQL: through a fixture, a ``postgres`` param, or
    ``fresh_store("postgres")`` in its body. Mark the field suites (``FIELD``, and ``slow``)
    and leave them out of a run that neither asks for them nor names their files."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (names & _PG_FIXTURES or any(_is_pg(value) for value in params.values())
                or _asks_pg(getattr(item, "function", None))):
            item.add_marker(pytest.mark.postgres)
        if _is_field(item):
            item.add_marker(pytest.mark.field)
    wanted = (config.getoption("field") or os.environ.get("MEMSHIFT_FIELD") == "1"
              or "field" in (config.getoption("markexpr") or ""))
    if wanted:
        return
    named = _named(config)
    keep, field = [], []
    for item in items:
        if item.get_closest_marker("field") and item.nodeid.split("::", 1)[0] not in named:
            field.append(item)
        else:
            keep.append(item)
    if field:
        config.hook.pytest_deselected(items=field)
        items[:] = keep
        config.stash[_FIELD_LEFT_OUT] = len(field)


_FIELD_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    left_out = config.stash.get(_FIELD_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} field tests deselected (slow suites CI runs): `pytest -m field` runs "
            f"them, `pytest --field` runs everything")


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
