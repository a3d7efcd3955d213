"""``memshift history --store URL``: the runs logged in a store, oldest first (read-only)."""

from __future__ import annotations

from typing import Any

import click

from compat.cli._common import Output, output_options, resolve_store, show_url, store_options
from compat.cli._urls import check_url, kind_of

__all__ = ["history"]


def _counts(counts: dict[str, Any] | None) -> str:
    if not counts:
        return ""
    always = ("migrated", "moved", "skipped", "failed")  # the others only when not zero
    keys = ("migrated", "moved", "rebuilt", "skipped", "unchanged", "already_there", "failed",
            "incomplete")
    return " ".join(f"{k}={counts[k]}" for k in keys
                    if k in counts and (counts[k] or k in always))


def _policy(policy: dict[str, Any] | None) -> str:
    if not policy:
        return ""
    rule = policy.get("effective") or {}
    parts = [f"{rule[k]}/{rule[k.replace('max', 'keep')]} {k.split('_')[1]}"
             for k in ("max_tokens", "max_messages") if rule.get(k)]
    mixed = f" ({len(policy.get('recorded', []))} recorded)" if policy.get("origin") == "mixed" \
        else ""
    return f"{policy.get('origin', '?')}{mixed}: " + ", ".join(parts)


def _took(row: Any) -> str:
    from datetime import datetime

    if not row.finished_at:
        return "-"
    seconds = (datetime.fromisoformat(row.finished_at)
               - datetime.fromisoformat(row.started_at)).total_seconds()
    return f"{seconds:.0f} s"


def _moved(row: Any) -> str:
    return f"{row.source} → {row.target}" if row.source else (row.target or "")


def _table(rows: list[Any]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("run", "started (UTC)", "took", "status", "command", "shard"):
        table.add_column(name, no_wrap=True)
    for name in ("source → target", "counts", "policy"):
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(r.run_id[:12], r.started_at[:19].replace("T", " "), _took(r), r.status,
                      r.command, r.shard or "", _moved(r), _counts(r.counts), _policy(r.policy))
    return table


@click.command("history")
@store_options("", "MEMSHIFT_STORE", "store whose run log to read (read only)")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the newest N runs. [default: all]")
@output_options
def history(limit: int | None, as_json: bool, output: str | None, quiet: bool,
            **opts: Any) -> int:
    """List the migrate / resummarize / rollout runs logged in a store, like a schema-migration
    tool's history: when, what, from where, with which policy, and the result.

    A run still marked "running" is in progress, or was killed (re-run it: runs resume).
    """
    from adapters.stores.readonly import read_engine
    from compat.runlog import read_runs

    out = Output(as_json, output, quiet)
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    rows: list[Any] = []
    if kind_of(url) != "memory":
        engine = read_engine(url, snapshot=True)
        try:
            rows = read_runs(engine, limit)
        finally:
            engine.dispose()
    if not rows:
        out.line(f"no runs logged in {show_url(url)}")
    elif out.width() >= 150:
        out.table(_table(rows))
    else:  # a narrow terminal: one block per run
        for r in rows:
            out.line(f"{r.run_id[:12]}  {r.started_at[:19].replace('T', ' ')}  {r.status:<8} "
                     f"{r.command}{'  shard ' + r.shard if r.shard else ''}  ({_took(r)})")
            out.line(f"    {_moved(r)}")
            out.line(f"    {_counts(r.counts)}  |  policy {_policy(r.policy)}")
    out.emit({"command": "history", "store": show_url(url),
              "runs": [r.as_dict() for r in rows]})
    return 0
