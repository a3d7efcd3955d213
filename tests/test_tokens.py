"""Offline token counting."""

from __future__ import annotations

import socket

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from adapters.tokens import count_tokens_cjk, resolve_token_counter, tiktoken_counter

CHINESE = "对话一长，单纯把历史消息塞进 Prompt 就会变得很笨重。前十轮还好，五十轮以后就会开始暴露问题。" * 20


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_cjk_counter_is_close_to_real_tokenizers_on_chinese(no_network: None) -> None:
    message = [HumanMessage(CHINESE)]
    exact = [tiktoken_counter(n)(message) for n in ("cl100k_base", "o200k_base")]
    ours = count_tokens_cjk(message)
    stock = count_tokens_approximately(message)
    assert min(exact) * 0.9 <= ours <= max(exact) * 1.1, (ours, exact)
    assert stock < min(exact) / 2, "the stock counter under-counts Chinese 2-3x"


def test_cjk_counter_matches_four_chars_per_token_on_english() -> None:
    text = "hello world " * 100
    assert count_tokens_cjk([HumanMessage(text)]) == 300 + 3


def test_tool_calls_count() -> None:
    plain = count_tokens_cjk([AIMessage("x")])
    with_call = count_tokens_cjk([AIMessage("x", tool_calls=[{"name": "search", "args": {"q": "a" * 80}, "id": "1"}])])
    assert with_call > plain + 20


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken_loads_offline(no_network: None, name: str, tmp_path: object,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSHIFT_CACHE_DIR", str(tmp_path))
    from adapters import tokens

    tokens._encoding.cache_clear()
    count = tiktoken_counter(name)([HumanMessage("hello world")])
    assert count == 2 + 3
    tokens._encoding.cache_clear()


def test_resolve_counter() -> None:
    assert resolve_token_counter(None) is count_tokens_cjk
    custom = lambda msgs: 7  # noqa: E731
    assert resolve_token_counter(custom) is custom
