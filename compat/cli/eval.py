"""``memshift eval`` (and ``resummarize``, which lives in ``_cli_resummarize``)."""

from __future__ import annotations

from typing import Any

import click

from adapters import MemoryPolicy
from compat.cli._common import Output, resolve_store, store_options
from compat.cli._policy import FIELDS, choose_policy, model_from, model_options, policy_options
from compat.cli.resummarize import resummarize
from compat.cli._urls import check_url

__all__ = ["eval_command", "resummarize"]


def _override(opts: dict[str, Any], store: str | None, out: Output) -> dict[str, Any] | None:
    """What replaces each case's policy: the store's recorded policy (with any options), or
    the options alone, or nothing (each case keeps its own)."""
    given = {k: opts.get(k) for k in FIELDS if opts.get(k) is not None}
    if not store and not given:
        out.header("policy: each case's own (the policy block of its .json)")
        return None
    if not store:
        out.header("policy: each case's own, with these options over it: "
                   + ", ".join(f"{k}={v}" for k, v in given.items()))
        return given
    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT

    choice = choose_policy(opts, [store], MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT), out,
                           allow_mixed=False, snapshot=True)
    choice.close()
    if choice.origin == "default":
        out.warn(f"{store!r} holds no recorded policy: each case keeps its own")
        return given or None
    return {k: v for k, v in choice.policy.recorded().items() if k != "prompt_version"}


@click.command("eval")
@click.option("--fidelity", is_flag=True,
              help="Score the fidelity set instead: planted facts kept by fold depth, both "
                   "backends, stock's prompt and memshift's side by side.")
@click.option("--prompt", "prompts", multiple=True, metavar="stock|memshift|FILE",
              help="With --fidelity: the summary prompt(s) to compare (repeatable). "
                   "[default: stock and memshift]")
@click.option("--keep-specifics", is_flag=True,
              help="With --fidelity: run with MemoryPolicy(keep_specifics=True), the ledger of "
                   "the specifics a summary dropped.")
@click.option("--language", "languages", multiple=True, type=click.Choice(["en", "zh"]),
              help="With --fidelity: the language(s) of the set to run (repeatable). "
                   "[default: en and zh]")
@click.option("--report", "html", type=click.Path(dir_okay=False), metavar="HTML",
              help="With --fidelity: also write an HTML page charting facts kept by depth.")
@click.option("--cases", type=click.Path(file_okay=False), metavar="DIR",
              help="A folder of <case>.jsonl + <case>.json. [default: the bundled 12 cases]")
@click.option("--min-score", type=click.FloatRange(0, 1), metavar="X",
              help="Exit 1 when the mean score is below X (0..1).")
@store_options("", None, "store whose recorded policy every case runs with (read only; "
                         "optional)")
@policy_options("each case's own policy")
@model_options
@click.option("--quiet", "-q", is_flag=True, help="No progress and no notes on stderr.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON result to this file.")
@click.option("--json", "as_json", is_flag=False, flag_value="-", default=None,
              metavar="[FILE]",
              help="Print the result as one JSON document on stdout. (The old form --json FILE "
                   "still writes FILE, like --output FILE.)")
def eval_command(fidelity: bool, prompts: tuple[str, ...], keep_specifics: bool,
                 languages: tuple[str, ...], html: str | None, cases: str | None,
                 min_score: float | None, as_json: str | None, output: str | None, quiet: bool,
                 **opts: Any) -> int:
    """Score the summarizer on the evaluation set: what must survive a fold, does it?

    Offline by default (memshift's extractive summarizer). With --store (or policy options)
    every case runs with that policy instead of its own. Exit 1 below --min-score.
    """
    from compat.evaluation import BUNDLED_CASES, format_table, load_cases, run_eval

    if as_json not in (None, "-"):  # the old --json FILE: the file, and the table on stdout
        click.echo("memshift: note: --json FILE is now --output FILE; --json alone prints JSON "
                   "on stdout", err=True)
        output, as_json = output or as_json, None
    out = Output(as_json == "-", output, quiet)
    if fidelity:
        return _fidelity(prompts or ("stock", "memshift"), languages or ("en", "zh"),
                         min_score, out, opts, keep_specifics, html)
    if keep_specifics or html or languages:
        raise click.UsageError("--keep-specifics, --language and --report go with --fidelity")
    store = resolve_store(opts, "", None, out, required=False)
    if store:
        check_url(store, "--store", must_exist=True)
    override = _override(opts, store, out)
    loaded = load_cases(cases or BUNDLED_CASES)
    llm = model_from(opts)
    with out.progress(len(loaded), "cases", "eval") as tick:
        report = run_eval(loaded, llm=llm, model=opts.get("model") or "offline extractive",
                          override=override, on_case=lambda _c: tick())
    out.line(format_table(report))
    code = 1 if min_score is not None and report.score < min_score else 0
    out.emit({"command": "eval", **report.as_dict(), "min_score": min_score,
              "policy_override": override, "exit_code": code})
    return code


def _fidelity(prompts: tuple[str, ...], languages: tuple[str, ...], min_score: float | None,
              out: Output, opts: dict[str, Any], keep_specifics: bool, html: str | None) -> int:
    """``eval --fidelity``: the set's facts kept by fold depth (``compat.fidelity``), with the
    policy options given over the set's own policy."""
    from compat.fidelity import MODEL_SUMMARY_CAP, format_fidelity, run_fidelity

    stores = ("store", "store_file", "store_env")
    if opts.get("policy_override") or any(opts.get(k) for k in stores):
        raise click.UsageError("--fidelity runs the set's own policy with the policy options "
                               "given over it (--max-tokens, --max-summary-tokens, ...), not a "
                               "store's: pass the store's values as options")
    given = {k: opts[k] for k in FIELDS if opts.get(k) is not None}
    llm = model_from(opts)
    summarizer = opts.get("model") or "memshift offline (no model)"
    cap = given.get("max_summary_tokens") or (MODEL_SUMMARY_CAP if llm is not None else None)
    out.header(f"summarizer: {summarizer}; prompts: " + ", ".join(prompts)
               + ("; with the specifics ledger (keep_specifics)" if keep_specifics else "")
               + "; policy: the set's"
               + "".join(f", {k}={v}" for k, v in given.items() if k != "max_summary_tokens")
               + (f", max_summary_tokens={cap}" if cap else "")
               + (" (the model-run default)" if cap and "max_summary_tokens" not in given
                  else "")
               + "; a rejected fold is retried on the next save (retry_backoff=0)")
    runs = [run for prompt in prompts
            for run in run_fidelity(llm=llm, prompt=prompt, keep_specifics=keep_specifics,
                                    languages=languages, overrides=given)]
    table = format_fidelity(runs)
    out.line(table)
    if html:
        from compat.fidelity.report import fidelity_html

        out.line(f"report: {fidelity_html(runs, html, summarizer, table)}")
    kept = sum(next(iter(r.facts_kept.values()), 0) for r in runs)
    total = sum(r.facts for r in runs)
    score = kept / total if total else 0.0
    disagree = [f"{r.language}/{r.prompt}" for r in runs if not r.backends_agree]
    if disagree:
        out.line("BACKENDS DISAGREE on: " + ", ".join(disagree))
    code = 1 if disagree or (min_score is not None and score < min_score) else 0
    out.emit({"command": "eval --fidelity", "score": round(score, 4), "min_score": min_score,
              "runs": [r.as_dict() for r in runs], "exit_code": code})
    return code
