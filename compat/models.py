"""Turning ``--model`` strings into chat models (only when the user asks for one)."""

from __future__ import annotations

import os
from typing import Any

from adapters.errors import ConfigError

__all__ = ["resolve_model"]


def resolve_model(spec: str, *, base_url: str | None = None, max_tokens: int | None = None) -> Any:
    """``openai:<name>`` via langchain-openai (``OPENAI_BASE_URL`` / ``base_url`` honoured),
    anything else via ``init_chat_model``. Temperature 0 for repeatable summaries."""
    provider, _, name = spec.partition(":")
    if provider == "openai":
        try:
            from langchain_openai import ChatOpenAI
        except ImportError as exc:
            raise ConfigError("--model openai:... needs: pip install 'memshift[openai]'") from exc
        kwargs: dict[str, Any] = {"model": name, "temperature": 0}
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if url:
            kwargs["base_url"] = url
            kwargs.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or "not-needed")
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
            if url:  # OpenAI-compatible local servers ignore max_completion_tokens
                kwargs["extra_body"] = {"max_tokens": max_tokens}
        return ChatOpenAI(**kwargs)
    try:
        from langchain.chat_models import init_chat_model

        return init_chat_model(spec, temperature=0)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"cannot load model {spec!r}: {exc}") from exc
