"""Specifics: the URLs, e-mails, paths, identifiers and numbers of a text.

What a summary that keeps "names, numbers, decisions" must not all drop (the fail-closed
check, ``adapters.fold_check``), what the offline summarizer keeps a sentence for
(``adapters.extractive``) and what ``MemoryPolicy(keep_specifics=True)`` carries verbatim
when a summarizer drops it (``adapters.ledger``). One definition for the three.
"""

from __future__ import annotations

import re

__all__ = ["has_specifics", "normalize", "specifics"]

_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]}]+", re.I | re.A)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", re.A)
_PATH = re.compile(r"(?<![\w/.~])(?:~|\.{1,2})?(?:/[\w.-]+){2,}/?|\b[A-Za-z]:\\[\w.\\-]+|"
                   r"\b[\w.-]+/[\w.-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b", re.A)
# letters and digits in one token (FACT-7, INV-2024-001, gpt-4o), or snake_case
_IDENT = re.compile(r"\b(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z0-9][\w-]*[A-Za-z0-9]\b|"
                    r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b", re.A)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*\d(?![\w])", re.A)  # two digits or more
_PATTERNS = (_URL, _EMAIL, _PATH, _IDENT, _NUMBER)
_GROUPING = re.compile(r"(?<=\d),(?=\d{3})")


def normalize(text: str) -> str:
    """Lower case, no thousands separators: how specifics are compared."""
    return _GROUPING.sub("", text.lower())


def specifics(text: str) -> set[str]:
    """The URLs, e-mails, paths, identifiers and numbers of ``text``, normalized (lower case,
    no thousands separators, no trailing punctuation). A number inside an identifier or a URL
    is not counted again."""
    found: set[str] = set()
    for pattern in _PATTERNS:
        found.update(normalize(m.group(0)).rstrip(".,;:!?/") for m in pattern.finditer(text))
        text = pattern.sub(" ", text)
    return {s for s in found if len(s) >= 2}


def has_specifics(text: str) -> bool:
    """Cheaper than ``specifics``: is there one at all?"""
    return any(pattern.search(text) for pattern in _PATTERNS)
