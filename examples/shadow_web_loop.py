"""Shadow mode in a small web-style loop: classic serves, middleware is compared.

    MEMSHIFT_BACKEND=shadow MEMSHIFT_SHADOW_LOG=/tmp/shadow.jsonl python examples/shadow_web_loop.py

A request handler loads memory, calls the model, saves the turn; the shadow backend
mirrors every save to the candidate and compares on every load. With the same policy
on both sides the mismatch count is 0; pass --candidate-keep 50 to see divergences
recorded (while the served answers stay exactly the same).
"""

from __future__ import annotations

import argparse
import sys
import warnings

from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from compat import MemoryPolicy, SummaryMemory
from compat.testing import EchoChatModel

warnings.filterwarnings("ignore")


def make_handler(memory: SummaryMemory):
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are a helpful assistant."), MessagesPlaceholder("history"), ("human", "{q}")])
    chain = prompt | EchoChatModel()

    def handle(request: dict) -> dict:
        """POST /chat {"session": ..., "q": ...} -> {"answer": ...}"""
        history = memory.load(request["session"]).as_messages()
        answer = chain.invoke({"history": history, "q": request["q"]}).content
        memory.save(request["session"], request["q"], answer)
        return {"answer": answer}

    return handle


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--candidate-keep", type=int, default=None)
    args = parser.parse_args()
    policy = MemoryPolicy(max_tokens=150, keep_tokens=80)
    candidate = MemoryPolicy(max_tokens=150, keep_tokens=args.candidate_keep) \
        if args.candidate_keep else None
    memory = SummaryMemory(backend="shadow", policy=policy, candidate_policy=candidate)
    handle = make_handler(memory)
    sessions = ["web:alice", "web:bob", "web:carol"]
    for n in range(args.requests):
        handle({"session": sessions[n % 3], "q": f"request {n}: remember code {n * 11}"})
    memory.close()  # waits for the candidate's queued writes and comparisons
    print(f"backend={memory.backend_name} requests={args.requests} "
          f"comparisons={memory.backend_impl.compared} mismatches={len(memory.mismatches)}")
    return 0 if (len(memory.mismatches) == 0) == (candidate is None) else 1


if __name__ == "__main__":
    sys.exit(main())
