"""Where a thread lives: this configuration's decision, and the compare-and-set move.

Why a module of its own: ``adapters.staged`` is the engine API (load, save, restore... on the
side the record names); this is everything that reads or changes the record itself — what
the configuration wants for a thread (``desired``/``settled``), where a thread no record
names was found (``origin``), and the move (``place``): the state copied through the same
restore path as ``migrate`` and the placement changed in the same transaction, which checks
that no turn landed meanwhile (transcript compare-and-set) and that nobody moved it first
(version compare-and-set). The guards that check the record inside a side's own transaction
are in ``adapters.placement_guard``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage

from adapters.engine import MemoryEngine
from adapters.errors import ConfigError, ThreadElsewhere
from adapters.io import Steps
from adapters.placement_guard import PlacementChanged, placement_guard, swap
from adapters.placement_sides import SIDES, Sides
from adapters.protocol import Guard
from adapters.stores.base import Placement, Store, Tx, in_transaction, require, store_io
from adapters.telemetry import TELEMETRY
from adapters.view import MemoryView, ThreadRecord

__all__ = ["ATTEMPTS", "BACKENDS", "PlacementChanged", "Placer", "share_of", "transcript_of"]

ATTEMPTS = 5
BACKENDS = SIDES


def share_of(thread_id: str) -> float:
    """A stable number in [0, 1) for a thread id: the rollout compares against it."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def transcript_of(store: Store, thread_id: str) -> Steps[list[BaseMessage]]:
    """The thread's transcript on ``store``, in a read transaction of its own."""
    def body(tx: Tx) -> Steps[list[BaseMessage]]:
        return (yield store_io(store, tx, store.transcript_in))
    return (yield from in_transaction(store, thread_id, body, write=False))


class Placer:
    """The placement record of one staged engine's threads, and this configuration's rule.

    ``sides``: the sides the store hosts (``adapters.placement_sides``: one may be built on
    first need). Placements live with the middleware side's store (a side built on first
    need shares the store of the one built at once). ``hints`` remembers the backend that
    served a thread here last: where to try first, never a decision."""

    hints_size = 100_000  # threads whose last backend this process remembers (a hint only)

    def __init__(self, sides: Sides, *, rollout: float,
                 route: Callable[[str], str] | None, fixed: str | None, move_on_touch: bool,
                 config_since: float) -> None:
        self.sides = sides
        self.fixed, self.route, self.move_on_touch = fixed, route, move_on_touch
        self.rollout = {"classic": 0.0, "middleware": 1.0}.get(fixed or "", rollout)
        self.config_since = config_since
        built = {name: side.leaves()[0] for name, side in sides.built.items()}
        home = built.get("middleware") or built["classic"]
        self.store: Any = require(home.store, "placements", "knowing where a thread lives")
        self.same_store = all(leaf.store is home.store for leaf in built.values())
        self.read_only = self.store.read_only
        self.moves = 0
        self.hints: dict[str, str] = {}
        self._guards: dict[tuple[str, bool], Guard] = {}

    # -- the decision ----------------------------------------------------------------------
    def desired(self, thread_id: str) -> str:
        """The backend this configuration wants for the thread."""
        if self.fixed is not None:
            return self.fixed
        if self.route is not None:
            backend = self.route(thread_id)
            if backend not in self.sides:
                raise ConfigError(f"route() returned {backend!r}; use 'classic' or 'middleware'")
            return backend
        return "middleware" if share_of(thread_id) < self.rollout else "classic"

    def settled(self, thread_id: str, placement: Placement) -> bool:
        """Whether this configuration leaves the placement as it is: a pin, a decision of a
        newer configuration, or already where this one wants it."""
        return self.read_only or placement.pinned or placement.since > self.config_since or \
            placement.backend == self.desired(thread_id)

    def remember(self, thread_id: str, backend: str) -> None:
        """Note the backend that served the thread (bounded: a hint, not an LRU)."""
        hints = self.hints
        if hints.get(thread_id) == backend:
            return
        if len(hints) >= self.hints_size:
            hints.clear()
        hints[thread_id] = backend

    def read(self, thread_id: str) -> Steps[Placement | None]:
        """The thread's placement record, in a read transaction of its own."""
        store = self.store

        def body(tx: Tx) -> Steps[Placement | None]:
            return (yield store_io(store, tx, store.placement))
        return (yield from in_transaction(store, thread_id, body, write=False))

    def guard(self, backend: str, write: bool, outer: Guard | None = None) -> Guard | None:
        """The guard for a transaction on ``backend``'s side (``placement_guard``); with the
        record on another store, ``outer`` alone (the caller settles the record first).
        Built once per side and mode (the thread comes with the transaction)."""
        if not self.same_store:
            return outer
        if outer is not None:
            return self._new_guard(backend, write, outer)
        guard = self._guards.get((backend, write))
        if guard is None:
            guard = self._guards[backend, write] = self._new_guard(backend, write, None)
        return guard

    def _new_guard(self, backend: str, write: bool, outer: Guard | None) -> Guard:
        other = "middleware" if backend == "classic" else "classic"
        sides = self.sides

        def other_leaf() -> MemoryEngine | None:  # built on the first thread no record names
            return sides.leaf(other) if other in sides else None
        return placement_guard(self.store, backend, write, outer, other=other_leaf,
                               settled=self.settled, since=self.config_since)

    def origin(self, thread_id: str) -> Steps[str | None]:
        """Where a thread no record names lives: the only side holding state, else the side
        whose window ends with the transcript's newest message, else the configured one;
        ``None`` when neither side holds anything."""
        holding: list[str] = []
        leaves = {name: self.sides.leaf(name) for name in self.sides.hosted}
        for name, leaf in leaves.items():  # asked without building a view
            if (yield from in_transaction(leaf.store, thread_id, leaf.holds_in, write=False)):
                holding.append(name)
        if len(holding) < 2:
            return holding[0] if holding else None
        views: dict[str, MemoryView] = {}
        for name, leaf in leaves.items():
            views[name] = yield from leaf.load_steps(thread_id, False)
        store = self.store

        def newest(tx: Tx) -> Steps[list[str]]:
            return (yield store_io(store, tx, store.last_ids, 1))
        last = yield from in_transaction(store, thread_id, newest, write=False)
        ending = [name for name, view in views.items()
                  if view.messages and last and view.messages[-1].id == last[0]]
        return ending[0] if len(ending) == 1 else self.desired(thread_id)

    # -- the move --------------------------------------------------------------------------
    def place(self, thread_id: str, want: str | None = None, pin: bool | None = None,
              since: float | None = None) -> Steps[Placement | None]:
        """The thread's placement after applying this configuration, moving the thread if
        due. ``want``: an explicit demand (a pin, the agent's checkpointer), decided at
        ``since`` (default: now). ``None``: nothing is stored for the thread anywhere."""
        for _ in range(ATTEMPTS):
            current = yield from self.read(thread_id)
            if current is None:
                origin = yield from self.origin(thread_id)
                if origin is not None:  # where it was found: every configuration applies
                    found = Placement(origin, 1, 0.0)
                elif want is not None:  # a new thread, claimed: a decision made now
                    found = Placement(want, 1, time.time() if since is None else since,
                                      bool(pin))
                else:
                    return None
                if self.read_only:
                    return found
                yield from in_transaction(self.store, thread_id, self._record_new(found))
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
                raise self.elsewhere(thread_id, current, target)
            try:
                moved = yield from self._move(thread_id, current, target, pinned, stamp)
            except PlacementChanged:
                continue
            if moved is not None:
                return moved
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def _record_new(self, found: Placement) -> Guard:
        """Steps that record ``found`` unless a record appeared meanwhile."""
        store = self.store

        def record(tx: Tx) -> Steps[None]:
            if (yield store_io(store, tx, store.placement)) is None:
                yield store_io(store, tx, store.set_placement, found)
        return record

    def elsewhere(self, thread_id: str, current: Placement, wanted: str) -> ThreadElsewhere:
        """The error of a ``move_on_touch=False`` memory asked for a thread it would move."""
        where = self.sides.leaf(current.backend).store.url
        return ThreadElsewhere(
            f"thread {thread_id!r} lives on the {current.backend} backend ({where}); this "
            f"memory serves {wanted!r} with move_on_touch=False, so nothing was read or "
            f"written. Move it: memshift rollout move --to {wanted} --thread ID --store URL "
            f"(or memory.pin(thread_id, {wanted!r}), or drop move_on_touch=False)",
            thread_id=thread_id, lives_on=current.backend, wanted=wanted)

    def swap(self, expected: Placement, new: Placement) -> Guard:
        """Steps that change the placement only if it is still ``expected``."""
        return swap(self.store, expected, new)

    def _move(self, thread_id: str, current: Placement, to: str, pinned: bool,
              since: float) -> Steps[Placement | None]:
        if to not in self.sides or current.backend not in self.sides:
            raise ConfigError(f"thread {thread_id!r} would move from {current.backend} to {to}, "
                              f"but this store hosts only {sorted(self.sides.hosted)}")
        new = Placement(to, current.version + 1, since, pinned)
        if current.backend == to:  # only the pin (or its time) changes
            yield from in_transaction(self.store, thread_id, self.swap(current, new))
            return new
        source, target = self.sides.leaf(current.backend), self.sides.side(to)
        # transcript first: a turn that commits between the two reads is then newer than
        # the last id checked below, and the move is retried instead of dropping it
        transcript = yield from transcript_of(source.store, thread_id)
        view = yield from source.load_steps(thread_id)
        record = ThreadRecord(thread_id, view.summary, view.messages, view.folds, transcript)
        last = transcript[-1].id if transcript and transcript[-1].id else ""
        if self.same_store:
            wrote = yield from target.restore_steps(record, last, None, self.swap(current, new))
            if not wrote:  # a turn landed meanwhile: read again
                return None
        else:  # the state first, then the record on its own store
            yield from target.restore_steps(record)
            yield from in_transaction(self.store, thread_id, self.swap(current, new))
            yield from self._catch_up(thread_id, source, to, last)
        self.moves += 1
        TELEMETRY.move(thread_id, current.backend, to)
        self.remember(thread_id, to)
        return new

    def _catch_up(self, thread_id: str, source: MemoryEngine, to: str, last: str) -> Steps[None]:
        """Two stores: turns the old side committed while the move was under way follow the
        thread (by id, so a turn forwarded twice is stored once)."""
        transcript = yield from transcript_of(source.store, thread_id)
        ids = [m.id for m in transcript]
        late = transcript[ids.index(last) + 1:] if last in ids else \
            (transcript if not last else [])
        if late:
            yield from self.sides.leaf(to).save_steps(thread_id, list(late))
