"""``SummaryMemory``: the facade. A drop-in ``BaseMemory`` whose backend is a flag.

Thin on purpose: it resolves threads, keys and configuration, writes the transcript,
and delegates memory behaviour to one backend from ``adapters``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import BaseMessage, SystemMessage, get_buffer_string
from langchain_core.prompts import BasePromptTemplate
from pydantic import ConfigDict, Field, PrivateAttr, field_serializer

from adapters import BACKENDS, MemoryPolicy, MemoryView, Store, ThreadRecord, open_store, redact_url
from adapters._upstream import check_upstream
from adapters.stores.base import Placement
from adapters.errors import ConfigError, StoreError, ThreadIdRequired, UnknownArgumentError
from adapters.fold import FoldRecord
from adapters.engine import new_id
from adapters.summarizer import build_summarizer, summarizer_name
from adapters.view import detach, set_id
from adapters.stores.own_saver import OwnSaver
from compat._adopt import (
    explicit_memory_store_warning, history_store, history_thread, is_persistent, legacy_adopter,
    shared_store,
)
from compat._engines import Engine, build_engine
from compat._keys import resolve_input, resolve_output
from compat._render import BufferRenderer
from compat._stock import StockSurface
from compat._turns import as_messages, as_turn, check_thread_id
from compat.history import MemshiftChatHistory

__all__ = ["SummaryMemory"]


BACKEND_ENV = "MEMSHIFT_BACKEND"
STORE_ENV = "MEMSHIFT_STORE"
DEFAULT_MAX_TOKEN_LIMIT = 2000  # stock ConversationSummaryBufferMemory default


class SummaryMemory(StockSurface, BaseMemory):
    """Conversation-summary memory with a switchable backend (``classic`` | ``middleware``).

    Accepts the stock ``ConversationSummaryBufferMemory`` keywords, so a legacy call
    site only changes the class name. Unknown keywords raise ``UnknownArgumentError``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", populate_by_name=True)

    backend: str | None = None
    policy: MemoryPolicy | None = None
    llm: Any = None
    summarizer: Any = None
    store: Any = Field(default=None, repr=False)  # a URL may carry a password
    # the application's own LangGraph saver for middleware checkpoints (``checkpointer=``)
    own_checkpointer: Any = Field(default=None, alias="checkpointer", repr=False)
    # legacy conversations adopted at first touch (``chat_memory=``, a stock table in the store)
    legacy_history: Any = Field(default=None, alias="chat_memory", repr=False)
    legacy_write: bool | None = None  # default: on for a persistent chat_memory=, else off
    legacy_table: str | None = None
    adopt_legacy: bool = True
    thread_id: str | None = None
    thread_key: str = "thread_id"
    # stock ConversationSummaryBufferMemory keywords, same defaults
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    prompt: BasePromptTemplate | None = None
    summary_message_cls: type[BaseMessage] = SystemMessage
    max_token_limit: int | None = None
    # shadow mode (backend="shadow")
    primary: str = "classic"
    candidate: str = "middleware"
    candidate_policy: MemoryPolicy | None = None
    on_mismatch: Any = None
    shadow_sample: float | None = None  # else $MEMSHIFT_SHADOW_SAMPLE, else 1.0
    shadow_log: str | None = None  # else $MEMSHIFT_SHADOW_LOG
    shadow_timeout: float = 5.0
    # staged cutover (backend="staged")
    rollout: float | None = None  # else $MEMSHIFT_ROLLOUT, else 0.0
    route: Any = None  # thread_id -> "classic" | "middleware" (instead of the rollout share)
    target_store: Any = Field(default=None, repr=False)  # middleware on another store
    # a thread found on the other backend moves at first touch; False: ThreadElsewhere
    move_on_touch: bool = True

    _backend: Engine = PrivateAttr()
    _store: Store = PrivateAttr()
    _policy: MemoryPolicy = PrivateAttr()
    _private_thread: str = PrivateAttr(default_factory=lambda: f"private-{uuid.uuid4()}")
    _adopter: Any = PrivateAttr(default=None)
    _borrowed: bool = PrivateAttr(default=False)  # a store shared by memories on one database
    _renderer: BufferRenderer | None = PrivateAttr(default=None)
    _checkpointer: Any = PrivateAttr(default=None)

    def __init__(self, **kwargs: Any) -> None:
        fields = type(self).model_fields
        known = set(fields) | {f.alias for f in fields.values() if f.alias}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise UnknownArgumentError(f"SummaryMemory got unexpected keyword(s) {unknown}; "
                                       f"accepted: {sorted(type(self).model_fields)}")
        super().__init__(**kwargs)
        # Built after validation (not in model_post_init) so memshift errors keep their type.
        name = self.backend or os.environ.get(BACKEND_ENV) or "classic"
        if name not in (*BACKENDS, "shadow", "staged"):
            raise ConfigError(f"unknown backend {name!r} (from "
                              f"{'argument' if self.backend else BACKEND_ENV}); "
                              f"use one of {sorted((*BACKENDS, 'shadow', 'staged'))}")
        check_upstream()
        self._policy = self._resolve_policy()
        if self.max_token_limit is None:  # stock reads it: the effective limit, not None
            self.__dict__["max_token_limit"] = self._policy.max_tokens
        summarizer = build_summarizer(self._policy, self.llm, self.summarizer,
                                      human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)
        if self.thread_id is not None:
            check_thread_id(self.thread_id)
        self._store = self._open_store()
        if self.own_checkpointer is not None:
            self._store.checkpoints = OwnSaver(self.own_checkpointer, self._store.checkpoints.keep)
        if self.legacy_history is not None and self.thread_id is None:
            if (session := history_thread(self.legacy_history)) is not None:
                self.__dict__["thread_id"] = session  # keyed by the history's own id
        self._backend = build_engine(self, name, summarizer, self._store)
        self._adopter = legacy_adopter(self, self._store, self._private_thread)
        # a classic window on the memory store keeps its objects: strings are rendered once
        if name == "classic" and self._store.shares_messages:  # per message
            self._renderer = BufferRenderer()

    def _open_store(self) -> Store:
        """``store=``, else ``$MEMSHIFT_STORE``, else where a ``chat_memory=`` history lives
        (its SQL database: memshift's tables beside it), else in memory."""
        url = self.store if self.store is not None else os.environ.get(STORE_ENV)
        if url is None and self.legacy_history is not None:
            derived = history_store(self.legacy_history)
            if derived is not None:
                self._borrowed = True
                return shared_store(derived)
        elif url in ("memory", "memory://") and self.legacy_history is not None and \
                is_persistent(self.legacy_history):
            explicit_memory_store_warning(self.legacy_history)
        return open_store(url)

    @field_serializer("store", "target_store")
    def _dump_store(self, value: Any) -> str | None:
        """``model_dump`` never carries a password: URLs are redacted, store objects named."""
        if value is None or isinstance(value, str):
            return redact_url(value) if value else value
        return type(value).__name__

    def pin(self, thread_id: str, backend: str) -> Placement:
        """Serve this thread from ``backend`` whatever the flag or rollout (moved now)."""
        return self._backend.pin(check_thread_id(thread_id), backend)

    def unpin(self, thread_id: str) -> Placement | None:
        """Let the flag or rollout decide this thread again from its next touch."""
        return self._backend.unpin(check_thread_id(thread_id))

    def placement(self, thread_id: str) -> Placement | None:
        """Where the thread lives (backend, version, since, pinned), or ``None`` before its
        first save."""
        return self._backend.placement_of(check_thread_id(thread_id))

    def _resolve_policy(self) -> MemoryPolicy:
        policy = self.policy
        if policy is None:
            policy = MemoryPolicy(max_tokens=self.max_token_limit or DEFAULT_MAX_TOKEN_LIMIT)
        elif self.max_token_limit is not None and self.max_token_limit != policy.max_tokens:
            raise ConfigError(f"max_token_limit={self.max_token_limit} conflicts with "
                              f"policy.max_tokens={policy.max_tokens}; pass one of them")
        if self.prompt is not None:
            policy = replace(policy, summary_prompt=self.prompt)  # type: ignore[arg-type]
        return policy

    # -- identity ----------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        """Which backend is active: ``classic`` | ``middleware`` | ``shadow``."""
        return self._backend.name

    @property
    def mismatches(self) -> list:
        """Recorded shadow divergences (thread id, turn, kind, diff); ``[]`` off shadow."""
        return list(self._backend.mismatches)

    @property
    def active_policy(self) -> MemoryPolicy:
        return self._policy

    @property
    def backend_impl(self) -> Engine:
        """The engine behind this memory: a router over both backends (``StagedEngine``),
        or a ``ShadowEngine`` in shadow mode."""
        return self._backend

    @property
    def store_url(self) -> str:
        """The store URL with any password masked."""
        return self._store.url

    def for_thread(self, thread_id: str) -> SummaryMemory:
        """A view of this memory bound to one thread (same backend and store)."""
        return self.model_copy(update={"thread_id": check_thread_id(thread_id)})

    def _thread(self, thread_id: str | None) -> str:
        """The thread a call is about: explicit, else bound, else (in-memory store only) this
        object's own private thread — one object, one conversation, as with the stock class."""
        tid = thread_id if thread_id is not None else self.thread_id
        if tid is not None:
            return check_thread_id(tid)
        if not self._store.persistent:
            return self._private_thread
        raise ThreadIdRequired(
            f"no thread id, and this memory is on a persistent store ({self._store.url}): a "
            "stable id is what finds the conversation again after a restart. Pass it in "
            f"inputs[{self.thread_key!r}], bind one with memory.for_thread(tid), or build the "
            "memory with SummaryMemory(thread_id=...)")

    # -- the memshift API ------------------------------------------------------------
    def _touch(self, thread_id: str | None) -> str:
        """The thread id, with its legacy conversation adopted first if there is one."""
        tid = self._thread(thread_id)
        if self._adopter is not None:
            self._adopter.ensure(self, tid)
        return tid

    def load(self, thread_id: str | None = None) -> MemoryView:
        return self._backend.load(self._touch(thread_id))

    async def aload(self, thread_id: str | None = None) -> MemoryView:
        return await self._backend.aload(self._touch(thread_id))

    def save(self, thread_id: str | None, human: Any, ai: Any) -> None:
        """Store one turn: ``human`` str|message; ``ai`` str|message|list (an agent turn)."""
        self._save(thread_id, as_turn(human, ai))  # fresh: no as_messages (it would copy again)

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

    def _through(self, thread_id: str | None, turn: list[BaseMessage]) -> str:
        """The thread; a legacy history written through gets the turn first (ids set now,
        so the history and memshift hold the same messages)."""
        tid = self._touch(thread_id)
        if self._adopter is not None and self._adopter.write is not None:
            self._policy.check_sizes(turn)  # refused here, or the history would hold it
            for message in turn:
                if message.id is None:
                    set_id(message, new_id())  # an owned turn: nobody else holds it
            self._adopter.before_save(tid, [detach(m) for m in turn])  # its own copies
        return tid

    def _save(self, thread_id: str | None, turn: list[BaseMessage], fold: bool = True) -> None:
        self._backend.save(self._through(thread_id, turn), turn, fold)

    async def _asave(self, thread_id: str | None, turn: list[BaseMessage],
                     fold: bool = True) -> None:
        await self._backend.asave(self._through(thread_id, turn), turn, fold)

    def _home(self, thread_id: str) -> Store:
        """The store holding the thread's transcript and fold records: where it lives now
        (a staged memory on two stores has one of each)."""
        homes = self._homes()
        if len(homes) == 1:
            return homes[0]
        return self._backend.locate(thread_id, move=False).store

    def _homes(self) -> list[Store]:
        """The stores that hold transcripts (a shadow candidate's mirror holds none)."""
        found: dict[int, Store] = {}
        for leaf in self._backend.leaves():
            if leaf.owns_transcript:
                found.setdefault(id(leaf.store), leaf.store)
        return list(found.values())

    def summary_history(self, thread_id: str) -> list[dict[str, Any]]:
        """Every fold of the thread, oldest first: version, trigger, what was folded and
        kept, summary tokens, summarizer, prompt version, duration, error."""
        store = self._home(tid := check_thread_id(thread_id))
        with store.guard("summary_history"):
            return store.fold_records(tid)

    def transcript(self, thread_id: str) -> list[BaseMessage]:
        """Every message ever saved on the thread, in order; ``[]`` for an unknown thread."""
        store = self._home(tid := check_thread_id(thread_id))
        with store.guard("transcript"):
            return store.transcript(tid)

    def thread_ids(self) -> list[str]:
        """Every thread with a transcript in this memory's stores, in first-seen order."""
        homes = self._homes()
        return list(self.iter_thread_ids()) if len(homes) > 1 else self._guarded_ids(homes[0])

    @staticmethod
    def _guarded_ids(store: Store) -> list[str]:
        with store.guard("thread_ids"):
            return store.thread_ids()

    def iter_thread_ids(self) -> Iterator[str]:
        """Every thread with a transcript, streamed (each once, across stores)."""
        homes = self._homes()
        if len(homes) == 1:
            return homes[0].iter_thread_ids()
        return _unique(store.iter_thread_ids() for store in homes)

    def restore_thread(self, record: ThreadRecord, fold_record: FoldRecord | None = None,
                       expect_last_id: str | None = None) -> bool:
        """Write a thread's transcript (idempotent by message id), summary and window, in
        one transaction, with ``fold_record`` (what produced this summary: a backup, a
        migration) when given: the state and the record that describes it commit together.
        ``expect_last_id``: a compare-and-set — written only if the thread's newest transcript
        message is still that one (``""``: only if it has none); gives whether it wrote."""
        check_thread_id(record.thread_id)
        if fold_record is not None and fold_record.thread_id != record.thread_id:
            raise ConfigError(f"the fold record is for thread {fold_record.thread_id!r}, the "
                              f"state for {record.thread_id!r}; nothing was written")
        return self._backend.restore(record, expect_last_id=expect_last_id,
                                     fold_record=fold_record)

    def resummarize(self, thread_id: str, llm: Any = None,
                    policy: MemoryPolicy | None = None, attempts: int = 3) -> MemoryView:
        """Rebuild the running summary from the raw transcript (after a summarizer or prompt
        change). The rebuild runs with no lock held; it is written (with its fold record, in
        one transaction) only if no turn was saved meanwhile, else rebuilt again."""
        from compat._rebuild import rebuild_fold_record, rebuild_record, summarizer_for

        tid = check_thread_id(thread_id)
        policy = policy or self._policy
        summarizer = summarizer_for(self, policy, llm)
        for _ in range(attempts):
            start = time.perf_counter()
            where = self._backend.locate(tid)
            transcript = where.store.transcript(tid)
            record = rebuild_record(self, tid, transcript, policy, summarizer,
                                    backend=where.backend)
            fold = rebuild_fold_record(tid, transcript, record, policy, trigger="resummarize",
                                       summarizer=summarizer_name(summarizer),
                                       backend=self.backend_name, started=start)
            last = transcript[-1].id if transcript else None
            if self._backend.restore(record, expect_last_id=last, fold_record=fold):
                return self.load(tid)
        raise StoreError(f"resummarize gave up after {attempts} attempts: the thread kept "
                         "receiving turns; retry when it is quiet")

    @classmethod
    def read_only(cls, store: str, backend: str = "classic", **kwargs: Any) -> SummaryMemory:
        """A memory that reads an existing SQLite or PostgreSQL store and can never write to it
        (reports, dashboards and audits beside the live app): ``load``, the string and message
        histories, ``transcript``, ``summary_history`` and ``thread_ids`` work; every write
        raises ``StoreError``. SQLite opens with ``mode=ro`` (a missing file stays missing),
        PostgreSQL sessions with ``default_transaction_read_only=on``; no schema is created."""
        from compat._cli_common import show_url
        from compat._cli_readonly import open_read_only
        from compat._cli_urls import kind_of

        if backend not in ("classic", "middleware"):
            raise ConfigError(f"a read-only memory reads with 'classic' or 'middleware', got {backend!r}")
        if not isinstance(store, str) or kind_of(store) == "memory":
            raise ConfigError("read_only needs a sqlite:/// or postgresql:// URL: an in-memory "
                              "store has nothing to read")
        opened = open_read_only(store)
        if opened is None:
            raise StoreError(f"{show_url(store)} holds no memshift tables: nothing to read")
        return cls(backend=backend, store=opened, **kwargs)

    def reopen(self) -> SummaryMemory:
        """A new memory with this configuration and its own connection to the same store."""
        return type(self)(**{name: getattr(self, name) for name in self.model_fields_set})

    def close(self, drain: bool = True) -> None:
        """Release the stores' connections (pools, files). A shadow memory first waits for
        its queued candidate writes (``drain=False``: drops them, each counted as a
        ``candidate_dropped`` mismatch)."""
        self._backend.close(drain)
        for store in self._backend.stores():
            if not (self._borrowed and store is self._store):  # shared: others still use it
                store.close()

    async def arelease(self) -> None:
        """Release the async connections of the running event loop (call it before a loop
        ends when the memory outlives the loop, e.g. one ``asyncio.run`` per request)."""
        for store in self._backend.stores():
            await store.aclose()

    async def aclose(self, drain: bool = True) -> None:
        """Release this event loop's async connections, then everything else."""
        await self.arelease()
        self.close(drain)

    async def __aenter__(self) -> SummaryMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> SummaryMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat_history(self, session_id: str) -> MemshiftChatHistory:
        """For ``RunnableWithMessageHistory(get_session_history=memory.chat_history)``."""
        return MemshiftChatHistory(self, check_thread_id(session_id))

    # -- cutover ---------------------------------------------------------------------
    @property
    def checkpointer(self) -> Any:
        """The LangGraph checkpointer holding middleware threads (for ``create_agent``). Its
        first read of a thread that lives on classic moves the thread to middleware, so the
        agent continues every thread with its summary and window."""
        if self._checkpointer is None:
            from adapters.stores.placed import PlacedSaver

            engine = self._require_middleware("checkpointer")
            self._checkpointer = PlacedSaver(engine.store.checkpoints.checkpointer,
                                             self._backend, touch=self._touch)
        return self._checkpointer

    @property
    def middleware(self) -> Any:
        """The configured ``SummarizationMiddleware`` (for ``create_agent(middleware=[...])``)."""
        return self._require_middleware("middleware").middleware

    def _require_middleware(self, what: str) -> Any:
        engine = self._backend.middleware_engine()
        if engine is None or self.backend_name == "classic":
            raise ConfigError(f"memory.{what} is for the middleware backend; this memory runs "
                              f"{self.backend_name!r}. Flip the flag to backend='middleware' "
                              "(threads move at first touch) or use backend='staged'.")
        return engine

    # -- classic drop-in (BaseMemory) ---------------------------------------------------
    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    @property
    def buffer(self) -> Any:
        """Stock ``ConversationSummaryBufferMemory.buffer``: the bound thread's rendering."""
        return self.load_memory_variables({})[self.memory_key]

    async def abuffer(self) -> Any:
        return (await self.aload_memory_variables({}))[self.memory_key]

    def prompt_messages(self, view: MemoryView) -> list[BaseMessage]:
        """What an old chain receives: the summary as ``summary_message_cls`` (``SystemMessage``
        by default, like stock classic) then the window, whichever backend is active, so the
        flag never changes a prompt. ``create_agent`` keeps the middleware's own placement."""
        head = [self.summary_message_cls(content=view.summary)] if view.summary else []
        return [*head, *view.messages]

    def _render(self, view: MemoryView) -> dict[str, Any]:
        if self._renderer is not None and not self.return_messages:
            return {self.memory_key: self._renderer.render(
                view.thread_id, view.summary, view.messages,
                (self.human_prefix, self.ai_prefix, self.summary_message_cls))}
        messages = self.prompt_messages(view)
        return {self.memory_key: messages if self.return_messages else get_buffer_string(
            messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)}

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        tid = self._touch((inputs or {}).get(self.thread_key))
        return self._render(self._backend.load(tid, **self._copies()))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        tid = self._touch((inputs or {}).get(self.thread_key))
        return self._render(await self._backend.aload(tid, **self._copies()))

    def _copies(self) -> dict[str, bool]:  # a string rendering only reads: no copy of the window
        return {"detached": self.return_messages}

    def _turn_from(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> tuple[str, list]:
        tid = self._thread(inputs.get(self.thread_key))
        human = resolve_input(inputs, input_key=self.input_key,
                              memory_variables=self.memory_variables, thread_key=self.thread_key)
        ai = resolve_output(outputs, output_key=self.output_key, owner=type(self).__name__)
        return tid, as_turn(human, ai)

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        self._save(*self._turn_from(inputs, outputs))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        await self._asave(*self._turn_from(inputs, outputs))

    def clear(self, thread_id: str | None = None) -> None:
        """Forget the thread's summary and window (the audit transcript is kept); a legacy
        history written through is cleared too, as stock's ``clear()`` does."""
        self._backend.clear(tid := self._touch(thread_id))  # adopted first, or it comes back
        if self._adopter is not None:
            self._adopter.clear(tid)

    async def aclear(self, thread_id: str | None = None) -> None:
        await self._backend.aclear(tid := self._touch(thread_id))
        if self._adopter is not None:
            self._adopter.clear(tid)


def _unique(streams: Iterator[Iterator[str]]) -> Iterator[str]:
    seen: set[str] = set()
    for stream in streams:
        for thread_id in stream:
            if thread_id not in seen:
                seen.add(thread_id)
                yield thread_id


class _Private:
    """Reads a private attribute from pydantic's slot. Pydantic serves them from
    ``__getattr__`` only after the normal lookup failed (~1.6 µs a read, eight reads per
    save+load); a class-level data descriptor is found first (~0.14 µs). Writes still go
    through pydantic's ``__setattr__``, which stores them in the same slot."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.__pydantic_private__[self.name]
        except (KeyError, TypeError):  # not set yet, or no private state
            raise AttributeError(self.name) from None

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__pydantic_private__[self.name] = value


for _name in SummaryMemory.__private_attributes__:
    setattr(SummaryMemory, _name, _Private(_name))
