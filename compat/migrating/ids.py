"""Compact per-thread outcomes for a migration report.

A report over 100,000 threads held each id as a ``str`` (~85 bytes for a uuid) in up to four
lists, a ``(thread, reason)`` tuple per skipped thread and a thread->note dict: ~12 MB of
small objects that live for the whole run, scattered over the interpreter's memory pools
between the run's short-lived objects (so the pools they pin are not given back either).
Here a report registers each thread once, as UTF-8 bytes in one growing buffer, and every
outcome list is an ``array`` of 4-byte ordinals into it: a few large buffers, about 45 bytes
a thread. The lists still read, compare and append like the ``list`` they replace.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import overload

__all__ = ["IdTable", "Notes", "Outcomes", "ThreadIds"]


class IdTable:
    """The threads a report names, each registered once per outcome it starts (a thread the
    delta pass copies again is registered again: the buffer only grows). An id that is not
    a ``str`` (a caller's mistake the run reports as a failed thread) is kept as it is."""

    __slots__ = ("_blob", "_ends", "_last", "_others")

    def __init__(self) -> None:
        self._blob = bytearray()
        self._ends = array("Q")
        self._last: object = None
        self._others: dict[int, object] = {}  # ordinal -> an id that is not a str

    def ordinal(self, thread_id: str) -> int:
        """The ordinal of ``thread_id``: the newest one when it is the thread just
        registered (one thread's outcomes are recorded together), else a new one."""
        if self._ends and (thread_id is self._last or
                           (type(thread_id) is str and thread_id == self._last)):
            return len(self._ends) - 1
        if isinstance(thread_id, str):
            self._blob += thread_id.encode("utf-8", "surrogatepass")
        else:
            self._others[len(self._ends)] = thread_id
        self._ends.append(len(self._blob))
        self._last = thread_id
        return len(self._ends) - 1

    def __getitem__(self, ordinal: int) -> str:
        if self._others and ordinal in self._others:
            return self._others[ordinal]  # type: ignore[return-value]
        start = self._ends[ordinal - 1] if ordinal else 0
        return self._blob[start:self._ends[ordinal]].decode("utf-8", "surrogatepass")

    def find(self, thread_id: object) -> list[int]:
        """Every ordinal registered for ``thread_id`` (a search of the buffer, not a decode
        of each id)."""
        found = [o for o, other in self._others.items() if other == thread_id]
        if not isinstance(thread_id, str):
            return found
        needle, ends, blob = thread_id.encode("utf-8", "surrogatepass"), self._ends, self._blob
        if not needle:  # the empty id: zero-length entries that are not other objects
            return found + [o for o in range(len(ends)) if o not in self._others and
                            ends[o] == (ends[o - 1] if o else 0)]
        pos = blob.find(needle)
        while pos != -1:
            o = bisect_right(ends, pos)  # the entry holding byte ``pos``
            if (ends[o - 1] if o else 0) == pos and ends[o] == pos + len(needle):
                found.append(o)
            pos = blob.find(needle, pos + 1)
        return found


class _Ordinals:
    """What the outcome lists share: ordinals into one table, filtered in one pass."""

    __slots__ = ("_ids", "_ords")

    def __init__(self, ids: IdTable) -> None:
        self._ids, self._ords = ids, array("I")

    def __len__(self) -> int:
        return len(self._ords)

    def keep(self, keep: Iterable[bool]) -> list[int]:
        """Keep the entries ``keep`` says (one flag per entry); the kept positions."""
        kept = [i for i, flag in zip(range(len(self._ords)), keep) if flag]
        self._ords = array("I", (self._ords[i] for i in kept))
        return kept

    def drop(self, gone: set[str]) -> None:
        """Remove every entry whose thread is in ``gone`` (order kept)."""
        if gone:
            self.keep(self._ids[o] not in gone for o in self._ords)


class ThreadIds(_Ordinals, Sequence[str]):
    """A list of thread ids (``len``, iteration, indexing, ``in``, ``==`` with any
    sequence, ``append``, ``extend``, ``+=``) stored as ordinals."""

    __slots__ = ()

    def __init__(self, ids: IdTable, values: Iterable[str] = ()) -> None:
        super().__init__(ids)
        self.extend(values)

    def append(self, thread_id: str) -> None:
        self._ords.append(self._ids.ordinal(thread_id))

    def extend(self, values: Iterable[str]) -> None:
        for thread_id in values:
            self.append(thread_id)

    def __iadd__(self, values: Iterable[str]) -> ThreadIds:
        self.extend(values)
        return self

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._ids[o] for o in self._ords[index]]
        return self._ids[self._ords[index]]

    def __iter__(self) -> Iterator[str]:
        ids = self._ids
        return (ids[o] for o in self._ords)

    def __contains__(self, thread_id: object) -> bool:
        ords = self._ords
        return any(o in ords for o in self._ids.find(thread_id))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ThreadIds, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it replaces

    def __repr__(self) -> str:
        return repr(list(self))


class Outcomes(_Ordinals, Sequence[tuple[str, str]]):
    """A list of ``(thread_id, reason)`` pairs; each distinct reason is held once."""

    __slots__ = ("_codes", "_reasons", "_index")

    def __init__(self, ids: IdTable, values: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(ids)
        self._codes = array("I")
        self._reasons: list[str] = []
        self._index: dict[str, int] = {}
        self.extend(values)

    def append(self, pair: tuple[str, str]) -> None:
        thread_id, reason = pair
        if not isinstance(reason, str):
            raise TypeError(f"a reason is a str, not {type(reason).__name__}")
        code = self._index.setdefault(reason, len(self._reasons))
        if code == len(self._reasons):
            self._reasons.append(reason)
        self._ords.append(self._ids.ordinal(thread_id))
        self._codes.append(code)

    def extend(self, values: Iterable[tuple[str, str]]) -> None:
        for pair in values:
            self.append(pair)

    def __iadd__(self, values: Iterable[tuple[str, str]]) -> Outcomes:
        self.extend(values)
        return self

    def keep(self, keep: Iterable[bool]) -> list[int]:
        kept = super().keep(keep)
        self._codes = array("I", (self._codes[i] for i in kept))
        return kept

    def by_reason(self) -> dict[str, int]:
        """How many entries each reason has."""
        return {self._reasons[code]: n for code, n in Counter(self._codes).items()}

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, str]]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, str] | list[tuple[str, str]]:
        if isinstance(index, slice):
            return list(self)[index]
        return self._ids[self._ords[index]], self._reasons[self._codes[index]]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        ids, reasons = self._ids, self._reasons
        return ((ids[o], reasons[c]) for o, c in zip(self._ords, self._codes))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Outcomes, list, tuple)):
            return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class Notes(Mapping[str, str]):
    """Thread id -> the note its source gave (for example "summary rebuilt from history"),
    held as one ordinal list per distinct note: the report prints each note once. Looking a
    thread up builds a dict once (until the next ``add`` or ``drop``); ``distinct`` does not."""

    __slots__ = ("_by_note", "_ids", "_index")

    def __init__(self, ids: IdTable, values: Mapping[str, str] | None = None) -> None:
        self._ids = ids
        self._by_note: dict[str, ThreadIds] = {}
        self._index: dict[str, str] | None = None
        for thread_id, note in (values or {}).items():
            self.add(thread_id, note)

    def add(self, thread_id: str, note: str) -> None:
        if not isinstance(note, str):
            raise TypeError(f"a note is a str, not {type(note).__name__}")
        self._by_note.setdefault(note, ThreadIds(self._ids)).append(thread_id)
        self._index = None

    def _lookup(self) -> dict[str, str]:
        if self._index is None:
            self._index = {t: note for note, threads in self._by_note.items() for t in threads}
        return self._index

    def __getitem__(self, thread_id: str) -> str:
        return self._lookup()[thread_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lookup())

    def __len__(self) -> int:
        return len(self._lookup())

    def distinct(self) -> list[str]:
        """The notes given, each once, sorted."""
        return sorted(note for note, threads in self._by_note.items() if threads)

    def drop(self, gone: set[str]) -> None:
        for threads in self._by_note.values():
            threads.drop(gone)
        self._index = None

    def __repr__(self) -> str:
        return repr(self._lookup())
