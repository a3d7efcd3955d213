"""Regressions for defects found in review: each test failed before its fix."""

from __future__ import annotations

import threading

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.store.memory import InMemoryStore

from adapters import MemoryPolicy, compare_views, redact_url
from compat import SummaryMemory, migrate
from compat.testing import filler_turn
from compat import admin
from tests.conftest import BACKENDS

POLICY = MemoryPolicy(max_tokens=100, keep_tokens=40)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reused_message_id_does_not_drop_a_turn(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=MemoryPolicy(max_tokens=5000))
    greeting = AIMessage("Welcome!", id="greeting")
    memory.save("t", "hi", greeting)
    memory.save("t", "again", greeting)
    assert [m.content for m in memory.load("t").messages] == ["hi", "Welcome!", "again", "Welcome!"]
    assert len(memory.transcript("t")) == 4
    assert len({m.id for m in memory.transcript("t")}) == 4


def test_streamed_answers_keep_the_backends_equivalent() -> None:
    classic = SummaryMemory(backend="classic", policy=POLICY)
    middleware = SummaryMemory(backend="middleware", policy=POLICY)
    for memory in (classic, middleware):
        for i in range(5):
            human, ai = filler_turn("t", i, 8)
            memory.save("t", human, AIMessageChunk(content=ai))
    assert not compare_views(classic.load("t"), middleware.load("t"))
    assert classic.load("t").messages[-1].type == "ai"
    target = SummaryMemory(backend="middleware", policy=POLICY)
    assert migrate(classic, target).ok


@pytest.mark.parametrize("backend", BACKENDS)
def test_resummarize_does_not_lose_a_concurrent_save(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=POLICY)
    for i in range(6):
        memory.save("t", *filler_turn("t", i, 8))
    inner = memory.backend_impl.summarizer
    late = threading.Thread(target=lambda: memory.save("t", "LATE question", "LATE answer"))

    class SavesMeanwhile:
        def summarize(self, summary: str, messages: list) -> str:
            if not late.is_alive() and late.ident is None:
                late.start()
                late.join(0.3)  # blocked on the thread's lock until the rebuild is written
            return inner.summarize(summary, messages)

    memory.backend_impl.summarizer = SavesMeanwhile()
    admin.resummarize(memory, "t")
    late.join(10)
    view = memory.load("t")
    assert "LATE answer" in [m.content for m in view.messages] or "LATE" in view.summary


def test_shadow_resummarize_records_no_false_mismatch() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY, shadow_timeout=5)
    for i in range(6):
        memory.save("t", *filler_turn("t", i, 8))
    admin.resummarize(memory, "t")
    memory.load("t")
    assert memory.mismatches == []


def test_users_whose_ids_differ_only_by_a_dot_keep_separate_preferences() -> None:
    store = InMemoryStore()
    policy = MemoryPolicy(max_tokens=60, keep_tokens=20, summary_format="structured",
                          preferences_store=store)
    memory = SummaryMemory(policy=policy)
    memory.save("acme.corp:chat-1", "I prefer replies in French.", "D'accord.")
    for i in range(3):
        memory.save("acme.corp:chat-1", *filler_turn("x", i, 8))
    assert store.search(("memshift", "preferences", "acme%2Ecorp"))
    assert not store.search(("memshift", "preferences", "acme_corp"))


@pytest.mark.parametrize("url", ["postgresql://u@h/db?password=hunter2",
                                 "postgresql://u:hunter2@h/db?sslmode=require&sslpassword=hunter2"])
def test_query_string_passwords_are_redacted(url: str) -> None:
    shown = redact_url(url)
    assert "hunter2" not in shown and "***" in shown


def test_retention_runs_even_when_the_summarizer_fails() -> None:
    class Down:
        def summarize(self, summary: str, messages: list) -> str:
            raise RuntimeError("down")

    memory = SummaryMemory(backend="middleware", summarizer=Down(),
                           policy=MemoryPolicy(max_tokens=60, keep_tokens=30, summary_retries=0))
    for i in range(30):
        memory.save("t", *filler_turn("t", i, 8))
    assert len(list(memory.checkpointer.list({"configurable": {"thread_id": "t"}}))) <= 20
    assert len(memory.load("t").messages) == 60  # nothing lost either


def test_shadow_close_does_not_wait_for_the_candidate_backlog() -> None:
    memory = SummaryMemory(backend="shadow", policy=POLICY, shadow_timeout=0.05)
    release = threading.Event()
    candidate = memory.backend_impl.candidate_backend
    candidate.save = lambda *a, **k: release.wait(30)  # type: ignore[method-assign]
    for i in range(5):
        memory.save("t", *filler_turn("t", i, 4))  # each candidate save times out, queued
    memory.close()
    assert not release.is_set(), "close() waited for the blocked candidate"
    release.set()
