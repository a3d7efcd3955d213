"""Adapter details: the middleware's stock defects are guarded, models resolve offline."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from adapters import MemoryPolicy
from compat import ConfigError, SummaryMemory
from compat.testing import RecordingSummarizer
from compat import admin


def test_middleware_never_trims_what_it_summarizes() -> None:
    """Stock trim_tokens_to_summarize=4000 silently drops the previous summary."""
    summarizer = RecordingSummarizer()
    memory = SummaryMemory(backend="middleware", summarizer=summarizer,
                           policy=MemoryPolicy(max_tokens=7000, keep_tokens=100))
    assert memory.middleware.trim_tokens_to_summarize is None
    big = "word " * 1200  # ~1,500 tokens a message
    for i in range(3):
        memory.save("t", f"q{i} {big}", f"a{i} {big}")
    assert len(summarizer.calls) == 1, "the third turn should fold the first two"
    folded = summarizer.calls[0][1]
    assert [text.split()[0] for _, text in folded] == ["q0", "a0", "q1", "a1"]  # ~6,000 tokens


def test_middleware_ignores_reported_usage_metadata() -> None:
    """Real replies carry usage_metadata; stock would fold on the reported total."""
    memory = SummaryMemory(backend="middleware", policy=MemoryPolicy(max_tokens=500))
    answer = AIMessage("short", usage_metadata={"input_tokens": 9000, "output_tokens": 10,
                                                "total_tokens": 9010},
                       response_metadata={"model_provider": "memshift-summarizer"})
    memory.save("t", HumanMessage("hi"), answer)
    memory.save("t", "again", "fine")
    assert memory.load("t").folds == 0


def test_resolve_openai_model_for_a_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai", reason="memshift[openai] not installed")
    from compat.models import resolve_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = resolve_model("openai:smollm2", base_url="http://127.0.0.1:8080/v1", max_tokens=256)
    assert model.model_name == "smollm2" and model.temperature == 0
    assert str(model.openai_api_base).startswith("http://127.0.0.1:8080")
    assert model.extra_body == {"max_tokens": 256}


def test_unknown_model_provider_is_a_config_error() -> None:
    from compat.models import resolve_model

    with pytest.raises(ConfigError, match="cannot load model"):
        resolve_model("nosuchprovider:model-x")


def test_real_openai_replies_with_usage_metadata_do_not_move_fold_points() -> None:
    """With a ChatOpenAI model (never called here), stock would fold on the provider-reported
    total; memshift folds where the policy says, exactly as with the offline summarizer."""
    pytest.importorskip("langchain_openai", reason="memshift[openai] not installed")
    from langchain_openai import ChatOpenAI

    from compat.testing import RecordingSummarizer, filler_turn

    llm = ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test-not-used", base_url="http://127.0.0.1:9/v1")
    policy = MemoryPolicy(max_tokens=150, keep_tokens=80)
    real = SummaryMemory(backend="middleware", llm=llm, summarizer=RecordingSummarizer(), policy=policy)
    offline = SummaryMemory(backend="middleware", summarizer=RecordingSummarizer(), policy=policy)
    for i in range(10):
        human, ai = filler_turn("t", i, 10)
        reply = AIMessage(ai, usage_metadata={"input_tokens": 90_000, "output_tokens": 50,
                                              "total_tokens": 90_050},
                          response_metadata={"model_provider": "openai"})
        real.save("t", human, reply)
        offline.save("t", human, ai)
        assert real.load("t").folds == offline.load("t").folds, f"turn {i}"
    assert real.middleware.model is llm


def test_stock_prompt_stays_available() -> None:
    from compat import STOCK_SUMMARY_PROMPT

    memory = SummaryMemory(prompt=STOCK_SUMMARY_PROMPT)
    assert "Current summary" in memory.active_policy.prompt.template
    assert memory.active_policy.prompt_version != MemoryPolicy(max_tokens=10).prompt_version


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_a_model_that_ignores_the_cap_cannot_grow_the_next_prompt(backend: str) -> None:
    """Summaries over max_summary_tokens fail the fold (nothing lost); the next fold's
    prompt is never built on an over-long summary."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from compat.testing import filler_turn

    prompts: list[str] = []

    class Rambling(FakeListChatModel):
        def _call(self, messages: list, *args: object, **kwargs: object) -> str:
            prompts.append(messages[-1].content)
            return ("ramble " * 2000) if len(prompts) % 3 else "short summary"

    policy = MemoryPolicy(max_tokens=120, keep_tokens=60, max_summary_tokens=64, summary_retries=1,
                          retry_backoff=0)  # every save may retry: the cap is what is tested
    memory = SummaryMemory(backend=backend, llm=Rambling(responses=["x"]), policy=policy)
    for i in range(12):
        memory.save("t", *filler_turn("t", i, 10))
    records = admin.summary_history(memory, "t")
    assert any("exceeds max_summary_tokens=64" in (r["error"] or "") for r in records)
    assert all(r["summary_tokens"] <= 64 for r in records if not r["error"])
    assert memory.load("t").folds >= 1 and "ramble" not in memory.load("t").summary
    budget = policy.count([HumanMessage(policy.prompt.template)]) + 64 + 120 + 50
    assert max(policy.count([HumanMessage(p)]) for p in prompts) <= budget


def test_buffer_property_like_stock() -> None:
    import asyncio

    memory = SummaryMemory(thread_id="t")
    memory.save_context({"input": "aaa"}, {"output": "dummy"})
    assert memory.buffer == "Human: aaa\nAI: dummy"
    assert asyncio.run(memory.abuffer()) == memory.buffer


def test_summary_cap_reaches_a_local_server_in_the_form_it_honours(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pytest.importorskip("langchain_openai", reason="memshift[openai] not installed")
    from langchain_openai import ChatOpenAI

    from adapters.summarizer import ChatModelSummarizer

    local = ChatOpenAI(model="m", api_key="x", base_url="http://127.0.0.1:8080/v1")
    bound = ChatModelSummarizer(local, MemoryPolicy(max_tokens=10).prompt, max_tokens=100)._bound
    assert bound.kwargs == {"max_tokens": 80, "extra_body": {"max_tokens": 80}}
    hosted = ChatOpenAI(model="m", api_key="x")
    bound = ChatModelSummarizer(hosted, MemoryPolicy(max_tokens=10).prompt, max_tokens=100)._bound
    assert bound.kwargs == {"max_tokens": 80}
