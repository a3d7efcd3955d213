"""Summary governance: structured summaries, fold records, resummarize, redaction, eval."""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from adapters import MemoryPolicy
from adapters.fold import comparable
from adapters.structured import parse_rendered
from compat import SummaryMemory, SummarizerError, cli
from compat.testing import RecordingSummarizer, filler_turn
from compat.testing.conversations import agent_turn
from compat import admin
from tests.conftest import BACKENDS

STRUCTURED = MemoryPolicy(max_tokens=120, keep_tokens=40, summary_format="structured")
SECRETS = ["li.wei@example.com", "sk-proj-8f3kQ2x9Lm4Pz7Tq1Vb6Nc0Rd5Ye2Wu", "S3cretPass"]


def _filler(memory: SummaryMemory, thread: str, start: int, n: int) -> None:
    for i in range(start, start + n):
        memory.save(thread, *filler_turn(thread, i, 12))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_correction_leaves_only_the_corrected_fact(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=STRUCTURED)
    memory.save("t", "Our database is MySQL 8 and we deploy on Fridays.", "Noted: MySQL 8.")
    memory.save("t", "Actually we use PostgreSQL, not MySQL.", "Got it, PostgreSQL instead of MySQL.")
    _filler(memory, "t", 0, 4)
    facts = parse_rendered(memory.load("t").summary).field_text("facts")
    assert "PostgreSQL" in facts and "mysql" not in facts.lower()


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_decision_replaces_options_and_done_todos_leave(backend: str) -> None:
    memory = SummaryMemory(backend=backend, policy=STRUCTURED)
    memory.save("t", "Option A is Celery, option B is RQ. TODO: write the rollback script.", "Both work.")
    memory.save("t", "Final decision: we go with RQ.", "RQ it is.")
    memory.save("t", "Done: the rollback script is written.", "Great.")
    _filler(memory, "t", 0, 4)
    doc = parse_rendered(memory.load("t").summary)
    assert "RQ" in doc.field_text("decisions") and "Celery" not in doc.field_text("decisions")
    assert "rollback" not in doc.field_text("todos")


@pytest.mark.parametrize("backend", BACKENDS)
def test_secrets_never_reach_the_summarizer(backend: str) -> None:
    recorder = RecordingSummarizer()
    memory = SummaryMemory(backend=backend, summarizer=recorder,
                           policy=MemoryPolicy(max_tokens=100, keep_tokens=40, redact=True))
    memory.save("t", f"Mail me at {SECRETS[0]}; the key is {SECRETS[1]}.", "Stored.")
    memory.save("t", f"DB is postgresql://app:{SECRETS[2]}@db.internal/app", "Thanks.")
    human, ai = agent_turn("t", 9, 4)
    ai[0].tool_calls[0]["args"]["q"] = SECRETS[0]
    memory.save("t", human, ai)
    _filler(memory, "t", 0, 5)
    sent = json.dumps(recorder.calls, ensure_ascii=False)
    assert recorder.calls and "[EMAIL]" in sent and "[SECRET]" in sent
    assert not any(s in sent for s in SECRETS)
    assert not any(s in memory.load("t").summary for s in SECRETS)
    assert SECRETS[0] in memory.transcript("t")[0].content  # the transcript keeps the original


def test_redact_transcript_and_custom_redactors() -> None:
    policy = MemoryPolicy(max_tokens=500, redact=[True, lambda t: t.replace("Acme", "[ORG]")],
                          redact_transcript=True)
    memory = SummaryMemory(policy=policy)
    memory.save("t", f"I am at Acme, {SECRETS[0]}", "ok")
    stored = memory.transcript("t")[0].content
    assert stored == "I am at [ORG], [EMAIL]"
    assert memory.load("t").messages[0].content == f"I am at Acme, {SECRETS[0]}"  # window verbatim


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_fold_records_are_written_persisted_and_logged_without_text(
        store_kind: str, fresh_store, caplog: pytest.LogCaptureFixture) -> None:
    url = fresh_store(store_kind)
    with caplog.at_level(logging.INFO, logger="memshift.folds"):
        memory = SummaryMemory(backend="middleware", store=url,
                               policy=MemoryPolicy(max_tokens=100, keep_tokens=40))
        _filler(memory, "t", 0, 8)
    records = admin.summary_history(memory, "t")
    view = memory.load("t")
    assert [r["version"] for r in records] == list(range(1, view.folds + 1))
    first = records[0]
    assert first["trigger"].startswith("tokens=") and first["folded"] > 0 and first["error"] is None
    assert first["messages_kept"] == first["messages_before"] - first["folded"]
    assert first["folded_first_id"] == memory.transcript("t")[0].id
    assert first["summary_tokens"] > 0 and len(first["prompt_version"]) == 12
    assert first["summarizer"] == "ExtractiveSummarizer"
    assert "FACT-t-" not in caplog.text and "fold thread='t' version=1" in caplog.text
    if store_kind == "sqlite":
        assert admin.reopen(memory).summary_history("t") == records
    memory.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_failed_folds_are_recorded_too(backend: str) -> None:
    class Down:
        def summarize(self, summary: str, messages: list) -> str:
            raise RuntimeError("down")

    memory = SummaryMemory(backend=backend, summarizer=Down(),
                           policy=MemoryPolicy(max_tokens=60, keep_tokens=30, summary_retries=1))
    _filler(memory, "t", 0, 3)
    records = admin.summary_history(memory, "t")
    assert records and all(r["error"] and "RuntimeError" in r["error"] for r in records)
    assert memory.load("t").folds == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_structured_model_reply_is_validated_retried_then_fails_cleanly(backend: str) -> None:
    good = json.dumps({"facts": [{"key": "database", "value": "PostgreSQL 15"}],
                       "todos": [{"key": "rollback", "value": "write the rollback script"}]})
    llm = FakeListChatModel(responses=["not json at all", good, "still not json", "{]", "nope"])
    policy = MemoryPolicy(max_tokens=60, keep_tokens=20, summary_format="structured",
                          summary_retries=1, on_summary_error="raise")
    memory = SummaryMemory(backend=backend, llm=llm, policy=policy)
    memory.save("t", "Our database is PostgreSQL 15 " + "x " * 40, "ok " * 20)
    memory.save("t", "next " * 30, "fine")  # fold 1: a bad reply, then a good one
    doc = parse_rendered(memory.load("t").summary)
    assert doc.field_text("facts") == "database: PostgreSQL 15"
    with pytest.raises(SummarizerError, match="not valid JSON|no JSON"):
        memory.save("t", "more " * 30, "again")  # fold 2: two bad replies
    view = memory.load("t")
    assert view.folds == 1 and view.messages[-1].content == "again"  # nothing lost


@pytest.mark.parametrize("backend", BACKENDS)
def test_resummarize_after_a_prompt_change(backend: str) -> None:
    prompts: list[str] = []

    class Model(FakeListChatModel):
        def _call(self, messages: list, *args: object, **kwargs: object) -> str:
            prompts.append(messages[-1].content)
            return "v2 summary" if "VERSION 2" in messages[-1].content else "v1 summary"

    llm = Model(responses=["unused"])
    memory = SummaryMemory(backend=backend, llm=llm, policy=MemoryPolicy(max_tokens=100, keep_tokens=40))
    _filler(memory, "t", 0, 6)
    transcript = [(m.id, m.content) for m in memory.transcript("t")]
    assert memory.load("t").summary == "v1 summary"
    new_policy = MemoryPolicy(max_tokens=100, keep_tokens=40,
                              summary_prompt="VERSION 2\n{summary}\n{new_lines}")
    view = admin.resummarize(memory, "t", policy=new_policy)
    assert view.summary == "v2 summary" and view.folds >= 1
    assert [(m.id, m.content) for m in memory.transcript("t")] == transcript
    last = admin.summary_history(memory, "t")[-1]
    assert last["trigger"] == "resummarize" and last["prompt_version"] == new_policy.prompt_version


def test_resummarize_cli(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    with SummaryMemory(backend="classic", store=url, policy=MemoryPolicy(max_tokens=2000)) as memory:
        for t in ("a", "b"):
            _filler(memory, t, 0, 3)
    code = cli.main(["resummarize", "--backend", "classic", "--store", url, "--all",
                     "--max-tokens", "100", "--keep-tokens", "40", "--summary-format", "structured"])
    out = capsys.readouterr().out
    assert code == 0 and "resummarized 2 of 2" in out
    with SummaryMemory(backend="classic", store=url) as memory:
        assert memory.load("a").summary.startswith("Facts:")
        assert admin.summary_history(memory, "a")[-1]["trigger"] == "resummarize"


def test_preferences_outlive_the_thread() -> None:
    store = InMemoryStore()
    policy = MemoryPolicy(max_tokens=80, keep_tokens=30, summary_format="structured",
                          preferences_store=store)
    memory = SummaryMemory(policy=policy)
    memory.save("tenant-1:user-42:chat-1", "I prefer short answers with code samples.", "Will do.")
    _filler(memory, "tenant-1:user-42:chat-1", 0, 3)
    items = store.search(("memshift", "preferences", "tenant-1:user-42"))
    assert any("short answers" in i.value["value"] for i in items)
    memory.clear("tenant-1:user-42:chat-1")
    assert store.search(("memshift", "preferences", "tenant-1:user-42"))


def test_structured_backends_agree_on_records() -> None:
    left = SummaryMemory(backend="classic", policy=STRUCTURED)
    right = SummaryMemory(backend="middleware", policy=STRUCTURED)
    for m in (left, right):
        m.save("t", HumanMessage("We use Kafka. TODO: add a DLQ.", id="h1"), AIMessage("ok", id="a1"))
        _filler(m, "t", 0, 4)
    assert left.load("t").summary == right.load("t").summary
    assert [comparable(r) for r in admin.summary_history(left, "t")] == \
        [comparable(r) for r in admin.summary_history(right, "t")]


def test_eval_runs_offline_and_prints_per_case_results(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "eval.json"
    code = cli.main(["eval", "--json", str(out_json), "--min-score", "0.9"])
    out = capsys.readouterr().out
    assert code == 0
    for name in ("retain_profile_en", "correction_zh", "sensitive_data_en", "tool_result_zh"):
        assert name in out
    report = json.loads(out_json.read_text())
    assert len(report["cases"]) == 12 and report["score"] >= 0.9
    assert {c["language"] for c in report["cases"]} == {"en", "zh"}


def test_eval_with_user_cases_and_a_failing_check(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mine.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"thread_id": "x", "role": "human", "content": "My name is Ada and I use Rust 1.80."},
        {"thread_id": "x", "role": "ai", "content": "Hello Ada."}]))
    (tmp_path / "mine.json").write_text(json.dumps({
        "name": "mine", "language": "en", "category": "custom", "policy": {"max_tokens": 500},
        "checks": {"memory_contains": ["Rust 1.80"], "summary_contains": ["Ada"]}}))
    code = cli.main(["eval", "--cases", str(tmp_path), "--min-score", "0.9"])
    out = capsys.readouterr().out
    assert code == 1 and "1/2" in out and "summary contains 'Ada'" in out
