"""A staged cutover of the bundled 213-turn, 6-thread conversation, as a team would run one.

The conversation is replayed through ``SummaryMemory(backend="staged")`` while the rollout
grows 0 → 0.5 → 1.0 (each step is a new deployment: a new memory object on the same store),
beside an untouched classic memory. Threads move to the middleware backend at their first
touch after each step; after every turn the staged view must equal the classic twin's.

    python examples/staged_cutover.py [store-url]     # default: a temporary SQLite file
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from adapters import MemoryPolicy, compare_views, open_store  # noqa: E402
from compat import SummaryMemory  # noqa: E402
from compat.conversations import iter_turns, read_messages  # noqa: E402
from compat import admin

POLICY = MemoryPolicy(max_tokens=400, keep_tokens=200)


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{tempfile.mkdtemp()}/staged.db"
    turns = list(iter_turns(read_messages(ROOT / "examples/conversations/long_multithread.jsonl")))
    store = open_store(url)
    twin = SummaryMemory(backend="classic", policy=POLICY)
    steps = [0.0, 0.5, 1.0]
    per_step = -(-len(turns) // len(steps))
    mismatches = 0
    for k, rollout in enumerate(steps):
        memory = SummaryMemory(backend="staged", store=store, rollout=rollout, policy=POLICY)
        for turn in turns[k * per_step:(k + 1) * per_step]:
            memory.save_messages(turn.thread_id, turn.messages)
            twin.save_messages(turn.thread_id, turn.messages)
            diffs = compare_views(memory.load(turn.thread_id), twin.load(turn.thread_id))
            if diffs:
                mismatches += 1
                print(f"MISMATCH {turn.thread_id}: {diffs[0]}")
        threads = sorted({t.thread_id for t in turns})
        on = {b: sum(admin.placement(memory, t).backend == b for t in threads
                     if admin.placement(memory, t) is not None) for b in ("classic", "middleware")}
        print(f"rollout {rollout:.1f}: {on['classic']} thread(s) on classic, "
              f"{on['middleware']} on middleware, {memory.backend_impl.moves} moved")
    print(f"turns: {len(turns)}  mismatches with the classic twin: {mismatches}")
    print("RESULT: " + ("EQUIVALENT" if not mismatches else "DIVERGED"))
    store.close()
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
