"""The placement record, checked by the transaction that touches the state.

Why a module of its own: these are the steps that run *inside* a side's transaction (a load's,
a save's, a move's, a restore's) and decide, before it commits, whether the placement still
says what the caller believed; ``adapters.placement`` decides and moves, ``adapters.staged``
routes. Nothing here chooses a backend: a guard only refuses (``Elsewhere``, ``Unsettled``,
``PlacementChanged``) and the caller retries where the record says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.errors import MemshiftError
from adapters.io import Steps
from adapters.protocol import Check, Guard, open_guard
from adapters.stores.base import Placement, Tx, store_io

__all__ = ["Elsewhere", "PlacementChanged", "Unsettled", "both", "expect", "placement_guard",
           "swap"]


class PlacementChanged(MemshiftError):
    """The thread moved between deciding where it lives and writing to it (retried)."""


class Elsewhere(Exception):
    """Inside a transaction: the settled placement names the other side."""

    def __init__(self, backend: str) -> None:
        self.backend = backend


class Unsettled(Exception):
    """Inside a transaction: the placement is missing or this configuration moves it."""


def placement_guard(store: Any, backend: str, write: bool, outer: Guard | None, *,
                    other: Callable[[], Any], settled: Callable[[str, Placement], bool],
                    since: float) -> Guard:
    """A guard for a transaction on ``backend``'s side of ``store`` (both sides on it): the
    placement says this side serves the thread, or the transaction raises ``Elsewhere`` /
    ``Unsettled`` (rolled back, retried where it does). A thread no record names is this
    side's when ``other()`` (the other side's serving engine, ``None`` when there is none)
    holds nothing of it; a write records that in the same transaction, decided at ``since``.
    On a batching store the placement read travels with the transaction's first read and is
    answered before commit (the guard gives a check); otherwise it is answered at once."""

    def verdict(tx: Tx, placement: Placement | None) -> Steps[None]:
        if placement is None:
            side = other()
            if side is not None and (yield from side.holds_in(tx)):
                raise Unsettled
            if write:
                yield store_io(store, tx, store.set_placement, Placement(backend, 1, since))
            return
        if not settled(tx.thread_id, placement):
            raise Unsettled
        if placement.backend != backend:
            raise Elsewhere(placement.backend)

    if not store.batches:  # the store answers at once: decide before anything is read
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
            yield from verdict(tx, (yield store_io(store, tx, store.deferred_placement, token)))
        return check
    return guard


def swap(store: Any, expected: Placement, new: Placement) -> Guard:
    """Steps that change the placement only if it is still ``expected``."""
    def steps(tx: Tx) -> Steps[None]:
        if (yield store_io(store, tx, store.placement)) != expected:
            raise PlacementChanged("another process changed the placement first")
        yield store_io(store, tx, store.set_placement, new)
    return steps


def expect(store: Any, current: Placement | None, new: Placement) -> Guard:
    """Steps that find the placement still ``current`` and leave ``new`` (a no-op write when
    they are the same)."""
    def steps(tx: Tx) -> Steps[None]:
        if (yield store_io(store, tx, store.placement)) != current:
            raise PlacementChanged("another process changed the placement first")
        if new != current:
            yield store_io(store, tx, store.set_placement, new)
    return steps


def both(first: Guard, then: Guard | None) -> Guard:
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
