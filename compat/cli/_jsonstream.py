"""The ``--json`` document written as it is produced.

A migration over 100,000 threads lists every thread by outcome. Built as one string (then
scrubbed: a second copy) that document cost ~70 MB of peak memory at the end of a run; written
piece by piece, with the per-thread lists produced lazily (:class:`Items`), it costs a write
buffer. The text is exactly ``json.dumps(document, ensure_ascii=False, indent=2,
default=str)``'s, so scripts see no change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Items", "chunks"]

INDENT = "  "


class Items:
    """A JSON list produced while it is written (``factory`` is called once per write).

    Deliberately not a ``list``: ``json.dumps`` refuses it, rather than writing ``[]``."""

    __slots__ = ("factory",)

    def __init__(self, factory: Callable[[], Iterable[Any]]) -> None:
        self.factory = factory

    def __iter__(self) -> Iterator[Any]:
        return iter(self.factory())

    def __repr__(self) -> str:
        return "Items(<written by compat.cli._jsonstream>)"


def chunks(value: Any, level: int = 0) -> Iterator[str]:
    """The JSON text of ``value`` in pieces; a string is never split across two pieces
    (so that each piece can be scrubbed of secrets on its own)."""
    if isinstance(value, dict):
        yield from _container(((_key(k), v) for k, v in value.items()), "{", "}", level)
    elif isinstance(value, (list, tuple, Items)):
        yield from _container(((None, v) for v in value), "[", "]", level)
    else:
        yield json.dumps(value, ensure_ascii=False, default=str)


def _container(items: Iterator[tuple[str | None, Any]], opening: str, closing: str,
               level: int) -> Iterator[str]:
    pad = "\n" + INDENT * (level + 1)
    empty = True
    for key, item in items:
        head = (opening if empty else ",") + pad
        yield head if key is None else head + json.dumps(key, ensure_ascii=False) + ": "
        yield from chunks(item, level + 1)
        empty = False
    yield opening + closing if empty else "\n" + INDENT * level + closing


def _key(key: Any) -> str:
    """A dict key as ``json`` converts it (str, number, bool, None), else ``TypeError``."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
