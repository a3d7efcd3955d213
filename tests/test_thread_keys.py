"""Thread ids over the byte budget are stored under a key derived from them, the same on every
store (so such a thread can move between stores), and the caller keeps using its own id
(listings show it too: tests/test_long_ids.py)."""

from __future__ import annotations

import random

import pytest

from adapters.thread_keys import KEY_PREFIX, MAX_STORED_BYTES, is_key, storage_id
from compat import SummaryMemory


def _cjk(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n))


def test_ids_within_the_budget_are_stored_as_they_are() -> None:
    for tid in ("t", "x" * 1024, "é" * 1024, _cjk(682, 1)):
        assert storage_id(tid) == tid
    long = _cjk(1000, 2)
    key = storage_id(long)
    assert key.startswith(KEY_PREFIX) and is_key(key) and len(key.encode()) < MAX_STORED_BYTES
    assert storage_id(long) == key and storage_id(_cjk(1000, 3)) != key
    assert storage_id(key) == key  # a key names its thread


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_long_ids_keep_their_threads_apart_on_every_store(kind: str, fresh_store) -> None:
    url = fresh_store(kind)
    memory = SummaryMemory(store=url, backend="classic")
    ids = [_cjk(1000, seed) for seed in range(4)]
    for n, tid in enumerate(ids):
        memory.save(tid, f"q{n}", f"a{n}")
    for n, tid in enumerate(ids):
        assert [m.text for m in memory.transcript(tid)] == [f"q{n}", f"a{n}"]
        view = memory.for_thread(tid)
        assert f"q{n}" in view.load_memory_variables({})["history"]
    assert sorted(memory.thread_ids()) == sorted(ids)  # as the application named them
    memory.close()
