"""``memshift replay FILE``: both backends, turn by turn, on a recorded conversation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from adapters.errors import ConfigError
from compat.cli._common import Output, output_options, resolve_store, scrub, store_options
from compat.cli._policy import ModelArgs, choose_policy, model_options, policy_options
from compat.cli._urls import check_url
from compat.replay import DEFAULT_REPLAY_POLICY, ReplayReport, TurnResult

__all__ = ["print_report", "replay", "replay_document"]

_DEFAULT_NOTE = ("replay's default; --store URL replays with the policy your app recorded, "
                 "--max-tokens/--keep-tokens set one")


def _row(r: TurnResult, backends: Sequence[str]) -> str:
    cells = [f"{r.index + 1:>4}", f"{r.thread_id[:18]:<18}", f"{r.turn:>4}"]
    cells += [f"{r.windows[b]:>3}/{r.folds[b]:<3}" for b in backends]
    prompt = r.prompt_tokens
    status = "ok" if r.match else ("MODEL" if r.nondeterminism else "DIFF")
    cells += [f"{prompt[backends[0]]:>6}", f"{prompt['full']:>6}", status]
    return " ".join(cells)


def print_report(report: ReplayReport, out: Output, summarizer: str = "") -> None:
    """The turn-by-turn equivalence table and totals (plain text: greppable, diffable);
    ``summarizer`` names who wrote the summaries the closing facts line measured."""
    b = report.backends
    header = ["   #", f"{'thread':<18}", "turn"] + [f"{n[:7]:>7}" for n in b] + [
        "prompt", "  full", "match"]
    out.line("turn-by-turn (window msgs / folds per backend; prompt tokens with memory vs "
             "full history)")
    out.line(" ".join(header))
    for r in report.turns:
        out.line(_row(r, b))
        for d in r.diffs:
            label = "model nondeterminism (same summarizer input)" if r.nondeterminism else "!"
            out.line(f"      {label} {d}")
    mem, full = report.total_prompt_tokens(b[0]), report.total_prompt_tokens("full")
    out.line()
    out.line(f"turns: {len(report.turns)}  threads: {len(report.threads)}  "
             f"divergent turns: {len(report.divergences)}")
    if report.classes:
        out.line("differing turns by class: " + ", ".join(
            f"{name} {count}{' (ignored)' if name in report.ignored else ''}"
            for name, count in sorted(report.classes.items())))
    if report.nondeterministic:
        out.line(f"turns that differ by model nondeterminism only (--no-share; not a backend "
                 f"divergence): {len(report.nondeterministic)}")
    out.line(f"summarizer calls: {report.summarizer_calls}  folds shared between backends: "
             f"{report.shared_folds}")
    for name in (*b, *report.baselines):
        out.line(f"prompt tokens ({name}): {report.total_prompt_tokens(name)}")
    ratio = f"{mem / full:.2f}" if full else "n/a"
    out.line(f"prompt tokens (full history): {full}  (memory/full = {ratio})")
    if report.facts and report.facts["full"][1]:
        by = f" with {summarizer}" if summarizer else ""
        out.line(f"marked facts (FACT-... tokens in the conversation) still visible to the model "
                 f"after the last turn, in summary + window{by} (by fold depth, on planted "
                 "facts of every kind: memshift eval --fidelity):")
        for name in report.strategies:
            seen, stated = report.facts[name]
            out.line(f"  {name:<12}{seen:>5} / {stated}")
    out.line("RESULT: " + ("EQUIVALENT" if not report.divergences else "DIVERGED"))


def replay_document(report: ReplayReport, file: str) -> dict[str, Any]:
    """The ``--json`` result of a replay."""
    return {
        "command": "replay", "file": file,
        "result": "EQUIVALENT" if not report.divergences else "DIVERGED",
        "backends": list(report.backends), "turns": len(report.turns),
        "threads": len(report.threads), "divergent_turns": len(report.divergences),
        "nondeterministic_turns": len(report.nondeterministic),
        "expected_turns": sum(t.expected for t in report.turns),
        "classes": report.classes,
        "summarizer_calls": report.summarizer_calls, "shared_folds": report.shared_folds,
        "prompt_tokens": {name: report.total_prompt_tokens(name) for name in report.strategies},
        "facts": {name: {"visible": seen, "stated": stated}
                  for name, (seen, stated) in report.facts.items()},
        "divergences": [{"index": t.index, "thread_id": t.thread_id, "turn": t.turn,
                         "line": t.line, "diffs": t.diffs, "classes": list(t.classes)}
                        for t in report.divergences],
    }


def proved_with(choice: Any, summarizer: Any, model: str | None) -> dict[str, Any]:
    """What a replay proves equivalence with, stated before its result: the summarizer, the
    prompt (version and, for one memshift ships, its name), the token counter, the policy and
    where it came from, and every substitution of something the store recorded."""
    from adapters.summarizer import summarizer_name
    from compat.cli._prompts import known_prompts

    policy = choice.policy
    version = policy.prompt_version
    name = known_prompts().get(version, ("a custom prompt", None))[0]
    return {
        "summarizer": (f"{model} ({summarizer_name(summarizer)})" if summarizer is not None
                       else "memshift offline deterministic summarizer (no model)"),
        "prompt": f"{version} ({name})",
        "token_counter": policy.recorded()["token_counter"] or "approximate",
        "policy": f"{policy.explain().splitlines()[0]} ({choice.origin})",
        "substitutions": choice.substitutions,
    }


def _command_line(file: str) -> str:
    """The command as the report's header shows it: its options as given (secrets scrubbed)."""
    ctx = click.get_current_context()
    words = [ctx.command_path, file]
    for name, value in ctx.params.items():
        if name == "file" or value in (None, False, (), ""):
            continue
        flag = "--" + name.replace("_", "-")
        values = value if isinstance(value, tuple) else (value,)
        words += [flag] if value is True else [w for v in values for w in (flag, scrub(str(v)))]
    return " ".join(words)


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--report", "html", type=click.Path(dir_okay=False), metavar="HTML",
              help="Also write a self-contained HTML report here.")
@click.option("--baseline", multiple=True, type=click.Choice(["trim", "filter"]),
              help="Also show a discard strategy (repeatable): trim_messages / filter_messages.")
@click.option("--no-share", is_flag=True,
              help="Call the summarizer separately per backend (shows model nondeterminism).")
@click.option("--ignore", multiple=True, metavar="CLASS",
              type=click.Choice(["whitespace", "summary_text", "fold_count", "message_roles"]),
              help="An expected class of difference (repeatable): counted by class, not a "
                   "divergence.")
@click.option("--summary-prompt", "prompt_file", type=click.Path(dir_okay=False, exists=True),
              metavar="FILE", help="The summary prompt (its text, with {summary} and "
              "{new_lines}). [default: the one recorded in --store, else memshift's]")
@store_options("", None, "store whose recorded policy to use (read only; optional)")
@policy_options("max_tokens=400, keep_tokens=200")
@model_options
@output_options
def replay(file: str, html: str | None, baseline: tuple[str, ...], no_share: bool,
           ignore: tuple[str, ...], prompt_file: str | None, as_json: bool, output: str | None,
           quiet: bool, **opts: Any) -> int:
    """Replay a JSONL conversation through both backends; compare after every turn.

    Runs offline by default (memshift's deterministic summarizer). The policy is the one
    recorded in --store when given — its prompt and token counter included, or the run is
    refused (exit 2) naming what to pass — else max_tokens=400, keep_tokens=200. Every output
    starts with what was proved: summarizer, prompt, counter, policy, substitutions. Exit 0
    when the backends agreed after every turn, 1 when they diverged.
    """
    from compat.cli._policy import summarizer_from
    from compat.conversations import iter_turns, read_messages
    from compat.replay import replay as run_replay

    out = Output(as_json, output, quiet)
    if not Path(file).is_file():
        raise ConfigError(f"no such conversation file: {file!r}")
    store = resolve_store(opts, "", None, out, required=False)
    if store:
        check_url(store, "--store", must_exist=True)
    prompt = Path(prompt_file).read_text(encoding="utf-8") if prompt_file else None
    choice = choose_policy(opts, [store], DEFAULT_REPLAY_POLICY, out, allow_mixed=False,
                           snapshot=True, default_note=_DEFAULT_NOTE, strict=True,
                           prompt=prompt)
    choice.close()
    turns = list(iter_turns(read_messages(file)))
    summarizer = summarizer_from(ModelArgs(opts), choice.policy)
    proof = proved_with(choice, summarizer, opts.get("model"))
    out.header("proved with:")
    for key, value in proof.items():
        out.header(f"  {key.replace('_', ' ')}: " + (
            "; ".join(value) or "none" if isinstance(value, list) else str(value)))
    with out.progress(len(turns), "turns", "replay") as tick:
        report = run_replay(turns, policy=choice.policy, summarizer=summarizer,
                            share_summaries=not no_share, baselines=tuple(baseline),
                            on_turn=lambda _r: tick(), ignore=ignore)
    print_report(report, out, proof["summarizer"])
    document = {"proved_with": proof, **replay_document(report, file),
                "policy": choice.as_json(), "exit_code": 1 if report.divergences else 0}
    if html:
        from compat.report import write_html

        from compat.report import run_meta

        meta = {**run_meta(_command_line(file), file),
                **{k.replace("_", " "): "; ".join(v) or "none" if isinstance(v, list) else v
                   for k, v in proof.items()}}
        path = write_html(report, html, title=f"memshift replay: {Path(file).name}",
                          meta=meta)
        document["report_html"] = str(path)
        out.line(f"report: {path}")
    out.emit(document)
    return int(document["exit_code"])


