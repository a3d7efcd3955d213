"""Hostile inputs: corrections that name nothing, and passwords that break URL parsing.

The offline summarizer once let one tool message, "Actually, not the.", erase every fact
containing "the" (substring match). And a DSN whose password has unencoded ``@ : / # ?``
was parsed in the wrong place, so half of the password reached error text and logs.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import traceback
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from adapters import MemoryPolicy
from adapters.errors import ConfigError, MemshiftError, StoreError
from adapters.extractive import ExtractiveSummarizer
from adapters.stores.url import redact_url, scrub, scrub_cause
from adapters.structured import parse_rendered
from compat import SummaryMemory
from compat.testing import filler_turn

# -- Task A: corrections by key or whole term ----------------------------------------------

SIX_FACTS = [
    "Our database is PostgreSQL 15.",
    "We deploy the theatre app on Fridays.",
    "My name is Ana and I work at Acme.",
    "The budget is 500 dollars.",
    "Our team uses the category service.",
    "We host in eu-west-1 with 3 nodes.",
]


def _summary(*messages: BaseMessage, summary: str = "") -> str:
    return ExtractiveSummarizer().summarize(summary, list(messages))


def _facts(summary: str) -> list[str]:
    return [item.value for item in parse_rendered(summary).facts]


@pytest.fixture
def six() -> str:
    summary = _summary(HumanMessage(content=" ".join(SIX_FACTS)))
    assert _facts(summary) == SIX_FACTS, "setup: the six facts should all be kept"
    return summary


def test_the_attack_keeps_all_six_facts(six: str) -> None:
    after = _summary(ToolMessage(content="Actually, not the.", tool_call_id="call-1"), summary=six)
    assert _facts(after) == SIX_FACTS, "a correction that names nothing erased facts"
    assert after == six, "a correction that names nothing changed the summary"


@pytest.mark.parametrize("text", [
    "Actually, not the.", "no", "No.", "not that", "Actually, not that.", "Actually, not a.",
    "Correction: not the the the.", "Actually, not ...", "Actually, not !!!", "Actually, not.",
    "Actually, not this one.", "I was wrong, not it.", "Actually, it is not.", "Actually, no.",
    "?!", "...", "Actually, not the!", "其实不是的。", "更正：不是这样。", "不是。",
])
@pytest.mark.parametrize("role", ["human", "tool"])
def test_negations_without_a_target_change_nothing(six: str, text: str, role: str) -> None:
    message = (HumanMessage(content=text) if role == "human"
               else ToolMessage(content=text, tool_call_id="call-1"))
    assert _summary(message, summary=six) == six, f"{text!r} ({role}) changed the summary"


@pytest.mark.parametrize("correction, word", [
    ("Actually, not the.", "theatre"), ("Actually, not cat.", "category"),
    ("Actually, not ate.", "theatre"), ("Correction: not eu.", "eu-west-1"),
    ("Actually, not Post.", "PostgreSQL"), ("Actually, not Ac.", "Acme"),
])
def test_a_substring_of_a_fact_word_never_removes_the_fact(six: str, correction: str,
                                                           word: str) -> None:
    after = _facts(_summary(HumanMessage(content=correction), summary=six))
    assert any(word in fact for fact in after), f"{correction!r} removed the fact with {word!r}"
    assert all(fact in after for fact in SIX_FACTS)


def test_a_whole_term_correction_removes_only_what_names_it(six: str) -> None:
    after = _facts(_summary(HumanMessage(content="Actually, not the theatre app."), summary=six))
    assert not any("theatre" in fact for fact in after)
    assert [f for f in SIX_FACTS if "theatre" not in f] == [f for f in after if f in SIX_FACTS]


def test_a_clear_correction_supersedes_in_the_users_own_messages() -> None:
    start = _summary(HumanMessage(content="We are meeting in Paris on Monday. The budget is 500 dollars."))
    facts = _facts(_summary(HumanMessage(content="Actually, not Paris, Lyon."), summary=start))
    assert "Lyon" in facts and not any("Paris" in f for f in facts)
    assert "The budget is 500 dollars." in facts


def test_a_tool_correction_changes_nothing(six: str) -> None:
    """Only the user retracts the user's facts (tool output can be injected text)."""
    text = "Actually we use MySQL 8, not PostgreSQL 15."
    human = _summary(HumanMessage(content=text), summary=six)
    tool = _summary(ToolMessage(content=text, tool_call_id="call-1"), summary=six)
    assert not any("PostgreSQL" in f for f in _facts(human)) and "MySQL 8" in human
    assert tool == six


@pytest.mark.parametrize("before, after, gone, kept", [
    ("My budget is 500 dollars.", "Actually my budget is 700 dollars.", "500", "700"),
    ("The deadline for the project is June 10.", "Correction: the project deadline is June 24.",
     "June 10", "June 24"),
    ("My name is Ana.", "Actually, my name is Anna.", "Ana.", "Anna"),
    ("我的预算是500元。", "其实我的预算是700元。", "500", "700"),
])
def test_a_keyed_correction_supersedes_the_old_fact(before: str, after: str, gone: str,
                                                   kept: str) -> None:
    other = "We host in eu-west-1 with 3 nodes."
    start = _summary(HumanMessage(content=f"{before} {other}" if before.isascii() else before),
                     HumanMessage(content=other))
    facts = _facts(_summary(HumanMessage(content=after), summary=start))
    assert any(kept in f for f in facts), f"the correction {after!r} was not kept: {facts}"
    assert not any(gone in f for f in facts), f"{before!r} survived its correction: {facts}"
    assert other in facts, "a keyed correction removed an unrelated fact"


@pytest.mark.parametrize("text", ["Actually it is 700 dollars.", "Actually, that is 700.",
                                  "Actually, everything is fine.", "Actually I am 700."])
def test_a_correction_without_a_clear_key_replaces_nothing(text: str) -> None:
    start = _summary(HumanMessage(content="My budget is 500 dollars. I am Ana from Acme."))
    facts = _facts(_summary(HumanMessage(content=text), summary=start))
    assert "My budget is 500 dollars." in facts and "I am Ana from Acme." in facts


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_the_attack_through_the_memory_keeps_every_fact(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=MemoryPolicy(
        max_tokens=120, keep_tokens=40, summary_format="structured"))
    memory.save("t", " ".join(SIX_FACTS), "Noted.")
    call = {"name": "lookup", "args": {"q": "x"}, "id": "call-1"}
    memory.save("t", "Check it.", [AIMessage(content="", tool_calls=[call]),
                                   ToolMessage(content="Actually, not the.", tool_call_id="call-1"),
                                   AIMessage(content="Done looking.")])
    for i in range(4):
        memory.save("t", *filler_turn("t", i, 12))
    facts = parse_rendered(memory.load("t").summary).field_text("facts")
    missing = [f for f in SIX_FACTS if f not in facts]
    assert not missing, f"facts erased by a correction that names nothing: {missing}"


# -- Task B: passwords never reach error text or logs --------------------------------------

NASTY = [
    "p%zz@:/x#leak2",            # the reported one: invalid escape, '@', ':', '/', '#'
    "pa@ss:w/rd",                # the reported one: looks like a host and a path
    "s3cr@t/p#ss?x=1%",          # '?', '#', trailing '%'
    "hunter2%40db",              # already percent-encoded text inside the password
    "evil@127.0.0.1:5432/db",    # contains a whole host:port/db
    "p[w]@::1x",                 # IPv6-looking brackets
    "pw with space+plus",        # spaces and '+'
    "a&password=bsecret",        # looks like a query string
    "%41%42cdefgh",              # decodes to other characters
]


def _forms(password: str) -> set[str]:
    """Every spelling of a password that must never be shown."""
    plain = {password, unquote(password), unquote_plus(password)}
    encoded = {q(p, safe="") for p in plain for q in (quote, quote_plus)}
    return plain | encoded | {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e)
                              for e in encoded}


def _urls(password: str, host: str = "127.0.0.1:1") -> list[str]:
    return [f"postgresql://u:{password}@{host}/db",
            f"postgresql://u:{quote(password, safe='')}@{host}/db"]


def _assert_clean(text: str, password: str, where: str) -> None:
    shown = [form for form in _forms(password) if form in text]
    assert not shown, f"{where} shows the password as {shown}: {text!r}"


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out:
        out.append(current)
        current = current.__cause__ or (None if current.__suppress_context__
                                        else current.__context__)
    return out


def _assert_error_clean(exc: BaseException, password: str) -> None:
    _assert_clean(str(exc), password, "str(error)")
    _assert_clean(repr(exc), password, "repr(error)")
    _assert_clean("".join(traceback.format_exception(exc)), password, "the traceback")
    for link in _chain(exc):
        _assert_clean(f"{link} {link!r}", password, f"chained {type(link).__name__}")


@pytest.mark.parametrize("password", NASTY)
@pytest.mark.parametrize("host", ["127.0.0.1:1", "[::1]:1", "db.internal"])
def test_redact_url_never_shows_the_password(password: str, host: str) -> None:
    for url in _urls(password, host):
        shown = redact_url(url)
        _assert_clean(shown, password, f"redact_url({url!r})")
        assert "***" in shown


@pytest.mark.parametrize("url, secret", [
    ("host=127.0.0.1 port=1 password=s3cretpw dbname=y", "s3cretpw"),
    ("host=x password='se cret\\'pw' dbname=y", "se cret'pw"),
    ("postgresql://u@h/db?sslmode=require&password=hunter2xx", "hunter2xx"),
    ("postgresql://u@h/db?PASSWORD=hunter2xx&x=1", "hunter2xx"),
    ("postgresql://u:pw1xyz@h/db?sslpassword=hunter2xx", "hunter2xx"),
])
def test_conninfo_and_query_passwords_are_redacted(url: str, secret: str) -> None:
    assert secret not in redact_url(url) and "***" in redact_url(url)
    assert secret not in scrub(f"driver echoed {url} and {secret}", url)


@pytest.mark.parametrize("password", NASTY)
def test_scrub_removes_every_form_from_driver_text(password: str) -> None:
    for url in _urls(password):
        for form in _forms(password):
            _assert_clean(scrub(f'failed: token "{form}" in {url}', url), password, "scrub")


def test_scrub_cause_drops_a_cause_that_would_show_the_password() -> None:
    url = "postgresql://u:Sup3rSecretPw@127.0.0.1:1/db"
    assert scrub_cause(RuntimeError("connection refused"), url) is not None
    assert scrub_cause(RuntimeError("auth failed for Sup3rSecretPw"), url) is None
    assert scrub_cause(RuntimeError("auth failed for Sup3rSecretPw"), None) is not None


def _pg_failure(build: Callable[[str], object], password: str, caplog: pytest.LogCaptureFixture,
                host: str = "127.0.0.1:1") -> None:
    pytest.importorskip("psycopg")
    caplog.set_level(logging.DEBUG)  # the root logger at DEBUG: drivers may log the DSN
    raw, encoded = _urls(password, host)
    for url in (raw, encoded):
        with pytest.raises(MemshiftError) as info:
            build(url)
        # unencoded delimiters may be refused before connecting (ConfigError); a
        # percent-encoded password always reaches the driver and fails there
        expected = StoreError if url == encoded else (StoreError, ConfigError)
        assert isinstance(info.value, expected), f"{type(info.value).__name__}: {info.value}"
        _assert_error_clean(info.value, password)
    _assert_clean(caplog.text, password, "the DEBUG log")
    _assert_clean("\n".join(str(r.__dict__) for r in caplog.records), password, "log records")


@pytest.mark.parametrize("password", NASTY)
@pytest.mark.parametrize("host", ["127.0.0.1:1", "[::1]:1"])
def test_a_failed_connection_never_shows_the_password(password: str, host: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from adapters.stores import open_store

    _pg_failure(open_store, password, caplog, host)


@pytest.mark.parametrize("password", NASTY)
def test_summary_memory_construction_never_shows_the_password(
        password: str, caplog: pytest.LogCaptureFixture) -> None:
    _pg_failure(lambda url: SummaryMemory(backend="classic", store=url), password, caplog)


@pytest.mark.parametrize("password", NASTY)
def test_store_error_translation_scrubs_the_driver_message(password: str, tmp_path: Path) -> None:
    """What ``SqlStore.guard`` does with any driver error that echoes the password."""
    from adapters.stores.sqlite import SqliteStore

    store = SqliteStore(f"sqlite:///{tmp_path}/s.db")
    try:
        for url in _urls(password):
            store._secret = url  # as PostgresStore sets it
            for form in _forms(password):
                with pytest.raises(StoreError) as info, store.guard("read"):
                    raise sqlite3.OperationalError(f"server said {form!s} for {url}")
                _assert_error_clean(info.value, password)
    finally:
        store.close()
