"""What the codemod takes over, read from memshift itself so that it can never rewrite to a
name the facade lacks, nor report a keyword the facade accepts."""

from __future__ import annotations

from functools import cache

__all__ = ["FACADE_MODULE", "IN_MEMORY_HISTORIES", "SOURCE_MODULES", "TAKEN_OVER",
           "accepted_keywords", "is_source_or_parent", "keyword_hint", "qualified_class",
           "sql_history"]

# classic class -> the compat name that takes it over (only what compat really provides:
# ConversationSummaryMemory and the other classic memories have no drop-in)
TAKEN_OVER = {"ConversationSummaryBufferMemory": "SummaryMemory"}
FACADE_MODULE = "compat"

# where legacy code imports the class from (langchain 0.x, langchain-classic 1.x)
SOURCE_MODULES = frozenset({
    "langchain.memory", "langchain.memory.summary_buffer",
    "langchain_classic.memory", "langchain_classic.memory.summary_buffer",
})


def is_source_or_parent(module: str) -> bool:
    """``module`` is a classic memory module or a package above one (``import langchain``
    reaches ``langchain.memory``)."""
    return any(m == module or m.startswith(module + ".") for m in SOURCE_MODULES)

# chat histories that live in the process: no thread id needed (see compat._adopt.is_persistent)
IN_MEMORY_HISTORIES = frozenset({"InMemoryChatMessageHistory", "ChatMessageHistory"})

# stock fields memshift does not take as keywords -> what to do instead
_INSTEAD = {
    "moving_summary_buffer": "set memory.moving_summary_buffer after construction (the bound "
                             "thread's running summary), or migrate the stored summary",
}


@cache
def accepted_keywords() -> frozenset[str]:
    """The keywords ``SummaryMemory(...)`` accepts: the same set its constructor checks
    (fields, their aliases and the flat config keywords); anything else raises
    ``UnknownArgumentError``."""
    from compat.config import FLAT
    from compat.memory import SummaryMemory

    fields = SummaryMemory.model_fields
    return frozenset(set(fields) | {f.alias for f in fields.values() if f.alias} | set(FLAT))


def keyword_hint(name: str) -> str:
    """What to do about a refused keyword: the stock equivalent, or the nearest accepted one."""
    if name in _INSTEAD:
        return _INSTEAD[name]
    from difflib import get_close_matches

    close = get_close_matches(name, sorted(accepted_keywords()), n=1)
    return f"did you mean {close[0]!r}?" if close else "remove it (stock ignored it silently)"


def qualified_class(chain: str | None, bindings: dict[str, str]) -> str | None:
    """The classic class a ``module.Class`` chain names through a module binding, if any
    (the scan's and the rewrite's: one rule for what a qualified use is)."""
    if chain is None or "." not in chain:
        return None
    head, _, cls = chain.rpartition(".")
    root, _, rest = head.partition(".")
    if cls not in TAKEN_OVER or root not in bindings:
        return None
    module = bindings[root] + (f".{rest}" if rest else "")
    return cls if module in SOURCE_MODULES else None


def sql_history(class_name: str) -> bool:
    """A history memshift can keep its own tables beside (it names its database)."""
    return class_name == "SQLChatMessageHistory"
