"""``memshift doctor --store URL``: where threads live, and what a path would read wrong."""

from __future__ import annotations

from typing import Any

import click

from compat.cli._common import Output, output_options, resolve_store, store_options
from compat.cli._urls import check_url

__all__ = ["doctor"]


@click.command("doctor")
@store_options("", "MEMSHIFT_STORE", "store to examine (opened read-only; must exist)")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Look at the first N threads only. [default: every thread]")
@click.option("--shadow-log", type=click.Path(dir_okay=False, exists=True), default=None,
              envvar="MEMSHIFT_SHADOW_LOG", metavar="FILE",
              help="Also count a shadow log's mismatches by class of difference (ignored "
                   "classes apart). [default: $MEMSHIFT_SHADOW_LOG]")
@output_options
def doctor(limit: int | None, shadow_log: str | None, as_json: bool, output: str | None,
           quiet: bool, **opts: Any) -> int:
    """Where the store's threads live (per backend, pinned, moved), threads with state on
    both backends and no record saying which serves them, stock chat-history tables and how
    much of them is adopted, memshift's tables, and the versions in use. Read-only. Exit 1
    when a thread would be read empty or stale by some path; each such finding comes with
    the command that fixes it."""
    from compat.doctor import diagnose

    out = Output(as_json, output, quiet)
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    with out.progress(None, "threads", "doctor") as tick:
        found = diagnose(url, limit=limit, on_thread=lambda _tid: tick())
    out.line(f"store: {found.store}")
    out.line(f"threads: {found.threads}" + (f" (the first {limit})" if limit else ""))
    for backend in ("classic", "middleware"):
        out.line(f"  on {backend:<10} recorded {found.placements.get(backend, 0):>7}, "
                 f"pinned {found.pinned.get(backend, 0)}, not yet recorded "
                 f"{found.unrecorded.get(backend, 0)}")
    out.line(f"  moved at least once: {found.moved_at_least_once}")
    out.line(f"  cleared (a transcript, no memory where it lives): {len(found.empty)}")
    out.line(f"  held by the offline fallback (the summarizer kept failing): "
             f"{len(found.fallback)}")
    out.line(f"  state on both backends with no record: {len(found.ambiguous)}")
    for table, counts in found.legacy.items():
        out.line(f"legacy table {table}: {counts['sessions']} session(s), {counts['adopted']} "
                 f"adopted, {counts['not_yet']} adopted at their first touch")
    out.line("schema: " + ("; ".join(found.schema_problems) or
                           f"ok ({', '.join(sorted(found.schema))})"))
    out.line("versions: " + ", ".join(f"{k} {v}" for k, v in found.versions.items()))
    for problem in found.problems:
        where = f" {problem['thread']!r}" if problem["thread"] else ""
        out.line(f"  PROBLEM{where}: {problem['what']}\n    fix: {problem['fix']}")
    shadow = None
    if shadow_log:
        from compat.doctor import shadow_counts

        shadow = shadow_counts(shadow_log)
        out.line(f"shadow log: {shadow['mismatches']} mismatch(es), {shadow['counted']} counted, "
                 f"{shadow['ignored']} of ignored classes" + "".join(
                     f"\n  {name:<18} counted {c['counted']:>6}, ignored {c['ignored']:>6}"
                     for name, c in shadow["classes"].items()))
        if shadow["unreadable_lines"]:
            out.line(f"  unreadable lines: {shadow['unreadable_lines']}")
    out.line("RESULT: " + ("OK" if found.ok else f"{len(found.problems)} problem(s)"))
    out.emit({"command": "doctor", **found.as_dict(),
              **({"shadow": shadow} if shadow is not None else {})})
    return 0 if found.ok else 1
