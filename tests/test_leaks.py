"""A DSN password never leaves memshift: not through model_dump/repr/str, errors, logs at any
level, the shadow mismatch log, or the HTML report, on a working PostgreSQL store as on a
failing one, whether the password is percent-encoded or not."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory
from compat.testing import filler_turn
from compat import admin

SECRET = "Zq9#sEcr%t@:/x"


def _forms(secret: str) -> list[str]:
    return [secret, quote(secret, safe=""), quote(secret, safe="").lower()]


def _with_password(url: str, secret: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"memshift_leak:{quote(secret, safe='')}@{parts.hostname}:{parts.port}").geturl()


@pytest.fixture
def secret_url(pg_server: Any, pg_url: str) -> str:
    """``pg_url`` reached as a role whose password is ``SECRET``."""
    with pg_server.admin() as conn:
        conn.execute("DROP ROLE IF EXISTS memshift_leak")
        conn.execute(f"CREATE ROLE memshift_leak LOGIN SUPERUSER PASSWORD '{SECRET}'")
    return _with_password(pg_url, SECRET)


def _assert_clean(text: str) -> None:
    for form in _forms(SECRET):
        assert form not in text, f"the password leaked ({form!r})"


def test_a_working_store_leaks_nothing_anywhere(secret_url: str, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from compat.report import render_html
    from compat.replay import replay
    from compat.conversations import Turn

    caplog.set_level(logging.DEBUG)
    log = tmp_path / "shadow.jsonl"
    candidate = MemoryPolicy(max_tokens=60, keep_tokens=30)  # differs: mismatches are logged
    memory = SummaryMemory(backend="shadow", store=secret_url, policy=MemoryPolicy(max_tokens=120),
                           candidate_policy=candidate, shadow_log=str(log))
    for i in range(8):
        memory.save("t", *filler_turn("t", i, 10))
    memory.load("t")
    memory.backend_impl.drain(10)
    texts = [repr(memory), str(memory), str(memory.model_dump()),
             caplog.text, log.read_text() if log.exists() else "",
             repr(memory.mismatches), str(admin.summary_history(memory, "t"))]
    assert memory.mismatches, "the differing candidate policy produced no mismatch to check"
    memory.close()
    from langchain_core.messages import AIMessage, HumanMessage

    turns = [Turn("t", [HumanMessage(h), AIMessage(a)], i)
             for i, (h, a) in enumerate(filler_turn("t", i, 10) for i in range(4))]
    texts.append(render_html(replay(turns), title=f"replay of {secret_url}"))
    for text in texts:
        _assert_clean(text)


def test_a_failing_store_leaks_nothing_anywhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://app:{quote(SECRET, safe='')}@127.0.0.1:1/app"
    with pytest.raises(Exception) as info:
        SummaryMemory(backend="middleware", store=url).save("t", "q", "a")
    error = info.value
    texts = [str(error), repr(error), "".join(traceback.format_exception(error)), caplog.text]
    for text in texts:
        _assert_clean(text)
