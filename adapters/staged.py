"""Where a thread lives: both backends, each thread served by the one its placement names.

Every ``SummaryMemory`` that is not shadow runs on this engine: ``backend="staged"`` with a
rollout share (or ``route``), and a fixed ``backend="classic"`` / ``"middleware"``, which is a
rollout of 0.0 / 1.0. A fixed configuration's saves and loads go straight to its own side,
whose transaction checks the placement before anything else (the guard); only a thread the
guard refuses (placed elsewhere, or due to move) goes through the router. A thread's location
is one record (``Placement``: backend, version, since, pinned) kept with the middleware side's
store, and every path reads it inside its own transaction: a save's guard reads it before
anything is written, a load's before the state is read. A thread found on the other backend
moves at first touch: its state is copied through the same restore path as ``migrate`` and
the placement changes *in the same transaction*, which checks that no turn landed meanwhile (transcript compare-and-set) and that nobody moved
it first (version compare-and-set). A crash mid-move leaves the thread on its old backend,
intact. ``move_on_touch=False`` makes that move a ``ThreadElsewhere`` error instead; a
read-only store is served where the thread lives.

Rolling deploys: a placement records the configuration that decided it (``since``: the time
that configuration was built). A process follows any record decided by a newer configuration
(or pinned), so two processes with different flags never move one thread back and forth: it
changes backend at most once per configuration change. A record that only says where a
legacy thread was found has ``since=0``: any configuration applies itself to it.

This module is the engine API (what the protocol asks, routed to the side the record names);
the decision and the move are ``adapters.placement``, the in-transaction checks
``adapters.placement_guard``, the sides (one of a fixed configuration built on first need)
``adapters.placement_sides``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from adapters.engine import MemoryEngine
from adapters.errors import ConfigError
from adapters.io import Steps, run_sync
from adapters.placement import ATTEMPTS, BACKENDS, Placer, share_of  # noqa: F401 (share_of)
from adapters.placement_guard import Elsewhere, PlacementChanged, Unsettled, both, expect
from adapters.placement_sides import Side, Sides
from adapters.protocol import Engine, Guard, Location
from adapters.stores.base import Placement, Store, Tx, in_transaction
from adapters.view import MemoryView, ThreadRecord

__all__ = ["PlacementChanged", "StagedEngine", "share_of"]

T = TypeVar("T")
# one operation on one side, given the guard its transaction runs first
SideCall = Callable[[Engine, "Guard | None"], Steps[T]]


class _Route:
    """What ``StagedEngine._straight`` returns when the router must serve the call."""


ROUTE = _Route()


def _distinct(stores: Iterable[Store]) -> list[Store]:
    """Each store once (both sides may share one), in first-seen order."""
    return list({id(store): store for store in stores}.values())


class StagedEngine(Engine):
    """Both backends; the placement record decides which one serves a thread.

    ``classic``/``middleware``: a side's engine, ``None`` when the store cannot host it, or
    a factory (no arguments) for the side a fixed configuration does not serve: built on
    first need, on the same store (``adapters.placement_sides``). Any other factory is
    called at once."""

    def __init__(self, *, classic: Side, middleware: Side, rollout: float = 0.0,
                 route: Callable[[str], str] | None = None, fixed: str | None = None,
                 move_on_touch: bool = True, config_since: float | None = None) -> None:
        if fixed is not None and fixed not in BACKENDS:
            raise ConfigError(f"unknown backend {fixed!r}; use one of {list(BACKENDS)}")
        if not 0 <= rollout <= 1:
            raise ConfigError(f"rollout must be within [0, 1], got {rollout}")
        # a side the store cannot host (it lacks that concern) is absent
        sides = Sides(classic=classic, middleware=middleware)
        if not sides.hosted or (fixed is not None and fixed not in sides) or \
                (fixed is None and len(sides.hosted) < 2):
            raise ConfigError(f"the store cannot host the {fixed or 'staged'} backend: "
                              f"only {list(sides.hosted) or 'no backend'} (a store without "
                              "'classic' state or 'checkpoints' runs the other backend only)")
        for name in sides.lazy():  # only the side a fixed configuration never serves waits
            if name == fixed or fixed is None or not sides.built:
                sides.side(name)
        self.placer = placer = Placer(
            sides, rollout=rollout, route=route, fixed=fixed, move_on_touch=move_on_touch,
            config_since=time.time() if config_since is None else config_since)
        self.sides = sides
        self._first = next(iter(sides.built.values()))
        # a fixed configuration's own side, served without the router while the placement
        # guard in its own transaction agrees (``_straight``)
        self._own = sides.built.get(fixed) if fixed is not None and placer.same_store and \
            not placer.read_only else None
        self.fixed, self.name = fixed, fixed or "staged"
        self.rollout, self.route, self.move_on_touch = placer.rollout, route, move_on_touch
        self.config_since, self.store = placer.config_since, placer.store
        self.same_store, self.read_only = placer.same_store, placer.read_only

    # -- what the protocol asks of every engine -------------------------------------------
    @property
    def engines(self) -> dict[str, Engine]:
        """The sides built so far, by backend (``sides.side(name)`` builds one)."""
        return self.sides.built

    @property
    def moves(self) -> int:
        """Threads this engine moved from one backend to the other."""
        return self.placer.moves

    @property
    def policy(self) -> Any:  # type: ignore[override]
        return self._first.policy

    @property
    def summarizer(self) -> Any:  # type: ignore[override]
        return self._first.summarizer

    @summarizer.setter
    def summarizer(self, value: Any) -> None:
        self.sides.set_summarizer(value)

    @property
    def clock(self) -> Callable[[], float]:
        """The fold backoff's clock (injectable in tests), shared by every side."""
        return self._first.leaves()[0].clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self.sides.set_clock(value)

    @property
    def mismatches(self) -> list[Any]:
        """Shadow mismatches of the classic cohort (``shadow_sample``), else ``[]``."""
        return self._first.mismatches

    def forget_mismatches(self, thread_id: str) -> int:
        return sum(side.forget_mismatches(thread_id) for side in self.engines.values())

    def leaves(self) -> list[MemoryEngine]:
        """Every side's one-backend engines, classic first (a side not built yet is built)."""
        return [leaf for side in self.sides.all() for leaf in side.leaves()]

    def stores(self) -> list[Store]:
        return _distinct(store for side in self.engines.values() for store in side.stores())

    def homes(self) -> list[Store]:
        return _distinct(store for side in self.engines.values() for store in side.homes())

    def middleware_engine(self) -> MemoryEngine | None:
        return self.sides.leaf("middleware") if "middleware" in self.sides else None

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
        return self.placer.hints.get(thread_id) or self.desired(thread_id)

    def desired(self, thread_id: str) -> str:
        """The backend this configuration wants for the thread."""
        return self.placer.desired(thread_id)

    def settled(self, thread_id: str, placement: Placement) -> bool:
        """Whether this configuration leaves the placement as it is."""
        return self.placer.settled(thread_id, placement)

    def place_steps(self, thread_id: str, want: str | None = None, pin: bool | None = None,
                    since: float | None = None) -> Steps[Placement | None]:
        """The thread's placement after applying this configuration, moving the thread if
        due (``Placer.place``)."""
        return (yield from self.placer.place(thread_id, want, pin, since))

    # -- the engine API ---------------------------------------------------------------------
    def locate_steps(self, thread_id: str, move: bool = True) -> Steps[Location]:
        if move:
            placement = yield from self.placer.place(thread_id)
            backend = placement.backend if placement is not None else self.desired(thread_id)
        else:
            placement = yield from self.placer.read(thread_id)
            backend = placement.backend if placement is not None else \
                (yield from self.placer.origin(thread_id)) or self.desired(thread_id)
        leaf = self.sides.leaf(backend)
        return Location(backend, leaf, leaf.store, placement)

    def claim_steps(self, thread_id: str, backend: str) -> Steps[Location]:
        if backend not in self.sides:
            raise ConfigError(f"claim 'classic' or 'middleware', not {backend!r}")
        placer = self.placer
        current = yield from placer.read(thread_id)
        if not self.read_only and (current is None or current.backend != backend):
            if current is not None and not self.move_on_touch:
                raise placer.elsewhere(thread_id, current, backend)
            current = yield from placer.place(thread_id, want=backend)
        leaf = self.sides.leaf(backend)
        return Location(backend, leaf, leaf.store, current)

    def _routed(self, thread_id: str, write: bool, outer: Guard | None,
                call: SideCall[T]) -> Steps[T]:
        """``call(side, guard)`` on the side the placement names, checked inside its
        transaction; retried where it says, or after the move this configuration asks for."""
        placer = self.placer
        for _ in range(ATTEMPTS):
            backend = placer.hints.get(thread_id) or placer.desired(thread_id)
            if not self.same_store:  # the record is on another store: settle it first
                placement = yield from placer.place(thread_id)
                backend = placement.backend if placement is not None else backend
            try:
                result = yield from call(self.sides.side(backend),
                                         placer.guard(backend, write, outer))
            except Elsewhere as moved:
                placer.remember(thread_id, moved.backend)
                continue
            except Unsettled:
                placement = yield from placer.place(thread_id)
                if self.read_only or (placement is None and not write):
                    # served where it lives, never moved (or: nothing anywhere, empty)
                    side = placement.backend if placement is not None else \
                        placer.desired(thread_id)
                    return (yield from call(self.sides.side(side), outer))
                if placement is not None:
                    placer.remember(thread_id, placement.backend)
                continue
            placer.remember(thread_id, backend)
            return result
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def _straight(self, thread_id: str, write: bool, guard: Guard | None,
                  call: SideCall[T]) -> Steps[T | _Route]:
        """A fixed configuration's hot path: ``call`` on its own side, whose transaction checks
        the placement first (the guard), no router between. ``ROUTE`` when the router must
        decide: a caller's guard, a thread last found elsewhere, or a refusal by the guard
        (``Elsewhere``, ``Unsettled``: rolled back, nothing written), after which the router
        moves the thread or serves it where it lives."""
        own, placer = self._own, self.placer
        if own is None or guard is not None or placer.hints.get(thread_id, self.fixed) != self.fixed:
            return ROUTE
        try:
            return (yield from call(own, placer.guard(own.name, write)))
        except Elsewhere as moved:
            placer.remember(thread_id, moved.backend)  # where the router tries first
            return ROUTE
        except Unsettled:  # due to move (or unplaced and the other side holds it)
            return ROUTE

    def _quick(self, thread_id: str) -> MemoryEngine | None:
        """The classic side, when it may serve the thread in one statement per call
        (``MemoryEngine.quick_load_steps``): a one-backend engine on the store of the
        placements, and the thread expected there (never a round trip spent on a thread
        last served by the middleware side)."""
        side = self.sides.built.get("classic")
        if side is None or not self.same_store or self.read_only:
            return None
        leaf = side.leaves()[0]
        placer = self.placer
        if leaf is not side or leaf.quick is None or \
                (placer.hints.get(thread_id) or placer.desired(thread_id)) != "classic":
            return None
        return leaf

    def _serves_classic(self, thread_id: str) -> Callable[[Placement], bool]:
        """Whether a placement read by a quick call lets the classic side serve the thread
        as it is (what the placement guard lets through without moving it)."""
        placer = self.placer
        return lambda placement: placement.backend == "classic" and \
            placer.settled(thread_id, placement)

    def load_steps(self, thread_id: str, detached: bool = True,
                   guard: Guard | None = None) -> Steps[MemoryView]:
        leaf = self._quick(thread_id) if guard is None else None
        if leaf is not None:
            view = yield from leaf.quick_load_steps(thread_id, detached,
                                                    self._serves_classic(thread_id))
            if view is not None:
                self.placer.remember(thread_id, "classic")
                return view

        def load(side: Engine, checked: Guard | None) -> Steps[MemoryView]:
            return side.load_steps(thread_id, detached, checked)
        view = yield from self._straight(thread_id, False, guard, load)
        if not isinstance(view, _Route):
            return view
        return (yield from self._routed(thread_id, False, guard, load))

    def save_steps(self, thread_id: str, turn: list[BaseMessage], fold: bool = True,
                   guard: Guard | None = None) -> Steps[list[BaseMessage]]:
        leaf = self._quick(thread_id) if guard is None else None
        if leaf is not None:  # the same store: nothing to forward
            quick = yield from leaf.quick_save_steps(thread_id, turn, fold,
                                                     self._serves_classic(thread_id))
            if quick is not None:
                return quick

        def save(side: Engine, checked: Guard | None) -> Steps[list[BaseMessage]]:
            return side.save_steps(thread_id, turn, fold, checked)
        stored = yield from self._straight(thread_id, True, guard, save)
        if not isinstance(stored, _Route):
            return stored
        stored = yield from self._routed(thread_id, True, guard, save)
        if not self.same_store:
            yield from self._forward_if_moved(thread_id, self.placer.hints.get(thread_id),
                                              stored)
        return stored

    def _forward_if_moved(self, thread_id: str, saved_on: str | None,
                          stored: list[BaseMessage]) -> Steps[None]:
        """Two stores: a move that committed while this turn was being saved on the old side
        gets the turn too (by id, so a turn the move caught up already is stored once)."""
        now = yield from self.placer.read(thread_id)
        if now is not None and now.backend != saved_on:
            yield from self.sides.leaf(now.backend).save_steps(thread_id, list(stored))

    def clear_steps(self, thread_id: str) -> Steps[None]:
        where = yield from self.locate_steps(thread_id)
        yield from self.sides.side(where.backend).clear_steps(thread_id)

    def prune_steps(self, thread_id: str) -> Steps[None]:
        where = yield from self.locate_steps(thread_id)
        yield from self.sides.side(where.backend).prune_steps(thread_id)

    def restore_steps(self, record: ThreadRecord, expect_last_id: str | None = None,
                      fold_record: Any = None, also: Guard | None = None) -> Steps[bool]:
        """A whole state written where this configuration places the thread, its placement
        changed in the same transaction (same store) when it lived elsewhere."""
        thread_id, placer = record.thread_id, self.placer
        for _ in range(ATTEMPTS):
            current = yield from placer.read(thread_id)
            if current is not None and placer.settled(thread_id, current):
                target = current.backend
            else:
                target = placer.desired(thread_id)
            new = current if current is not None and current.backend == target else \
                Placement(target, current.version + 1 if current else 1, self.config_since,
                          current.pinned if current else False)
            swap = expect(self.store, current, new)
            side = self.sides.side(target)
            try:
                if self.same_store:
                    wrote = yield from side.restore_steps(record, expect_last_id, fold_record,
                                                          both(swap, also))
                else:
                    wrote = yield from side.restore_steps(record, expect_last_id, fold_record,
                                                          also)
                    if wrote and new is not current:
                        yield from in_transaction(self.store, thread_id, swap)
            except PlacementChanged:
                continue
            if wrote:
                placer.remember(thread_id, target)
            return wrote
        raise PlacementChanged(f"thread placement kept changing for {ATTEMPTS} attempts")

    def view_in(self, tx: Tx) -> Steps[MemoryView]:
        return (yield from self.sides.leaf(self.serving(tx.thread_id)).view_in(tx))

    # -- placements, for the facade and the command line -------------------------------------
    def placement_counts(self) -> list[tuple[str, bool, int, int]]:
        return self.store.placement_counts()

    def pin(self, thread_id: str, backend: str) -> Placement:
        if backend not in self.sides:
            raise ConfigError(f"pin to 'classic' or 'middleware', not {backend!r}")
        placement = run_sync(self.placer.place(thread_id, want=backend, pin=True))
        assert placement is not None
        return placement

    def unpin(self, thread_id: str) -> Placement | None:
        """The configuration decides again from the next touch on."""
        current = run_sync(self.placer.read(thread_id))
        if current is None or not current.pinned:
            return current or run_sync(self.placer.place(thread_id))
        released = Placement(current.backend, current.version + 1, 0.0, False)
        run_sync(in_transaction(self.store, thread_id, self.placer.swap(current, released)))
        return released

    def placement_of(self, thread_id: str) -> Placement | None:
        return run_sync(self.placer.read(thread_id))
