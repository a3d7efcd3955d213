"""``memshift migrate``: build the source and target a command line names, run, report.

Sources are always opened read-only (a SQLite source that does not exist is an error, never
created). ``--dry-run`` opens the target read-only too, or not at all when it does not exist
yet, and writes nothing anywhere. A real run records itself in the target's run log
(``memshift history``). ``--shard I/N`` splits the threads between N processes by a stable
hash of the thread id; every shard is resumable (a re-run skips identical threads).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import click

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from compat.cli._common import (
    Output, in_shard, output_options, parse_shard, resolve_store, show_url, store_options,
    threads_file,
)
from compat.cli._migrate_report import close_run, migrate_document, print_migration
from compat.cli._policy import ModelArgs, choose_policy, model_options, policy_options
from adapters.stores.readonly import read_engine, read_only_saver, table_names
from compat.admin import read_only_memory
from compat.cli._urls import check_url
from compat.migration import MigrationReport, migrate
from compat.sources import ClassicHistorySource, GraphSource, SummaryMemorySource, as_source

__all__ = ["build_source", "migrate_command"]

_DEFAULT_NOTE = ("nothing recorded in the source or target: using max_tokens=2000, the stock "
                 "ConversationSummaryBufferMemory default. If your app used another limit, pass "
                 "it (--max-tokens N --keep-tokens M): rebuilt summaries follow this policy")


def build_source(kind: str, url: str, opts: dict[str, Any], policy: MemoryPolicy,
                 summarizer: Any, *, snapshot: bool) -> Any:
    """The thread source a store holds, opened read-only."""
    from compat.memory import SummaryMemory

    if kind == "graph":
        prefixes = tuple(opts.get("summary_prefix") or ())
        return GraphSource(read_only_saver(url, snapshot=snapshot),
                           summary_key=opts.get("summary_key", "summary"),
                           summary_in=opts.get("summary_in", "auto"),
                           **({"summary_prefixes": prefixes} if prefixes else {}))
    tables = table_names(url, snapshot=snapshot)
    explicit = opts.get("table") is not None  # --table T always reads T
    table = opts.get("table") or "message_store"
    shown = show_url(url)
    if explicit and kind == "classic" and table not in tables:
        raise ConfigError(f"{shown} has no table {table!r} (tables: {sorted(tables) or 'none'})")
    if not explicit and url in ("memory", "memory://"):
        return SummaryMemory(backend=kind, store=url, policy=policy, summarizer=summarizer)
    if not explicit and "memshift_transcript" in tables:
        return read_only_memory(kind, url, snapshot=snapshot, policy=policy,
                                summarizer=summarizer, adopt_legacy=True)
    if kind == "classic" and table in tables:
        engine = read_engine(url, snapshot=snapshot)
        if opts.get("summaries"):
            summaries = _summaries(Path(opts["summaries"]))
            return SummaryMemorySource(url, table=table, summaries=summaries, engine=engine)
        return ClassicHistorySource(url, table=table, engine=engine)
    if kind == "middleware" and "checkpoints" in tables:
        return GraphSource(read_only_saver(url, snapshot=snapshot))
    raise ConfigError(f"{shown} holds no {kind} threads memshift can read "
                      f"(tables: {sorted(tables) or 'none'})")


def _summaries(path: Path) -> dict[str, str]:
    try:
        summaries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--summaries {str(path)!r}: {exc}") from None
    if not isinstance(summaries, dict):
        raise ConfigError("--summaries must be a JSON object {thread_id: summary}")
    return summaries


def _close(thing: Any) -> None:
    """Close a source or target, whatever it is (memory, history table, LangGraph saver)."""
    if thing is None:
        return
    if isinstance(thing, GraphSource):
        conn = getattr(thing.checkpointer, "conn", None)
        if conn is not None and hasattr(conn, "close"):
            conn.close()
        return
    close = getattr(thing, "close", None)
    if close is not None:
        close()


def _threads(source: Any, listed: list[str] | None,
             shard: tuple[int, int] | None) -> tuple[Any, int]:
    """The shard's thread ids (streamed from the source unless listed) and how many."""
    if listed is not None:
        ids = [t for t in listed if in_shard(t, shard)]
        return ids, len(ids)
    total = sum(1 for t in source.iter_thread_ids() if in_shard(t, shard))
    return _ShardIds(source, shard), total


class _ShardIds:
    """The shard's ids, streamed from the source each time they are iterated (the run's
    delta pass goes over them again without holding them in memory)."""

    def __init__(self, source: Any, shard: tuple[int, int] | None) -> None:
        self.source, self.shard = source, shard

    def __iter__(self) -> Any:
        return (t for t in self.source.iter_thread_ids() if in_shard(t, self.shard))


def _thread_list(path: str | None) -> list[str] | None:
    return None if not path else [tid for _, tid in threads_file(path)]


@click.command("migrate")
@click.option("--from", "source_kind", required=True,
              type=click.Choice(["classic", "middleware", "graph"]),
              help="What the source holds: memshift or stock classic threads, memshift or "
                   "stock middleware threads, or a LangGraph rolling-summary graph.")
@store_options("from", "MEMSHIFT_FROM_STORE", "source store (opened read-only; must exist)")
@click.option("--to", "target_kind", required=True, type=click.Choice(["classic", "middleware"]),
              help="The backend the threads move to.")
@store_options("to", "MEMSHIFT_TO_STORE", "target store")
@click.option("--threads", "threads_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Only the thread ids in this file, one per line. [default: every thread]")
@click.option("--shard", metavar="I/N",
              help="Only shard I of N (1-based; a stable hash of the thread id), so N "
                   "processes can split one store.")
@click.option("--dry-run", is_flag=True,
              help="Report what would move. Opens nothing for writing, creates no file, table "
                   "or lock.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Re-read every migrated thread from the target and compare.")
@click.option("--table", default=None, metavar="NAME",
              help="--from classic: the stock SQLChatMessageHistory table to read (always read "
                   "when given). [default: memshift's tables, else message_store]")
@click.option("--summaries", type=click.Path(dir_okay=False), metavar="FILE",
              help="--from classic: JSON {thread_id: summary} saved from stock "
                   "ConversationSummaryMemory objects.")
@click.option("--summary-key", default="summary", show_default=True, metavar="KEY",
              help="--from graph: the state key holding the summary.")
@click.option("--summary-in", type=click.Choice(["auto", "state", "messages"]), default="auto",
              show_default=True, help="--from graph: where the summary lives.")
@click.option("--summary-prefix", multiple=True, metavar="TEXT",
              help="--from graph: prefix of a summary message (repeatable). [default: "
                   "【对话摘要】 and English variants]")
@policy_options("max_tokens=2000, the stock default")
@model_options
@output_options
def migrate_command(source_kind: str, target_kind: str, as_json: bool, output: str | None,
                    quiet: bool, **opts: Any) -> int:
    """Move stored threads between backends and stores, verified and resumable.

    Each thread ends as exactly one of migrated, skipped (already identical, not in the
    source, or target newer: the target moved on since it was migrated and is kept) or
    failed. Threads written in the source during the run are copied again by a delta pass;
    any written again after it are reported "changed during migration" (not verified). The
    policy is the one recorded with the source's threads (else the target's); policy options
    that contradict it need --policy-override. A thread with a record that does not decode
    (a fold record) still moves its state and is reported INCOMPLETE, naming the table and
    what was not carried. Exit 0 when no thread failed, changed or was incomplete, 1
    otherwise, 2 for usage and configuration errors.
    """
    from compat.cli._policy import summarizer_from
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT, SummaryMemory
    from compat.runlog import RunLog

    out = Output(as_json, output, quiet)
    source_url = check_url(resolve_store(opts, "from", "MEMSHIFT_FROM_STORE", out) or "",
                           "--from-store", must_exist=True)
    target_url = check_url(resolve_store(opts, "to", "MEMSHIFT_TO_STORE", out) or "",
                           "--to-store", must_exist=False)
    shard, dry = parse_shard(opts["shard"]), bool(opts["dry_run"])
    listed = _thread_list(opts["threads_file"])
    out.header(f"source: {source_kind} threads at {show_url(source_url)} (read-only)")
    out.header(f"target: {target_kind} backend at {show_url(target_url)}"
               + (" (dry run: nothing is written)" if dry else ""))
    if shard:
        out.header(f"shard: {shard[0]}/{shard[1]}")
    choice = choose_policy(opts, [source_url, target_url],
                           MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True, snapshot=dry, default_note=_DEFAULT_NOTE)
    source: Any = None
    target: Any = None
    runlog: RunLog | None = None
    report: MigrationReport | None = None
    run_id: str | None = None
    outcomes: Counter[str] = Counter()
    status = "failed"
    try:
        summarizer = summarizer_from(ModelArgs(opts), choice.policy)
        source = build_source(source_kind, source_url, opts, choice.policy, summarizer,
                              snapshot=dry)
        if dry:
            target = read_only_memory(target_kind, target_url, snapshot=True,
                                      policy=choice.policy, summarizer=summarizer)
        else:
            target = SummaryMemory(backend=target_kind, store=target_url, policy=choice.policy,
                                   summarizer=summarizer)
            runlog = RunLog.open(target_url, show_url(target_url))
        ids, total = _threads(as_source(source), listed, shard)
        if runlog is not None:
            run_id = runlog.start(
                "migrate", source=f"{source_kind} {show_url(source_url)}",
                target=f"{target_kind} {show_url(target_url)}",
                shard=opts["shard"], policy=choice.as_json())
        with out.progress(total, "threads", "migrate") as advance:
            def tick(_thread: str, outcome: str) -> None:
                outcomes[outcome] += 1
                advance()

            report = migrate(source, target, ids, verify=opts["verify"], dry_run=dry,
                             on_thread=tick, policy_for=choice.for_thread)
        status = "ok" if report.ok else "failed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        close_run(runlog, run_id, status, report.counts() if report else dict(outcomes), out)
        for thing in (source, target):
            _close(thing)
        choice.close()
    assert report is not None
    code = 0 if report.ok else 1
    print_migration(report, out, run_id=run_id, target_url=target_url)
    out.emit(migrate_document(report, out, code=code, run_id=run_id, policy=choice.as_json(),
                              source=(source_kind, source_url), target=(target_kind, target_url),
                              shard=opts["shard"]))
    return code
