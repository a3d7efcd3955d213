"""``memshift codemod`` names every memory that will raise ``ThreadIdRequired`` on its first
call once ``MEMSHIFT_STORE`` names a persistent store (issue 40 item 3): each construction
with no ``thread_id=`` whose uses in the file carry no thread id, with the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.codemod import codemod_source
from tests._cli import run_memshift

IMPORT = "from langchain_classic.memory import ConversationSummaryBufferMemory\n"


def _sites(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in codemod_source(source, "app.py").findings
            if f.kind == "thread-id"]


@pytest.mark.parametrize("body", [
    # a stock memory used without a thread id
    "m = ConversationSummaryBufferMemory(llm=None)\n"
    "m.save_context({'input': 'q'}, {'output': 'a'})\n",
    # built and handed back: no call in this file carries a thread id
    "def build(llm):\n    return ConversationSummaryBufferMemory(llm=llm)\n",
    # built inside a chain
    "chain = ConversationChain(llm=llm, memory=ConversationSummaryBufferMemory(llm=llm))\n"
    "chain.invoke({'input': 'q'})\n",
    # a chain whose calls carry no thread id
    "memory = ConversationSummaryBufferMemory(llm=llm)\n"
    "chain = ConversationChain(llm=llm, memory=memory)\n"
    "chain.predict(input='q')\n",
    # some calls carry it, one does not
    "m = ConversationSummaryBufferMemory(llm=None)\n"
    "m.save_context({'input': 'q', 'thread_id': t}, {'output': 'a'})\n"
    "m.load_memory_variables({})\n",
    # on an attribute
    "class Bot:\n    def __init__(self, llm):\n"
    "        self.memory = ConversationSummaryBufferMemory(llm=llm, max_token_limit=500)\n"
    "    def ask(self, q):\n        return self.memory.load_memory_variables({'input': q})\n",
])
def test_a_memory_whose_calls_carry_no_thread_id_is_named(body: str) -> None:
    source = IMPORT + "from langchain_classic.chains import ConversationChain\n" + body
    sites = _sites(source)
    built = next(i for i, line in enumerate(source.splitlines(), 1)
                 if "ConversationSummaryBufferMemory(" in line)
    assert [line for line, _ in sites] == [built], sites
    message = sites[0][1]
    assert "MEMSHIFT_STORE" in message and "ThreadIdRequired" in message
    assert "thread_id=" in message and "for_thread" in message and "'thread_id'" in message


@pytest.mark.parametrize("body", [
    "m = ConversationSummaryBufferMemory(llm=None, thread_id='default')\n"
    "m.save_context({'input': 'q'}, {'output': 'a'})\n",
    "m = ConversationSummaryBufferMemory(llm=None)\n"
    "m.save_context({'input': 'q', 'thread_id': t}, {'output': 'a'})\n"
    "m.load_memory_variables({'thread_id': t})\n",
    "m = ConversationSummaryBufferMemory(llm=None)\n"
    "m.for_thread(t).save_context({'input': 'q'}, {'output': 'a'})\n",
    "m = ConversationSummaryBufferMemory(llm=None, thread_key='session')\n"
    "m.save_context(dict(input='q', session=s), {'output': 'a'})\n",
    "m = ConversationSummaryBufferMemory(llm=None)\n"
    "chain = ConversationChain(llm=llm, memory=m)\n"
    "chain.invoke({'input': 'q', 'thread_id': t})\n",
    "m = ConversationSummaryBufferMemory(**settings)\n",  # cannot tell: not named
])
def test_a_memory_with_a_thread_id_is_not_named(body: str) -> None:
    source = IMPORT + "from langchain_classic.chains import ConversationChain\n" + body
    assert _sites(source) == []


def test_the_input_key_named_in_the_fix_follows_thread_key() -> None:
    source = IMPORT + ("m = ConversationSummaryBufferMemory(thread_key='session')\n"
                       "m.load_memory_variables({'input': 'q'})\n")
    [(line, message)] = _sites(source)
    assert line == 2 and "'session'" in message and "line 3" in message


@pytest.mark.parametrize("source", [
    "from langchain_classic.memory import ConversationSummaryBufferMemory as Memory\n"
    "m = Memory()\n",
    "from compat import SummaryMemory as ConversationSummaryBufferMemory\n"
    "m = ConversationSummaryBufferMemory()\n",
    "import langchain_classic.memory as lcm\nm = lcm.ConversationSummaryBufferMemory()\n",
    "import compat\nm = compat.SummaryMemory()\n",
])
def test_every_spelling_of_the_class_is_named_before_and_after_the_rewrite(source: str) -> None:
    assert [line for line, _ in _sites(source)] == [2]
    rewritten = codemod_source(source).new_source
    assert [line for line, _ in _sites(rewritten)] == [2]


def test_persistent_store_findings_are_kept_and_not_doubled() -> None:
    source = IMPORT + ("m = ConversationSummaryBufferMemory(store='sqlite:///m.db')\n"
                       "m.save_context({'input': 'q'}, {'output': 'a'})\n")
    assert [line for line, _ in _sites(source)] == [2, 3]


def test_the_json_report_names_each_site(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        IMPORT + "def build(llm):\n    return ConversationSummaryBufferMemory(llm=llm)\n")
    doc = json.loads(run_memshift("codemod", str(tmp_path), "--json", check=0).stdout)
    [site] = [f for f in doc["findings"] if f["kind"] == "thread-id"]
    assert Path(site["path"]).name == "app.py" and site["line"] == 3
    assert "thread_id=" in site["message"]
