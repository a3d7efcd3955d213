"""Migrate a classic SQLite store to the middleware backend on PostgreSQL, then let
create_agent continue the same threads.

    python examples/migrate_classic_to_agent.py [TARGET_STORE_URL]

TARGET_STORE_URL defaults to $MEMSHIFT_EXAMPLE_PG_DSN, else a second SQLite file.
Runs offline: the summarizer is memshift's deterministic one, the agent model a fake.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
import warnings

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from compat import MemoryPolicy, SummaryMemory
from compat.migration import migrate
from compat.testing import EchoChatModel

warnings.filterwarnings("ignore")
POLICY = MemoryPolicy(max_tokens=200, keep_tokens=100)


def main() -> int:
    workdir = tempfile.mkdtemp(prefix="memshift-example-")
    target_url = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MEMSHIFT_EXAMPLE_PG_DSN")
                  or f"sqlite:///{workdir}/agent.db")

    run = f"tenant-{uuid.uuid4().hex[:6]}"  # fresh threads on every run of the example

    # 1. The app as it runs today: classic memory on SQLite.
    with SummaryMemory(backend="classic", store=f"sqlite:///{workdir}/classic.db",
                       policy=POLICY) as classic:
        for user in ("alice", "bob"):
            thread = f"{run}:{user}:chat-1"
            for i in range(8):
                classic.save(thread, f"{user} question {i}: my favourite number is {i * 7}, and "
                                     f"I would like you to remember it for the rest of this chat.",
                             f"Noted, {user}: your favourite number is now {i * 7}. I will keep "
                             f"that in mind when we talk about numbers later.")
        # 2. Move every thread (transcript, running summary, window) and verify it.
        with SummaryMemory(backend="middleware", store=target_url, policy=POLICY) as target:
            report = migrate(classic, target)
            print(f"migrated {len(report.migrated)} threads, verified {len(report.verified)}, "
                  f"failed {len(report.failed)} -> {target.store_url}")
            if not report.ok:
                return 1

            # 3. Cut over: create_agent continues the same threads on the same checkpointer.
            model = EchoChatModel()
            agent = create_agent(model, tools=[], middleware=[target.middleware],
                                 checkpointer=target.checkpointer)
            thread = f"{run}:alice:chat-1"
            result = agent.invoke({"messages": [HumanMessage("What was my favourite number?")]},
                                  {"configurable": {"thread_id": thread}})
            sent = model.seen[-1]
            print(f"agent saw {len(sent)} messages; the first is the summary: "
                  f"{sent[0].additional_kwargs.get('lc_source') == 'summarization'}")
            print("agent answer:", result["messages"][-1].content)
            print("transcript length after the agent turn:", len(target.transcript(thread)))
            folded = sent[0].additional_kwargs.get("lc_source") == "summarization"
            return 0 if folded and len(target.transcript(thread)) == 18 else 1


if __name__ == "__main__":
    sys.exit(main())
