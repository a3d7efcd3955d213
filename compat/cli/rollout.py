"""``memshift rollout status|move``: where staged threads live, and moving a cohort eagerly."""

from __future__ import annotations

from typing import Any

import click

from adapters import MemoryPolicy
from compat.cli._common import (
    Output, in_shard, output_options, parse_shard, resolve_store, show_url, store_options,
)
from compat.cli._migrate_report import close_run, run_stats
from compat.cli._policy import choose_policy, policy_options
from compat.cli._urls import check_url
from compat import admin

__all__ = ["rollout"]


def _store(opts: dict[str, Any], out: Output) -> str:
    return check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                     must_exist=True)


@click.group("rollout")
def rollout() -> None:
    """Staged cutover: placements per backend, and eager moves of a cohort."""


@rollout.command("status")
@store_options("", "MEMSHIFT_STORE", "staged store (must exist)")
@output_options
def status(as_json: bool, output: str | None, quiet: bool, **opts: Any) -> int:
    """Threads per backend, pinned threads, threads moved at least once (read-only)."""
    from compat.admin import read_only_memory
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT, SummaryMemory

    out = Output(as_json, output, quiet)
    url = _store(opts, out)
    policy = MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT)
    memory = SummaryMemory(backend="staged", store=url, policy=policy) if url == "memory" \
        else read_only_memory("staged", url, snapshot=True, policy=policy)
    rows: list[Any] = []
    if memory is not None:  # None: no memshift tables yet, so no placements either
        with memory:
            rows = memory.backend_impl.placement_counts()
    result: dict[str, Any] = {
        "command": "rollout status", "store": show_url(url),
        "threads": {b: sum(n for backend, _, n, _ in rows if backend == b)
                    for b in ("classic", "middleware")},
        "pinned": {b: sum(n for backend, p, n, _ in rows if backend == b and p)
                   for b in ("classic", "middleware")},
        "moved_at_least_once": sum(m for *_, m in rows),
        "moves_in_progress": 0,  # a move is one transaction: it either happened or did not
    }
    for backend, count in result["threads"].items():
        out.line(f"{backend:<11}{count:>8} thread(s), {result['pinned'][backend]} pinned")
    out.line(f"moved at least once: {result['moved_at_least_once']}")
    out.emit(result)
    return 0


@rollout.command("move")
@click.option("--to", "to", required=True, type=click.Choice(["classic", "middleware"]),
              help="Move the threads the share assigns to this backend.")
@click.option("--share", type=click.FloatRange(0, 1), metavar="X",
              help="The rollout share to apply, in [0, 1]. [default: with --thread, the thread "
                   "moves to --to; otherwise required]")
@click.option("--thread", "threads", multiple=True, metavar="ID",
              help="Only this thread (repeatable): moved to --to now, whatever the share.")
@store_options("", "MEMSHIFT_STORE", "staged store (must exist)")
@click.option("--shard", metavar="I/N",
              help="Only shard I of N (1-based; a stable hash of the thread id).")
@policy_options("max_tokens=2000, the stock default")
@output_options
def move(to: str, share: float | None, threads: tuple[str, ...], as_json: bool,
         output: str | None, quiet: bool, **opts: Any) -> int:
    """Move a cohort now instead of at first touch. Exit 1 when a thread failed to move."""
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT, SummaryMemory
    from compat.runlog import RunLog

    out = Output(as_json, output, quiet)
    if share is None and not threads:
        raise click.UsageError("rollout move needs --share X, or --thread ID to move one thread")
    url = _store(opts, out)
    shard = parse_shard(opts["shard"])
    choice = choose_policy(opts, [url], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True)
    # --thread: a fixed flag (every listed thread wants --to); else the share's cohort
    config: dict[str, Any] = {"backend": to} if share is None else \
        {"backend": "staged", "rollout": share}
    moved = stayed = failed = 0
    runlog = RunLog.open(url, show_url(url))
    run_id, status = None, "failed"
    try:
        with SummaryMemory(store=url, policy=choice.policy, **config) as memory:
            engine = memory.backend_impl
            what = f"--share {share}" if share is not None else f"--thread ({len(threads)})"
            if runlog is not None:
                run_id = runlog.start(f"rollout move --to {to} {what}", source=None,
                                      target=f"staged {show_url(url)}", shard=opts["shard"],
                                      policy=choice.as_json())
            with out.progress(None, "threads", "rollout move") as tick:
                for thread_id in threads or admin.iter_thread_ids(memory):
                    if not in_shard(thread_id, shard) or engine.desired(thread_id) != to:
                        continue
                    before = engine.placement_of(thread_id)
                    try:
                        after = engine.place(thread_id)
                    except Exception as exc:  # one bad thread never stops the run; counted
                        failed += 1
                        out.warn(f"{thread_id!r}: {type(exc).__name__}: {exc}")
                        continue
                    finally:
                        tick()
                    if after is not None and (before.backend != after.backend if before
                                              else after.version > 1):
                        moved += 1
                    else:
                        stayed += 1
        status = "ok" if not failed else "failed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        counts = {"moved": moved, "already_there": stayed, "failed": failed}
        close_run(runlog, run_id, status, counts, out)
        choice.close()
    result = {"command": "rollout move", "to": to, "share": share, "shard": opts["shard"],
              "run_id": run_id, **counts, "stats": run_stats(out, moved + stayed + failed)}
    out.line(f"moved {moved} thread(s) to {to}; {stayed} already there; {failed} failed")
    out.emit(result)
    return 1 if failed else 0
