"""``memshift rollout status|move``: where staged threads live, and moving a cohort eagerly."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from adapters.errors import ConfigError
from adapters.staged import share_of

__all__ = ["add_rollout_parser"]


def _shard(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    try:
        index, count = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard wants I/N (1-based), e.g. 2/4; got {spec!r}") from None
    if not 1 <= index <= count:
        raise ConfigError(f"--shard {spec}: I must be within 1..N")
    return index, count


def _in_shard(thread_id: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    index, count = shard
    return int(share_of("shard\x00" + thread_id) * count) == index - 1


def cmd_status(args: argparse.Namespace, policy: Any) -> int:
    from compat.memory import SummaryMemory

    with SummaryMemory(backend="staged", store=args.store, policy=policy) as memory:
        rows = memory._staged("rollout status").store.placement_counts()
    result: dict[str, Any] = {
        "threads": {b: sum(n for backend, _, n, _ in rows if backend == b)
                    for b in ("classic", "middleware")},
        "pinned": {b: sum(n for backend, p, n, _ in rows if backend == b and p)
                   for b in ("classic", "middleware")},
        "moved_at_least_once": sum(m for *_, m in rows),
        "moves_in_progress": 0,  # a move is one transaction: it either happened or did not
    }
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
    else:
        for backend, count in result["threads"].items():
            print(f"{backend:<11}{count:>8} thread(s), {result['pinned'][backend]} pinned")
        print(f"moved at least once: {result['moved_at_least_once']}")
    return 0


def cmd_move(args: argparse.Namespace, policy: Any) -> int:
    from compat.memory import SummaryMemory

    shard = _shard(args.shard)
    moved = stayed = failed = 0
    with SummaryMemory(backend="staged", store=args.store, policy=policy,
                       rollout=args.share) as memory:
        engine = memory._staged("rollout move")
        for thread_id in memory.iter_thread_ids():
            if not _in_shard(thread_id, shard) or engine.desired(thread_id) != args.to:
                continue
            before = engine.placement_of(thread_id)
            try:
                after = engine.place(thread_id)
            except Exception as exc:  # one bad thread never stops the run; counted
                failed += 1
                print(f"memshift: {thread_id!r}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            if before is None or before.backend != after.backend:
                moved += 1
            else:
                stayed += 1
    result = {"to": args.to, "share": args.share, "shard": args.shard, "moved": moved,
              "already_there": stayed, "failed": failed}
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"moved {moved} thread(s) to {args.to}; {stayed} already there; {failed} failed")
    return 1 if failed else 0


def add_rollout_parser(sub: Any, add_policy_args: Any, policy_of: Any) -> None:
    ro = sub.add_parser("rollout", help="staged cutover: placements and eager moves")
    rsub = ro.add_subparsers(dest="rollout_command", required=True)
    st = rsub.add_parser("status", help="threads per backend, pins, moves")
    st.add_argument("--store", required=True, help="store URL")
    st.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    add_policy_args(st)
    st.set_defaults(func=lambda args: cmd_status(args, policy_of(args)))
    mv = rsub.add_parser("move", help="move a cohort now instead of at first touch")
    mv.add_argument("--to", required=True, choices=["classic", "middleware"])
    mv.add_argument("--share", required=True, type=float,
                    help="the rollout share to apply, in [0, 1]")
    mv.add_argument("--store", required=True, help="store URL")
    mv.add_argument("--shard", help="I/N: only this shard of the threads (stable hash)")
    mv.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    add_policy_args(mv)
    mv.set_defaults(func=lambda args: cmd_move(args, policy_of(args)))
