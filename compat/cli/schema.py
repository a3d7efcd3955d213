"""``memshift schema status|upgrade --store URL``: the store's schema version, and the steps
that bring it to this memshift's (or, with ``--sql``, the statements for a DBA)."""

from __future__ import annotations

from typing import Any

import click

from compat.cli._common import Output, output_options, resolve_store, store_options
from compat.cli._urls import check_url

__all__ = ["schema"]

_CHECK = click.option("--check", is_flag=True,
                      help="Write nothing; exit 1 when an upgrade is pending (for CI).")


@click.group("schema")
def schema() -> None:
    """memshift's (and LangGraph's) tables in a store: versions and upgrades."""


def _report(opts: dict[str, Any], out: Output, must_exist: bool) -> Any:
    from adapters.stores.schema_status import schema_report

    url = check_url(resolve_store(opts, "", "MEMSHIFT_STORE", out) or "", "--store",
                    must_exist=must_exist)
    return url, schema_report(url)


def _show(report: Any, out: Output) -> None:
    from adapters.stores.versions import CURRENT

    status = report.memshift
    out.line(f"store: {report.store}")
    out.line(f"memshift: {status.describe()}; this memshift: version {CURRENT}"
             + (f" (written by memshift {status.written_by})" if status.written_by else ""))
    for step in status.as_dict()["pending"]:
        out.line(f"  pending: {step['version']}: {step['step']}")
    out.line(f"LangGraph checkpoint tables: {report.langgraph.state}"
             + (f" ({len(report.langgraph.pending)} statement(s) pending)"
                if report.langgraph.pending else ""))
    out.line("RESULT: " + ("upgrade pending: memshift schema upgrade --store URL"
                           if report.pending else "up to date"))


@schema.command("status")
@store_options("", "MEMSHIFT_STORE", "store to examine (read-only)")
@_CHECK
@output_options
def status(check: bool, as_json: bool, output: str | None, quiet: bool, **opts: Any) -> int:
    """The schema version the store records (or, for a store written before versions were
    recorded, the one its tables show), the steps an upgrade would run, and the state of
    LangGraph's checkpoint tables. Read-only."""
    out = Output(as_json, output, quiet)
    _, report = _report(opts, out, must_exist=True)
    _show(report, out)
    out.emit({"command": "schema status", **report.as_dict()})
    return 1 if check and report.pending else 0


@schema.command("upgrade")
@store_options("", "MEMSHIFT_STORE", "store to create or upgrade")
@click.option("--sql", "as_sql", is_flag=True,
              help="Print the statements an upgrade would run (memshift's, then LangGraph's) "
                   "and write nothing: for a DBA to review and apply.")
@_CHECK
@output_options
def upgrade(as_sql: bool, check: bool, as_json: bool, output: str | None, quiet: bool,
            **opts: Any) -> int:
    """Bring the store's tables to this memshift's schema: each step in its own
    transaction with its record in memshift_schema, logged; then LangGraph's setup(). Safe to
    run while apps use the store, and again (a current store is left as it is). A store
    written by a newer memshift is refused."""
    from adapters.stores.versions import refuse_newer

    out = Output(as_json, output, quiet)
    url, report = _report(opts, out, must_exist=False)
    refuse_newer(report.memshift, report.store)
    if as_sql or check:
        if as_sql and not as_json:
            click.echo(report.sql() or "-- nothing to do: the schema is up to date")
        elif not as_sql:
            _show(report, out)
        out.emit({"command": "schema upgrade", "sql": report.sql() if as_sql else None,
                  **report.as_dict()})
        return 1 if check and report.pending else 0
    from adapters.stores.schema_status import upgrade_schema

    applied = upgrade_schema(url)
    for step in applied:
        out.line(f"applied: {step}")
    after = _report(opts, out, must_exist=True)[1]
    out.line("RESULT: " + ("up to date" if not after.pending else "still pending (see status)"))
    out.emit({"command": "schema upgrade", "applied": applied, "before": report.as_dict(),
              **after.as_dict()})
    return 0 if not after.pending else 1
