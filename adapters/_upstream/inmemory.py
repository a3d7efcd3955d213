"""``InMemorySaver``'s storage, read and changed in place: undo of a failed transaction,
retention, LangGraph's ``prune``/``copy_thread``/``delete_for_runs`` for the in-process store.

Part of ``adapters._upstream`` (every private upstream detail in one package): read it when
``langgraph-checkpoint`` releases (its ``storage``/``writes``/``blobs`` layout).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DELTA_METADATA_KEYS", "delta_metadata", "inmemory_copy", "inmemory_delete_runs",
           "inmemory_drop", "inmemory_erase", "inmemory_prune_latest", "inmemory_retain",
           "inmemory_run_threads", "inmemory_undo", "inmemory_uses_delta"]

# Checkpoint metadata keys LangGraph writes for ``DeltaChannel`` state (upstream's
# ``PostgresSaver.prune`` refuses such threads by the same keys).
DELTA_METADATA_KEYS = frozenset({"counters_since_delta_snapshot", "delta_writes_versioned"})


def inmemory_undo(saver: Any, thread_id: str) -> Any:
    """A function that removes the root checkpoints of ``thread_id`` added after this call
    (a failed in-memory transaction rolls its checkpoint write back)."""
    before = set(saver.storage.get(thread_id, {}).get("", {}))

    def undo() -> None:
        checkpoints = saver.storage.get(thread_id, {}).get("", {})
        for checkpoint_id in set(checkpoints) - before:
            checkpoints.pop(checkpoint_id, None)
            saver.writes.pop((thread_id, "", checkpoint_id), None)
    return undo


def inmemory_erase(saver: Any, thread_id: str) -> Any:
    """Remove every checkpoint, write and blob of ``thread_id`` from an ``InMemorySaver``;
    gives the function that puts them back (a failed transaction's undo)."""
    storage = saver.storage.pop(thread_id, None)
    writes = {k: saver.writes.pop(k) for k in [k for k in list(saver.writes) if k[0] == thread_id]}
    blobs = {k: saver.blobs.pop(k) for k in [k for k in list(saver.blobs) if k[0] == thread_id]}

    def undo() -> None:
        if storage is not None:
            saver.storage[thread_id] = storage
        saver.writes.update(writes)
        saver.blobs.update(blobs)
    return undo


def _versions_of(saver: Any, typed: Any) -> dict[str, Any]:
    return saver.serde.loads_typed(typed).get("channel_versions", {})


def _meta(saver: Any, entry: tuple) -> dict[str, Any]:
    return saver.serde.loads_typed(entry[1]) or {}


def _spaces(saver: Any, thread_id: str) -> list[tuple[str, list[tuple[str, tuple]]]]:
    """A snapshot of a thread's namespaces and checkpoints (``list`` of a dict is one C call:
    LangGraph's background writes to other keys cannot break it)."""
    spaces = saver.storage.get(thread_id)
    return [(ns, list(cps.items())) for ns, cps in list(spaces.items())] if spaces else []


def delta_metadata(metadata: Any) -> bool:
    """Whether a checkpoint's metadata says its channel values are ``DeltaChannel`` deltas
    (rebuilt by the graph from older checkpoints; the raw ``channel_values`` lack them)."""
    return bool(DELTA_METADATA_KEYS & (metadata or {}).keys())


def inmemory_uses_delta(saver: Any, thread_id: str) -> bool:
    """Whether a thread's checkpoints carry ``DeltaChannel`` state (its metadata keys)."""
    return any(delta_metadata(_meta(saver, entry))
               for _ns, entries in _spaces(saver, thread_id) for _cid, entry in entries)


def inmemory_drop(saver: Any, thread_id: str, doomed: Any) -> None:
    """Remove the checkpoints ``doomed(ns, checkpoint_id, entry)`` picks, their writes and the
    blobs they name that no remaining checkpoint names."""
    spaces = saver.storage.get(thread_id)
    gone: list[tuple[str, Any]] = []
    for ns, entries in _spaces(saver, thread_id):
        for checkpoint_id, entry in entries:
            if doomed(ns, checkpoint_id, entry):
                spaces[ns].pop(checkpoint_id, None)
                saver.writes.pop((thread_id, ns, checkpoint_id), None)
                gone.append((ns, entry[0]))
    if not gone:
        return
    live = {(ns, ch, v) for ns, entries in _spaces(saver, thread_id) for _c, entry in entries
            for ch, v in _versions_of(saver, entry[0]).items()}
    for ns, typed in gone:
        for ch, v in _versions_of(saver, typed).items():
            if (ns, ch, v) not in live:
                saver.blobs.pop((thread_id, ns, ch, v), None)


def inmemory_retain(saver: Any, thread_id: str, keep: int) -> None:
    """Whole turns: keep the newest ``keep`` root checkpoints and everything back to the start
    of the oldest one's turn (a root checkpoint not written by the loop: an input, an update, a
    fork); older root checkpoints and the subgraph calls of their turns go, with their writes
    and blobs. A thread with ``DeltaChannel`` state is kept whole."""
    root = sorted(dict(_spaces(saver, thread_id)).get("", []))
    if len(root) <= keep or inmemory_uses_delta(saver, thread_id):
        return
    cut = next((cid for cid, entry in reversed(root[:len(root) - keep + 1])
                if _meta(saver, entry).get("source") != "loop"), None)
    if cut is not None:
        inmemory_drop(saver, thread_id,
                      lambda ns, cid, _e: (ns == "" or ":" in ns) and cid < cut)


def inmemory_prune_latest(saver: Any, thread_id: str) -> None:
    """LangGraph's ``prune(strategy="keep_latest")``: the newest checkpoint of each namespace."""
    latest = {ns: max(cid for cid, _e in entries) for ns, entries in _spaces(saver, thread_id)
              if entries}
    inmemory_drop(saver, thread_id, lambda ns, cid, _e: cid != latest[ns])


def inmemory_delete_runs(saver: Any, thread_id: str, run_ids: set[str]) -> None:
    inmemory_drop(saver, thread_id,
                  lambda _ns, _cid, entry: _meta(saver, entry).get("run_id") in run_ids)


def inmemory_run_threads(saver: Any, run_ids: set[str]) -> list[str]:
    """Threads with a checkpoint of one of ``run_ids``."""
    return [thread_id for thread_id in list(saver.storage)
            if any(_meta(saver, entry).get("run_id") in run_ids
                   for _ns, entries in _spaces(saver, thread_id) for _c, entry in entries)]


def inmemory_copy(saver: Any, source: str, target: str) -> None:
    """LangGraph's ``copy_thread``: every checkpoint, write and blob of ``source`` under
    ``target`` (values are immutable serialized tuples: shared, not copied)."""
    for ns, entries in _spaces(saver, source):
        saver.storage[target][ns].update(entries)
        for checkpoint_id, _entry in entries:
            if (writes := saver.writes.get((source, ns, checkpoint_id))) is not None:
                saver.writes[(target, ns, checkpoint_id)] = dict(writes)
    for key in [k for k in list(saver.blobs) if k[0] == source]:
        saver.blobs[(target, *key[1:])] = saver.blobs[key]
