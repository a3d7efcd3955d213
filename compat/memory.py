"""``SummaryMemory``: the facade. A drop-in ``BaseMemory`` whose backend is a flag.

It resolves threads, keys and configuration and hands every memory call to one engine (a
router over both backends, or shadow): ``load``/``save`` and their async twins, the stock
``BaseMemory`` API, the transcript, the cutover handles. Operations that are not memory
(placements, restores, resummarize, fold records, thread listing, read-only opening) are
functions of ``compat.admin`` that take a memory (``forget`` and ``arelease`` too: the old
``memory.forget``/``memory.arelease`` still answer, with a PendingDeprecationWarning); the
stock attributes live in ``compat._stock``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import ConfigDict, Field, PrivateAttr, field_serializer

from adapters import BACKENDS, MemoryPolicy, MemoryView
from adapters._upstream import check_upstream
from adapters.errors import ConfigError, ThreadIdRequired, UnknownArgumentError
from adapters.stores.base import require
from adapters.stores.own_saver import OwnSaver
from adapters.stores.quick import keeps_messages
from adapters.summarizer import build_summarizer
from compat._adopt import history_thread, legacy_adopter
from compat._engines import Runtime, build_engine, open_memory_store, resolve_policy
from compat._stock import BufferRenderer, PromptField, StockSurface
from compat._turns import as_messages, as_turn, check_thread_id
from compat.config import (
    FLAT, LegacyConfig, ShadowConfig, StagedConfig, dump_setting, split_flat,
)

if TYPE_CHECKING:
    from compat._histories import MemshiftChatHistory

__all__ = ["SummaryMemory"]

BACKEND_ENV = "MEMSHIFT_BACKEND"
STORE_ENV = "MEMSHIFT_STORE"
DEFAULT_MAX_TOKEN_LIMIT = 2000  # stock ConversationSummaryBufferMemory default
RENDERED_CHARS = 2_000_000  # string renderings kept of a store's quick loads, at most


class SummaryMemory(StockSurface, BaseMemory):
    """Conversation-summary memory with a switchable backend (``classic`` | ``middleware`` |
    ``staged`` | ``shadow``). Accepts the stock ``ConversationSummaryBufferMemory`` keywords,
    so a legacy call site only changes the class name. Unknown keywords raise
    ``UnknownArgumentError``."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", populate_by_name=True)

    backend: str | None = None  # else $MEMSHIFT_BACKEND, else "classic"
    policy: MemoryPolicy | None = None
    llm: Any = None
    summarizer: Any = None
    store: Any = Field(default=None, repr=False)  # a URL may carry a password
    # the application's own LangGraph saver for middleware checkpoints (``checkpointer=``)
    own_checkpointer: Any = Field(default=None, alias="checkpointer", repr=False)
    thread_id: str | None = None
    thread_key: str = "thread_id"
    move_on_touch: bool = True  # a thread found on the other backend moves; False: ThreadElsewhere
    create_schema: bool = True  # False: no DDL at open (`memshift schema upgrade` runs it)
    shadow: ShadowConfig | None = None
    staged: StagedConfig | None = Field(default=None, repr=False)  # may name a store
    legacy: LegacyConfig | None = Field(default=None, repr=False)
    # stock ConversationSummaryBufferMemory keywords, same defaults
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    prompt: PromptField = None
    summary_message_cls: type[BaseMessage] = SystemMessage
    max_token_limit: int | None = None

    # what the memory runs on, in one private attribute (one read per call, not one per part)
    _rt: Runtime = PrivateAttr(default_factory=lambda: Runtime())

    def __init__(self, **kwargs: Any) -> None:
        fields = type(self).model_fields
        known = set(fields) | {f.alias for f in fields.values() if f.alias} | set(FLAT)
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise UnknownArgumentError(f"SummaryMemory got unexpected keyword(s) {unknown}; "
                                       f"accepted: {sorted(known)}")
        super().__init__(**split_flat(kwargs))
        # Built after validation (not in model_post_init) so memshift errors keep their type.
        name = self.backend or os.environ.get(BACKEND_ENV) or "classic"
        if name not in (*BACKENDS, "shadow", "staged"):
            raise ConfigError(f"unknown backend {name!r} (from "
                              f"{'argument' if self.backend else BACKEND_ENV}); "
                              f"use one of {sorted((*BACKENDS, 'shadow', 'staged'))}")
        check_upstream(classic=name != "middleware")
        rt = self._rt
        rt.policy = resolve_policy(self.policy, self.max_token_limit, self.prompt,
                                   DEFAULT_MAX_TOKEN_LIMIT, self.llm)
        if self.max_token_limit is None:  # stock reads it: the effective limit, not None
            self.max_token_limit = rt.policy.max_tokens
        summarizer = build_summarizer(rt.policy, self.llm, self.summarizer,
                                      human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)
        if self.thread_id is not None:
            check_thread_id(self.thread_id)
        history = self.legacy.history if self.legacy else None
        rt.store, rt.borrowed = open_memory_store(
            self.store if self.store is not None else os.environ.get(STORE_ENV), history,
            self.create_schema)
        if self.own_checkpointer is not None:
            rt.store.checkpoints = OwnSaver(self.own_checkpointer, rt.store.checkpoints.keep)
        if history is not None and self.thread_id is None:
            if (session := history_thread(history)) is not None:
                self.thread_id = session  # keyed by the history's own id
        rt.backend = build_engine(self, name, summarizer, rt.store)
        rt.adopter = legacy_adopter(self, rt.store, rt.private_thread)
        # a classic window whose objects the store keeps (in memory; PostgreSQL's quick
        # load): strings are rendered once per message
        if name == "classic" and rt.store.shares_messages:
            rt.renderer = BufferRenderer()
        elif name == "classic" and keeps_messages(rt.store):
            rt.renderer = BufferRenderer(chars=RENDERED_CHARS)  # it may outlive the store's

    @field_serializer("store", "staged", "legacy")
    def _dump_secrets(self, value: Any) -> Any:
        """``model_dump`` never carries a password: URLs are redacted, objects named."""
        return dump_setting(value)

    # -- what it is -------------------------------------------------------------------------
    backend_name = property(lambda self: self._rt.backend.name, doc="Which engine is active: "
                            "``classic`` | ``middleware`` | ``staged`` | ``shadow``.")
    backend_impl = property(lambda self: self._rt.backend,
                            doc="The engine behind this memory (``adapters.protocol.Engine``).")
    active_policy = property(lambda self: self._rt.policy, doc="The effective MemoryPolicy.")
    store_url = property(lambda self: self._rt.store.url, doc="The store URL, password masked.")

    @property
    def mismatches(self) -> list:
        """Recorded shadow divergences (thread id, turn, kind, diff); ``[]`` off shadow."""
        return list(self._rt.backend.mismatches)

    # -- threads ----------------------------------------------------------------------------
    def for_thread(self, thread_id: str) -> SummaryMemory:
        """A view of this memory bound to one thread (same engine and store)."""
        return self.model_copy(update={"thread_id": check_thread_id(thread_id)})

    def _thread(self, thread_id: str | None, rt: Runtime | None = None) -> str:
        """The thread a call is about: explicit, else bound, else (in-memory store only) this
        object's own private thread — one object, one conversation, as with the stock class."""
        tid = thread_id if thread_id is not None else self.thread_id
        if tid is not None:
            return check_thread_id(tid)
        rt = rt or self._rt
        if not rt.store.persistent:
            return rt.private_thread
        raise ThreadIdRequired(
            f"no thread id, and this memory is on a persistent store ({rt.store.url}): a "
            "stable id is what finds the conversation again after a restart. Pass it in "
            f"inputs[{self.thread_key!r}], bind one with memory.for_thread(tid), or build the "
            "memory with SummaryMemory(thread_id=...)")

    def _touch(self, thread_id: str | None, rt: Runtime | None = None) -> str:
        """The thread id, with its legacy conversation adopted first if there is one."""
        rt = rt or self._rt
        tid = self._thread(thread_id, rt)
        if rt.adopter is not None:
            rt.adopter.ensure(self, tid)
        return tid

    # -- the memshift API -------------------------------------------------------------------
    def load(self, thread_id: str | None = None) -> MemoryView:
        rt = self._rt
        return rt.backend.load(self._touch(thread_id, rt))

    async def aload(self, thread_id: str | None = None) -> MemoryView:
        rt = self._rt
        return await rt.backend.aload(self._touch(thread_id, rt))

    def save(self, thread_id: str | None, human: Any, ai: Any) -> None:
        """Store one turn: ``human`` str|message; ``ai`` str|message|list (an agent turn)."""
        self._save(thread_id, as_turn(human, ai))

    async def asave(self, thread_id: str | None, human: Any, ai: Any) -> None:
        await self._asave(thread_id, as_turn(human, ai))

    def save_messages(self, thread_id: str | None, messages: Sequence[BaseMessage],
                      fold: bool = True) -> None:
        """Store already-built messages as one turn (transcript, window and state in one
        transaction; the fold, if due, after it commits; ``fold=False``: append only, as a
        stock ``chat_memory.add_messages``)."""
        self._save(thread_id, as_messages(messages), fold)

    async def asave_messages(self, thread_id: str | None, messages: Sequence[BaseMessage],
                             fold: bool = True) -> None:
        await self._asave(thread_id, as_messages(messages), fold)

    def _through(self, thread_id: str | None, turn: list[BaseMessage], rt: Runtime) -> str:
        """The thread; a legacy history written through gets the turn first."""
        tid = self._touch(thread_id, rt)
        if rt.adopter is not None:
            rt.adopter.before_save(tid, turn, rt.policy)
        return tid

    def _save(self, thread_id: str | None, turn: list[BaseMessage], fold: bool = True) -> None:
        rt = self._rt
        rt.backend.save(self._through(thread_id, turn, rt), turn, fold)

    async def _asave(self, thread_id: str | None, turn: list[BaseMessage],
                     fold: bool = True) -> None:
        rt = self._rt
        await rt.backend.asave(self._through(thread_id, turn, rt), turn, fold)

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        """Every message ever saved on the thread, in order; ``[]`` for an unknown thread."""
        store = require(self._rt.backend.home_of(tid := check_thread_id(thread_id)), "reads",
                        "memory.transcript")
        with store.guard("transcript"):
            return store.transcript(tid)

    def chat_history(self, session_id: str) -> MemshiftChatHistory:
        """For ``RunnableWithMessageHistory(get_session_history=memory.chat_history)``."""
        from compat._histories import MemshiftChatHistory

        return MemshiftChatHistory(self, check_thread_id(session_id))

    # -- lifetime ---------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> None:
        """Wait for background folds and a shadow's queued writes (every save has its fold)."""
        self._rt.backend.drain(timeout)

    async def adrain(self) -> None:  # ``drain`` from an event loop: this loop's fold tasks
        await self._rt.backend.adrain()

    def close(self, drain: bool = True) -> None:
        """Release the stores after draining; ``drain=False`` drops queued background work (a
        shadow's writes are counted per thread as ``candidate_dropped``)."""
        rt = self._rt
        rt.backend.close(drain)
        for store in rt.backend.stores():
            if not (rt.borrowed and store is rt.store):  # shared: others still use it
                store.close()

    async def aclose(self, drain: bool = True) -> None:
        """This loop's background folds (``drain``), its async connections, then the rest.
        (A memory that outlives its loop: ``compat.admin.arelease(memory)``.)"""
        if drain:
            await self.adrain()
        for store in self._rt.backend.stores():
            await store.aclose()
        self.close(drain)

    def __enter__(self) -> SummaryMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SummaryMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- cutover ----------------------------------------------------------------------------
    @property
    def checkpointer(self) -> Any:
        """The LangGraph checkpointer holding middleware threads (for ``create_agent``). Its
        first read of a thread that lives on classic moves the thread to middleware, so the
        agent continues every thread with its summary and window."""
        rt = self._rt
        if rt.checkpointer is None:
            from adapters.stores.placed import PlacedSaver

            engine = self._require_middleware("checkpointer")
            rt.checkpointer = PlacedSaver(engine.store.checkpoints.checkpointer, rt.backend,
                                          engine.store, touch=self._touch)
        return rt.checkpointer

    @property
    def middleware(self) -> Any:
        """The configured ``SummarizationMiddleware`` (for ``create_agent(middleware=[...])``)."""
        return self._require_middleware("middleware").middleware

    def _require_middleware(self, what: str) -> Any:
        rt = self._rt
        engine = rt.backend.middleware_engine()
        if engine is None or self.backend_name == "classic":
            raise ConfigError(f"memory.{what} is for the middleware backend; this memory runs "
                              f"{self.backend_name!r}. Flip the flag to backend='middleware' "
                              "(threads move at first touch) or use backend='staged'.")
        if rt.adopter is not None and rt.adopter.write is not None and engine.hooks is not None:
            engine.hooks.write_through(rt.adopter.after_agent_turn)  # agent turns too
        return engine
