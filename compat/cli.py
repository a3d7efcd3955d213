"""``memshift`` / ``python -m compat``: replay (the equivalence check) and migrate."""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from langchain_core._api import LangChainDeprecationWarning

from adapters import MemoryPolicy
from adapters.errors import MemshiftError
from compat.cli_governance import add_governance_parsers
from compat.cli_rollout import add_rollout_parser
from compat.cli_migrate import add_migrate_parser, cmd_migrate
from compat.conversations import iter_turns, read_messages
from compat.replay import DEFAULT_REPLAY_POLICY, ReplayReport, TurnResult, replay

__all__ = ["main"]


class Progress:
    """A progress bar on stderr: redrawn in place on a terminal, every 10% otherwise.
    With an unknown total (streamed threads) it counts instead."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True,
                 unit: str = "turns") -> None:
        stream = stream or sys.stderr
        self.total, self.stream, self.enabled, self.unit = total, stream, enabled, unit
        self.tty = stream.isatty()
        self.last = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        if self.total <= 0:
            if self.tty or done % 100 == 0:
                self.stream.write(f"{done} {self.unit}{chr(13) if self.tty else chr(10)}")
                self.stream.flush()
            return
        pct = done * 100 // self.total
        if not self.tty and pct // 10 == self.last // 10 and done != self.total:
            return
        self.last = pct
        bar = "#" * (pct // 5) + "-" * (20 - pct // 5)
        end = "\r" if self.tty and done != self.total else "\n"
        self.stream.write(f"[{bar}] {done}/{self.total} {self.unit}{end}")
        self.stream.flush()

    def finish(self, done: int) -> None:
        if self.enabled and self.total <= 0:
            self.stream.write(f"{done} {self.unit} done\n")


def add_policy_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--keep-tokens", type=int)
    parser.add_argument("--max-messages", type=int)
    parser.add_argument("--keep-messages", type=int)
    parser.add_argument("--cut", choices=["turn", "message"])
    parser.add_argument("--token-counter", help="approximate (default), cl100k_base or o200k_base")
    parser.add_argument("--max-summary-tokens", type=int,
                        help="cap on summary length: asked of the model, enforced on the reply")
    parser.add_argument("--model", help="summarizer model, e.g. openai:gpt-4.1-mini (default: offline)")
    parser.add_argument("--base-url", help="OpenAI-compatible server URL (else OPENAI_BASE_URL)")


def _policy(args: argparse.Namespace, default: MemoryPolicy = DEFAULT_REPLAY_POLICY) -> MemoryPolicy:
    if not any((args.max_tokens, args.keep_tokens, args.max_messages, args.keep_messages,
                args.cut, args.token_counter, args.max_summary_tokens)):
        return default
    max_tokens = args.max_tokens or (None if args.max_messages else default.max_tokens)
    return MemoryPolicy(
        max_tokens=max_tokens, keep_tokens=args.keep_tokens, max_messages=args.max_messages,
        keep_messages=args.keep_messages, cut=args.cut or "turn", token_counter=args.token_counter,
        max_summary_tokens=args.max_summary_tokens,
    )


def _row(r: TurnResult, backends: Sequence[str]) -> str:
    cells = [f"{r.index + 1:>4}", f"{r.thread_id[:18]:<18}", f"{r.turn:>4}"]
    cells += [f"{r.windows[b]:>3}/{r.folds[b]:<3}" for b in backends]
    prompt = r.prompt_tokens
    status = "ok" if r.match else ("MODEL" if r.nondeterminism else "DIFF")
    cells += [f"{prompt[backends[0]]:>6}", f"{prompt['full']:>6}", status]
    return " ".join(cells)


def print_report(report: ReplayReport, out: TextIO) -> None:
    b = report.backends
    header = ["   #", f"{'thread':<18}", "turn"] + [f"{n[:7]:>7}" for n in b] + [
        "prompt", "  full", "match"]
    out.write("turn-by-turn (window msgs / folds per backend; prompt tokens with memory vs full history)\n")
    out.write(" ".join(header) + "\n")
    for r in report.turns:
        out.write(_row(r, b) + "\n")
        for d in r.diffs:
            label = "model nondeterminism (same summarizer input)" if r.nondeterminism else "!"
            out.write(f"      {label} {d}\n")
    mem, full = report.total_prompt_tokens(b[0]), report.total_prompt_tokens("full")
    out.write("\n")
    out.write(f"turns: {len(report.turns)}  threads: {len(report.threads)}  "
              f"divergent turns: {len(report.divergences)}\n")
    if report.nondeterministic:
        out.write(f"turns that differ by model nondeterminism only (--no-share; not a backend "
                  f"divergence): {len(report.nondeterministic)}\n")
    out.write(f"summarizer calls: {report.summarizer_calls}  folds shared between backends: "
              f"{report.shared_folds}\n")
    for name in (*b, *report.baselines):
        out.write(f"prompt tokens ({name}): {report.total_prompt_tokens(name)}\n")
    ratio = f"{mem / full:.2f}" if full else "n/a"
    out.write(f"prompt tokens (full history): {full}  (memory/full = {ratio})\n")
    if report.facts and report.facts["full"][1]:
        out.write("facts from the conversation still visible to the model after the last turn:\n")
        for name in report.strategies:
            seen, stated = report.facts[name]
            out.write(f"  {name:<12}{seen:>5} / {stated}\n")
    out.write("RESULT: " + ("EQUIVALENT" if not report.divergences else "DIVERGED") + "\n")


def _summarizer(args: argparse.Namespace, policy: MemoryPolicy) -> Any:
    if not args.model:
        return None
    from adapters.summarizer import build_summarizer
    from compat.models import resolve_model

    return build_summarizer(policy, resolve_model(args.model, base_url=args.base_url))


def cmd_replay(args: argparse.Namespace) -> int:
    turns = list(iter_turns(read_messages(args.file)))
    summarizer = _summarizer(args, _policy(args))
    progress = Progress(len(turns), enabled=not args.quiet)
    done = 0

    def tick(_: TurnResult) -> None:
        nonlocal done
        done += 1
        progress.update(done)

    report = replay(turns, policy=_policy(args), summarizer=summarizer,
                    share_summaries=not args.no_share, baselines=tuple(args.baseline or ()),
                    on_turn=tick)
    print_report(report, sys.stdout)
    if args.report:
        from compat.report import write_html

        path = write_html(report, args.report, title=f"memshift replay: {Path(args.file).name}")
        print(f"report: {path}")
    return 1 if report.divergences else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memshift", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("replay", help="replay a JSONL conversation through both backends")
    rp.add_argument("file")
    rp.add_argument("--report", help="write a self-contained HTML report here")
    rp.add_argument("--baseline", action="append", choices=["trim", "filter"],
                    help="also show a discard strategy (repeatable): trim_messages / filter_messages")
    add_policy_args(rp)
    rp.add_argument("--no-share", action="store_true",
                    help="call the summarizer separately per backend (shows model nondeterminism)")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.set_defaults(func=cmd_replay)
    mp = add_migrate_parser(sub, add_policy_args)
    mp.add_argument("--quiet", action="store_true", help="no progress output")
    mp.set_defaults(func=_run_migrate)
    add_governance_parsers(sub, add_policy_args, _default_policy)
    add_rollout_parser(sub, add_policy_args, _default_policy)
    return parser


def _default_policy(args: argparse.Namespace) -> MemoryPolicy:
    from dataclasses import replace

    from compat.memory import DEFAULT_MAX_TOKEN_LIMIT

    policy = _policy(args, MemoryPolicy(max_tokens=DEFAULT_MAX_TOKEN_LIMIT))
    fmt: Any = getattr(args, "summary_format", "text")
    return replace(policy, summary_format=fmt, summary_prompt=None) if fmt != policy.summary_format \
        else policy


def _run_migrate(args: argparse.Namespace) -> int:
    policy = _default_policy(args)
    return cmd_migrate(args, policy, _summarizer(args, policy),
                       lambda total, unit: Progress(total, enabled=not args.quiet, unit=unit))


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The classic classes memshift wraps are deprecated upstream; that is why it exists.
    warnings.filterwarnings("ignore", category=LangChainDeprecationWarning)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (MemshiftError, OSError) as exc:
        print(f"memshift: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
