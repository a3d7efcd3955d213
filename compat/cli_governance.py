"""``memshift eval`` and ``memshift resummarize``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from adapters import MemoryPolicy
from compat.memory import SummaryMemory

__all__ = ["add_governance_parsers"]


def _model(args: argparse.Namespace) -> Any:
    if not args.model:
        return None
    from compat.models import resolve_model

    return resolve_model(args.model, base_url=args.base_url)


def cmd_eval(args: argparse.Namespace) -> int:
    from compat.evaluation import BUNDLED_CASES, format_table, load_cases, run_eval

    cases = load_cases(args.cases or BUNDLED_CASES)
    report = run_eval(cases, llm=_model(args), model=args.model or "offline extractive")
    print(format_table(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(report.to_json(), encoding="utf-8")
        print(f"report: {args.json}")
    return 1 if args.min_score is not None and report.score < args.min_score else 0


def cmd_resummarize(args: argparse.Namespace, policy: MemoryPolicy) -> int:
    with SummaryMemory(backend=args.backend, store=args.store, policy=policy) as memory:
        if args.all:
            threads = list(memory.iter_thread_ids())
        elif args.threads:
            threads = [x.strip() for x in Path(args.threads).read_text(encoding="utf-8").splitlines()
                       if x.strip()]
        else:
            threads = list(args.thread)
        failed = 0
        for tid in threads:
            try:
                view = memory.resummarize(tid, llm=_model(args), policy=policy)
                print(f"{tid}: version {view.folds}, {len(view.messages)} messages kept, "
                      f"summary {len(view.summary)} chars")
            except Exception as exc:  # report and go on with the next thread
                failed += 1
                print(f"{tid}: FAILED {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"resummarized {len(threads) - failed} of {len(threads)} thread(s)")
        return 1 if failed else 0


def add_governance_parsers(sub: Any, add_policy_args: Any, policy_of: Any) -> None:
    ev = sub.add_parser("eval", help="score summaries on the evaluation set")
    ev.add_argument("--cases", help="folder of <case>.jsonl + <case>.json (default: bundled)")
    ev.add_argument("--model", help="summarizer model (default: the offline extractive one)")
    ev.add_argument("--base-url", help="OpenAI-compatible server URL (else OPENAI_BASE_URL)")
    ev.add_argument("--json", help="write a JSON report here")
    ev.add_argument("--min-score", type=float, help="exit 1 when the mean score is below this")
    ev.set_defaults(func=cmd_eval)

    rs = sub.add_parser("resummarize", help="rebuild running summaries from the transcript")
    rs.add_argument("--backend", required=True, choices=["classic", "middleware"])
    rs.add_argument("--store", required=True, help="store URL")
    group = rs.add_mutually_exclusive_group(required=True)
    group.add_argument("--thread", action="append", help="a thread id (repeatable)")
    group.add_argument("--threads", help="file with one thread id per line")
    group.add_argument("--all", action="store_true", help="every thread in the store")
    add_policy_args(rs)
    rs.add_argument("--summary-format", choices=["text", "structured"], default="text")
    rs.set_defaults(func=lambda args: cmd_resummarize(args, policy_of(args)))
