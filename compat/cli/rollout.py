"""``memshift rollout status|move|advance``: where staged threads live, moving a cohort eagerly,
and guarded steps that halt themselves."""

from __future__ import annotations

from typing import Any

import click

from adapters import MemoryPolicy
from compat.cli._common import (
    Output, in_shard, output_options, parse_shard, resolve_store, show_url, store_options,
)
from compat.cli._migrate_report import close_run, finish_run, run_stats
from compat.cli._policy import choose_policy, policy_options
from compat.cli._urls import check_url
from compat import admin
from compat.rollout import DEFAULT_INTERVAL

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


@rollout.command("advance")
@click.option("--to", "target", required=True, type=click.FloatRange(0, 1), metavar="X",
              help="The share to reach, in [0, 1].")
@click.option("--step", type=click.FloatRange(0, 1, min_open=True), default=0.1,
              show_default=True, metavar="X", help="How much of the share one step moves.")
@click.option("--from", "start", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              metavar="X", help="The share the rollout is at now.")
@click.option("--guard", "guard_spec", required=True, metavar="RULES",
              help="Comma-separated metric<value: mismatch_rate, mismatches, "
                   "fold_failure_rate, fold_failures (e.g. \"mismatch_rate<0.01,"
                   "fold_failure_rate<0.05\").")
@click.option("--shadow-log", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="MEMSHIFT_SHADOW_LOG", metavar="FILE",
              help="Also read this shadow log (JSONL); the mismatch guards always read the "
                   "evidence every shadow records in the store. [default: "
                   "$MEMSHIFT_SHADOW_LOG]")
@click.option("--min-threads", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N", help="Judge a step only when this run has moved at least N threads.")
@click.option("--interval", type=click.FloatRange(min=0), default=DEFAULT_INTERVAL,
              show_default=True, metavar="S",
              help="Seconds to wait after each step before reading the evidence (traffic on "
                   "the moved threads makes the fold evidence; every shadow's findings land).")
@click.option("--rollback-on-trip", is_flag=True,
              help="When a guard trips, move the step's threads back (else: halt there).")
@store_options("", "MEMSHIFT_STORE", "staged store (must exist)")
@policy_options("max_tokens=2000, the stock default")
@output_options
def advance(target: float, step: float, start: float, guard_spec: str, shadow_log: str | None,
            min_threads: int, interval: float, rollback_on_trip: bool, as_json: bool,
            output: str | None, quiet: bool, **opts: Any) -> int:
    """Raise the rollout one step at a time; after each step read the shadow and fold records
    of the threads it moved and halt (or, with --rollback-on-trip, step back) when a guard
    trips or has no evidence to judge. Every decision is recorded in the run log (memshift
    history). Exit 1 when a guard tripped or had no evidence."""
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT, SummaryMemory
    from compat.cli._stop import check
    from compat.rollout import advance as run_advance, parse_guards
    from compat.runlog import RunLog

    out = Output(as_json, output, quiet)
    guards = parse_guards(guard_spec)
    url = _store(opts, out)
    choice = choose_policy(opts, [url], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True)
    runlog = RunLog.open(url, show_url(url))
    journal = _StepLog(runlog, f"--guard {','.join(map(str, guards))}",
                       f"staged {show_url(url)}", choice.as_json(), out)
    try:
        steps = run_advance(
            lambda share: SummaryMemory(store=url, policy=choice.policy, backend="staged",
                                        rollout=share),
            admin.iter_thread_ids, start=start, target=target, step=step, guards=guards,
            shadow_log=shadow_log, min_threads=min_threads, interval=interval,
            rollback_on_trip=rollback_on_trip, journal=journal, between=check)
    finally:
        if runlog is not None:
            runlog.close()
        choice.close()
    last = steps[-1] if steps else None
    tripped = last is not None and bool(last.tripped)
    reached = start if last is None else \
        (last.share_from if last.decision == "rolled_back" else last.share_to)
    out.line(f"rollout at {reached:g} (target {target:g})" +
             (": a guard tripped" if tripped else ""))
    out.emit({"command": "rollout advance", "from": start, "to": target, "step": step,
              "guards": [str(g) for g in guards], "reached": reached, "tripped": tripped,
              "steps": [s.__dict__ for s in steps]})
    return 1 if tripped else 0



def _rate(value: float | None) -> str:
    """A measured rate, or what it is when nothing was measured (never 0.0000)."""
    return "n/a (no evidence)" if value is None else f"{value:.4f}"


class _StepLog:
    """Each step's run-log row: started before the step moves anything, naming (by hash) every
    thread it is about to move; completed with the threads it moved, the decision and the
    evidence — or, when the step is cut off, ``interrupted`` with what it moved so far. A row
    that cannot be written is a warning: the store may be the thing that went away."""

    def __init__(self, runlog: Any, guards: str, target: str, policy: Any, out: Output) -> None:
        self.runlog, self.guards, self.target, self.policy, self.out = \
            runlog, guards, target, policy, out
        self.run_id: str | None = None

    def begin(self, share_from: float, share_to: float, moving: list[str]) -> None:
        if self.runlog is None:
            return
        from adapters.telemetry import thread_hash

        self.run_id = self.runlog.start(
            f"rollout advance {share_from:g} -> {share_to:g} {self.guards}", source=None,
            target=self.target, shard=None, policy=self.policy,
            counts={"moving": [thread_hash(t) for t in moving]})

    def end(self, step: Any, moved: set[str]) -> None:
        ev = step.evidence
        self.out.line(f"{step.share_from:g} -> {step.share_to:g}: moved {step.moved}, "
                      f"{step.decision}" + (f" ({'; '.join(step.tripped)})" if step.tripped
                                            else "") +
                      f"  [mismatch_rate {_rate(ev.get('mismatch_rate'))} over "
                      f"{ev.get('compared', 0)} compared of {ev.get('threads', 0)} moved "
                      f"thread(s), fold_failure_rate {_rate(ev.get('fold_failure_rate'))}]")
        self._finish("failed" if step.tripped else "ok", moved,
                     {"decision": step.decision, "moved": step.moved, "failed": step.failed,
                      "tripped": step.tripped, **step.evidence})

    def cut(self, moved: set[str], exc: BaseException) -> None:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        self._finish(status, moved, {"moved": len(moved), "error": type(exc).__name__})

    def _finish(self, status: str, moved: set[str], counts: dict[str, Any]) -> None:
        from adapters.telemetry import thread_hash

        if self.runlog is not None and self.run_id is not None:
            finish_run(self.runlog, self.run_id, status,
                       {**counts, "moved_threads": sorted(thread_hash(t) for t in moved)},
                       self.out)
        self.run_id = None
