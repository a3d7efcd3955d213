"""Stock ``SummarizationMiddleware``'s private helpers memshift calls (its trigger parser, its
``keep`` check, its summary message and model-call config) and LangChain core's content-block
formatting.

Part of ``adapters._upstream`` (every private upstream detail in one package): read it when
LangChain releases; ``tests/test_upstream.py`` spies on each.
"""

from __future__ import annotations

from typing import Any, cast

__all__ = ["REMOVE_ALL_MESSAGES", "build_summary_message", "format_block", "normalize_trigger",
           "summary_call_config", "validate_context_size"]

# ``langgraph.graph.message.REMOVE_ALL_MESSAGES`` (public, but importing it loads
# ``langgraph.graph``): a copy, spy-tested against the installed value.
REMOVE_ALL_MESSAGES = "__remove_all__"


def summary_call_config() -> Any:
    """The config stock ``SummarizationMiddleware`` gives its summary model call
    (``metadata={"lc_source": "summarization", ...}``, the ``nostream`` tag): LangGraph's
    ``stream_mode="messages"`` and ``astream_events`` then carry no summary tokens, and a trace
    marks the call as stock marks it. Private (``_summary_config``): a copy each time."""
    from langchain.agents.middleware.summarization import _summary_config

    return _summary_config()


def normalize_trigger(trigger: Any) -> list[dict[str, Any]]:
    """Stock's reading of ``trigger=`` (a ``ContextSize`` tuple, a ``TriggerClause`` dict, or a
    list of them) as clauses: AND within one, OR across them; stock's own checks and messages
    (``ValueError``/``TypeError``). Private (``SummarizationMiddleware._normalize_trigger``,
    which uses ``self`` only for the static ``_validate_context_size``)."""
    from langchain.agents.middleware.summarization import SummarizationMiddleware

    return [dict(c) for c in SummarizationMiddleware._normalize_trigger(
        cast(Any, SummarizationMiddleware), trigger)]


def validate_context_size(size: Any, parameter: str) -> tuple[str, Any]:
    """Stock's check of a ``keep=`` tuple. Private (``_validate_context_size``)."""
    from langchain.agents.middleware.summarization import SummarizationMiddleware

    if not isinstance(size, tuple) or len(size) != 2:
        raise ValueError(f"{parameter} must be a (kind, value) tuple such as ('tokens', 3000), "
                         f"got {size!r}")
    kind, value = SummarizationMiddleware._validate_context_size(cast(Any, size), parameter)
    return kind, value


def format_block(block: Any) -> str | None:
    """A content block as stock ``SummarizationMiddleware`` shows it to its summarizer
    (``get_buffer_string(format="xml")``): a URL image as ``<image url="…" />``, base64 data
    left out (``None``). Private (``_format_content_block_xml``)."""
    from langchain_core.messages.utils import _format_content_block_xml

    return _format_content_block_xml(block)


def build_summary_message(summary: str) -> Any:
    """The exact summary message stock ``SummarizationMiddleware`` writes."""
    from langchain.agents.middleware import SummarizationMiddleware

    return SummarizationMiddleware._build_new_messages(summary)[0]
