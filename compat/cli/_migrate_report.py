"""How ``memshift migrate`` reports: one outcome per thread, the rest explained beside it."""

from __future__ import annotations

import resource
from typing import Any

from adapters.thread_keys import original_of
from compat.cli._common import Output, show_url
from compat.cli._jsonstream import Items
from compat.migrating.folds import split_gap
from compat.migrating.ids import Outcomes, ThreadIds
from compat.migration import ALREADY, NOT_FOUND, MigrationReport

__all__ = ["close_run", "migrate_document", "print_migration", "run_stats"]

REBUILT_MEANS = ("recomputed from the stored history with this run's policy, because stock "
                 "classic memory never persisted a summary")


def run_stats(out: Output, items: int) -> dict[str, float]:
    """Elapsed time, rate, CPU time and this process's peak memory (for shard sizing)."""
    seconds = out.elapsed()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"elapsed_s": round(seconds, 3),
            "per_s": round(items / seconds, 2) if seconds > 0 else 0.0,
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),  # whole process, imports too
            "max_rss_mb": round(peak_rss_kb(usage) / 1024, 1)}


def peak_rss_kb(usage: resource.struct_rusage) -> float:
    """This program's peak resident memory. On Linux ``VmHWM``: ``ru_maxrss`` keeps the peak
    of the process image before ``exec`` (a large parent that started the command would be
    reported as the command's own: 801 MB for a 241 MB worker, measured)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            lines = status.readlines()
    except OSError:  # no /proc (macOS, BSD): the kernel's figure is the only one
        return float(usage.ru_maxrss)
    found = [line.split()[1] for line in lines if line.startswith("VmHWM:")]
    return float(found[0]) if found else float(usage.ru_maxrss)


def close_run(runlog: Any, run_id: str | None, status: str, counts: dict[str, Any],
              out: Output) -> None:
    """Complete the run's log row and close the log; a failure to log never hides the
    run's own result (it is a warning)."""
    if runlog is None:
        return
    try:
        finish_run(runlog, run_id, status, counts, out)
    finally:
        runlog.close()


def finish_run(runlog: Any, run_id: str | None, status: str, counts: dict[str, Any],
               out: Output) -> None:
    """Complete the run's log row, leaving the log open (a command that logs several runs);
    a failure to log is a warning."""
    from adapters.errors import StoreError

    try:
        if run_id is not None:
            runlog.finish(run_id, status, counts)
    except StoreError as exc:
        out.warn(f"the run log was not updated: {exc}")


def print_migration(report: MigrationReport, out: Output, *, run_id: str | None,
                    target_url: str) -> None:
    """The outcome table (rows add up to the total), then facts, failures and notes."""
    from rich import box
    from rich.table import Table

    dry = report.dry_run
    reasons = report.skipped_by_reason()
    skipped_means = "; ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items())) or \
        f"{ALREADY}, or {NOT_FOUND}"
    verified = len(report.verified)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("outcome")
    table.add_column("threads", justify="right")
    table.add_column("meaning")
    table.add_row("would migrate" if dry else "migrated", str(len(report.migrated)),
                  "not identical on the target: would be written" if dry else
                  "written to the target" + (", re-read and verified" if verified else ""))
    table.add_row("skipped", str(len(report.skipped)), skipped_means)
    table.add_row("failed", str(len(report.failed)), "see FAILED lines below" if report.failed
                  else "")
    table.add_row("total", str(report.total), "each thread is exactly one of the above")
    out.line(f"read as: {report.source}")
    out.table(table)
    which = "threads that would migrate" if dry else "migrated threads"
    out.line(f"summary rebuilt: {len(report.rebuilt)} of the {which} ({REBUILT_MEANS})")
    out.line(f"verified: {verified} (re-read from the target and identical to the source, "
             "skipped threads included)" if verified else "verified: 0")
    if report.caught_up:
        out.line(f"caught up: {len(report.caught_up)} thread(s) received turns in the source "
                 "during the run and were copied again")
    if report.changed:
        out.line(f"changed during migration: {len(report.changed)} thread(s) received turns in "
                 "the source after their last copy: not verified; re-run to copy them")
    if report.incomplete:
        out.line(f"incomplete: {len(report.incomplete)} thread(s) with records the run could "
                 "not carry (see INCOMPLETE lines below; their state is counted above)")
    for tid, reason in report.failed:
        out.line(f"  FAILED {shown(tid)!r}: {reason}")
    for tid, gap in report.incomplete:
        out.line(f"  INCOMPLETE {shown(tid)!r}: {gap}")
    for note in report.notes.distinct():
        out.line(f"  note: {note}")
    if run_id:
        out.line(f"run {run_id} logged in the target (see: memshift history --store "
                 f"{show_url(target_url)})")
    out.line("RESULT: " + ("OK" if report.ok else "FAILED") + (" (dry run)" if dry else ""))


def migrate_document(report: MigrationReport, out: Output, *, code: int, run_id: str | None,
                     policy: dict[str, Any], source: tuple[str, str], target: tuple[str, str],
                     shard: str | None) -> dict[str, Any]:
    """The ``--json`` result of a migration."""
    return {
        "command": "migrate", "run_id": run_id, "dry_run": report.dry_run, "ok": report.ok,
        "exit_code": code, "shard": shard,
        "source": {"kind": source[0], "store": show_url(source[1]), "name": report.source},
        "target": {"kind": target[0], "store": show_url(target[1]), "name": report.target},
        "policy": policy,
        "counts": report.counts(),
        "skipped_by_reason": report.skipped_by_reason(),
        "threads": {
            "migrated": _ids(report.migrated),
            "skipped": _outcomes(report.skipped),
            "failed": _outcomes(report.failed),
            "rebuilt": _ids(report.rebuilt),
            "changed": _ids(report.changed),
            "caught_up": _ids(report.caught_up),
            "incomplete": _gaps(report.incomplete),
        },
        "notes": report.notes.distinct(),
        "stats": run_stats(out, report.total),
    }


def shown(thread_id: str) -> str:
    """The id the application passed, for a long id's key this run met in the listing
    (``adapters.thread_keys``); any other id as it is."""
    return original_of(thread_id) or thread_id


def _ids(threads: ThreadIds) -> Items:
    """A report's thread list, decoded as it is written."""
    return Items(lambda: (shown(t) for t in threads))


def _gaps(pairs: Outcomes) -> Items:
    """``{"thread_id", "table", "not_carried"}``: what the run could not carry of a thread."""
    return Items(lambda: ({"thread_id": shown(t), "table": split_gap(g)[0],
                           "not_carried": split_gap(g)[1]} for t, g in pairs))


def _outcomes(pairs: Outcomes) -> Items:
    """``{"thread_id", "reason"}`` objects made as they are written, not a dict per thread
    held beside the report (about 18 MB over 100,000 skipped threads)."""
    return Items(lambda: ({"thread_id": shown(t), "reason": r} for t, r in pairs))
