"""Migrate the seed tutorials' LangGraph rolling-summary graph into memshift.

The graph (``State(MessagesState)`` + ``summary: str``; over 6 messages it summarizes and
deletes all but the last 2 with ``RemoveMessage``) runs on a SqliteSaver; then
``memshift migrate --from graph`` moves its threads to the middleware backend.

    python examples/migrate_seed_graph.py
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
import warnings

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from compat import SummaryMemory

warnings.filterwarnings("ignore")


class State(MessagesState):
    summary: str


def conversation(state: State) -> dict:
    return {"messages": [AIMessage(f"Sure. ({state['messages'][-1].content})")]}


def summarize_conversation(state: State) -> dict:
    summary = state.get("summary", "")
    new = "; ".join(str(m.content) for m in state["messages"][:-2] if m.type == "human")
    return {"summary": f"{summary}; {new}" if summary else new,
            "messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}


def should_continue(state: State) -> str:
    return "summarize_conversation" if len(state["messages"]) > 6 else END


def main() -> int:
    workdir = tempfile.mkdtemp(prefix="memshift-graph-")
    graph_db, target_db = f"{workdir}/graph.db", f"sqlite:///{workdir}/memshift.db"
    builder = StateGraph(State)
    builder.add_node("conversation", conversation)
    builder.add_node("summarize_conversation", summarize_conversation)
    builder.add_edge(START, "conversation")
    builder.add_conditional_edges("conversation", should_continue)
    builder.add_edge("summarize_conversation", END)
    graph = builder.compile(checkpointer=SqliteSaver(sqlite3.connect(graph_db, check_same_thread=False)))
    config = {"configurable": {"thread_id": "1"}}
    for q in ["hi! I'm Lance", "what's my name?", "i like the 49ers!", "who is Nick Bosa?"]:
        graph.invoke({"messages": [HumanMessage(q)]}, config)
    state = graph.get_state(config).values
    print("graph summary:", state["summary"])
    print("graph window:", [m.content for m in state["messages"]])

    cmd = [sys.executable, "-m", "compat", "migrate", "--quiet", "--from", "graph",
           "--from-store", f"sqlite:///{graph_db}", "--to", "middleware", "--to-store", target_db]
    done = subprocess.run(cmd, capture_output=True, text=True)
    print(done.stdout.strip())
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return done.returncode

    with SummaryMemory(backend="middleware", store=target_db) as memory:
        view = memory.load("1")
        print("memshift summary:", view.summary)
        print("memshift window:", [m.content for m in view.messages])
        ok = view.summary == state["summary"] and \
            [m.content for m in view.messages] == [m.content for m in state["messages"]]
        memory.save("1", "and what team do I like?", "The 49ers.")
        print("continued:", [m.content for m in memory.load("1").messages][-2:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
