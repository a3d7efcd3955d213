"""langchain-core 2.0 readiness: ``BaseChatMessageHistory`` is deprecated (1.8.3, for removal
in 2.0). ``import compat`` and the agent path (``memory.middleware``, ``memory.checkpointer``,
``load``/``save``, ``create_agent`` runs) define and instantiate no subclass of it, and raise
no deprecation warning of memshift's own; the legacy API still gets its histories (defined
on first use). Each check runs in a fresh interpreter with a spy on the class."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SPY = textwrap.dedent("""
    import json, sys, warnings
    from langchain_core.chat_history import BaseChatMessageHistory

    defined, made = [], []

    def spy(cls, **kwargs):
        defined.append(f"{cls.__module__}.{cls.__qualname__}")
        init = cls.__init__
        def counted(self, *args, init=init, **kw):
            made.append(type(self).__qualname__)
            init(self, *args, **kw)
        cls.__init__ = counted
    BaseChatMessageHistory.__init_subclass__ = classmethod(spy)

    def ours(names):
        return [n for n in names if n.startswith(("compat", "adapters"))]

    # memshift's own deprecation warnings become errors (upstream's stay warnings)
    warnings.filterwarnings("error", category=DeprecationWarning, module="(compat|adapters)")
""")

AGENT = textwrap.dedent("""
    import asyncio
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    import compat
    from compat import MemoryPolicy, SummaryMemory
    after_import = ours(defined)

    class M(GenericFakeChatModel):
        def bind_tools(self, *a, **k): return self

    def model():
        return M(messages=iter([AIMessage("answer " + "word " * 30)] * 100))

    for store in STORES:
        memory = SummaryMemory(llm=model(), store=store, backend="middleware",
                               policy=MemoryPolicy(max_tokens=120, keep_tokens=40))
        agent = create_agent(model(), [], middleware=[memory.middleware],
                             checkpointer=memory.checkpointer)
        for i in range(4):
            agent.invoke({"messages": [HumanMessage(f"q{i} " + "word " * 30)]},
                         {"configurable": {"thread_id": "agent"}})
        async def go():
            await agent.ainvoke({"messages": [HumanMessage("async q")]},
                                {"configurable": {"thread_id": "agent"}})
            await memory.asave("direct-async", "q", "a")
            return await memory.aload("direct-async")
        asyncio.run(go())
        for i in range(4):
            memory.save("direct", f"q{i} " + "word " * 30, "a " + "word " * 30)
        assert memory.load("direct").folds >= 1
        assert memory.load("agent").messages
        memory.close()
    print(json.dumps({"import": after_import, "defined": ours(defined), "made": made}))
""")


def _run(script: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_and_agent_path_define_no_chat_history_subclass(tmp_path: Path,
                                                              pg_url: str) -> None:
    stores = ["memory", f"sqlite:///{tmp_path}/a.db", pg_url]
    seen = _run(SPY + f"STORES = {stores!r}\n" + AGENT)
    assert seen == {"import": [], "defined": [], "made": []}


def test_the_legacy_api_defines_its_histories_on_first_use(tmp_path: Path) -> None:
    script = SPY + textwrap.dedent(f"""
        from compat import SummaryMemory
        assert ours(defined) == []
        memory = SummaryMemory(store="sqlite:///{tmp_path}/l.db", backend="classic",
                               thread_id="t")
        memory.save("t", "hello", "hi")
        history = memory.chat_history("t")
        assert [m.content for m in memory.chat_memory.messages] == ["hello", "hi"]
        from compat import MemshiftChatHistory
        assert isinstance(history, MemshiftChatHistory)
        assert [m.content for m in history.messages] == ["hello", "hi"]
        print(json.dumps({{"defined": ours(defined)}}))
    """)
    assert sorted(_run(script)["defined"]) == [
        "adapters.backends.classic_memory.StepWindow", "compat._histories.MemshiftChatHistory",
        "compat._histories.WindowHistory"]


@pytest.mark.parametrize("old", ["compat._stock", "compat.history"])
def test_old_import_paths_still_find_the_histories(old: str) -> None:
    script = textwrap.dedent(f"""
        import warnings
        warnings.simplefilter("ignore")
        import importlib, compat
        module = importlib.import_module({old!r})
        print(module.MemshiftChatHistory.__module__, module.WindowHistory.__module__)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["compat._histories", "compat._histories"]
