"""Rebuilding a thread's memory from its raw transcript (migration of legacy stores,
``resummarize`` after a summarizer or prompt change)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import SystemMessage

from adapters import MemoryPolicy, ThreadRecord
from adapters.fold import FoldRecord
from adapters.summarizer import build_summarizer
from adapters.engine import MemoryEngine
from adapters.stores.memory import MemoryStore
from compat._turns import as_messages, split_turns

if TYPE_CHECKING:
    from compat.memory import SummaryMemory

__all__ = ["rebuild_fold_record", "rebuild_record", "summarizer_for"]


def summarizer_for(memory: SummaryMemory, policy: MemoryPolicy, llm: Any = None) -> Any:
    """The summarizer a rebuild uses: ``llm`` (or the memory's own model) with the policy's
    prompt and format, else the memory's summarizer as it is."""
    current = memory.backend_impl.summarizer
    llm = llm or getattr(getattr(current, "inner", current), "llm", None)
    if llm is None:
        return current
    return build_summarizer(policy, llm, human_prefix=memory.human_prefix,
                            ai_prefix=memory.ai_prefix)


def rebuild_record(memory: SummaryMemory, thread_id: str, transcript: list,
                   policy: MemoryPolicy | None = None, summarizer: Any = None,
                   backend: str | None = None, fold: bool = True) -> ThreadRecord:
    """Replay the transcript turn by turn through a scratch engine (``backend`` over a fresh
    in-memory store, with ``policy`` and the memory's style) — by default the backend the
    memory serves the thread from; both give the same record. ``fold=False`` (adoption): the
    turns are appended and nothing is summarized — the thread's first fold (its next save, or
    the agent's next model call) then summarizes all that lies beyond the window in one call
    (its chunks past the policy's summarizer input budget), as the stock class does on such a
    request, instead of a fold each time a replay crosses the trigger. A summarizer failure
    raises ``SummarizerError`` (nothing is half-rebuilt)."""
    policy = replace(policy or memory.active_policy, on_summary_error="raise",
                     preferences_store=None)
    backend = backend or memory.backend_impl.serving(thread_id)
    scratch = MemoryEngine(backend, policy=policy, store=MemoryStore(),
                           summarizer=summarizer or memory.backend_impl.summarizer,
                           llm=memory.llm, human_prefix=memory.human_prefix,
                           ai_prefix=memory.ai_prefix,
                           summary_message_cls=memory.summary_message_cls)
    try:
        for turn in split_turns(list(transcript)):
            scratch.save(thread_id, as_messages(turn), fold=fold)
        view = scratch.load(thread_id)
    finally:
        scratch.close()
    return ThreadRecord(thread_id, view.summary, view.messages, view.folds, list(transcript))


def rebuild_fold_record(thread_id: str, transcript: list, record: ThreadRecord,
                        policy: MemoryPolicy, *, trigger: str, summarizer: str, backend: str,
                        started: float) -> FoldRecord:
    """The fold record of a whole-transcript rebuild (resummarize, adoption): what was folded
    and kept, written with the rebuilt state."""
    folded = len(transcript) - len(record.window)
    return FoldRecord(
        thread_id=thread_id, version=record.folds, trigger=trigger,
        messages_before=len(transcript), messages_kept=len(record.window), folded=folded,
        folded_first_id=transcript[0].id if folded else None,
        folded_last_id=transcript[folded - 1].id if folded else None,
        summary_tokens=policy.count([SystemMessage(record.summary)]) if record.summary else 0,
        summarizer=summarizer, prompt_version=policy.prompt_version,
        policy=policy.recorded(),
        duration_ms=round((time.perf_counter() - started) * 1000, 3), backend=backend)
