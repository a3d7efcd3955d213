"""``memshift`` / ``python -m compat``: the command line (click + rich).

One module per command in this package (``replay``, ``export``, ``migrate``, ``resummarize``,
``eval``, ``rollout``, ``history``, ``doctor``, ``schema``, ``codemod``, ``forget``), each
parsing options and calling library functions; this module holds the root group,
``--version`` and the one place errors become exit codes
and one-line messages.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import textwrap
import traceback
import warnings
from collections.abc import Sequence

import click
from langchain_core._api import LangChainDeprecationWarning

from adapters.errors import MemshiftError
from compat.cli._common import remember_secret, scrub, version_text

__all__ = ["EXIT_CODES", "main", "root"]

EXIT_CODES = {
    0: "success (replay: EQUIVALENT; migrate/resummarize: no thread failed)",
    1: "some threads failed or did not verify, the backends diverged, or eval scored below "
       "--min-score",
    2: "usage or configuration error: bad option, bad or unreachable store URL, missing "
       "source file, missing extra, refused policy override, a listed thread the store does "
       "not hold (export)",
    3: "internal error (a bug: rerun with MEMSHIFT_DEBUG=1 and report the traceback)",
    130: "interrupted (Ctrl-C)",
    143: "stopped by SIGTERM after the thread in hand (the run is recorded 'interrupted'; "
         "run it again to resume)",
}

_EPILOG = "\b\nExit codes:\n" + "\n".join(
    textwrap.fill(text, 88, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7)
    for code, text in EXIT_CODES.items()) + """

\b
Store URLs: sqlite:///relative/file.db, sqlite:////absolute/file.db,
postgresql://user@host/db. Keep passwords out of the command line (ps shows it): use
--from-store-env NAME / --from-store-file PATH (and the --to- and --store twins), or
the environment variables MEMSHIFT_FROM_STORE, MEMSHIFT_TO_STORE, MEMSHIFT_STORE."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=_EPILOG)
@click.version_option(message=version_text(), package_name="memshift")
def root() -> None:
    """Move LangChain conversation-summary memory from ConversationSummaryBufferMemory to
    create_agent + SummarizationMiddleware, with proof that nothing changed.

    \b
    Start with:  memshift replay examples/conversations/long_multithread.jsonl
    Then:        memshift migrate --dry-run ...   and   memshift history --store URL
    Your code:   memshift codemod src/   (a diff of the import swap; --write applies it)
    """


def _register() -> None:
    from compat.cli.codemod import codemod
    from compat.cli.history import history
    from compat.cli.replay import replay
    from compat.cli.export import export
    from compat.cli.doctor import doctor
    from compat.cli.eval import eval_command, resummarize
    from compat.cli.migrate import migrate_command
    from compat.cli.rollout import rollout
    from compat.cli.schema import schema
    from compat.cli.forget import forget
    from compat.cli.finish import finish
    from compat.cli.adopt import adopt

    for command in (replay, export, migrate_command, resummarize, eval_command, rollout,
                    history, doctor, schema, codemod, forget, finish, adopt):
        root.add_command(command)


_register()


class _ScrubSecrets(logging.Filter):
    """Log lines pass through the same secret scrubbing as everything else printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), None
        return True


def _error(text: str) -> str:
    """Print one scrubbed line on stderr; return it (for ``--json``)."""
    line = scrub(" ".join(text.split()))
    click.echo("memshift: error: " + line, err=True)
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (see ``EXIT_CODES``). With ``--json``, a
    failure also prints ``{"ok": false, "exit_code": N, "error": "..."}`` on stdout."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _ScrubSecrets) for f in handler.filters):
            handler.addFilter(_ScrubSecrets())
    # The classic classes memshift wraps are deprecated upstream; that is why it exists.
    warnings.filterwarnings("ignore", category=LangChainDeprecationWarning)
    args = list(argv) if argv is not None else sys.argv[1:]
    for arg in args:  # a URL anywhere on the command line: its password is never echoed
        if "://" in arg:
            remember_secret(arg)
    code, message = _run(args)
    if message is not None and "--json" in args:
        click.echo(json.dumps({"ok": False, "exit_code": code, "error": scrub(message)}))
    return code


def _run(args: list[str]) -> tuple[int, str | None]:
    """The exit code, and the one-line error when the command did not finish."""
    from compat.cli._stop import Stopped, on_sigterm

    try:
        with on_sigterm():
            code = root.main(args=args, prog_name="memshift", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        if isinstance(exc, Stopped) or isinstance(exc.__cause__, Stopped):  # click wraps it
            click.echo("memshift: stopped by SIGTERM after the thread in hand; run the same "
                       "command again to resume", err=True)
            return 143, "stopped by SIGTERM"
        click.echo("memshift: interrupted", err=True)
        return 130, "interrupted"
    except click.ClickException as exc:  # usage errors: click's own message, exit 2
        shown = io.StringIO()
        exc.show(file=shown)
        click.echo(scrub(shown.getvalue()), err=True, nl=False)
        return 2, exc.format_message()
    except (MemshiftError, OSError) as exc:  # configuration, stores, files
        return 2, _error(str(exc) or type(exc).__name__)
    except Exception as exc:  # a driver error nothing translated, or a bug
        if _is_store_error(exc):
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return 2, _error(f"store error: {type(exc).__name__}: {detail}")
        message = _error(f"internal error: {type(exc).__name__}: {exc}")
        if os.environ.get("MEMSHIFT_DEBUG"):
            click.echo(scrub(traceback.format_exc()), err=True)
        else:
            click.echo("memshift: set MEMSHIFT_DEBUG=1 to see the traceback", err=True)
        return 3, message
    return int(code or 0), None


def _is_store_error(exc: BaseException) -> bool:
    names = {c.__module__.split(".")[0] for c in type(exc).__mro__}
    return bool(names & {"sqlalchemy", "psycopg", "psycopg_pool", "sqlite3"})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
