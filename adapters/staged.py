"""Where a thread lives: both backends, each thread served by the one its placement names.

Every ``SummaryMemory`` that is not shadow runs on this engine: ``backend="staged"`` with a
rollout share (or ``route``), and a fixed ``backend="classic"`` / ``"middleware"``, which is a
rollout of 0.0 / 1.0. A thread's location is one record (``Placement``: backend, version,
since, pinned) kept with the middleware side's store, and every path reads it inside its own
transaction: a save's guard reads it before anything is written, a load's before the state is
read. A thread found on the other backend moves at first touch: its state is copied through
the same restore path as ``migrate`` and the placement changes *in the same transaction*,
which checks that no turn landed meanwhile (transcript compare-and-set) and that nobody moved
it first (version compare-and-set). A crash mid-move leaves the thread on its old backend,
intact. ``move_on_touch=False`` makes that move a ``ThreadElsewhere`` error instead; a
read-only store is served where the thread lives.

Rolling deploys: a placement records the configuration that decided it (``since``: the time
that configuration was built). A process follows any record decided by a newer configuration
(or pinned), so two processes with different flags never move one thread back and forth: it
changes backend at most once per configuration change. A record that only says where a
legacy thread was found has ``since=0``: any configuration applies itself to it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.telemetry import TELEMETRY
from adapters.engine import MemoryEngine
from adapters.errors import ConfigError, MemshiftError, ThreadElsewhere
from adapters.io import Steps, run_sync
from adapters.protocol import Check, Engine, Guard, Location, open_guard
from adapters.stores.base import Placement, Store, Tx, in_transaction, require, store_io
from adapters.view import MemoryView, ThreadRecord

__all__ = ["PlacementChanged", "StagedEngine", "share_of"]

ATTEMPTS = 5
BACKENDS = ("classic", "middleware")


class PlacementChanged(MemshiftError):
    """The thread moved between deciding where it lives and writing to it (retried)."""


class _Elsewhere(Exception):
    """Inside a transaction: the settled placement names the other side."""

    def __init__(self, backend: str) -> None:
        self.backend = backend


class _Unsettled(Exception):
    """Inside a transaction: the placement is missing or this configuration moves it."""


def share_of(thread_id: str) -> float:
    """A stable number in [0, 1) for a thread id: the rollout compares against it."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _distinct(stores: Iterable[Store]) -> list[Store]:
    """Each store once (both sides may share one), in first-seen order."""
    return list({id(store): store for store in stores}.values())


class StagedEngine(Engine):
    """Both backends; the placement record decides which one serves a thread."""

    hints_size = 100_000  # threads whose last backend this process remembers (a hint only)

    def __init__(self, *, classic: Engine | None, middleware: MemoryEngine | None,
                 rollout: float = 0.0,
                 route: Callable[[str], str] | None = None, fixed: str | None = None,
                 move_on_touch: bool = True, config_since: float | None = None) -> None:
        if fixed is not None and fixed not in BACKENDS:
            raise ConfigError(f"unknown backend {fixed!r}; use one of {list(BACKENDS)}")
        if not 0 <= rollout <= 1:
            raise ConfigError(f"rollout must be within [0, 1], got {rollout}")
        # a side the store cannot host (it lacks that concern) is absent
        self.engines: dict[str, Engine] = {name: side for name, side in
                                           (("classic", classic), ("middleware", middleware))
                                           if side is not None}
        if not self.engines or (fixed is not None and fixed not in self.engines) or \
                (fixed is None and len(self.engines) < 2):
            raise ConfigError(f"the store cannot host the {fixed or 'staged'} backend: "
                              f"only {sorted(self.engines) or 'no backend'} (a store without "
                              "'classic' state or 'checkpoints' runs the other backend only)")
        # the side's serving one-backend engine: reads for moves and origins go there
        self._leaf = {name: side.leaves()[0] for name, side in self.engines.items()}
        self._first = next(iter(self.engines.values()))
        self.fixed, self.name = fixed, fixed or "staged"
        self.rollout = {"classic": 0.0, "middleware": 1.0}.get(fixed or "", rollout)
        self.route, self.move_on_touch = route, move_on_touch
        self.config_since = time.time() if config_since is None else config_since
        # placements live with the middleware side
        home = self._leaf.get("middleware") or self._leaf["classic"]
        self.store: Any = require(home.store, "placements", "knowing where a thread lives")
        self.same_store = all(leaf.store is home.store for leaf in self._leaf.values())
        self.read_only = self.store.read_only
        self.moves = 0
        self._hints: dict[str, str] = {}
        self._guards: dict[tuple[str, bool], Guard] = {}

    # -- what the protocol asks of every engine -------------------------------------------
    @property
    def policy(self) -> Any:  # type: ignore[override]
        return self._first.policy

    @property
    def summarizer(self) -> Any:  # type: ignore[override]
        return self._first.summarizer

    @summarizer.setter
    def summarizer(self, value: Any) -> None:
        for engine in self.engines.values():
            engine.summarizer = value

    @property
    def clock(self) -> Callable[[], float]:
        """The fold backoff's clock (injectable in tests), shared by every side."""
        return self.leaves()[0].clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        for leaf in self.leaves():
            leaf.clock = value

    @property
    def mismatches(self) -> list[Any]:
        """Shadow mismatches of the classic cohort (``shadow_sample``), else ``[]``."""
        return self._first.mismatches

    def forget_mismatches(self, thread_id: str) -> int:
        return sum(side.forget_mismatches(thread_id) for side in self.engines.values())

    def leaves(self) -> list[MemoryEngine]:
        return [leaf for side in self.engines.values() for leaf in side.leaves()]

    def stores(self) -> list[Store]:
        return _distinct(store for side in self.engines.values() for store in side.stores())

    def homes(self) -> list[Store]:
        return _distinct(store for side in self.engines.values() for store in side.homes())

    def middleware_engine(self) -> MemoryEngine | None:
        return self._leaf.get("middleware")

    def drain(self, timeout: float | None = None) -> None:
        for side in self.engines.values():
            side.drain(timeout)

    async def adrain(self) -> None:
        for side in self.engines.values():
            await side.adrain()

    def close(self, drain: bool = True) -> None:
        for side in self.engines.values():
            side.close(drain)

    def serving(self, thread_id: str) -> str:
        """The backend that served the thread's last call here (a hint; the record decides)."""
        return self._hints.get(thread_id) or self.desired(thread_id)

    # -- the decision ----------------------------------------------------------------------
    def desired(self, thread_id: str) -> str:
        """The backend this configuration wants for the thread."""
        if self.fixed is not None:
            return self.fixed
        if self.route is not None:
            backend = self.route(thread_id)
            if backend not in self.engines:
                raise ConfigError(f"route() returned {backend!r}; use 'classic' or 'middleware'")
            return backend
        return "middleware" if share_of(thread_id) < self.rollout else "classic"

    def settled(self, thread_id: str, placement: Placement) -> bool:
        """Whether this configuration leaves the placement as it is: a pin, a decision of a
        newer configuration, or already where this one wants it."""
        return self.read_only or placement.pinned or placement.since > self.config_since or \
            placement.backend == self.desired(thread_id)

    def _remember(self, thread_id: str, backend: str) -> None:
        hints = self._hints
        if hints.get(thread_id) == backend:
            return
        if len(hints) >= self.hints_size:
            hints.clear()  # a bound, not an LRU: a hint is only where to try first
        hints[thread_id] = backend

    def _read(self, thread_id: str) -> Steps[Placement | None]:
        def body(tx: Tx) -> Steps[Placement | None]:
            return (yield store_io(self.store, tx, self.store.placement))
        return (yield from in_transaction(self.store, thread_id, body, write=False))

    def _check(self, backend: str, write: bool, outer: Guard | None = None) -> Guard | None:
        """A guard for a transaction on ``backend``'s side (same store only): the placement
        says this side serves the thread, or the call is rolled back and retried where it
        does. The placement is asked first and answered before commit, so on a batching
        store it travels with the transaction's own first read. A thread no record names
        yet is this side's when the other side holds nothing of it; a save records that in
        the same transaction. Built once per side (the thread comes with the transaction)."""
        if not self.same_store:
            return outer
        if outer is None:
            guard = self._guards.get((backend, write))
            if guard is None:
                guard = self._guards[backend, write] = self._make_check(backend, write, None)
            return guard
        return self._make_check(backend, write, outer)

    def _make_check(self, backend: str, write: bool, outer: Guard | None) -> Guard:
        store = self.store
        other = self._leaf.get("middleware" if backend == "classic" else "classic")
        batches = store.batches

        def verdict(tx: Tx, placement: Placement | None) -> Steps[None]:
            if placement is None:
                if other is not None and (yield from other.holds_in(tx)):
                    raise _Unsettled
                if write:
                    yield store_io(store, tx, store.set_placement,
                                   Placement(backend, 1, self.config_since))
                return
            if not self.settled(tx.thread_id, placement):
                raise _Unsettled
            if placement.backend != backend:
                raise _Elsewhere(placement.backend)

        if not batches:  # the store answers at once: decide before anything is read
            def guard_now(tx: Tx) -> Steps[Check | None]:
                first = (yield from outer(tx)) if outer is not None else None
                yield from verdict(tx, (yield store_io(store, tx, store.placement)))
                return first
            return guard_now

        def guard(tx: Tx) -> Steps[Check | None]:
            first = (yield from outer(tx)) if outer is not None else None
            token = yield store_io(store, tx, store.defer_placement)

            def check() -> Steps[None]:
                if first is not None:
                    yield from first()
                yield from verdict(tx, (yield store_io(store, tx, store.deferred_placement,
                                                       token)))
            return check
        return guard

    def _origin(self, thread_id: str) -> Steps[str | None]:
        """Where a thread no record names lives: the only side holding state, else the side
        whose window ends with the transcript's newest message, else the configured one;
        ``None`` when neither side holds anything."""
        holding: list[str] = []
        for name, leaf in self._leaf.items():  # asked without building a view
            if (yield from in_transaction(leaf.store, thread_id, leaf.holds_in, write=False)):
                holding.append(name)
        if len(holding) < 2:
            return holding[0] if holding else None
        views: dict[str, MemoryView] = {}
        for name, leaf in self._leaf.items():
            views[name] = yield from leaf.load_steps(thread_id, False)
        store = self.store

        def newest(tx: Tx) -> Steps[list[str]]:
            return (yield store_io(store, tx, store.last_ids, 1))
        last = yield from in_transaction(store, thread_id, newest, write=False)
        ending = [name for name, view in views.items()
                  if view.messages and last and view.messages[-1].id == last[0]]
        return ending[0] if len(ending) == 1 else self.desired(thread_id)

    def place_steps(self, thread_id: str, want: str | None = None, pin: bool | None = None,
                    since: float | None = None) -> Steps[Placement | None]:
        """The thread's placement after applying this configuration, moving the thread if
        due. ``want``: an explicit demand (a pin, the agent's checkpointer), decided at
        ``since`` (default: now). ``None``: nothing is stored for the thread anywhere."""
        for _ in range(ATTEMPTS):
            current = yield from self._read(thread_id)
            if current is None:
                origin = yield from self._origin(thread_id)
                if origin is not None:  # where it was found: every configuration applies
                    found = Placement(origin, 1, 0.0)
                elif want is not None:  # a new thread, claimed: a decision made now
                    found = Placement(want, 1, time.time() if since is None else since,
                                      bool(pin))
                else:
                    return None
                if self.read_only:
                    return found

                def record(tx: Tx, found: Placement = found) -> Steps[None]:
                    if (yield store_io(self.store, tx, self.store.placement)) is None:
                        yield store_io(self.store, tx, self.store.set_placement, found)
                yield from in_transaction(self.store, thread_id, record)
                continue
            if want is not None:
                target, stamp = want, time.time() if since is None else since
            else:
                target = current.backend if self.settled(thread_id, current) else \
                    self.desired(thread_id)
                stamp = self.config_since
            pinned = current.pinned if pin is None else pin
            if current.backend == target and current.pinned == pinned:
                return current
            if self.read_only:
                return current
            if want is None and not self.move_on_touch:
                raise self._elsewhere(thread_id, current, target)
            try:
                moved = yield from self._move(thread_id, current, target, pinned, stamp)
            except PlacementChanged:
                continue
            if moved is not None:
                return moved
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def _elsewhere(self, thread_id: str, current: Placement, wanted: str) -> ThreadElsewhere:
        where = self._leaf[current.backend].store.url
        return ThreadElsewhere(
            f"thread {thread_id!r} lives on the {current.backend} backend ({where}); this "
            f"memory serves {wanted!r} with move_on_touch=False, so nothing was read or "
            f"written. Move it: memshift rollout move --to {wanted} --thread ID --store URL "
            f"(or memory.pin(thread_id, {wanted!r}), or drop move_on_touch=False)",
            thread_id=thread_id, lives_on=current.backend, wanted=wanted)

    def _move(self, thread_id: str, current: Placement, to: str, pinned: bool,
              since: float) -> Steps[Placement | None]:
        if to not in self.engines or current.backend not in self.engines:
            raise ConfigError(f"thread {thread_id!r} would move from {current.backend} to {to}, "
                              f"but this store hosts only {sorted(self.engines)}")
        new = Placement(to, current.version + 1, since, pinned)
        if current.backend == to:  # only the pin (or its time) changes
            yield from in_transaction(self.store, thread_id, self._swap(current, new))
            return new
        source, target = self._leaf[current.backend], self.engines[to]
        # transcript first: a turn that commits between the two reads is then newer than
        # the last id checked below, and the move is retried instead of dropping it
        transcript = yield from _transcript(source.store, thread_id)
        view = yield from source.load_steps(thread_id)
        record = ThreadRecord(thread_id, view.summary, view.messages, view.folds, transcript)
        last = transcript[-1].id if transcript and transcript[-1].id else ""
        if self.same_store:
            wrote = yield from target.restore_steps(record, last, None, self._swap(current, new))
            if not wrote:  # a turn landed meanwhile: read again
                return None
        else:  # the state first, then the record on its own store
            yield from target.restore_steps(record)
            yield from in_transaction(self.store, thread_id, self._swap(current, new))
            yield from self._catch_up(thread_id, source, to, last)
        self.moves += 1
        TELEMETRY.move(thread_id, current.backend, to)
        self._remember(thread_id, to)
        return new

    def _catch_up(self, thread_id: str, source: MemoryEngine, to: str, last: str) -> Steps[None]:
        """Two stores: turns the old side committed while the move was under way follow the
        thread (by id, so a turn forwarded twice is stored once)."""
        transcript = yield from _transcript(source.store, thread_id)
        ids = [m.id for m in transcript]
        late = transcript[ids.index(last) + 1:] if last in ids else \
            (transcript if not last else [])
        if late:
            yield from self._leaf[to].save_steps(thread_id, list(late))

    def _swap(self, expected: Placement, new: Placement) -> Guard:
        """Steps that change the placement only if it is still ``expected``."""
        def steps(tx: Tx) -> Steps[None]:
            if (yield store_io(self.store, tx, self.store.placement)) != expected:
                raise PlacementChanged("another process changed the placement first")
            yield store_io(self.store, tx, self.store.set_placement, new)
        return steps

    # -- the engine API ---------------------------------------------------------------------
    def locate_steps(self, thread_id: str, move: bool = True) -> Steps[Location]:
        if move:
            placement = yield from self.place_steps(thread_id)
            backend = placement.backend if placement is not None else self.desired(thread_id)
        else:
            placement = yield from self._read(thread_id)
            backend = placement.backend if placement is not None else \
                (yield from self._origin(thread_id)) or self.desired(thread_id)
        leaf = self._leaf[backend]
        return Location(backend, leaf, leaf.store, placement)

    def claim_steps(self, thread_id: str, backend: str) -> Steps[Location]:
        if backend not in self.engines:
            raise ConfigError(f"claim 'classic' or 'middleware', not {backend!r}")
        current = yield from self._read(thread_id)
        if not self.read_only and (current is None or current.backend != backend):
            if current is not None and not self.move_on_touch:
                raise self._elsewhere(thread_id, current, backend)
            current = yield from self.place_steps(thread_id, want=backend)
        leaf = self._leaf[backend]
        return Location(backend, leaf, leaf.store, current)

    def _routed(self, thread_id: str, write: bool, outer: Guard | None, op: str,
                *args: Any) -> Steps[Any]:
        """``side.<op>(thread_id, *args, guard)`` on the side the placement names, checked
        inside its transaction; retried where it says, or after the move this configuration
        asks for."""
        for _ in range(ATTEMPTS):
            backend = self._hints.get(thread_id) or self.desired(thread_id)
            if not self.same_store:  # the record is on another store: settle it first
                placement = yield from self.place_steps(thread_id)
                backend = placement.backend if placement is not None else backend
            try:
                result = yield from getattr(self.engines[backend], op)(
                    thread_id, *args, self._check(backend, write, outer))
            except _Elsewhere as moved:
                self._remember(thread_id, moved.backend)
                continue
            except _Unsettled:
                placement = yield from self.place_steps(thread_id)
                if self.read_only or (placement is None and not write):
                    # served where it lives, never moved (or: nothing anywhere, empty)
                    side = placement.backend if placement is not None else self.desired(thread_id)
                    return (yield from getattr(self.engines[side], op)(thread_id, *args, outer))
                if placement is not None:
                    self._remember(thread_id, placement.backend)
                continue
            self._remember(thread_id, backend)
            return result
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def load_steps(self, thread_id: str, detached: bool = True,
                   guard: Guard | None = None) -> Steps[MemoryView]:
        return (yield from self._routed(thread_id, False, guard, "load_steps", detached))

    def save_steps(self, thread_id: str, turn: list[BaseMessage], fold: bool = True,
                   guard: Guard | None = None) -> Steps[list[BaseMessage]]:
        stored = yield from self._routed(thread_id, True, guard, "save_steps", turn, fold)
        if not self.same_store:
            yield from self._forward_if_moved(thread_id, self._hints.get(thread_id), stored)
        return stored

    def _forward_if_moved(self, thread_id: str, saved_on: str | None,
                          stored: list[BaseMessage]) -> Steps[None]:
        """Two stores: a move that committed while this turn was being saved on the old side
        gets the turn too (by id, so a turn the move caught up already is stored once)."""
        now = yield from self._read(thread_id)
        if now is not None and now.backend != saved_on:
            yield from self._leaf[now.backend].save_steps(thread_id, list(stored))

    def clear_steps(self, thread_id: str) -> Steps[None]:
        where = yield from self.locate_steps(thread_id)
        yield from self.engines[where.backend].clear_steps(thread_id)

    def prune_steps(self, thread_id: str) -> Steps[None]:
        where = yield from self.locate_steps(thread_id)
        yield from self.engines[where.backend].prune_steps(thread_id)

    def restore_steps(self, record: ThreadRecord, expect_last_id: str | None = None,
                      fold_record: Any = None, also: Guard | None = None) -> Steps[bool]:
        """A whole state written where this configuration places the thread, its placement
        changed in the same transaction (same store) when it lived elsewhere."""
        thread_id = record.thread_id
        for _ in range(ATTEMPTS):
            current = yield from self._read(thread_id)
            if current is not None and self.settled(thread_id, current):
                target = current.backend
            else:
                target = self.desired(thread_id)
            new = current if current is not None and current.backend == target else \
                Placement(target, current.version + 1 if current else 1, self.config_since,
                          current.pinned if current else False)
            swap = _expect(self.store, current, new)
            side = self.engines[target]
            try:
                if self.same_store:
                    wrote = yield from side.restore_steps(record, expect_last_id, fold_record,
                                                          _both(swap, also))
                else:
                    wrote = yield from side.restore_steps(record, expect_last_id, fold_record,
                                                          also)
                    if wrote and new is not current:
                        yield from in_transaction(self.store, thread_id, swap)
            except PlacementChanged:
                continue
            if wrote:
                self._remember(thread_id, target)
            return wrote
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def view_in(self, tx: Tx) -> Steps[MemoryView]:
        return (yield from self._leaf[self.serving(tx.thread_id)].view_in(tx))

    # -- placements, for the facade and the command line -------------------------------------
    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        return self.store.placement_counts()

    def pin(self, thread_id: str, backend: str) -> Placement:
        if backend not in self.engines:
            raise ConfigError(f"pin to 'classic' or 'middleware', not {backend!r}")
        placement = run_sync(self.place_steps(thread_id, want=backend, pin=True))
        assert placement is not None
        return placement

    def unpin(self, thread_id: str) -> Placement | None:
        """The configuration decides again from the next touch on."""
        current = run_sync(self._read(thread_id))
        if current is None or not current.pinned:
            return current or run_sync(self.place_steps(thread_id))
        released = Placement(current.backend, current.version + 1, 0.0, False)
        run_sync(in_transaction(self.store, thread_id, self._swap(current, released)))
        return released

    def placement_of(self, thread_id: str) -> Placement | None:
        return run_sync(self._read(thread_id))


def _transcript(store: Store, thread_id: str) -> Steps[list[BaseMessage]]:
    def body(tx: Tx) -> Steps[list[BaseMessage]]:
        return (yield store_io(store, tx, store.transcript_in))
    return (yield from in_transaction(store, thread_id, body, write=False))


def _expect(store: Any, current: Placement | None, new: Placement) -> Guard:
    """Steps that find the placement still ``current`` and leave ``new`` (a no-op write when
    they are the same)."""
    def steps(tx: Tx) -> Steps[None]:
        if (yield store_io(store, tx, store.placement)) != current:
            raise PlacementChanged("another process changed the placement first")
        if new != current:
            yield store_io(store, tx, store.set_placement, new)
    return steps


def _both(first: Guard, then: Guard | None) -> Guard:
    """``first`` then ``then`` as one guard (their checks run in the same order)."""
    def steps(tx: Tx) -> Steps[Check | None]:
        checks = [c for c in ((yield from first(tx)), (yield from open_guard(then, tx)))
                  if c is not None]
        if len(checks) < 2:
            return checks[0] if checks else None

        def check() -> Steps[None]:
            for one in checks:
                yield from one()
        return check
    return steps
