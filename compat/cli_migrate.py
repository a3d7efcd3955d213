"""``memshift migrate``: build the source and target a command line names, run, report."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from adapters import MemoryPolicy, redact_url
from adapters.stores import sqlalchemy_url
from adapters.errors import ConfigError
from compat.memory import SummaryMemory
from compat.migration import MigrationReport, migrate
from compat.sources import ClassicHistorySource, GraphSource, SummaryMemorySource

__all__ = ["add_migrate_parser", "cmd_migrate"]


def _tables(url: str) -> set[str]:
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.exc import SQLAlchemyError

    try:
        engine = create_engine(sqlalchemy_url(url))
        try:
            return set(inspect(engine).get_table_names())
        finally:
            engine.dispose()
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise ConfigError(f"cannot read {redact_url(url)}: {type(exc).__name__}") from None


def open_checkpointer(url: str) -> Any:
    """A LangGraph saver on a store URL, for reading threads written by someone else's graph."""
    if url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = url.removeprefix("sqlite:///")
        if not Path(path).exists():
            raise ConfigError(f"no such SQLite file: {path}")
        return SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    if url.startswith(("postgresql://", "postgres://")):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        return PostgresSaver(conn)  # type: ignore[arg-type]
    raise ConfigError(f"--from graph needs a sqlite or postgresql store, got {redact_url(url)!r}")


def build_source(args: argparse.Namespace, policy: MemoryPolicy, summarizer: Any) -> Any:
    url, kind = args.from_store, args.source
    if kind == "graph":
        prefixes = tuple(args.summary_prefix) if args.summary_prefix else None
        return GraphSource(open_checkpointer(url), summary_key=args.summary_key,
                           summary_in=args.summary_in,
                           **({"summary_prefixes": prefixes} if prefixes else {}))
    tables = _tables(url) if url != "memory" else set()
    explicit = args.table is not None  # --table T always reads T
    args.table = args.table or "message_store"
    if explicit and kind == "classic" and args.table not in tables:
        raise ConfigError(f"{redact_url(url)} has no table {args.table!r} "
                          f"(tables: {sorted(tables) or 'none'})")
    if not explicit and ("memshift_transcript" in tables or url == "memory"):
        return SummaryMemory(backend=kind, store=url, policy=policy, summarizer=summarizer,
                             adopt_legacy=True)
    if kind == "classic" and args.table in tables:
        if args.summaries:
            summaries = json.loads(Path(args.summaries).read_text(encoding="utf-8"))
            if not isinstance(summaries, dict):
                raise ConfigError("--summaries must be a JSON object {thread_id: summary}")
            return SummaryMemorySource(url, table=args.table, summaries=summaries)
        return ClassicHistorySource(url, table=args.table)
    if kind == "middleware" and "checkpoints" in tables:
        return GraphSource(open_checkpointer(url))
    raise ConfigError(f"{redact_url(url)} holds no {kind} threads memshift can read "
                      f"(tables: {sorted(tables) or 'none'})")


def print_migration(report: MigrationReport, out: Any) -> None:
    out.write(f"source: {report.source}\ntarget: {report.target}\n")
    for name, count in report.summary_rows():
        out.write(f"  {name:<16}{count:>8}\n")
    for tid, reason in report.failed:
        out.write(f"  FAILED {tid!r}: {reason}\n")
    notes = sorted(set(report.notes.values()))
    for note in notes:
        out.write(f"  note: {note}\n")
    out.write("RESULT: " + ("OK" if report.ok else "FAILED") + (" (dry run)" if report.dry_run else "")
              + "\n")


def cmd_migrate(args: argparse.Namespace, policy: MemoryPolicy, summarizer: Any,
                progress_factory: Any) -> int:
    threads = None
    if args.threads:
        threads = [line.strip() for line in Path(args.threads).read_text(encoding="utf-8").splitlines()
                   if line.strip()]
    source = build_source(args, policy, summarizer)
    target = SummaryMemory(backend=args.to, store=args.to_store, policy=policy, summarizer=summarizer)
    done = 0
    progress = progress_factory(len(threads) if threads is not None else 0, unit="threads")

    def tick(thread_id: str, outcome: str) -> None:
        nonlocal done
        done += 1
        progress.update(done)

    try:
        report = migrate(source, target, threads, verify=args.verify, dry_run=args.dry_run,
                         on_thread=tick)
    finally:
        target.close()
        close = getattr(source, "close", None)
        if close is not None:
            close()
    progress.finish(done)
    print_migration(report, sys.stdout)
    return 0 if report.ok else 1


def add_migrate_parser(sub: Any, add_policy_args: Any) -> argparse.ArgumentParser:
    mp = sub.add_parser("migrate", help="move stored threads between backends and stores")
    mp.add_argument("--from", dest="source", required=True, choices=["classic", "middleware", "graph"])
    mp.add_argument("--from-store", required=True, help="store URL of the source")
    mp.add_argument("--to", required=True, choices=["classic", "middleware"])
    mp.add_argument("--to-store", required=True, help="store URL of the target")
    mp.add_argument("--threads", help="file with one thread id per line (default: all)")
    mp.add_argument("--dry-run", action="store_true", help="report what would move; write nothing")
    mp.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                    help="re-read every migrated thread and compare (default: on)")
    mp.add_argument("--table", default=None,
                    help="stock SQLChatMessageHistory table for --from classic (always read "
                         "when given; default: memshift's tables, else message_store)")
    mp.add_argument("--summaries", help="--from classic: JSON {thread_id: summary} saved from "
                                        "stock ConversationSummaryMemory objects")
    mp.add_argument("--summary-key", default="summary", help="state key of the summary for --from graph")
    mp.add_argument("--summary-in", choices=["auto", "state", "messages"], default="auto",
                    help="--from graph: where the summary lives (auto-detected by default)")
    mp.add_argument("--summary-prefix", action="append",
                    help="--from graph: prefix of a summary message (default: 【对话摘要】 and "
                         "English variants; repeatable)")
    add_policy_args(mp)
    return mp
