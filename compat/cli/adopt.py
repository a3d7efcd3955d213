"""``memshift adopt --store URL``: adopt every stock history before the deploy, not at each
user's first request. Each thread is adopted as a first touch would (``compat._adopt``: no
summarizer call; the thread's first fold summarizes what lies beyond the window at once);
threads memshift already holds are skipped, so a run resumes where one stopped."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from compat.cli._common import (
    Output, in_shard, output_options, parse_shard, resolve_store, show_url, store_options,
)
from compat.cli._policy import choose_policy, policy_options
from compat.cli._urls import check_url

__all__ = ["adopt"]


@click.command("adopt")
@click.option("--table", default="message_store", show_default=True, metavar="NAME",
              help="The stock SQLChatMessageHistory table.")
@click.option("--threads", "threads_file", type=click.Path(dir_okay=False, exists=True),
              metavar="FILE", help="Only these sessions (one id per line).")
@click.option("--shard", metavar="I/N", help="Only shard I of N (a stable hash of the id).")
@click.option("--dry-run", is_flag=True,
              help="Count what would be adopted and the summarizer calls; write nothing.")
@store_options("", "MEMSHIFT_STORE", "store holding the stock table (must exist)")
@policy_options("max_tokens=2000, the stock default")
@output_options
def adopt(table: str, threads_file: str | None, shard: str | None, dry_run: bool,
          as_json: bool, output: str | None, quiet: bool, **opts: Any) -> int:
    """Adopt the store's stock chat histories now. Exit 1 when a listed thread is not in the
    table."""
    from adapters import MemoryPolicy
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT

    out = Output(as_json, output, quiet)
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    part = parse_shard(shard)
    choice = choose_policy(opts, [url], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True)
    counts = {"adopted": 0, "would_adopt": 0, "already": 0, "summarizer_calls_at_adoption": 0,
              "first_fold_calls": 0}
    not_found: list[str] = []
    engine = _engine(url)  # the stock table's reads: one engine for the run
    try:
        sessions, ours = _sessions(engine, url, table)
        wanted = sessions if threads_file is None else [
            t for t in Path(threads_file).read_text(encoding="utf-8").split("\n") if t.strip()]
        held = set(sessions)
        not_found = [t for t in wanted if t not in held]
        todo = [t for t in wanted if t in held and in_shard(t, part)]
        memory = _open(url, choice.policy, table) if ours or not dry_run else None
        with contextlib.ExitStack() as stack, out.progress(len(todo), "threads", "adopt") as tick:
            if memory is not None:
                stack.enter_context(memory)
            for thread_id in todo:
                if memory is not None and _held(memory, thread_id):
                    counts["already"] += 1
                elif dry_run:
                    counts["would_adopt"] += 1
                    counts["first_fold_calls"] += _first_fold_calls(engine, table, thread_id,
                                                                    choice.policy)
                else:
                    memory.load(thread_id)  # the first touch adopts it
                    counts["adopted"] += 1
                tick()
    finally:
        engine.dispose()
        choice.close()
    verb = "would adopt" if dry_run else "adopted"
    out.line(f"{show_url(url)}: {verb} {counts['would_adopt' if dry_run else 'adopted']} "
             f"thread(s) of {table}; {counts['already']} already held; {len(not_found)} "
             "listed and not found")
    if dry_run:
        out.line(f"summarizer calls: 0 at adoption; {counts['first_fold_calls']} at the "
                 "threads' first folds (one per thread past the trigger)")
    for thread_id in not_found:
        out.line(f"  NOT FOUND {thread_id!r}")
    out.emit({"command": "adopt", "store": show_url(url), "table": table, "dry_run": dry_run,
              **counts, "not_found": not_found})
    return 1 if not_found else 0


def _open(url: str, policy: Any, table: str) -> Any:
    """The memory that adopts (as a first touch does)."""
    from compat.config import LegacyConfig
    from compat.memory import SummaryMemory

    return SummaryMemory(store=url, policy=policy, legacy=LegacyConfig(table=table))


def _held(memory: Any, thread_id: str) -> bool:
    """Whether memshift holds the thread already (adopted, or saved since)."""
    from compat._adopt import held

    return held(memory.backend_impl.locate(thread_id, move=False).store, thread_id)


def _engine(url: str) -> Any:
    from sqlalchemy import create_engine

    from adapters.stores.url import sqlalchemy_url

    return create_engine(sqlalchemy_url(url.partition("?")[0]))


def _sessions(engine: Any, url: str, table: str) -> tuple[list[str], bool]:
    """The table's sessions, in id order, and whether memshift's tables exist (read only: a
    dry run on a store memshift never opened creates nothing and finds nothing held)."""
    from sqlalchemy import inspect

    from adapters.errors import ConfigError
    from compat._adopt import legacy_sessions

    if not inspect(engine).has_table(table):
        raise ConfigError(f"{show_url(url)} has no table {table!r} (--table NAME)")
    return legacy_sessions(engine, table), inspect(engine).has_table("memshift_transcript")


def _first_fold_calls(engine: Any, table: str, thread_id: str, policy: Any) -> int:
    """1 when the adopted window is past the trigger (its first fold summarizes it at once)."""
    from langchain_community.chat_message_histories import SQLChatMessageHistory

    messages = SQLChatMessageHistory(session_id=thread_id, connection=engine,
                                     table_name=table).messages
    return int(bool(policy.trigger_reason(messages))) if messages else 0
