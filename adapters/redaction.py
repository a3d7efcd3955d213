"""Redaction of what is sent to the summarizer (and, optionally, of the transcript).

Built-in patterns: e-mail addresses, phone numbers, card numbers (Luhn-checked), API
keys and tokens (provider prefixes, ``key=value`` secrets, bearer tokens, long hex),
and passwords inside URLs. Custom redactors are ``str -> str`` callables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from adapters.errors import ConfigError

__all__ = ["Redactor", "default_redactor", "redact_messages", "resolve_redactor"]

Redactor = Callable[[str], str]

_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(@)", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}\b", re.I)
_KEYS = re.compile(
    r"\b(?:sk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}|"
    r"[0-9a-f]{32,})\b")
_ASSIGNED = re.compile(
    r"((?:api[_-]?key|secret|token|password|passwd|pwd|密码|密钥|令牌)\s*[:=：]\s*)([^\s,;，。]+)", re.I)
_BEARER = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]{12,}", re.I)
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
_PHONE = re.compile(r"(?<![\w.])\+?\d[\d\s().-]{7,}\d(?![\w.])")


def _luhn(digits: str) -> bool:
    total, alt = 0, False
    for ch in reversed(digits):
        n = int(ch)
        if alt:
            n = n * 2 - 9 if n > 4 else n * 2
        total, alt = total + n, not alt
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[CARD]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group(0)


_DATE = re.compile(r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}$")


def _phone(match: re.Match[str]) -> str:
    if _DATE.match(match.group(0).strip()):
        return match.group(0)
    digits = re.sub(r"\D", "", match.group(0))
    return "[PHONE]" if 8 <= len(digits) <= 15 else match.group(0)


def default_redactor(text: str) -> str:
    """Replace secrets and personal data with ``[EMAIL]``, ``[SECRET]``, ``[CARD]``..."""
    text = _URL_PASSWORD.sub(r"\1[PASSWORD]\3", text)
    text = _EMAIL.sub("[EMAIL]", text)
    text = _BEARER.sub(r"\1[SECRET]", text)
    text = _ASSIGNED.sub(r"\1[SECRET]", text)
    text = _KEYS.sub("[SECRET]", text)
    text = _CARD.sub(_card, text)
    return _PHONE.sub(_phone, text)


def resolve_redactor(spec: Any) -> Redactor | None:
    """``None``/``False``: off; ``True``/``"default"``: built-in; a callable or a list of them."""
    if spec is None or spec is False:
        return None
    if spec is True or spec == "default":
        return default_redactor
    if callable(spec):
        return spec
    if isinstance(spec, (list, tuple)) and spec:
        parts = [resolve_redactor(s) for s in spec]

        def chain(text: str) -> str:
            for part in parts:
                if part is not None:
                    text = part(text)
            return text

        return chain
    raise ConfigError(f"redact must be True, a callable or a list of callables, got {spec!r}")


def _redact_value(value: Any, fn: Redactor) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v, fn) for v in value]
    return value


def redact_messages(messages: Sequence[BaseMessage], fn: Redactor | None) -> list[BaseMessage]:
    """Copies with content (and tool-call arguments) redacted; the originals are untouched."""
    if fn is None:
        return list(messages)
    out = []
    for message in messages:
        copy = message.model_copy(deep=True)
        copy.content = _redact_value(copy.content, fn)
        if isinstance(copy, AIMessage) and copy.tool_calls:
            copy.tool_calls = [{**c, "args": _redact_value(c["args"], fn)} for c in copy.tool_calls]
        out.append(copy)
    return out
