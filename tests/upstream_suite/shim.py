"""conftest for LangChain's own ``SummarizationMiddleware`` unit tests, pointed at
``memory.middleware``: the name the test module imports is memshift's, and every
``SummarizationMiddleware(model, trigger=..., keep=..., ...)`` the tests build is a
``SummaryMemory(backend="middleware")`` built from the same arguments, its middleware returned.

Copied next to the extracted tests by ``tests/test_upstream_suite.py``; also runs async tests
(the suite uses pytest-asyncio's auto mode) and honours its ``requires`` marker.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import warnings
from typing import Any

import pytest

import compat  # noqa: F401  (memshift imports the real class before the name is replaced)
from adapters.backends import MemshiftSummarizationMiddleware
from compat import MemoryPolicy, SummaryMemory
from langchain.agents.middleware import summarization as stock
from langchain_core.language_models import BaseChatModel
from langchain_core.messages.utils import count_tokens_approximately



class PointedAtMemshift(MemshiftSummarizationMiddleware):
    """Stock's constructor; builds a memory and hands back its ``memory.middleware``."""

    def __new__(cls, model: Any, *, trigger: Any = None,
                keep: Any = ("messages", stock._DEFAULT_MESSAGES_TO_KEEP),
                token_counter: Any = count_tokens_approximately,
                summary_prompt: str = stock.DEFAULT_SUMMARY_PROMPT,
                trim_tokens_to_summarize: int | None = stock._DEFAULT_TRIM_TOKEN_LIMIT,
                summarizer: Any = None, **deprecated: Any) -> Any:
        if "max_tokens_before_summary" in deprecated:
            warnings.warn("max_tokens_before_summary is deprecated. Use trigger=('tokens', "
                          "value) instead.", DeprecationWarning, stacklevel=2)
            trigger = trigger or ("tokens", deprecated["max_tokens_before_summary"])
        if "messages_to_keep" in deprecated:
            warnings.warn("messages_to_keep is deprecated. Use keep=('messages', value) "
                          "instead.", DeprecationWarning, stacklevel=2)
            if keep == ("messages", stock._DEFAULT_MESSAGES_TO_KEEP):  # as stock: if default
                keep = ("messages", deprecated["messages_to_keep"])
        if isinstance(model, str):
            model = stock.init_chat_model(model)
        if isinstance(summarizer, str):
            summarizer = stock.init_chat_model(summarizer)
        writer = summarizer if isinstance(summarizer, BaseChatModel) else model
        # check_summaries=False: LangChain's tests answer with placeholder summaries
        # ("Generated summary") that memshift's fail-closed check rejects as too short for
        # what they fold; the checks have their own tests (tests/test_fold_checks.py)
        policy = MemoryPolicy(trigger=[] if trigger is None else trigger, keep=keep, token_counter=token_counter,
                              summary_prompt=summary_prompt, cut="message", check_summaries=False)
        if policy.fractional:
            policy = policy.with_model(model)
        memory = SummaryMemory(llm=writer, backend="middleware", store="memory", policy=policy)
        return memory.middleware


stock.SummarizationMiddleware = PointedAtMemshift  # type: ignore[misc]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires(name): needs an installed library")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requires"):
        for name in mark.args:
            if importlib.util.find_spec(name) is None:
                pytest.skip(f"requires {name}")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        names = pyfuncitem._fixtureinfo.argnames
        asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
        return True
    return None
