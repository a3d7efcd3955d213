"""The seed's LCEL chain, unchanged, with memshift as its memory; the backend is a flag.

    MEMSHIFT_BACKEND=middleware python examples/lcel_dropin.py

Only the memory constructor changed from ``ConversationSummaryBufferMemory(llm=...,
max_token_limit=...)``. Runs offline (fake chat model, offline summarizer).
"""

from __future__ import annotations

import sys
import warnings
from operator import itemgetter

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from compat import SummaryMemory
from compat.testing import EchoChatModel

warnings.filterwarnings("ignore")


def main() -> int:
    memory = SummaryMemory(max_token_limit=120, return_messages=True)  # was ConversationSummaryBufferMemory
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are a helpful assistant."),
        MessagesPlaceholder("history"),
        ("human", "{query}"),
    ])
    chat_llm = EchoChatModel()
    chain = (
        RunnablePassthrough.assign(
            history=RunnableLambda(memory.load_memory_variables) | itemgetter("history"))
        | prompt | chat_llm | StrOutputParser()
    )
    for thread in ("tenant-1:user-42:chat-1001", "tenant-1:user-7:chat-3"):
        for i in range(6):
            chain_input = {"query": f"({thread}) question {i}: please remember the number {i * 9}.",
                           "thread_id": thread}
            answer = chain.invoke(chain_input)
            memory.save_context(chain_input, {"output": answer})
    for thread in ("tenant-1:user-42:chat-1001", "tenant-1:user-7:chat-3"):
        view = memory.load(thread)
        print(f"{memory.backend_name} {thread}: {view.folds} folds, {len(view.messages)} verbatim "
              f"messages, {len(memory.transcript(thread))} in the transcript")
    leaked = any("user-7" in str(m.content) for m in memory.load("tenant-1:user-42:chat-1001").as_messages())
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())
