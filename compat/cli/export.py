"""``memshift export --store URL``: a store's conversations as a replay file (read-only)."""

from __future__ import annotations

import json
from typing import Any

import click

from adapters.errors import ConfigError, StoreError
from compat.cli._common import Output, resolve_store, show_url, store_options, threads_file
from compat.cli._urls import check_url, kind_of

__all__ = ["export"]

_SHOWN_MISSING = 5  # listed threads named in the error; the rest are counted


def _listed(path: str | None) -> list[tuple[int, str]] | None:
    """(line number, thread id) of every non-blank line of ``--threads FILE``."""
    if not path:
        return None
    listed = threads_file(path)
    if not listed:
        raise ConfigError(f"--threads {path!r} lists no thread (one thread id per line)")
    return listed


def _refused(path: str, listed: list[tuple[int, str]], missing: dict[str, str]) -> ConfigError:
    """The listed threads that are not in the store, named by their line in the file."""
    first = {tid: n for n, tid in reversed(listed)}  # a thread's first line in the file
    named = [f"{path}:{first[t]}: thread {t!r} {why}" for t, why in list(missing.items())
             [:_SHOWN_MISSING]]
    more = len(missing) - len(named)
    return ConfigError("; ".join(named) + (f"; and {more} more" if more else "") +
                       " (nothing was exported)")


@click.command("export")
@store_options("", "MEMSHIFT_STORE", "store to export from (opened read-only; must exist)")
@click.option("--threads", "threads_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Only these threads (one id per line), in the file's order.")
@click.option("--sample", type=click.IntRange(min=1), default=None, metavar="N",
              help="A deterministic sample of N threads (of the store, or of --threads).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Which sample: the same seed gives the same threads.")
@click.option("--quiet", "-q", is_flag=True, help="No progress and no notes on stderr.")
def export(threads_file: str | None, sample: int | None, seed: int, quiet: bool,
           **opts: Any) -> int:
    """Write a store's conversations to stdout as a replay file (JSONL, what `memshift
    replay` reads): every thread's whole transcript in saved order, wherever the thread
    lives (classic or middleware). Read-only: nothing in the store changes. A thread listed
    in --threads that the store does not hold is an error (exit 2) before any line is
    written.

    \b
    memshift export --store-env APP_DSN --sample 200 --seed 1 > sample.jsonl
    memshift replay sample.jsonl --max-tokens 800 --keep-tokens 400
    """
    from compat import admin

    out = Output(False, None, quiet)
    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=True)
    if kind_of(url) == "memory":
        raise ConfigError("--store memory: an in-memory store lives in its own process; "
                          "there is nothing to export")
    listed = _listed(threads_file)
    memory = admin.read_only_memory("classic", url, snapshot=True)
    if memory is None:
        raise StoreError(f"{show_url(url)} holds no memshift tables: nothing to export")
    threads = messages = 0
    with memory:
        try:
            lines = admin.export_conversations(
                memory, [t for _, t in listed] if listed is not None else None, sample=sample,
                seed=seed)
        except admin.MissingThreads as exc:
            assert listed is not None
            raise _refused(str(threads_file), listed, exc.missing) from None
        current = None
        with out.progress(None, "threads", "export") as tick:
            for line in lines:
                if line["thread_id"] != current:
                    if current is not None:
                        tick()
                    current, threads = line["thread_id"], threads + 1
                click.echo(json.dumps(line, ensure_ascii=False))  # the data, as stored
                messages += 1
            if current is not None:
                tick()
    out.note(f"export: {messages} message(s) of {threads} thread(s) from {show_url(url)}")
    if listed is None and (waiting := _unadopted(url)):
        out.warn(f"{waiting} session(s) of the stock table message_store are not adopted yet "
                 "and were not exported (a first touch or memshift migrate adopts them)")
    return 0


def _unadopted(url: str) -> int:
    """Sessions of the stock ``message_store`` table memshift holds no transcript of: an
    export that leaves them out says so (no silent gaps)."""
    from sqlalchemy import text

    from adapters.stores.readonly import read_engine, table_names
    from compat._adopt import DEFAULT_LEGACY_TABLE

    if DEFAULT_LEGACY_TABLE not in table_names(url, snapshot=True):
        return 0
    engine = read_engine(url, snapshot=True)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(
                f"SELECT count(DISTINCT session_id) FROM {DEFAULT_LEGACY_TABLE} WHERE session_id "
                "NOT IN (SELECT thread_id FROM memshift_transcript)")).scalar() or 0)
    finally:
        engine.dispose()
