"""Plumbing every ``memshift`` command shares: output modes, progress, store options,
secrets, shards.

Human results go to stdout; progress and notes to stderr. ``--json`` puts one JSON document
on stdout instead (``--output FILE`` also writes it to a file), so scripts never parse tables.
Every URL and error text passes through :func:`scrub` before it is printed.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import click

from adapters.errors import ConfigError
from adapters.stores.url import stripe_of

__all__ = [
    "Output", "in_shard", "output_options", "parse_shard", "remember_secret", "scrub",
    "show_url", "store_options", "resolve_store", "version_text",
]

# -- secrets ------------------------------------------------------------------------------
_SECRETS: set[str] = set()
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)([^@\s]+)(@)", re.I)


def remember_secret(url: str) -> None:
    """Note a URL's password so that no output path can print it, whatever a driver echoes:
    every spelling and every piece of it a parser could cut out (``secret_forms``)."""
    from adapters.stores.url import secret_forms

    match = _USERINFO.search(url)
    candidates = {match.group(2)} if match else set()
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        candidates |= {password, unquote(password)}
    candidates |= set(secret_forms(url))
    _SECRETS.update(c for c in candidates if len(c) >= 3)  # shorter: too many false hits


def scrub(text: str) -> str:
    """``text`` with URL passwords masked and every remembered secret replaced by ``***``."""
    text = _USERINFO.sub(r"\1***\3", text)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def show_url(url: str) -> str:
    """A store URL as it may be printed: passwords masked, then every remembered secret."""
    from adapters.stores.url import show_url as shown

    return scrub(shown(url))


def version_text() -> str:
    """``memshift X (langchain Y, langgraph Z, python V)``."""
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "?"

    py = ".".join(map(str, sys.version_info[:3]))
    return (f"memshift {v('memshift')} (langchain {v('langchain')}, langchain-classic "
            f"{v('langchain-classic')}, langgraph {v('langgraph')}, python {py})")


# -- output -------------------------------------------------------------------------------
@dataclass
class Output:
    """Where a command's results, notes and progress go."""

    json: bool = False
    output: str | None = None
    quiet: bool = False
    started: float = field(default_factory=time.perf_counter)

    def line(self, text: str = "") -> None:
        """A line of the human result (stdout); nothing in ``--json`` mode."""
        if not self.json:
            click.echo(scrub(text))

    def header(self, text: str) -> None:
        """Run setup (policy, stores): part of the human result, or a note beside JSON."""
        if not self.json:
            click.echo(scrub(text))
        elif not self.quiet:
            click.echo(scrub(text), err=True)

    def note(self, text: str) -> None:
        """A remark on stderr (warnings, the closing rate line); ``--quiet`` silences it."""
        if not self.quiet:
            click.echo(scrub(text), err=True)

    def warn(self, text: str) -> None:
        """A warning on stderr, even with ``--quiet``."""
        click.echo("memshift: warning: " + scrub(text), err=True)

    def width(self) -> int:
        """Columns available for a human result (a pipe gets a wide, stable 160)."""
        if not sys.stdout.isatty():
            return 160
        from rich.console import Console

        return Console(file=sys.stdout).width

    def table(self, table: Any) -> None:
        """A rich table on stdout (human mode only)."""
        if self.json:
            return
        import io

        from rich.console import Console

        tty = sys.stdout.isatty()
        buffer = io.StringIO()  # rendered first, so that the text can be scrubbed
        Console(file=buffer, width=self.width(),
                force_terminal=tty, markup=False, highlight=False, emoji=False,
                color_system="auto" if tty else None).print(table)
        click.echo(scrub(buffer.getvalue()), nl=False)

    def emit(self, document: dict[str, Any]) -> None:
        """The machine-readable result: stdout with ``--json``, and ``--output FILE``.

        Written as it is produced (``compat.cli._jsonstream``), a batch of pieces at a time,
        each batch scrubbed; the file goes to a temporary name first and replaces ``FILE``
        only when complete, so a failed run never leaves half a report."""
        from compat.cli._jsonstream import chunks

        path = Path(self.output) if self.output else None
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial") if path else None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with partial.open("w", encoding="utf-8") if partial else nullcontext() as sink:
                for batch in _batches(chunks(document)):
                    text = scrub(batch)
                    if self.json:
                        click.echo(text, nl=False)
                    if sink is not None:
                        sink.write(text)
                if sink is not None:
                    sink.write("\n")
            if self.json:
                click.echo("")
        except BaseException:
            if partial is not None:
                partial.unlink(missing_ok=True)
            raise
        if path is not None and partial is not None:
            os.replace(partial, path)
            self.note(f"report: {path}")

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @contextmanager
    def progress(self, total: int | None, unit: str, label: str) -> Iterator[Callable[[], None]]:
        """``tick()`` once per item. A rich bar with count, rate and ETA on a terminal;
        elsewhere one closing line (count, time, rate); nothing with ``--quiet``. A tick is a
        thread boundary: after a SIGTERM it raises ``Stopped`` (see ``_stop``)."""
        from compat.cli._stop import check

        done = 0
        start = time.perf_counter()
        live = not self.quiet and sys.stderr.isatty()
        if not live:
            def tick() -> None:
                nonlocal done
                done += 1
                check()
            yield tick
        else:
            from compat.cli._progress import rich_progress

            with rich_progress(total, unit, label) as advance:
                def tick() -> None:
                    nonlocal done
                    done += 1
                    advance()
                    check()
                yield tick
        seconds = time.perf_counter() - start
        rate = done / seconds if seconds > 0 else 0.0
        self.note(f"{label}: {done} {unit} in {seconds:.1f} s ({rate:.1f} {unit}/s)")


def _batches(pieces: Iterator[str], size: int = 1 << 16) -> Iterator[str]:
    """Pieces joined into batches of about ``size`` characters (a batch ends between two
    pieces, so a string is never split between batches)."""
    batch: list[str] = []
    length = 0
    for piece in pieces:
        batch.append(piece)
        length += len(piece)
        if length >= size:
            yield "".join(batch)
            batch, length = [], 0
    if batch:
        yield "".join(batch)


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``, ``--output FILE`` and ``--quiet``."""
    func = click.option("--quiet", "-q", is_flag=True,
                        help="No progress and no notes on stderr (warnings still show).")(func)
    func = click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
                        help="Also write the JSON result to this file.")(func)
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result as one JSON document on stdout.")(func)


# -- store URLs from an argument, an environment variable or a file ------------------------
def store_options(prefix: str, env: str | None, what: str) -> Callable[[Callable[..., Any]], Any]:
    """``--{prefix}store URL``, ``--{prefix}store-env NAME``, ``--{prefix}store-file PATH``."""
    dash = f"--{prefix}-store" if prefix else "--store"
    default = f" Default: ${env}." if env else ""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        func = click.option(f"{dash}-file", type=click.Path(dir_okay=False), default=None,
                            metavar="PATH",
                            help=f"{dash}, read from the first line of this file.")(func)
        func = click.option(f"{dash}-env", default=None, metavar="NAME",
                            help=f"{dash}, read from this environment variable.")(func)
        return click.option(dash, default=None, metavar="URL",
                            help=f"The {what}: sqlite:///path/to/file.db or "
                                 f"postgresql://user@host/db.{default} A password here is "
                                 f"visible in ps: prefer {dash}-env or {dash}-file.")(func)
    return decorate


def resolve_store(values: dict[str, Any], prefix: str, env: str | None, out: Output,
                  required: bool = True) -> str | None:
    """The store URL one of the three options (or ``$env``) gives; secrets remembered."""
    key = f"{prefix}_store" if prefix else "store"
    dash = f"--{prefix}-store" if prefix else "--store"
    url, env_name, file = values.get(key), values.get(f"{key}_env"), values.get(f"{key}_file")
    given = [x for x in (url, env_name, file) if x]
    if len(given) > 1:
        raise click.UsageError(f"give only one of {dash}, {dash}-env, {dash}-file")
    if url:
        remember_secret(url)
        if _has_password(url):
            out.warn(f"the password in {dash} is visible to other users of this machine (ps, "
                     f"shell history); prefer {dash}-env NAME or {dash}-file PATH")
    elif env_name:
        url = os.environ.get(env_name)
        if not url:
            raise ConfigError(f"environment variable {env_name} (from {dash}-env) is not set")
    elif file:
        url = _first_line(Path(file), f"{dash}-file")
    else:
        url = (os.environ.get(env) or None) if env else None
        if url is None and required:
            also = f", or set {env}" if env else ""
            raise ConfigError(f"no {dash.removeprefix('--')}: pass {dash} URL, {dash}-env NAME "
                              f"or {dash}-file PATH{also}")
    if url:
        url = url.strip()
        remember_secret(url)
    return url


def _has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False


def _first_line(path: Path, option: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {option} {str(path)!r}: {exc.strerror or exc}") from None
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            return line
    raise ConfigError(f"{option} {str(path)!r} holds no URL (first non-comment line)")


# -- shards ---------------------------------------------------------------------------------
def parse_shard(spec: str | None) -> tuple[int, int] | None:
    """``I/N`` (1-based) -> ``(I, N)``."""
    if spec is None:
        return None
    try:
        index, count = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard wants I/N (1-based), e.g. 2/4; got {spec!r}") from None
    if not 1 <= index <= count:
        raise ConfigError(f"--shard {spec}: I must be within 1..N")
    return index, count


def in_shard(thread_id: str, shard: tuple[int, int] | None) -> bool:
    """Stable across processes and runs: a 64-bit hash of the thread id, modulo N."""
    if shard is None:
        return True
    index, count = shard
    return stripe_of(thread_id, count) == index - 1


def threads_file(path: str) -> list[tuple[int, str]]:
    """(line number, thread id) of every non-blank line of a ``--threads FILE``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--threads {path!r}: {exc.strerror or exc}") from None
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
