"""``memshift resummarize``: rebuild running summaries from the transcript, with a dry run.

Each thread is rebuilt with the policy recorded for it (or the options, see ``_cli_policy``)
and compared with what is stored: unchanged threads are not rewritten; a changed one is
written with its fold record in one compare-and-set transaction (a turn saved meanwhile makes
it rebuild again). ``--dry-run`` opens the store read-only and lists, per thread, what would
change and by how many tokens; it still calls the summarizer, to show the new summaries.
"""

from __future__ import annotations

from typing import Any

import click
from adapters import MemoryPolicy, ThreadRecord
from adapters.errors import ConfigError
from compat.cli._common import (
    Output, output_options, resolve_store, show_url, store_options, threads_file,
)
from compat.cli._migrate_report import close_run, run_stats
from compat.cli._policy import choose_policy, model_from, model_options, policy_options
from compat.cli._urls import check_url
from compat import admin

__all__ = ["resummarize"]


def _one(memory: Any, tid: str, policy: MemoryPolicy, llm: Any, dry: bool) -> dict:
    """One thread through ``compat.admin``: rebuilt, compared, written only if it changed."""
    plan = admin.rebuild(memory, tid, policy=policy, llm=llm)
    if plan is None:
        return {"thread_id": tid, "status": "skipped", "reason": "no transcript"}
    row = {"thread_id": tid, "changed": plan.changed, **plan.tokens()}
    if not plan.changed:
        return {**row, "status": "unchanged"}
    if dry:
        return {**row, "status": "would change"}
    if not memory.backend_impl.restore(plan.record, expect_last_id=plan.last_id,
                                       fold_record=plan.fold):  # a turn arrived: again
        view = admin.resummarize(memory, tid, llm=llm, policy=policy)
        plan.record = ThreadRecord(tid, view.summary, view.messages, view.folds)
        row = {"thread_id": tid, "changed": plan.changed, **plan.tokens()}
    return {**row, "status": "rebuilt"}


def _check_choice(opts: dict[str, Any]) -> None:
    chosen = [bool(opts["thread_ids"]), bool(opts["threads_file"]), bool(opts["all_threads"])]
    if sum(chosen) != 1:
        raise click.UsageError("give exactly one of --thread ID (repeatable), --threads FILE, "
                               "--all")


def _thread_ids(memory: Any, opts: dict[str, Any]) -> list[str]:
    if opts["all_threads"]:
        return list(admin.iter_thread_ids(memory))
    if opts["threads_file"]:
        return [tid for _, tid in threads_file(opts["threads_file"])]
    return list(opts["thread_ids"])


def _print(rows: list[dict], out: Output, dry: bool) -> None:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name, justify in (("thread", "left"), ("folds", "right"), ("summary tokens", "right"),
                          ("window msgs", "right"), ("memory tokens", "right"),
                          ("Δ tokens", "right"), ("status", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        if "folds" not in r:
            table.add_row(r["thread_id"], "", "", "", "", "", f"{r['status']}: "
                          f"{r.get('reason', '')}")
            continue
        pair = " → ".join
        table.add_row(r["thread_id"], pair(map(str, r["folds"])),
                      pair(map(str, r["summary_tokens"])), pair(map(str, r["window_messages"])),
                      pair(map(str, r["memory_tokens"])), f"{r['delta_tokens']:+d}", r["status"])
    out.table(table)
    for r in rows:
        if r["status"] == "failed":
            out.line(f"  FAILED {r['thread_id']!r}: {r['reason']}")


@click.command("resummarize")
@click.option("--backend", required=True, type=click.Choice(["classic", "middleware"]),
              help="The backend the threads are stored for.")
@store_options("", "MEMSHIFT_STORE", "store (must exist)")
@click.option("--thread", "thread_ids", multiple=True, metavar="ID",
              help="A thread id (repeatable).")
@click.option("--threads", "threads_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="A file with one thread id per line.")
@click.option("--all", "all_threads", is_flag=True, help="Every thread in the store.")
@click.option("--dry-run", is_flag=True,
              help="List per thread what would change, with token deltas; write nothing (the "
                   "summarizer is still called).")
@policy_options("max_tokens=2000, the stock default", summary_format=True)
@model_options
@output_options
def resummarize(backend: str, as_json: bool, output: str | None, quiet: bool,
                **opts: Any) -> int:
    """Rebuild running summaries from the raw transcript (after a model or prompt change).

    The transcript is never modified. Each thread keeps the policy recorded for it unless
    policy options (with --policy-override when they differ) say otherwise. Exit 0 when no
    thread failed, 1 otherwise.
    """
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT, SummaryMemory
    from compat.runlog import RunLog
    from compat.admin import read_only_memory

    out = Output(as_json, output, quiet)
    _check_choice(opts)
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    dry = bool(opts["dry_run"])
    out.header(f"store: {backend} threads at {show_url(url)}"
               + (" (dry run: read-only, nothing is written)" if dry else ""))
    choice = choose_policy(opts, [url], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True, snapshot=dry)
    llm = model_from(opts)
    if dry:
        memory = read_only_memory(backend, url, snapshot=True, policy=choice.policy, llm=llm)
        if memory is None:
            raise ConfigError(f"{show_url(url)} holds no memshift threads")
    else:
        memory = SummaryMemory(backend=backend, store=url, policy=choice.policy, llm=llm)
    runlog = None if dry else RunLog.open(url, show_url(url))
    rows: list[dict] = []
    run_id, status = None, "failed"
    try:
        threads = _thread_ids(memory, opts)
        if runlog is not None:
            run_id = runlog.start("resummarize", source=None, target=f"{backend} {show_url(url)}",
                                  shard=None, policy=choice.as_json())
        with out.progress(len(threads), "threads", "resummarize") as tick:
            for tid in threads:
                try:
                    rows.append(_one(memory, tid, choice.for_thread(tid) or choice.policy, llm,
                                     dry))
                except Exception as exc:  # report and go on with the next thread
                    rows.append({"thread_id": tid, "status": "failed",
                                 "reason": f"{type(exc).__name__}: {exc}"})
                tick()
        status = "ok" if not any(r["status"] == "failed" for r in rows) else "failed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        counts = _counts(rows)
        close_run(runlog, run_id, status, counts, out)
        memory.close()
        choice.close()
    _print(rows, out, dry)
    changed = counts["would change"] if dry else counts["rebuilt"]
    out.line(f"{'would resummarize' if dry else 'resummarized'} {changed} of {len(rows)} "
             f"thread(s) ({counts['unchanged']} unchanged, {counts['skipped']} without a "
             f"transcript, {counts['failed']} failed; memory tokens "
             f"{counts['delta_tokens']:+d} in total)")
    code = 1 if counts["failed"] else 0
    out.emit({"command": "resummarize", "dry_run": dry, "backend": backend,
              "store": show_url(url), "run_id": run_id, "policy": choice.as_json(),
              "counts": counts, "threads": rows, "ok": code == 0, "exit_code": code,
              "stats": run_stats(out, len(rows))})
    return code


def _counts(rows: list[dict]) -> dict[str, int]:
    counts = {k: 0 for k in ("rebuilt", "would change", "unchanged", "skipped", "failed")}
    for r in rows:
        counts[r["status"]] += 1
    return {"total": len(rows), **counts,
            "delta_tokens": sum(r.get("delta_tokens", 0) for r in rows if r.get("changed"))}
