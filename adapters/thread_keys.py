"""A thread id as the stores keep it: the id itself, or, for an id too long for PostgreSQL's
indexes, a fixed-size key derived from it.

PostgreSQL's btree holds at most 2,704 bytes per entry, and LangGraph's checkpoint keys add
the namespace and checkpoint id to the thread id (incompressible ids failed from about 2,640
bytes). An id over ``MAX_STORED_BYTES`` in UTF-8 (a 1,000-character CJK id is 3,000 bytes) is
stored as ``memshift-key:sha256:<hex of its UTF-8>`` on every store, so a thread can always
move between stores. The key is deterministic: the same id finds the same thread from every
process, and the key names that thread too.

The id the application passed is stored beside its key (``memshift_long_ids``), so listings
show it: ``storage_id`` remembers, for this process, the original of each key it derives
(``original_of``), and a store's write that appends to the thread's transcript records it
with an idempotent insert in that transaction. Only a long id pays for this (one statement
per save, queued with the save's others on PostgreSQL); an id within the budget sends none.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict

__all__ = ["KEY_PREFIX", "MAX_STORED_BYTES", "is_key", "original_of", "storage_id"]

MAX_STORED_BYTES = 2048
KEY_PREFIX = "memshift-key:sha256:"
_KEY = re.compile(r"memshift-key:sha256:[0-9a-f]{64}")
MET_KEYS = 4096  # keys whose original this process remembers (the most recently met)
_met: OrderedDict[str, str] = OrderedDict()
_met_lock = threading.Lock()


def storage_id(thread_id: str) -> str:
    """The id the stores keep for ``thread_id`` (the id itself within the byte budget)."""
    if thread_id.isascii():  # O(1); ASCII ids within memshift's length limit always fit
        if len(thread_id) <= MAX_STORED_BYTES:
            return thread_id
    encoded = thread_id.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_STORED_BYTES:
        return thread_id
    key = KEY_PREFIX + hashlib.sha256(encoded).hexdigest()
    with _met_lock:  # a bound, most recently met last: a thread in use keeps its original
        _met[key] = thread_id
        _met.move_to_end(key)
        if len(_met) > MET_KEYS:
            _met.popitem(last=False)
    return key


def original_of(thread_id: str) -> str | None:
    """The long id ``thread_id`` is the key of, if this process derived that key (recently);
    ``None`` for any other id (an id within the budget is its own name)."""
    if not thread_id.startswith(KEY_PREFIX):
        return None
    with _met_lock:
        return _met.get(thread_id)


def is_key(thread_id: str) -> bool:
    return thread_id.startswith(KEY_PREFIX) and _KEY.fullmatch(thread_id) is not None
