"""A thread id as the stores keep it: the id itself, or, for an id too long for PostgreSQL's
indexes, a fixed-size key derived from it.

PostgreSQL's btree holds at most 2,704 bytes per entry, and LangGraph's checkpoint keys add
the namespace and checkpoint id to the thread id (incompressible ids failed from about 2,640
bytes). An id over ``MAX_STORED_BYTES`` in UTF-8 (a 1,000-character CJK id is 3,000 bytes) is
stored as ``memshift-key:sha256:<hex of its UTF-8>`` on every store, so a thread can always
move between stores. The key is deterministic: the same id finds the same thread from every
process, and the key names that thread too (listings show it for such threads).
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["KEY_PREFIX", "MAX_STORED_BYTES", "is_key", "storage_id"]

MAX_STORED_BYTES = 2048
KEY_PREFIX = "memshift-key:sha256:"
_KEY = re.compile(r"memshift-key:sha256:[0-9a-f]{64}")


def storage_id(thread_id: str) -> str:
    """The id the stores keep for ``thread_id`` (the id itself within the byte budget)."""
    if thread_id.isascii():  # O(1); ASCII ids within memshift's length limit always fit
        if len(thread_id) <= MAX_STORED_BYTES:
            return thread_id
    encoded = thread_id.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_STORED_BYTES:
        return thread_id
    return KEY_PREFIX + hashlib.sha256(encoded).hexdigest()


def is_key(thread_id: str) -> bool:
    return thread_id.startswith(KEY_PREFIX) and _KEY.fullmatch(thread_id) is not None
