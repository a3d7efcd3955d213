"""MemoryPolicy validation and the fold planner."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from adapters.errors import ConfigError
from adapters.policy import DEFAULT_SUMMARY_PROMPT, MemoryPolicy


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "needs max_tokens or max_messages"),
        ({"max_tokens": 0}, "greater than 0"),
        ({"max_tokens": -5}, "greater than 0"),
        ({"max_tokens": 10.5}, "must be an integer"),
        ({"max_tokens": True}, "must be an integer"),
        ({"max_tokens": 100, "keep_tokens": 101}, "keep must be <= trigger"),
        ({"max_messages": 6, "keep_tokens": 10}, "keep_tokens needs max_tokens"),
        ({"max_tokens": 100, "cut": "sentence"}, "cut must be"),
        ({"max_tokens": 100, "summary_format": "xml"}, "summary_format"),
        ({"max_tokens": 100, "summary_retries": -1}, "summary_retries"),
        ({"max_tokens": 100, "on_summary_error": "ignore"}, "on_summary_error"),
        ({"max_tokens": 100, "summary_prompt": "no variables"}, "{summary} and {new_lines}"),
        ({"max_tokens": 100, "token_counter": "gpt2"}, "unknown encoding"),
    ],
)
def test_invalid_policies_get_clear_errors(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("{", r"\{").replace("}", r"\}")):
        MemoryPolicy(**kwargs)


def test_keep_defaults_to_the_trigger() -> None:
    policy = MemoryPolicy(max_tokens=300, max_messages=8)
    assert (policy.keep_tokens, policy.keep_messages) == (300, 8)


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        MemoryPolicy(max_tokens=-1)


def test_default_prompt_has_no_example_dialogue() -> None:
    assert "Human:" not in DEFAULT_SUMMARY_PROMPT and "AI:" not in DEFAULT_SUMMARY_PROMPT
    assert len(MemoryPolicy(max_tokens=10).prompt_version) == 12


def _turns(n: int, words: int = 10) -> list:
    out = []
    for i in range(n):
        out += [HumanMessage(f"q{i} " + "w " * words), AIMessage(f"a{i} " + "w " * words)]
    return out


def test_no_fold_at_exactly_the_limit() -> None:
    window = _turns(3)
    policy = MemoryPolicy(max_tokens=MemoryPolicy(max_tokens=1).count(window))
    assert policy.plan_fold(window).cutoff == 0  # classic prunes at '>' not '>='


def test_fold_cuts_at_turn_boundaries_and_keeps_the_newest_turn() -> None:
    window = _turns(5)
    per_turn = MemoryPolicy(max_tokens=1).count(window[:2])
    policy = MemoryPolicy(max_tokens=per_turn * 4, keep_tokens=per_turn * 2)
    plan = policy.plan_fold(window)
    assert plan.cutoff == 6 and plan.reason.startswith("tokens=")
    assert isinstance(window[plan.cutoff], HumanMessage)


def test_message_cut_may_split_a_turn_but_never_a_tool_pair() -> None:
    call = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])
    window = [HumanMessage("q0"), call, ToolMessage("r", tool_call_id="c1"), AIMessage("a0"),
              HumanMessage("q1"), AIMessage("a1")]
    policy = MemoryPolicy(max_tokens=1000, max_messages=5, keep_messages=3, cut="message")
    plan = policy.plan_fold(window)
    assert plan.cutoff == 3  # index 2 would orphan the ToolMessage
    turn_policy = MemoryPolicy(max_tokens=1000, max_messages=5, keep_messages=3)
    assert turn_policy.plan_fold(window).cutoff == 4


def test_oversize_newest_turn_folds_everything_before_it_only() -> None:
    window = _turns(2) + [HumanMessage("huge " * 500), AIMessage("ok")]
    plan = MemoryPolicy(max_tokens=50).plan_fold(window)
    assert plan.cutoff == 4


def test_one_summarizer_factory_gives_llm_and_cli_model_the_same_input(monkeypatch) -> None:
    """``llm=`` and ``--model`` reach the same model with the same structured prompt."""
    import argparse

    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from adapters.summarizer import StructuredSummarizer
    from compat import SummaryMemory
    from compat.cli._policy import summarizer_from as _summarizer

    policy = MemoryPolicy(max_tokens=100, summary_format="structured", max_summary_tokens=50)
    model = FakeListChatModel(responses=["{}"])
    monkeypatch.setattr("compat.models.resolve_model", lambda spec, base_url=None: model)
    from_cli = _summarizer(argparse.Namespace(model="fake:x", base_url=None), policy)
    from_llm = SummaryMemory(policy=policy, llm=model).backend_impl.summarizer
    for built in (from_cli, from_llm):
        assert isinstance(built, StructuredSummarizer) and built.json_summary
        assert built.inner.llm is model and built.inner.max_tokens == 50
        assert built.inner.prompt.template == policy.prompt.template


def test_the_recorded_policy_rebuilds_the_same_rule() -> None:
    from adapters.tokens import count_tokens_cjk, tiktoken_counter

    for counter, expected in ((None, None), ("o200k_base", "o200k_base"),
                              (count_tokens_cjk, None), (tiktoken_counter("cl100k_base"), "cl100k_base"),
                              (lambda ms: 1, "callable:<lambda>")):
        policy = MemoryPolicy(max_tokens=300, keep_tokens=120, max_messages=40, cut="message",
                              token_counter=counter, max_summary_tokens=90)
        data = policy.recorded()
        assert data["token_counter"] == expected and data["prompt_version"] == policy.prompt_version
        again = MemoryPolicy.from_recorded(data)
        assert again.recorded()["token_counter"] == (None if expected and expected.startswith(
            "callable:") else expected)  # a user function cannot be rebuilt: the default
        assert {k: v for k, v in again.recorded().items() if k != "token_counter"} == \
            {k: v for k, v in data.items() if k != "token_counter"}


def test_recorded_and_prompt_version_are_built_once_and_never_shared() -> None:
    import dataclasses

    policy = MemoryPolicy(max_tokens=400, keep_tokens=200)
    first = policy.recorded()
    first["max_tokens"] = 1
    assert policy.recorded()["max_tokens"] == 400 and policy.recorded() is not policy.recorded()
    assert policy.recorded()["prompt_version"] == policy.prompt_version
    other = dataclasses.replace(policy, summary_prompt="Fold {summary} with {new_lines} tersely.")
    assert other.prompt_version != policy.prompt_version
    assert other.recorded()["prompt_version"] == other.prompt_version
    assert other == dataclasses.replace(policy, summary_prompt=other.summary_prompt)
    assert MemoryPolicy(max_tokens=400, keep_tokens=200) == policy  # caches never compared


def test_fold_record_as_dict_equals_asdict_and_shares_nothing() -> None:
    import dataclasses

    from adapters.fold import FoldRecord

    nested = {"max_tokens": 10, "extra": {"list": [1, 2]}}
    for policy in (MemoryPolicy(max_tokens=10).recorded(), nested, None):
        record = FoldRecord(thread_id="t", version=1, trigger="tokens=11>10", messages_before=3,
                            messages_kept=1, folded=2, folded_first_id="a", folded_last_id="b",
                            summary_tokens=5, summarizer="s", prompt_version="p",
                            duration_ms=1.0, policy=policy)
        out = record.as_dict()
        assert out == dataclasses.asdict(record)
        if policy is not None:
            assert out["policy"] is not policy
            out["policy"]["max_tokens"] = 99
            if "extra" in out["policy"]:
                out["policy"]["extra"]["list"].append(3)
            assert record.policy is not None and record.policy["max_tokens"] == 10
    assert out["policy"] is None
    assert nested["extra"]["list"] == [1, 2]


@pytest.mark.parametrize("summary_format", ["text", "structured"])
def test_a_built_in_prompt_is_built_on_first_read_and_versioned_by_its_text(
        summary_format: str) -> None:
    """Built-in prompts are known valid: the PromptTemplate (LangChain's runnables, ~1 s of
    imports) is built when first read, and the version is the text's, built or not."""
    from langchain_core.prompts import PromptTemplate

    policy = MemoryPolicy(max_tokens=100, summary_format=summary_format)
    version = policy.prompt_version
    assert policy._prompt is None  # noqa: SLF001 - what this test is about
    prompt = policy.prompt
    assert isinstance(prompt, PromptTemplate) and policy.prompt is prompt
    assert version == MemoryPolicy(max_tokens=100, summary_format=summary_format,
                                   summary_prompt=prompt.template).prompt_version
    assert set(prompt.input_variables) in ({"summary", "new_lines"}, {"messages"})


def test_the_facade_still_checks_a_stock_prompt_argument() -> None:
    from pydantic import ValidationError

    from compat import STOCK_SUMMARY_PROMPT, SummaryMemory

    with pytest.raises(ValidationError, match="BasePromptTemplate"):
        SummaryMemory(backend="classic", prompt="a plain string")
    memory = SummaryMemory(backend="classic", prompt=STOCK_SUMMARY_PROMPT)
    assert memory.active_policy.prompt.template == STOCK_SUMMARY_PROMPT.template
    memory.close()
