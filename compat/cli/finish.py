"""``memshift finish --store URL --check``: the proof that the threads can leave memshift."""

from __future__ import annotations

from typing import Any

import click

from compat.cli._common import Output, output_options, resolve_store, show_url, store_options
from compat.cli._policy import choose_policy, policy_options
from compat.cli._urls import check_url

__all__ = ["finish"]


@click.command("finish")
@click.option("--check", is_flag=True, required=True,
              help="Check only (the one mode: nothing is written or moved).")
@store_options("", "MEMSHIFT_STORE", "store the application keeps (must exist)")
@policy_options("max_tokens=2000, the stock default")
@output_options
def finish(check: bool, as_json: bool, output: str | None, quiet: bool, **opts: Any) -> int:
    """Prove the way out: every thread on middleware (else named), and for each one the
    messages stock create_agent + SummarizationMiddleware would read from the stock saver on
    the same database equal to memshift's view (else the difference named). Prints the code
    to run without memshift and what leaving gives up. Exit 0 when every thread can leave,
    1 when one cannot yet."""
    from adapters import MemoryPolicy
    from compat import admin
    from compat.migrating.finish import check_finish
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT

    out = Output(as_json, output, quiet)
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    choice = choose_policy(opts, [url], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True)
    try:
        with out.progress(None, "threads", "finish --check") as tick:
            report = check_finish(url, choice.policy, admin.iter_thread_ids, tick)
    finally:
        choice.close()
    checked = report.equal + len(report.different) + len(report.on_classic)
    out.line(f"{show_url(url)}: {checked} thread(s): {report.equal} read the same through the "
             f"stock classes, {len(report.different)} differ, {len(report.on_classic)} still "
             "on classic")
    for thread_id in report.on_classic:
        out.line(f"  ON CLASSIC {thread_id!r}: move it first (memshift rollout move --to "
                 "middleware --thread ID, or its next touch by a middleware memory)")
    for item in report.different:
        out.line(f"  DIFFERS {item['thread_id']!r}: {item['difference']}")
    out.line("the code that serves these threads without memshift:")
    for line in report.code.splitlines():
        out.line("    " + line)
    out.line("what leaving gives up:")
    for item in report.gives_up:
        out.line(f"  - {item}")
    out.line("RESULT: " + ("READY TO LEAVE" if report.ok else "NOT YET"))
    out.emit({"command": "finish", **report.as_dict(), "store": show_url(url)})
    return 0 if report.ok else 1
