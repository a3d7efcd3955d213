"""``memory.checkpointer``: the store's LangGraph saver, claiming a thread once per run.

``create_agent`` reads a thread through its checkpointer (``get_tuple`` at the start of every
run, ``list`` for the history) and writes it with ``put``. A thread that still lives on the
classic backend has no checkpoint there, so the agent would see an empty memory in silence.
This saver claims the thread for the middleware backend the first time this process meets it
(the router moves it if it lives on classic, or raises ``ThreadElsewhere`` when the memory was
told not to move threads) and remembers the placement it claimed (its version). From then on
nothing runs *before* a saver call; the placement rides along inside the transactions the
calls make:

- ``get_tuple`` reads the placement and the checkpoint in one read transaction of the thread:
  a thread another process moved since is claimed again first, so a run never starts from a
  stale or empty state (nor a pruned id: ``adapters.stores.pruned``);
- a root checkpoint that starts something (a run's input, an update, a fork) is written in a
  write transaction of the thread (its lock held) that reads the placement first and refuses
  the write (``PlacementChanged``, nothing written) if the thread moved meanwhile; retention
  runs in that same transaction when the checkpoint is a run's input (whole turns: never
  between the steps of a run, a replay or a fork; see ``adapters.stores.checkpoint_sql``).
  Where the store sends a checkpoint with what commits with it as one message
  (``Checkpoints.put_placed``, PostgreSQL: one implicit transaction, no ``BEGIN``/``COMMIT``),
  the placement is checked by a guard statement after the lock that aborts it all;
- the steps of a run (``loop`` checkpoints, pending writes, subgraph namespaces) go to the
  saver as they are, except the root checkpoint that first holds an answer: it is written in
  a transaction of the thread that also records the turn's new messages in the transcript
  (``FoldHooks.turn``: no step or transaction of its own; on PostgreSQL one message without
  the lock, as the recording ignores message ids the transcript holds); a move while a run
  is under way is found by the next run's read.

It advertises only what it implements (LangGraph's checkpoint-conformance suite detects a
saver's capabilities by the methods its class overrides): ``copy_thread``, ``delete_for_runs``
and ``prune`` run in memshift transactions of each thread where the store implements them,
pass to an application's own saver that has them, and are absent otherwise.
``delete_thread`` is the memory's ``clear`` (its record says the thread was cleared).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from adapters.io import IO, Steps, run_async, run_sync
from adapters.stores.base import Placement, Store, Tx, in_transaction, store_io
from adapters.stores.placed_ops import MIXINS, OPERATIONS, ThreadOperations
from adapters.stores.pruned import refuse_pruned
from adapters.stores.tx_saver import Moved, ajoined_put, aplaced_get, joined_put, placed_get
from adapters.thread_keys import storage_id

if TYPE_CHECKING:
    from adapters.agent_hooks import FoldHooks, Turn

__all__ = ["PlacedSaver", "OPERATIONS"]

_PASS = ("put_writes", "get_delta_channel_history", "get_next_version")
_APASS = ("aput_writes", "aget_delta_channel_history")


def _thread(config: Any) -> str | None:
    if not config:
        return None
    tid = (config.get("configurable") or {}).get("thread_id")
    return tid if isinstance(tid, str) and tid else None


def _keyed(config: Any) -> Any:
    """``config`` with its thread id as the stores keep it (``storage_id``): the same
    ``config`` unless the id is over the byte budget."""
    tid = _thread(config)
    if tid is None or (key := storage_id(tid)) == tid:
        return config
    return {**config, "configurable": {**config["configurable"], "thread_id": key}}


def _unkeyed(item: Any, asked: Any) -> Any:
    """A saver's answer (a config or a checkpoint tuple) named by the id the caller asked
    with, not by its key (the graph carries on with the caller's id)."""
    tid = _thread(asked)
    if item is None or tid is None or (key := storage_id(tid)) == tid:
        return item

    def back(config: Any) -> Any:
        if _thread(config) != key:
            return config
        return {**config, "configurable": {**config["configurable"], "thread_id": tid}}

    if isinstance(item, dict):
        return back(item)
    return item._replace(config=back(item.config), parent_config=back(item.parent_config))


def _opens(config: Any, metadata: Any) -> bool:
    """Whether a checkpoint starts something (a run's input, an update, a fork: any root
    checkpoint the loop did not write): its write is where the claim is checked."""
    configurable = (config or {}).get("configurable") or {}
    return not configurable.get("checkpoint_ns") and (metadata or {}).get("source") != "loop"


def _still(claimed: Placement, now: Placement | None) -> None:
    """``now`` (read in a transaction) is where this process claimed the thread, or ``Moved``."""
    if now is None or now.backend != claimed.backend or now.version != claimed.version:
        raise Moved(now)


def _overrides(saver: BaseCheckpointSaver, name: str) -> bool:
    return (getattr(type(saver), name, None) is not getattr(BaseCheckpointSaver, name)
            and getattr(type(saver), f"a{name}", None) is not getattr(BaseCheckpointSaver, f"a{name}"))


class PlacedSaver(ThreadOperations, BaseCheckpointSaver):
    """Claims threads for ``middleware`` through ``engine`` once, then checks the claim in the
    saver's transactions (module docstring); ``touch(thread_id)`` runs before a claim (legacy
    adoption). ``store``: the middleware side's (transactions, placements, operations)."""

    def __new__(cls, inner: BaseCheckpointSaver, engine: Any, store: Store,
                touch: Callable[[str], Any] | None = None) -> PlacedSaver:
        own = frozenset(store.checkpoints.operations)
        passed = frozenset(op for op in OPERATIONS if op not in own and _overrides(inner, op))
        return super().__new__(_capable(own, passed))

    claims_size = 100_000  # threads whose claim this process remembers

    def __init__(self, inner: BaseCheckpointSaver, engine: Any, store: Store,
                 touch: Callable[[str], Any] | None = None) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.engine, self.store, self.touch = inner, engine, store, touch
        self._claimed: dict[str, Placement] = {}  # thread -> the placement claimed here
        side = engine.middleware_engine()  # its hooks: what agent turns add to the transcript
        self.turns: FoldHooks | None = side.hooks if side is not None else None
        if self.turns is not None:
            self.turns.records_turns(self)

    # -- the claim: once per thread and process, then checked inside the saver's transactions
    def _claim_steps(self, thread_id: str) -> Steps[Placement | None]:
        """Claim the thread for ``middleware`` (moved now if it lives on classic) and remember
        the placement claimed; ``None`` when the engine keeps no placements (then every call
        claims, as nothing could be checked inside a transaction)."""
        if self.touch is not None:
            self.touch(thread_id)
        where = yield from self.engine.claim_steps(thread_id, "middleware")
        placement = where.placement
        if placement is not None and placement.backend == "middleware":
            claimed = self._claimed
            if len(claimed) >= self.claims_size:
                claimed.clear()  # a bound, not an LRU: a forgotten claim is claimed again
            claimed[thread_id] = placement
            return placement
        self._claimed.pop(thread_id, None)
        return None

    def _placed_in(self, tx: Tx, claimed: Placement) -> Steps[None]:
        """Inside ``tx``: the thread still lives where this process claimed it."""
        store = self.store
        _still(claimed, (yield store_io(store, tx, store.placement)))

    def _read_placement(self, thread_id: str) -> Steps[Placement | None]:
        store = self.store

        def body(tx: Tx) -> Steps[Placement | None]:
            return (yield store_io(store, tx, store.placement))
        return (yield from in_transaction(store, thread_id, body, write=False))

    def _verified(self, thread_id: str) -> Steps[Placement | None]:
        """The claimed placement, checked in a read transaction of its own (``list``), or a
        fresh claim."""
        claimed = self._claimed.get(thread_id)
        if claimed is not None:
            def body(tx: Tx) -> Steps[None]:
                yield from self._placed_in(tx, claimed)
            try:
                yield from in_transaction(self.store, thread_id, body, write=False)
                return claimed
            except Moved:
                self._claimed.pop(thread_id, None)
        return (yield from self._claim_steps(thread_id))

    # Thread ids over the byte budget travel to the saver as their key (``_keyed``) and come
    # back as the caller's id (``_unkeyed``).
    def _get_steps(self, keyed: Any) -> Steps[Any]:
        inner = self.inner
        if (tid := _thread(keyed)) is None:
            return (yield IO(inner.get_tuple, inner.aget_tuple, keyed))
        claimed, store = self._claimed.get(tid), self.store
        if claimed is not None:  # the placement and the checkpoint in one read (one statement
            def body(tx: Tx) -> Steps[Any]:  # where the store has one: no BEGIN/COMMIT)
                now, found = yield IO(placed_get, aplaced_get, store, tx, keyed)
                _still(claimed, now)
                return found
            single = store.checkpoints.get_placed is not None
            try:
                return (yield from in_transaction(store, tid, body, write=False, single=single))
            except Moved:  # another process moved it since: claim it again, then read
                self._claimed.pop(tid, None)
        yield from self._claim_steps(tid)
        return (yield IO(inner.get_tuple, inner.aget_tuple, keyed))

    def _found(self, config: Any) -> Steps[Any]:
        keyed = _keyed(config)
        return refuse_pruned(self._get_steps(keyed), self.inner, keyed,
                             self.store.checkpoints.keep, _thread(config) or "")

    def get_tuple(self, config: Any) -> Any:
        return _unkeyed(run_sync(self._found(config)), config)

    async def aget_tuple(self, config: Any) -> Any:
        return _unkeyed(await run_async(self._found(config)), config)

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        if (tid := _thread(keyed := _keyed(config))) is not None:
            run_sync(self._verified(tid))
        return (_unkeyed(item, config) for item in self.inner.list(keyed, **kwargs))

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if (tid := _thread(keyed := _keyed(config))) is not None:
            await run_async(self._verified(tid))
        async for item in self.inner.alist(keyed, **kwargs):
            yield _unkeyed(item, config)

    def _put_steps(self, keyed: Any, checkpoint: Any, metadata: Any,
                   new_versions: Any) -> Steps[Any]:
        inner, args = self.inner, (keyed, checkpoint, metadata, new_versions)
        if (tid := _thread(keyed)) is None:
            return (yield IO(inner.put, inner.aput, *args))
        claimed = self._claimed.get(tid)
        if claimed is None:  # no placement kept: claimed before every write, as it was
            claimed = yield from self._claim_steps(tid)
        check = claimed if _opens(keyed, metadata) else None  # a step of a run: input checked
        retain = self._turn_start(keyed, metadata) is not None
        turns = self.turns
        turn = self._turn(turns, tid, keyed, checkpoint, new_versions, check is not None)
        if check is None and not retain and turn is None:
            return (yield IO(inner.put, inner.aput, *args))
        if turns is not None and turn is not None:
            yield from turns.through_steps(turn)  # first, as a classic save writes through
        store = self.store
        whole = getattr(store.checkpoints, "put_placed", None)  # one message (PostgreSQL)

        def body(tx: Tx) -> Steps[Any]:
            if whole is not None:  # the guard and retention ride in it: Moved at the commit
                stored = yield store_io(store, tx, whole, args, check, retain)
            else:
                if check is not None:
                    yield from self._placed_in(tx, check)
                stored = yield IO(joined_put, ajoined_put, store, tx, *args)
                if retain:
                    yield from self._retain_in(tx)
            if turns is not None and turn is not None:  # no read in a message sent whole
                yield from turns.record_steps(tx, turn, read=whole is None)
            return stored
        try:
            stored = yield from in_transaction(store, tid, body)
        except Moved as moved:
            from adapters.staged import PlacementChanged

            self._claimed.pop(tid, None)
            now = moved.placement if moved.known else (yield from self._read_placement(tid))
            was = check.version if check else "-"
            raise PlacementChanged(
                f"thread {tid!r} moved (to {now.backend if now else 'no placement'}, version "
                f"{now.version if now else '-'}) after this process claimed it for the agent "
                f"(version {was}); nothing of this checkpoint was written. Run the turn "
                "again: the checkpointer claims the thread afresh") from None
        if turns is not None and turn is not None:
            turns.recorded(turn)
        return stored

    @staticmethod
    def _turn(turns: FoldHooks | None, tid: str, config: Any, checkpoint: Any,
              new_versions: Any, opens: bool) -> Turn | None:
        """What a root checkpoint whose messages changed (or that we write in a transaction
        anyway) adds to the transcript (``FoldHooks.turn``)."""
        root = not ((config or {}).get("configurable") or {}).get("checkpoint_ns")
        if turns is None or not root or not (opens or "messages" in (new_versions or {})):
            return None
        messages = (checkpoint.get("channel_values") or {}).get("messages")
        return turns.turn(tid, messages) if isinstance(messages, list) else None

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = run_sync(self._put_steps(_keyed(config), checkpoint, metadata, new_versions))
        return _unkeyed(stored, config)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = await run_async(self._put_steps(_keyed(config), checkpoint, metadata,
                                                 new_versions))
        return _unkeyed(stored, config)

    def _retain_in(self, tx: Tx) -> Steps[None]:
        checkpoints = self.store.checkpoints
        yield IO(checkpoints.retain, checkpoints.aretain, tx)

    @staticmethod
    def _turn_start(config: Any, metadata: Any) -> str | None:
        """The thread of a run's input checkpoint (root namespace), when retention is due."""
        configurable = (config or {}).get("configurable") or {}
        if (metadata or {}).get("source") == "input" and not configurable.get("checkpoint_ns"):
            return _thread(config)
        return None

    # -- deleting a thread is clearing its memory ---------------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        """The memory's ``clear``: checkpoints gone, the record says the thread was cleared."""
        self.engine.clear(storage_id(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self.engine.aclear(storage_id(thread_id))

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def _keyed_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A passed-through call's config (``put_writes``' first argument) keyed like the rest."""
    return (_keyed(args[0]), *args[1:]) if args and isinstance(args[0], dict) else args


def _passing(name: str) -> Any:
    def method(self: PlacedSaver, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*_keyed_args(args), **kwargs)
    method.__name__ = name
    return method


def _apassing(name: str) -> Any:
    async def method(self: PlacedSaver, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.inner, name)(*_keyed_args(args), **kwargs)
    method.__name__ = name
    return method


@functools.cache
def _capable(own: frozenset[str], passed: frozenset[str]) -> type:
    """``PlacedSaver`` with the operations the store implements and those passed to the saver
    (one class per combination)."""
    base = PlacedSaver
    if not own and not passed:
        return base
    mixins = tuple(MIXINS[op] for op in OPERATIONS if op in own)
    namespace = {**{op: _passing(op) for op in passed},
                 **{f"a{op}": _apassing(f"a{op}") for op in passed}}
    name = base.__name__ + "".join(f"_{op}" for op in OPERATIONS if op in own | passed)
    return type(name, (*mixins, base), {"__module__": base.__module__, **namespace})


for _name, _make in [*((n, _passing) for n in _PASS), *((n, _apassing) for n in _APASS)]:
    setattr(PlacedSaver, _name, _make(_name))
