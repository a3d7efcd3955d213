"""The history as a string (``get_buffer_string``), rendered once per message.

On the in-memory store a classic window holds the store's own message objects, and the store
never edits them: between two loads a thread's window only grows at its end (a turn) or loses
its head (a fold). ``get_buffer_string`` renders each message on its own and joins the lines
with ``"\\n"``, so the lines of messages rendered by an earlier load are reused (matched by
identity: ``kept_run``) and only new messages are rendered, by ``get_buffer_string`` itself.
A string load of a 60-message window then costs ~3 µs instead of ~45 µs. The cache holds the
messages, so an identity cannot be reused while it is cached. From the first message that is
not the same object on (a replaced window, a restore), messages are rendered again.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, get_buffer_string

from adapters.view import kept_run

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
        lines: list[str] = []
        head = ""
        if entry is not None and entry[0] == style:
            _, seen, seen_lines, seen_summary, seen_head = entry
            if summary and summary == seen_summary:
                head = seen_head
            start, n = kept_run(seen, window)
            lines = seen_lines[start:start + n]  # a copy: the cached entry is never changed
        lines.extend(self._line(m, style) for m in window[len(lines):])
        if summary and not head:
            head = self._line(style[2](content=summary), style)
        if len(self._cache) >= self.threads and thread_id not in self._cache:
            self._cache.clear()
        self._cache[thread_id] = (style, tuple(window), lines, summary, head)
        return "\n".join([head, *lines] if summary else lines)

