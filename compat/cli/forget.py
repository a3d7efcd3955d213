"""``memshift forget``: erase a thread, or the messages holding a text, from a store."""

from __future__ import annotations

from typing import Any

import click

from compat.cli._common import Output, output_options, resolve_store, show_url, store_options
from compat.cli._policy import choose_policy, model_from, model_options, policy_options
from compat.cli._urls import check_url

__all__ = ["forget"]


@click.command("forget")
@store_options("", "MEMSHIFT_STORE", "store to erase from (must exist)")
@click.option("--thread", "thread_id", required=True, metavar="ID", help="The thread.")
@click.option("--match", metavar="TEXT", default=None,
              help="Only the messages whose text contains TEXT (exact, case-sensitive); the "
                   "thread's memory is rebuilt from the rest. [default: the whole thread]")
@click.option("--match-env", metavar="NAME", default=None,
              help="Read TEXT from this environment variable (keeps it out of ps).")
@click.option("--shadow-log", "shadow_logs", multiple=True, metavar="FILE",
              type=click.Path(dir_okay=False, exists=True),
              help="Also scrub this shadow log (repeatable; $MEMSHIFT_SHADOW_LOG is included).")
@click.option("--no-compact", is_flag=True,
              help="SQLite: skip VACUUM (deleted bytes may stay in free pages until then).")
@click.option("--dry-run", is_flag=True, help="Count what would go; change nothing.")
@click.option("--offline-summarizer", is_flag=True,
              help="With --match and no --model: rebuild the summary with memshift's offline "
                   "summarizer (say so: it replaces what your model wrote).")
@policy_options("the policy recorded in the store, else max_tokens=2000")
@model_options
@output_options
def forget(thread_id: str, match: str | None, match_env: str | None,
           shadow_logs: tuple[str, ...], no_compact: bool, dry_run: bool,
           offline_summarizer: bool, as_json: bool, output: str | None, quiet: bool,
           **opts: Any) -> int:
    """Erase a thread — or, with --match, its messages holding a text — from the transcript,
    both backends' state, every retained checkpoint, fold records, shadow logs and the other
    side of a staged store; rebuild the summary from what remains; record an audit row that
    names the thread by a hash and holds no content. Exit 2 when no store holds the thread."""
    import os

    from adapters.errors import ConfigError
    from compat.erasure import forget as run_forget
    from compat.memory import SummaryMemory

    out = Output(as_json, output, quiet)
    if match_env:
        if match is not None:
            raise click.UsageError("give --match or --match-env, not both")
        match = os.environ.get(match_env)
        if not match:
            raise ConfigError(f"--match-env {match_env}: the variable is unset or empty")
    if match is not None and not dry_run and not opts.get("model") and not offline_summarizer:
        raise click.UsageError("--match rebuilds the thread's summary from what remains: name "
                               "your summarizer with --model SPEC, or pass --offline-summarizer")
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    from adapters import MemoryPolicy
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT

    choice = choose_policy(opts, [url], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=True)
    llm = model_from(opts)
    with SummaryMemory(backend="staged", store=url, policy=choice.policy, llm=llm) as memory:
        report = run_forget(memory, thread_id, match, dry_run=dry_run,
                            shadow_logs=shadow_logs, compact=not no_compact)
    verb = "would remove" if dry_run else "removed"
    what = "the whole thread" if report.whole else "the matching messages"
    out.line(f"{show_url(url)}: {what}: {verb} {report.messages_removed} message(s), kept "
             f"{report.messages_kept}, {report.stores} store(s)"
             + (f", summary rebuilt ({report.rebuilt_folds} fold(s))"
                if report.rebuilt_folds is not None else "")
             + (f", {report.shadow_lines_removed} shadow log line(s)"
                if report.shadow_lines_removed else "")
             + (" (dry run: nothing changed)" if dry_run else ""))
    choice.close()
    out.emit({"command": "forget", "store": show_url(url), **report.as_dict()})
    return 0
