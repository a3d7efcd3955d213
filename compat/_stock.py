"""The stock surfaces: ``ConversationSummaryBufferMemory``'s attributes on the bound thread,
(the chat histories legacy code takes live in ``_histories``, imported on first use).

Legacy code reads ``memory.chat_memory.messages``, sets ``memory.moving_summary_buffer``,
calls ``predict_new_summary`` and ``prune()``; LangChain's own tests do too. Each works like
stock on the bound thread (an unbound memory on a persistent store raises
``ThreadIdRequired``). A stock attribute memshift has no equivalent for raises an
``AttributeError`` that says what to use instead.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.messages import BaseMessage, get_buffer_string
from pydantic import AfterValidator

from adapters import MemoryView, ThreadRecord
from adapters.view import kept_run
from adapters.summarizer import run_summarizer
from compat._turns import as_turn, resolve_input, resolve_output

if TYPE_CHECKING:
    from langchain_core.prompts import BasePromptTemplate

    from compat._histories import WindowHistory
    from compat.memory import SummaryMemory

__all__ = ["BufferRenderer", "PromptField", "StockSurface", "Style", "forget_rendered"]


def _a_prompt(value: Any) -> Any:
    """Stock's check of ``prompt=``, made when one is given: importing ``BasePromptTemplate``
    with the facade would cost every command LangChain's runnables (~1 s)."""
    from langchain_core.prompts import BasePromptTemplate

    if value is not None and not isinstance(value, BasePromptTemplate):
        raise ValueError(f"prompt must be a BasePromptTemplate, got {type(value).__name__}")
    return value


if TYPE_CHECKING:
    PromptField = BasePromptTemplate | None
else:
    PromptField = Annotated[Any, AfterValidator(_a_prompt)]


class MovedFunctions:
    """``memory.<name>(...)`` that moved to ``compat.admin.<name>(memory, ...)``: the names
    are fixed here; the functions come from the loader ``compat/__init__.py`` registers (this
    module may not import ``compat.admin``, which builds memories), run at the first call of
    a moved name, so ``import compat`` never loads ``compat.admin``."""

    def __init__(self, names: Iterable[str], pending: Iterable[str] = ()) -> None:
        self.pending = frozenset(pending)  # moved lately: a PendingDeprecationWarning first
        self.names = frozenset(names) | self.pending
        self._loaders: list[Callable[[], Mapping[str, Any]]] = []
        self._functions: dict[str, Any] = {}

    def register(self, loader: Callable[[], Mapping[str, Any]]) -> None:
        self._loaders.append(loader)

    def update(self, functions: Mapping[str, Any]) -> None:
        """Functions given directly (as ``compat`` did before it loaded them lazily)."""
        self._functions.update(functions)

    def get(self, name: str) -> Any:
        if name not in self.names:
            return None
        if name not in self._functions:  # loaders are idempotent: no lock, no lost loader
            for load in self._loaders:
                self._functions.update(load())
        return self._functions.get(name)

    def __getitem__(self, name: str) -> Any:
        function = self.get(name)
        if function is None:
            raise KeyError(name)
        return function

    def __contains__(self, name: object) -> bool:
        return name in self.names


MOVED = MovedFunctions(
    ("pin", "unpin", "placement", "restore_thread", "resummarize", "summary_history",
     "thread_ids", "iter_thread_ids", "reopen", "open_read_only"),
    # documented in the guide and called by compat.testing's suites: warned as pending first
    pending=("forget", "arelease"))
# stock names with no memshift equivalent -> what to use instead
_INSTEAD = {
    "validate_prompt_input_variables": "nothing: SummaryMemory validates its prompt at construction",
    "summary_message_cls_": "summary_message_cls",
    "_get_input_output": "save_context(inputs, outputs) (memshift applies the stock key rules)",
    "get_num_tokens": "memory.active_policy.count(messages)",
}


class StockSurface:
    """Mixed into ``SummaryMemory``: the stock ``BaseMemory`` API (``load_memory_variables``,
    ``save_context``, ``clear`` and their async twins, rendered as stock renders them) and the
    stock attributes, each on the bound thread."""

    @property
    def memory_variables(self: SummaryMemory) -> list[str]:  # type: ignore[misc]
        return [self.memory_key]

    def prompt_messages(self: SummaryMemory, view: MemoryView) -> list[BaseMessage]:  # type: ignore[misc]
        """What an old chain receives: the summary as ``summary_message_cls`` (``SystemMessage``
        by default, like stock classic) then the window, whichever backend is active, so the
        flag never changes a prompt. ``create_agent`` keeps the middleware's own placement."""
        head = [self.summary_message_cls(content=view.summary)] if view.summary else []
        return [*head, *view.messages]

    def _render(self: SummaryMemory, view: MemoryView, rt: Any) -> dict[str, Any]:  # type: ignore[misc]
        if rt.renderer is not None and not self.return_messages:
            return {self.memory_key: rt.renderer.render(
                view.thread_id, view.summary, view.messages,
                (self.human_prefix, self.ai_prefix, self.summary_message_cls))}
        messages = self.prompt_messages(view)
        return {self.memory_key: messages if self.return_messages else get_buffer_string(
            messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)}

    def load_memory_variables(self: SummaryMemory,  # type: ignore[misc]
                              inputs: dict[str, Any]) -> dict[str, Any]:
        rt = self._rt
        tid = self._touch((inputs or {}).get(self.thread_key), rt)
        # a string rendering only reads: no copy of the window
        return self._render(rt.backend.load(tid, self.return_messages), rt)

    async def aload_memory_variables(self: SummaryMemory,  # type: ignore[misc]
                                     inputs: dict[str, Any]) -> dict[str, Any]:
        rt = self._rt
        tid = self._touch((inputs or {}).get(self.thread_key), rt)
        return self._render(await rt.backend.aload(tid, self.return_messages), rt)

    def _turn_from(self: SummaryMemory, inputs: dict[str, Any],  # type: ignore[misc]
                   outputs: dict[str, Any]) -> tuple[str, list]:
        tid = self._thread(inputs.get(self.thread_key))
        human = resolve_input(inputs, input_key=self.input_key,
                              memory_variables=self.memory_variables, thread_key=self.thread_key)
        ai = resolve_output(outputs, output_key=self.output_key, owner=type(self).__name__)
        return tid, as_turn(human, ai)

    def save_context(self: SummaryMemory, inputs: dict[str, Any],  # type: ignore[misc]
                     outputs: dict[str, Any]) -> None:
        self._save(*self._turn_from(inputs, outputs))

    async def asave_context(self: SummaryMemory, inputs: dict[str, Any],  # type: ignore[misc]
                            outputs: dict[str, Any]) -> None:
        await self._asave(*self._turn_from(inputs, outputs))

    def clear(self: SummaryMemory, thread_id: str | None = None) -> None:  # type: ignore[misc]
        """Forget the thread's summary and window (the audit transcript is kept); a legacy
        history written through is cleared too, as stock's ``clear()`` does."""
        rt = self._rt
        rt.backend.clear(tid := self._touch(thread_id, rt))  # adopted first, or it comes back
        if rt.adopter is not None:
            rt.adopter.clear(tid)

    async def aclear(self: SummaryMemory,  # type: ignore[misc]
                     thread_id: str | None = None) -> None:
        rt = self._rt
        await rt.backend.aclear(tid := self._touch(thread_id, rt))
        if rt.adopter is not None:
            rt.adopter.clear(tid)

    @property
    def chat_memory(self: SummaryMemory) -> WindowHistory:  # type: ignore[misc]
        from compat._histories import WindowHistory

        return WindowHistory(self, self._thread(None))

    @property
    def buffer(self: SummaryMemory) -> Any:  # type: ignore[misc]
        """The bound thread's rendering, as ``load_memory_variables`` gives it."""
        return self.load_memory_variables({})[self.memory_key]

    async def abuffer(self: SummaryMemory) -> Any:  # type: ignore[misc]
        return (await self.aload_memory_variables({}))[self.memory_key]

    @property
    def moving_summary_buffer(self: SummaryMemory) -> str:  # type: ignore[misc]
        return self.load().summary

    @moving_summary_buffer.setter
    def moving_summary_buffer(self: SummaryMemory, summary: str) -> None:  # type: ignore[misc]
        """Replace the running summary, keeping the window and the fold count."""
        view = self.load()
        self._rt.backend.restore(ThreadRecord(view.thread_id, str(summary), view.messages,
                                           view.folds))

    def predict_new_summary(self: SummaryMemory, messages: list[BaseMessage],  # type: ignore[misc]
                            existing_summary: str) -> str:
        """The summarizer on ``messages`` onto ``existing_summary`` (nothing is stored)."""
        policy = self.active_policy
        return run_summarizer(self._rt.backend.summarizer, existing_summary, messages,
                              retries=policy.summary_retries, timeout=policy.summary_timeout,
                              max_tokens=policy.max_summary_tokens, counter=policy.counter)

    async def apredict_new_summary(self: SummaryMemory, messages: list[BaseMessage],  # type: ignore[misc]
                                   existing_summary: str) -> str:
        from adapters.io import run_async
        from adapters.summarizer import summarize_steps

        policy = self.active_policy
        return await run_async(summarize_steps(
            self._rt.backend.summarizer, existing_summary, messages,
            retries=policy.summary_retries, timeout=policy.summary_timeout,
            max_tokens=policy.max_summary_tokens, counter=policy.counter))

    def prune(self: SummaryMemory) -> None:  # type: ignore[misc]
        """Fold the bound thread now if it is over the policy's limit."""
        self._rt.backend.prune(self._thread(None))

    async def aprune(self: SummaryMemory) -> None:  # type: ignore[misc]
        await self._rt.backend.aprune(self._thread(None))

    # -- moved to compat.admin (deprecated aliases for one minor version) ------------------
    @classmethod
    def read_only(cls, store: str, backend: str = "classic", **kwargs: Any) -> SummaryMemory:
        """Deprecated: ``compat.admin.open_read_only(url)``."""
        warnings.warn("SummaryMemory.read_only is compat.admin.open_read_only",
                      DeprecationWarning, stacklevel=2)
        return MOVED["open_read_only"](store, backend=backend, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "_rt":  # read on every call: pydantic's documented slot, not its lookup
            return self.__pydantic_private__["_rt"]  # type: ignore[attr-defined]
        function = MOVED.get(name) if name[0] != "_" and name != "open_read_only" else None
        if function is not None:
            warnings.warn(f"memory.{name}(...) is compat.admin.{name}(memory, ...)",
                          PendingDeprecationWarning if name in MOVED.pending else
                          DeprecationWarning, stacklevel=2)
            return lambda *args, **kwargs: function(self, *args, **kwargs)
        try:
            return super().__getattr__(name)  # type: ignore[misc]
        except AttributeError:
            if name in _INSTEAD:
                raise AttributeError(
                    f"SummaryMemory has no stock attribute {name!r}; use {_INSTEAD[name]}") from None
            raise


# -- the history as a string ------------------------------------------------------------
# The history as a string (``get_buffer_string``), rendered once per message.
#
# On the in-memory store a classic window holds the store's own message objects, and the store
# never edits them; on PostgreSQL a string load's window holds the objects the one-statement
# load keeps per thread (``adapters.stores.postgres_classic``), never edited either (a load
# that takes the usual path decodes new objects: rendered again). Between two loads a
# thread's window only grows at its end (a turn) or loses its head (a fold).
# ``get_buffer_string`` renders each message on its own and joins the lines with ``"\\n"``,
# so the lines of messages rendered by an earlier load are reused (matched by
# identity: ``kept_run``) and only new messages are rendered, by ``get_buffer_string`` itself.
# A string load of a 60-message window then costs ~3 µs instead of ~45 µs. The cache holds the
# messages, so an identity cannot be reused while it is cached. From the first message that is
# not the same object on (a replaced window, a restore), messages are rendered again. An
# erasure drops the thread's rendering (``forget``).
Style = tuple[str, str, type[BaseMessage]]  # human prefix, AI prefix, summary message class
# thread id -> (style, messages rendered, their lines, summary, its line, characters held)
_Entry = tuple[Style, tuple[BaseMessage, ...], list[str], str, str, int]


class BufferRenderer:
    """``get_buffer_string([summary_message_cls(summary), *window], prefixes)``, by thread.
    The style is given on every call (a memory's prefixes may be reassigned). ``chars``: the
    rendered text held, at most (a store whose cached messages it would otherwise outlive)."""

    def __init__(self, threads: int = 1024, chars: int | None = None) -> None:
        self.threads = threads  # cleared beyond this many: a bound, not an LRU
        self.chars = chars
        self._cache: dict[str, _Entry] = {}
        self._held = 0  # characters of the cached renderings
        self._lock = threading.Lock()  # the cache and its count change together
        _RENDERERS.add(self)

    def _line(self, message: BaseMessage, style: Style) -> str:
        return get_buffer_string([message], human_prefix=style[0], ai_prefix=style[1])

    def render(self, thread_id: str, summary: str, window: Sequence[BaseMessage],
               style: Style) -> str:
        entry = self._cache.get(thread_id)
        lines: list[str] = []
        head = ""
        if entry is not None and entry[0] == style:
            _, seen, seen_lines, seen_summary, seen_head, _ = entry
            if summary and summary == seen_summary:
                head = seen_head
            start, n = kept_run(seen, window)
            lines = seen_lines[start:start + n]  # a copy: the cached entry is never changed
        lines.extend(self._line(m, style) for m in window[len(lines):])
        if summary and not head:
            head = self._line(style[2](content=summary), style)
        text = "\n".join([head, *lines] if summary else lines)
        with self._lock:
            old = self._cache.pop(thread_id, None)
            self._held -= old[5] if old is not None else 0
            if len(self._cache) >= self.threads or \
                    (self.chars is not None and self._held + len(text) > self.chars):
                self._cache.clear()
                self._held = 0
            self._cache[thread_id] = (style, tuple(window), lines, summary, head, len(text))
            self._held += len(text)
        return text

    def forget(self, thread_id: str) -> None:
        """Drop the thread's rendering (an erased thread leaves no text here)."""
        with self._lock:
            old = self._cache.pop(thread_id, None)
            self._held -= old[5] if old is not None else 0


_RENDERERS: weakref.WeakSet[BufferRenderer] = weakref.WeakSet()  # every live one


def forget_rendered(thread_id: str) -> None:
    """Drop the thread's rendering from every renderer of this process (an erasure)."""
    for renderer in list(_RENDERERS):
        renderer.forget(thread_id)


def __getattr__(name: str) -> Any:
    # ``compat.history`` (an old name of this module) had the chat histories
    if name in ("MemshiftChatHistory", "WindowHistory"):
        from compat import _histories

        return getattr(_histories, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
