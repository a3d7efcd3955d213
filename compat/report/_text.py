"""Text helpers for the HTML report: every string reaches the page through :func:`text`,
which redacts store URLs and escapes HTML, because conversation content is untrusted."""

from __future__ import annotations

import dataclasses
import json
import re
from html import escape
from typing import Any

from adapters import redact_url

__all__ = ["clip", "format_value", "policy_rows", "policy_sentence", "short_id", "text"]

# Anything shaped like scheme://…: a DSN with a password must never reach the page.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`]+")

# Plain-language meaning of the fields operators ask about; the rest are listed as they are.
_MEANING = {
    "max_tokens": "fold when the verbatim window exceeds this many tokens",
    "keep_tokens": "after a fold, keep at most this many tokens verbatim",
    "max_messages": "fold when the verbatim window exceeds this many messages",
    "keep_messages": "after a fold, keep at most this many messages verbatim",
    "cut": "where a fold may cut: at turn boundaries or at any message",
    "summary_format": "plain-text or structured summary",
    "max_summary_tokens": "cap on the summary length (asked of the model, enforced on the reply)",
    "token_counter": "how tokens are counted (both backends use the same counter)",
    "prompt_version": "hash of the summary prompt text",
    "summary_prompt": "the summary prompt (its hash is prompt_version)",
    "summary_retries": "attempts per fold before it counts as failed",
    "on_summary_error": "what a failed fold does: defer (retry on a later save) or raise",
    "summary_timeout": "seconds per summarizer attempt",
    "max_summary_input_tokens": "fold in chunks above this many input tokens",
    "max_message_tokens": "a longer message is refused before anything is written",
    "retry_backoff": "seconds before a failed fold is tried again (doubles, capped)",
    "is_overflow": "how a context-overflow error is recognised",
    "redact": "redaction applied before text reaches the summarizer",
    "redact_transcript": "also redact the stored transcript",
    "preferences_store": "long-term preference store (structured summaries only)",
    "user_of": "maps a thread id to its user",
}


def _redact_urls(value: str) -> str:
    return _URL.sub(lambda m: redact_url(m.group(0)), value)


def text(value: object) -> str:
    """Page-safe text: URLs redacted, then HTML-escaped (quotes too, so it fits attributes)."""
    return escape(_redact_urls(str(value)), quote=True)


def clip(value: str, limit: int) -> str:
    """At most ``limit`` characters, saying how much was left out (keeps the page small)."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… (+{len(value) - limit} chars)"


def short_id(call_id: str | None) -> str:
    """A tool-call id short enough for a table cell; the full id goes in a tooltip."""
    if not call_id:
        return ""
    return call_id if len(call_id) <= 12 else f"{call_id[:4]}…{call_id[-6:]}"


def format_value(value: Any, limit: int = 120) -> str:
    """One argument or policy value as readable text: strings bare, the rest as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return clip(value, limit)
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    try:
        rendered = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        rendered = type(value).__name__
    return clip(rendered, limit)


def _policy_value(name: str, value: Any) -> str:
    if name == "summary_prompt":
        return "default" if value is None else "custom"
    if name == "preferences_store" and value is not None:
        return type(value).__name__  # never its repr: it may hold a connection string
    if name == "redact" and value is not None and not isinstance(value, bool):
        items = value if isinstance(value, (list, tuple)) else [value]
        return ", ".join(format_value(v) if callable(v) else type(v).__name__ for v in items)
    return format_value(value)


def policy_rows(policy: Any) -> list[tuple[str, str, str]]:
    """(field, value, meaning) for every public field: recorded ones first, as fold records
    store them, then the operational settings."""
    recorded: dict[str, Any] = policy.recorded() if hasattr(policy, "recorded") else {}
    rows = [(k, _policy_value(k, v), _MEANING.get(k, "")) for k, v in recorded.items()]
    if dataclasses.is_dataclass(policy):
        for f in dataclasses.fields(policy):
            if f.name.startswith("_") or not f.init or f.name in recorded:
                continue
            rows.append((f.name, _policy_value(f.name, getattr(policy, f.name)),
                         _MEANING.get(f.name, "")))
    elif not recorded:
        rows.append(("policy", clip(repr(policy), 300), ""))
    return rows


def policy_sentence(policy: Any) -> str:
    """The fold rule in words (``MemoryPolicy.explain``), or nothing for other objects."""
    explain = getattr(policy, "explain", None)
    if not callable(explain):
        return ""
    try:
        return str(explain())
    except Exception:  # a report must render even when a custom policy cannot explain itself
        return ""
