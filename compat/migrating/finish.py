"""Leaving memshift: proof that stock LangChain v1 continues every thread as memshift would.

After the cutover, memshift's middleware threads are LangGraph checkpoints in the saver's own
tables, with the summary as the message stock ``SummarizationMiddleware`` writes. So the way
out is stock classes only: ``create_agent`` with ``SummarizationMiddleware`` (the translated
policy) and the stock saver on the same database. ``check_finish`` proves it per thread: every
thread lives on middleware (else it is named), and the messages the stock saver hands the
agent are the ones memshift's view renders — equal, or the first difference named. It reads
only; nothing moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from compat.memory import SummaryMemory

__all__ = ["FinishReport", "GIVES_UP", "check_finish", "stock_code"]

GIVES_UP = [
    "checkpoint retention: stock savers keep every checkpoint of every step forever "
    "(memshift keeps the newest turns; prune yourself with the saver's delete/prune methods)",
    "the transcript, fold records and `memshift forget` (erasure reaches the checkpoint "
    "tables only through the saver's delete_thread)",
    "placement, staged rollouts, shadow and `memshift rollout`/`migrate` (nothing left to move)",
    "turn-boundary cuts that never split a tool call from its result (stock cuts where its "
    "token count says, with its own tool-pair rule)",
    "memshift's offline token counting (stock counts with `count_tokens_approximately` or the "
    "model's usage metadata, so folds may come at other turns)",
    "background folds, the lag bound, summary checks and the failed-fold fallback",
]


@dataclass
class FinishReport:
    store: str
    on_classic: list[str] = field(default_factory=list)
    equal: int = 0
    different: list[dict[str, str]] = field(default_factory=list)
    code: str = ""
    gives_up: list[str] = field(default_factory=lambda: list(GIVES_UP))

    @property
    def ok(self) -> bool:
        return not self.on_classic and not self.different

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def stock_code(url: str, policy: MemoryPolicy) -> str:
    """The code that serves the threads without memshift (the policy as stock spells it)."""
    trigger = (f'("tokens", {policy.max_tokens})' if policy.max_tokens
               else f'("messages", {policy.max_messages})')
    keep = (f'("messages", {policy.keep_messages})' if policy.keep_messages and
            not policy.keep_tokens else f'("tokens", {policy.keep_tokens or policy.max_tokens})')
    if url.startswith("sqlite"):
        saver = ('import sqlite3\nfrom langgraph.checkpoint.sqlite import SqliteSaver\n\n'
                 'saver = SqliteSaver(sqlite3.connect(PATH, check_same_thread=False))')
    else:
        saver = ('from langgraph.checkpoint.postgres import PostgresSaver\n\n'
                 'saver = PostgresSaver.from_conn_string(DSN).__enter__()  # or a pool')
    return (f"from langchain.agents import create_agent\n"
            f"from langchain.agents.middleware import SummarizationMiddleware\n{saver}\n\n"
            f"agent = create_agent(model, tools, middleware=[SummarizationMiddleware(\n"
            f"    model=summary_model, trigger={trigger}, keep={keep})], checkpointer=saver)\n"
            f"agent.invoke({{\"messages\": [question]}}, "
            f"{{\"configurable\": {{\"thread_id\": thread_id}}}})\n")


@contextmanager
def _stock_saver(url: str) -> Iterator[Any]:
    """LangGraph's own saver on the store's database (read only here)."""
    if url.startswith("sqlite:///"):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        path = url.removeprefix("sqlite:///").partition("?")[0]
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
        return
    if not url.startswith(("postgres://", "postgresql://", "postgresql+psycopg://")):
        raise ConfigError("finish needs the SQL store the application will keep using "
                          "(sqlite:/// or postgresql://)")
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    dsn = url.replace("postgresql+psycopg://", "postgresql://", 1).partition("?")[0]
    conn = Connection.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        yield PostgresSaver(conn)  # type: ignore[arg-type]
    finally:
        conn.close()


def _sig(message: BaseMessage) -> tuple[Any, ...]:
    return (message.type, message.text, message.additional_kwargs.get("lc_source"),
            tuple(c.get("id") for c in getattr(message, "tool_calls", None) or ()))


def _difference(stock: list[BaseMessage], ours: list[BaseMessage]) -> str | None:
    if len(stock) != len(ours):
        return f"stock reads {len(stock)} message(s), memshift renders {len(ours)}"
    for n, (a, b) in enumerate(zip(stock, ours)):
        if _sig(a) != _sig(b):
            return f"message {n}: stock reads a {a.type} message, memshift renders a {b.type} " \
                   "message or other content"
    return None


def check_finish(url: str, policy: MemoryPolicy, thread_ids: Callable[[Any], Any],
                 on_thread: Callable[[], None] = lambda: None) -> FinishReport:
    """Every thread of the store: on classic (named), or its stock read compared with
    memshift's view. ``thread_ids(memory)`` lists the store's threads."""
    report = FinishReport(store=url, code=stock_code(url, policy))
    with SummaryMemory(backend="middleware", store=url, policy=policy) as memory, \
            _stock_saver(url) as saver:
        engine = memory.backend_impl
        for thread_id in thread_ids(memory):
            on_thread()
            placement = engine.placement_of(thread_id)
            if placement is None or placement.backend != "middleware":
                report.on_classic.append(thread_id)
                continue
            found = saver.get_tuple({"configurable": {"thread_id": thread_id,
                                                      "checkpoint_ns": ""}})
            stock = list(found.checkpoint["channel_values"].get("messages", [])) if found else []
            difference = _difference(stock, memory.load(thread_id).as_messages())
            if difference is None:
                report.equal += 1
            else:
                report.different.append({"thread_id": thread_id, "difference": difference})
    return report
