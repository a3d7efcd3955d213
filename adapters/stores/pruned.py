"""A checkpoint id retention pruned is refused by name, not answered with ``None``.

``get_state_history`` hands out checkpoint ids; a later turn's retention may prune them. A
saver answering ``None`` for such an id makes LangGraph replay nothing (``EmptyInputError``)
or fork an empty conversation — the live summary silently gone. On a miss, and only then,
the saver asks whether the id is one retention pruned: an id LangGraph minted (a version-6
UUID, time-ordered) that is older than every checkpoint the thread's namespace still holds,
while newer ones exist. Retention drops whole turns from the oldest end, so such an id was
there and went. Ids the saver never wrote (another version, another thread, a thread with no
checkpoints) still read as ``None``, as every saver answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from adapters.errors import CheckpointPruned
from adapters.io import IO, Steps

__all__ = ["refuse_pruned"]


def _minted(checkpoint_id: Any) -> bool:
    try:
        return isinstance(checkpoint_id, str) and uuid.UUID(checkpoint_id).version == 6
    except ValueError:
        return False


def _first(items: Any) -> Any:
    return next(iter(items), None)


def _namespace(config: Any) -> Any:
    """The thread's namespace of ``config``, no checkpoint id: where ``list`` looks."""
    conf = config["configurable"]
    return {"configurable": {"thread_id": conf["thread_id"],
                             "checkpoint_ns": conf.get("checkpoint_ns", "")}}


def _newest_and_older(inner: Any, config: Any) -> tuple[Any, Any]:
    namespace = _namespace(config)
    return _first(inner.list(namespace, limit=1)), _first(inner.list(namespace, before=config,
                                                                     limit=1))


async def _anewest_and_older(inner: Any, config: Any) -> tuple[Any, Any]:
    namespace = _namespace(config)
    newest = older = None
    async for item in inner.alist(namespace, limit=1):
        newest = item
    async for item in inner.alist(namespace, before=config, limit=1):
        older = item
    return newest, older


def refuse_pruned(found: Steps[Any], inner: Any, config: Any, keep: int | None,
                  shown_thread: str) -> Steps[Any]:
    """``found``'s answer; on a miss for a minted id that retention pruned,
    ``CheckpointPruned`` naming the thread (``shown_thread``: the caller's id) and ``keep``."""
    answer = yield from found
    conf = (config or {}).get("configurable") or {}
    checkpoint_id = conf.get("checkpoint_id")
    if answer is not None or not conf.get("thread_id") or not _minted(checkpoint_id):
        return answer
    newest, older = yield IO(_newest_and_older, _anewest_and_older, inner, config)
    if newest is not None and older is None and \
            newest.config["configurable"]["checkpoint_id"] > checkpoint_id:
        raise CheckpointPruned(shown_thread, checkpoint_id, keep)
    return answer
