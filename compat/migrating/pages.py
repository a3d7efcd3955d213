"""A migration's page reads: which threads of a page are exactly as a verified migration of
this source left them, and which sources moved past their target (the delta pass) — one
query per page on the source and one connection per page on the target, never a round trip
per thread.

A thread is *unchanged* only when every fact agrees: the target's newest fold record is this
source's migration mark, and that mark was verified after its write (``confirm_mark``); the
source still has the mark's message count and newest id; the target's newest transcript
message is still the mark's; and the target's state stamp (placement, newest checkpoint or
summary and window rows: ``adapters.stores.marks``) is still the one the migration's own
transaction left. Anything else — a new turn on either side, a fold, a clear, a restore, a
move, a failed or unverified earlier run — goes the full path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from adapters.stores.marks import stamp_backend

__all__ = ["PageCheck", "behind_page", "check_page", "page_store", "pages", "read_page"]

PAGE = 500
CHUNK = 50  # source threads decoded at once


def pages(ids: Iterable[str], size: int = PAGE) -> Iterator[list[str]]:
    """``ids`` in lists of ``size`` (streamed: one page in memory at a time)."""
    it = iter(ids)
    while page := list(islice(it, size)):
        yield page


def page_store(target: Any) -> Any | None:
    """The target's one store when it can read a page of threads (SQL), else ``None``: a
    shadow target, or a staged one over two stores, is checked thread by thread."""
    if target is None or target.backend_name not in ("classic", "middleware"):
        return None
    homes = target.backend_impl.homes()
    if len(homes) != 1 or not hasattr(homes[0], "thread_marks"):
        return None
    return homes[0]


@dataclass
class PageCheck:
    unchanged: set[str] = field(default_factory=set)
    # thread -> token of a mark that matches in every way but was never verified: a full
    # comparison that finds the thread identical confirms it
    pending: dict[str, str] = field(default_factory=dict)
    on_target: set[str] = field(default_factory=set)  # threads with a transcript there


def check_page(src: Any, store: Any, page: list[str], trigger: str) -> PageCheck | None:
    """The page's unchanged threads (``None``: the source cannot read a page)."""
    fingerprints = getattr(src, "fingerprints", None)  # an optional capability of a source
    if fingerprints is None:
        return None
    have = fingerprints(page)
    marks = store.thread_marks(page)
    check = PageCheck(on_target=set(marks))
    for thread_id, seen in marks.items():
        fold = seen.fold or {}
        mark = fold.get("source")
        if fold.get("trigger") != trigger or not isinstance(mark, dict) or \
                not mark.get("token") or not mark.get("stamp"):
            continue
        if have.get(thread_id) != (mark.get("count"), mark.get("last_id")) or \
                seen.last_id != mark.get("last_id") or \
                mark["stamp"] != seen.stamp(stamp_backend(mark["stamp"])):
            continue
        if mark.get("verified") is True:
            check.unchanged.add(thread_id)
        else:
            check.pending[thread_id] = str(mark["token"])
    return check


def behind_page(src: Any, store: Any, page: list[str]) -> list[str] | None:
    """The page's threads whose source holds a newer message than the target (``None``: the
    source cannot read a page)."""
    fingerprints = getattr(src, "fingerprints", None)
    if fingerprints is None:
        return None
    have = fingerprints(page)
    tails = store.thread_marks(list(have), state=False)
    return [t for t in page if t in have and
            have[t][1] != (tails[t].last_id if t in tails else None)]


def read_page(src: Any, page: list[str], chunk: int = CHUNK) -> Any:
    """The page's source threads read a ``chunk`` at a time where the source can
    (``read_many``), else its ``read``: a callable ``thread_id -> SourceThread | None``."""
    read_many = getattr(src, "read_many", None)  # an optional capability of a source
    if read_many is None or not page:
        return src.read
    return _PageReader(src.read, read_many, page, chunk)


class _PageReader:
    """A page's threads, read ``chunk`` threads per query as the run reaches them, each
    handed out once (then dropped).

    Not the whole page in one read: 500 threads' decoded messages (~10 MB of small objects,
    freed a page later) were the burst that, interleaved with the run's long-lived objects,
    left the interpreter's memory arenas pinned and the worker's RSS ratcheting up with the
    number of threads. A chunk whose read fails (one row that does not decode) is read
    thread by thread, so only that thread fails; a thread asked for again, or not on the
    page, is read on its own."""

    def __init__(self, read: Any, read_many: Any, page: list[str], chunk: int) -> None:
        self.read, self.read_many = read, read_many
        self.chunks: Iterator[list[str]] | None = pages(page, max(1, chunk))  # None: all read
        self.found: dict[str, Any] = {}
        self.covered: set[str] = set()  # read (or tried), not handed out yet
        self.handed: set[str] = set()  # handed out already
        self.alone: set[str] = set()  # in a chunk whose read failed

    def __call__(self, thread_id: str) -> Any:
        while thread_id not in self.covered and thread_id not in self.handed and \
                self.chunks is not None:
            self._read_next()
        if thread_id not in self.covered:  # asked again, or not on the page
            return self.read(thread_id)
        self.handed.add(thread_id)
        self.covered.discard(thread_id)
        if thread_id in self.alone:
            self.alone.discard(thread_id)
            return self.read(thread_id)
        return self.found.pop(thread_id, None)

    def _read_next(self) -> None:
        assert self.chunks is not None
        ids = next(self.chunks, None)
        if ids is None:
            self.chunks = None
            return
        self.covered.update(ids)
        try:
            self.found.update(self.read_many(ids))
        except Exception:
            self.alone.update(ids)
