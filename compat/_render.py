"""The history as a string (``get_buffer_string``), rendered once per message.

On the in-memory store a classic window holds the store's own message objects, and the store
never edits them: between two loads a thread's window only grows at its end (a turn) or loses
its head (a fold). ``get_buffer_string`` renders each message on its own and joins the lines
with ``"\\n"``, so the lines of messages rendered by an earlier load are reused and only new
messages are rendered, by ``get_buffer_string`` itself. A string load of a 60-message window
then costs ~3 µs instead of ~45 µs. Messages are matched by identity; the cache holds them, so
an identity cannot be reused while it is cached. Anything else (a replaced window, a restore)
renders the whole window again.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import is_

from langchain_core.messages import BaseMessage, get_buffer_string

__all__ = ["BufferRenderer", "Style"]

Style = tuple[str, str, type[BaseMessage]]  # human prefix, AI prefix, summary message class
# thread id -> (style, messages rendered, their lines, summary, its line)
_Entry = tuple[Style, tuple[BaseMessage, ...], list[str], str, str]


class BufferRenderer:
    """``get_buffer_string([summary_message_cls(summary), *window], prefixes)``, by thread.
    The style is given on every call (a memory's prefixes may be reassigned)."""

    def __init__(self, threads: int = 1024) -> None:
        self.threads = threads  # cleared beyond this many: a bound, not an LRU
        self._cache: dict[str, _Entry] = {}

    def _line(self, message: BaseMessage, style: Style) -> str:
        return get_buffer_string([message], human_prefix=style[0], ai_prefix=style[1])

    def render(self, thread_id: str, summary: str, window: Sequence[BaseMessage],
               style: Style) -> str:
        entry = self._cache.get(thread_id)
        lines: list[str] | None = None
        head = ""
        if entry is not None and entry[0] == style:
            _, seen, seen_lines, seen_summary, seen_head = entry
            if summary and summary == seen_summary:
                head = seen_head
            lines = _reuse(seen, seen_lines, window)
        if lines is None:
            lines = []
        lines.extend(self._line(m, style) for m in window[len(lines):])
        if summary and not head:
            head = self._line(style[2](content=summary), style)
        if len(self._cache) >= self.threads and thread_id not in self._cache:
            self._cache.clear()
        self._cache[thread_id] = (style, tuple(window), lines, summary, head)
        return "\n".join([head, *lines] if summary else lines)


def _reuse(seen: tuple[BaseMessage, ...], lines: list[str],
           window: Sequence[BaseMessage]) -> list[str] | None:
    """The lines of ``window``'s head that ``seen`` already rendered: ``seen`` minus the
    messages a fold dropped must be the start of ``window`` (the rest is rendered anew)."""
    if not seen or not window:
        return None
    start = 0
    first = window[0]
    if seen[0] is not first:
        start = next((i for i, m in enumerate(seen) if m is first), -1)
        if start < 0:
            return None
    kept = len(seen) - start
    if kept > len(window) or not all(map(is_, seen[start:], window)):
        return None
    return lines[start:]
