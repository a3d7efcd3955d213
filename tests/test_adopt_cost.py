"""Deploy day at stock's cost: the first request of each user after the import swap adopts the
stored history with as few summarizer calls as its size allows — never more than the stock
class makes on that same request (one) — instead of replaying it fold by fold."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.language_models.fake import FakeListLLM

from compat import SummaryMemory, admin
from compat.testing.conversations import filler_turn


class CountingLLM(FakeListLLM):
    calls: int = 0

    def _call(self, *args: Any, **kwargs: Any) -> str:
        self.calls += 1
        return super()._call(*args, **kwargs)

    def get_num_tokens(self, text: str) -> int:  # offline (stock would load GPT-2's tokenizer)
        return max(1, len(text) // 4)


def _llm() -> CountingLLM:
    # a summary keeps the seeded facts (one naming none of them is rejected: check_summaries)
    facts = " ".join(f"FACT-user-1-{i}" for i in range(19))
    return CountingLLM(responses=[f"summary {i}: the user asked about {facts}" for i in range(100)])


def _history(url: str, session: str) -> Any:
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SQLChatMessageHistory(session_id=session, connection=url)


def _seed(url: str, session: str, turns: int) -> None:
    history = _history(url, session)
    for i in range(turns):
        q, a = filler_turn(session, i, 8)
        history.add_user_message(q)
        history.add_ai_message(a)


def _request(memory_cls: Any, url: str, session: str, turn: int) -> int:
    """One request of a per-request SQL app: load, answer, save. The summarizer calls."""
    llm = _llm()
    memory = memory_cls(llm=llm, max_token_limit=300, chat_memory=_history(url, session))
    memory.load_memory_variables({})
    q, a = filler_turn(session, turn, 8)
    memory.save_context({"input": q}, {"output": a})
    return llm.calls


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_first_request_after_the_swap_costs_no_more_summarizer_calls_than_stock(
        fresh_store, kind: str) -> None:
    from langchain_classic.memory import ConversationSummaryBufferMemory

    stock_url, url = fresh_store(kind), fresh_store(kind)
    for where in (stock_url, url):
        _seed(where, "user-1", 18)  # 36 messages, far past the limit
    stock = _request(ConversationSummaryBufferMemory, stock_url, "user-1", 18)
    ours = _request(SummaryMemory, url, "user-1", 18)
    assert stock == 1
    assert ours <= stock, f"first request after the swap: {ours} summarizer calls, stock {stock}"
    with SummaryMemory(llm=_llm(), max_token_limit=300, store=url) as memory:
        records = admin.summary_history(memory, "user-1")
        adopted = [r for r in records if str(r["trigger"]).startswith("adopted")]
        assert len(adopted) == 1 and adopted[0]["summarizer_calls"] == 0
        folds = [r for r in records if r is not adopted[0]]
        assert len(folds) == ours and folds[0]["messages_before"] == 38  # one fold, all of it
        assert folds[0]["folded"] + folds[0]["messages_kept"] == 38
        view = memory.load("user-1")
        assert view.summary and len(memory.transcript("user-1")) == 38  # nothing lost
