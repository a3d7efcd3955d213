"""``memshift codemod PATH... [--diff | --write] [--max-bytes N] [--json]``: the import swap
(guide §1) over a repository, as a diff to review or in place; findings on stderr as
``file:line:col: kind``, skipped files (symlinks, files over the bound…) with their reason."""

from __future__ import annotations

from typing import Any

import click

from compat.cli._common import Output, output_options
from compat.codemod import DEFAULT_MAX_BYTES

__all__ = ["codemod"]


@click.command("codemod")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--diff", "mode", flag_value="diff", default=True,
              help="Print a unified diff and write nothing. [default]")
@click.option("--write", "mode", flag_value="write",
              help="Rewrite the files in place (never a symlink, never outside PATHS).")
@click.option("--max-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_BYTES,
              show_default=True, metavar="N",
              help="Skip (and report) a file larger than this that names the class: a "
                   "generated or vendored file must not stall the run.")
@output_options
def codemod(paths: tuple[str, ...], mode: str, max_bytes: int, as_json: bool,
            output: str | None, quiet: bool, **_: Any) -> int:
    """Swap ConversationSummaryBufferMemory imports for memshift's SummaryMemory.

    Rewrites imports and qualified uses from langchain_classic.memory, langchain.memory and
    their summary_buffer module (PATHS: files or folders), keeping aliases, comments and
    formatting; a second run after --write changes nothing.

    Also reports what a tool cannot decide (file:line:col on stderr): call sites that will need
    a thread id on a persistent store, keywords SummaryMemory refuses, star imports, files that
    do not parse; every memory built with no thread id whose calls carry none (with
    MEMSHIFT_STORE set they raise ThreadIdRequired). Skipped, with the reason: notebooks,
    symlinks (never written through), files over --max-bytes. Files that do not name the
    class or its modules are not parsed. Needs pip install 'memshift[codemod]'.
    """
    from compat.codemod import run_codemod

    out = Output(as_json, output, quiet)
    report = run_codemod(paths, write=mode == "write", max_bytes=max_bytes)
    if mode == "diff" and not as_json:
        for result in report.changed:
            click.echo(result.diff(), nl=False)  # verbatim: a patch must apply
    for skipped in report.skipped:
        click.echo(f"{skipped['path']}: skipped: {skipped['reason']}", err=True)
    for finding in report.findings:
        click.echo(str(finding), err=True)
    changed = len(report.changed)
    verb = "rewrote" if mode == "write" else "would rewrite"
    if mode == "write":
        written = set(report.written)
        results = [r for r in report.changed if r.path in written]
        changed = len(results)
        for result in results:
            count = len(result.rewrites)
            out.line(f"rewrote {result.path} ({count} change{'' if count == 1 else 's'})")
    out.note(f"codemod: {verb} {changed} of {len(report.files)} files, "
             f"{len(report.rewrites)} changes, {len(report.findings)} findings, "
             f"{len(report.skipped)} skipped")
    out.emit(report.as_dict())
    return 0
