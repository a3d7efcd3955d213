"""PostgreSQL as operators run it: libpq's URL parameters (TLS, timeouts, application_name,
options, keepalives) reach every connection memshift makes, sync and async, against the real
server — TLS included, with a self-signed certificate made here and the server's ssl turned on
for the test."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from compat import ConfigError, StoreError, SummaryMemory

pytestmark = pytest.mark.postgres


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _apps(admin: Any, name: str) -> list[tuple[str, bool]]:
    rows = admin.execute("SELECT a.application_name, coalesce(s.ssl, false) FROM "
                         "pg_stat_activity a LEFT JOIN pg_stat_ssl s ON s.pid = a.pid "
                         "WHERE a.application_name = %s", (name,)).fetchall()
    return [(r[0], r[1]) for r in rows]


class Model(GenericFakeChatModel):
    def bind_tools(self, *args: Any, **kwargs: Any) -> Model:
        return self


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_libpq_parameters_reach_every_connection(pg_url: str, pg_server: Any,
                                                 backend: str) -> None:
    name = f"memshift-{uuid.uuid4().hex[:8]}"
    url = _with(pg_url, f"application_name={name}&connect_timeout=7&keepalives=1"
                        "&keepalives_idle=30&options=-c%20statement_timeout%3D45000"
                        "&target_session_attrs=read-write&keep_checkpoints=3")
    memory = SummaryMemory(store=url, backend=backend)
    memory.save("t", "hello", "there")
    with pg_server.admin() as admin:
        assert _apps(admin, name)  # the engine's pooled connection carries the name
    asyncio.run(memory.asave("t", "async", "too"))
    with pg_server.admin() as admin:
        assert len(_apps(admin, name)) >= 2  # and the async engine's
    if backend == "middleware":
        agent = create_agent(Model(messages=(AIMessage("ok") for _ in range(9))), [],
                             middleware=[memory.middleware], checkpointer=memory.checkpointer)
        agent.invoke({"messages": [HumanMessage("q")]}, {"configurable": {"thread_id": "a"}})
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("q2")]},
                                  {"configurable": {"thread_id": "a"}}))
    assert [m.text for m in memory.transcript("t")] == ["hello", "there", "async", "too"]
    memory.close()


@pytest.mark.parametrize("query, message", [
    ("sslmode=bogus", "sslmode must be one of disable, allow, prefer, require, verify-ca, "
                      "verify-full"),
    ("connect_timeout=soon", "connect_timeout must be a whole number"),
    ("target_session_attrs=primaryish", "target_session_attrs must be one of"),
    ("sslmod=require", "unknown store option 'sslmod'"),
])
def test_a_bad_parameter_is_a_precise_config_error(query: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SummaryMemory(store=f"postgresql://app:hunter2@127.0.0.1:1/db?{query}")


def test_libpq_parameters_are_for_postgresql_only(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown store option 'sslmode'"):
        SummaryMemory(store=f"sqlite:///{tmp_path}/x.db?sslmode=require")


# -- TLS against the real server ---------------------------------------------------------------
def _certificate(into: Path, name: str) -> tuple[Path, Path]:
    cert, key = into / f"{name}.crt", into / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def _server_file(admin: Any, path: str, text: str) -> None:
    """Written by the server itself, as its own user and mode 0600 (a key must be), through a
    superuser's COPY ... TO PROGRAM: works wherever the server runs."""
    import shlex

    from psycopg import sql

    lines = text.strip().splitlines()
    program = f"umask 077 && cat > {shlex.quote(path)}"
    admin.execute(sql.SQL("COPY (SELECT line FROM unnest({}::text[]) WITH ORDINALITY AS t(line, n) "
                          "ORDER BY n) TO PROGRAM {}").format(sql.Literal(lines),
                                                           sql.Literal(program)))


@pytest.fixture
def tls_server(pg_server: Any, tmp_path: Path) -> Any:
    if subprocess.run(["which", "openssl"], capture_output=True).returncode != 0:
        pytest.fail("openssl is needed to make the test certificate")  # CI images have it
    cert, key = _certificate(tmp_path, "server")
    with pg_server.admin() as admin:
        data = admin.execute("SHOW data_directory").fetchone()[0]
        _server_file(admin, f"{data}/memshift-test.crt", cert.read_text())
        _server_file(admin, f"{data}/memshift-test.key", key.read_text())
        admin.execute("ALTER SYSTEM SET ssl_cert_file = 'memshift-test.crt'")
        admin.execute("ALTER SYSTEM SET ssl_key_file = 'memshift-test.key'")
        admin.execute("ALTER SYSTEM SET ssl = on")
        admin.execute("SELECT pg_reload_conf()")
    _wait_for(pg_server, "on")
    try:
        yield cert
    finally:
        with pg_server.admin() as admin:
            for setting in ("ssl", "ssl_cert_file", "ssl_key_file"):
                admin.execute(f"ALTER SYSTEM RESET {setting}")
            admin.execute("SELECT pg_reload_conf()")
        _wait_for(pg_server, "off")


def _wait_for(pg_server: Any, ssl: str) -> None:
    """A reload is signalled, not waited for: poll new sessions until they see it."""
    import time

    for _ in range(100):
        with pg_server.admin() as admin:
            if admin.execute("SHOW ssl").fetchone()[0] == ssl:
                return
        time.sleep(0.05)
    with pg_server.admin() as admin:
        log = admin.execute("SELECT pg_current_logfile()").fetchone()
    pytest.fail(f"the server did not turn ssl {ssl} (log: {log})")


@pytest.mark.parametrize("mode", ["require", "verify-full"])
def test_tls_with_sslmode(pg_url: str, pg_server: Any, tls_server: Path, mode: str) -> None:
    name = f"memshift-tls-{uuid.uuid4().hex[:8]}"
    query = f"sslmode={mode}&application_name={name}"
    if mode == "verify-full":
        query += f"&sslrootcert={tls_server}"
    memory = SummaryMemory(store=_with(pg_url, query), backend="middleware")
    memory.save("t", "over", "tls")
    asyncio.run(memory.asave("t", "async", "tls"))
    with pg_server.admin() as admin:
        seen = _apps(admin, name)
    assert seen and all(ssl for _, ssl in seen)  # every connection is encrypted
    assert len(memory.transcript("t")) == 4
    memory.close()


def test_tls_verify_full_refuses_an_unknown_certificate(pg_url: str, tls_server: Path,
                                                        tmp_path: Path) -> None:
    other, _ = _certificate(tmp_path, "other")
    url = _with(pg_url, f"sslmode=verify-full&sslrootcert={other}")
    with pytest.raises(StoreError, match="cannot connect") as refused:
        SummaryMemory(store=url)
    assert "memshift-test-secret" not in str(refused.value)


# -- thread ids fit every store's indexes ------------------------------------------------------
def _cjk(n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n))  # incompressible


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_every_accepted_thread_id_fits_postgresql(pg_url: str, backend: str) -> None:

    memory = SummaryMemory(store=pg_url, backend=backend)
    agent = create_agent(Model(messages=(AIMessage("ok") for _ in range(99))), [],
                         middleware=[memory.middleware], checkpointer=memory.checkpointer) \
        if backend == "middleware" else None
    longest = _cjk(682, 1)  # 2,046 bytes: inside the budget
    for tid in (longest, "é" * 1024, "x" * 1024, "🙂" * 512):
        memory.save(tid, "q", "a")
        if agent is not None:
            agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": tid}})
        assert [m.text for m in memory.transcript(tid)][:2] == ["q", "a"]
    memory.close()


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_a_1000_character_cjk_id_works_on_postgresql_under_its_key(pg_url: str,
                                                                  backend: str) -> None:
    """Ids over the 2,048-byte budget (3,000 and 2,049 bytes here) are stored under a key
    derived from them: saves, loads, the agent's checkpoints and ``get_state`` work with the
    caller's id, two long ids never share a thread, and the key names the same thread."""
    from adapters.thread_keys import storage_id

    memory = SummaryMemory(store=pg_url, backend=backend)
    agent = create_agent(Model(messages=(AIMessage("ok") for _ in range(99))), [],
                         middleware=[memory.middleware], checkpointer=memory.checkpointer) \
        if backend == "middleware" else None
    long_ids = (_cjk(1000, 2), _cjk(683, 3), _cjk(1000, 4))
    for n, tid in enumerate(long_ids):
        memory.save(tid, f"q{n}", f"a{n}")
        if agent is not None:
            config = {"configurable": {"thread_id": tid}}
            agent.invoke({"messages": [HumanMessage(f"hi {n}")]}, config)
            state = agent.get_state(config)
            assert state.config["configurable"]["thread_id"] == tid
            assert f"hi {n}" in [m.text for m in state.values["messages"]]
    for n, tid in enumerate(long_ids):
        texts = [m.text for m in memory.transcript(tid)]
        assert texts[:2] == [f"q{n}", f"a{n}"] and not any(f"q{k}" in texts
                                                           for k in range(3) if k != n)
        assert memory.transcript(storage_id(tid)) == memory.transcript(tid)
    memory.close()
    again = SummaryMemory(store=pg_url, backend=backend)  # another process: the same thread
    assert [m.text for m in again.transcript(long_ids[0])][:2] == ["q0", "a0"]
    again.close()


def test_read_only_sessions_keep_the_urls_options_and_stay_read_only(pg_url: str) -> None:
    """Both read-only paths (the engine of ``doctor``/``migrate --dry-run`` and the saver of
    ``--from graph``) join the URL's ``options`` to the read-only session's own."""
    from sqlalchemy import text

    from adapters.stores.readonly import read_engine, read_only_saver

    url = _with(pg_url, "options=-c%20statement_timeout%3D45000&connect_timeout=7")
    engine = read_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "45s"
            assert conn.execute(text("SHOW default_transaction_read_only")).scalar() == "on"
    finally:
        engine.dispose()
    saver = read_only_saver(url)
    try:
        conn = saver.conn
        assert conn.execute("SHOW statement_timeout").fetchone()["statement_timeout"] == "45s"
        assert conn.execute("SHOW default_transaction_read_only").fetchone()[
            "default_transaction_read_only"] == "on"
    finally:
        saver.conn.close()
