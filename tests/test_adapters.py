"""Adapter details: the middleware's stock defects are guarded, models resolve offline."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from adapters import MemoryPolicy
from compat import ConfigError, SummaryMemory
from compat.testing import RecordingSummarizer


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
