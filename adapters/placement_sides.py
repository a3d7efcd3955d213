"""The two sides of a staged engine, the one a fixed configuration does not serve built on
first need.

Why a module of its own: a memory that can only ever serve one backend (``backend="classic"``
or ``"middleware"``: a rollout of 0.0 or 1.0) still has to know where a thread lives, so it
keeps the other side — but it needs it only when a thread no placement record names comes by
(the placement guard asks the other side whether it holds the thread), when one found there
moves, or when a caller asks for every engine (``leaves``, ``middleware_engine``). Until then
that side is a factory: nothing of it is built or imported. A side built later lives on the
same store as the side built at once (placements are checked inside that store's
transactions), and gets the summarizer and clock set on the engine since.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from adapters.engine import MemoryEngine
from adapters.errors import ConfigError
from adapters.protocol import Engine

__all__ = ["SIDES", "Side", "Sides"]

SIDES = ("classic", "middleware")
# a side: its engine, a factory that builds it on first need, or None (the store cannot host it)
Side = Engine | Callable[[], Engine] | None


class Sides:
    """The sides the store hosts (``hosted``), those built so far (``built``, in
    ``SIDES`` order), and the factories of the others."""

    def __init__(self, *, classic: Side, middleware: Side) -> None:
        given = {"classic": classic, "middleware": middleware}
        self.hosted = tuple(name for name in SIDES if given[name] is not None)
        self.built: dict[str, Engine] = {}
        self._factories: dict[str, Callable[[], Engine]] = {}
        for name in self.hosted:
            side = given[name]
            if isinstance(side, Engine):
                self.built[name] = side
            else:
                assert callable(side)
                self._factories[name] = side
        self._lock = threading.Lock()
        self._summarizer: Any = None  # set on the engine since: given to a side built later
        self._clock: Callable[[], float] | None = None

    def __contains__(self, name: object) -> bool:
        return name in self.hosted

    def lazy(self) -> tuple[str, ...]:
        """The sides not built yet."""
        return tuple(self._factories)

    def side(self, name: str) -> Engine:
        """The side's engine, built now if it was not yet (once, whatever the threads)."""
        engine = self.built.get(name)
        if engine is not None:
            return engine
        with self._lock:
            engine = self.built.get(name)
            if engine is None:
                engine = self._build(name)
        return engine

    def _build(self, name: str) -> Engine:
        factory = self._factories.get(name)
        if factory is None:
            raise ConfigError(f"this store hosts only {list(self.hosted)}, not {name!r}")
        engine = factory()
        first = next(iter(self.built.values()), None)
        if first is not None and engine.leaves()[0].store is not first.leaves()[0].store:
            raise ConfigError(f"the {name} side built on first need must be on the store of "
                              "the side built at once (placements are checked there)")
        if self._summarizer is not None:
            engine.summarizer = self._summarizer
        if self._clock is not None:
            for leaf in engine.leaves():
                leaf.clock = self._clock
        # in SIDES order, so the first built side stays first; published whole
        self.built = {n: self.built[n] if n != name else engine
                      for n in SIDES if n in self.built or n == name}
        del self._factories[name]
        return engine

    def leaf(self, name: str) -> MemoryEngine:
        """The one-backend engine serving the side (reads for moves and origins go there)."""
        return self.side(name).leaves()[0]

    def all(self) -> list[Engine]:
        """Every side, each built now if it was not yet."""
        return [self.side(name) for name in self.hosted]

    def set_summarizer(self, value: Any) -> None:
        """The summary writer of every side, including those built later."""
        self._summarizer = value
        for engine in list(self.built.values()):
            engine.summarizer = value

    def set_clock(self, value: Callable[[], float]) -> None:
        """The fold backoff's clock of every side, including those built later."""
        self._clock = value
        for engine in list(self.built.values()):
            for leaf in engine.leaves():
                leaf.clock = value
