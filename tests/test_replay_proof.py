"""Honest proof: ``memshift replay --store`` replays with the policy the app recorded — the
stock prompt when that is what it recorded, the counter it names — or refuses, naming what is
missing and how to supply it; and every output (terminal, JSON, HTML) says at the top which
summarizer, prompt, counter and policy it proved, and what it substituted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory
from compat.testing.conversations import filler_turn
from tests._cli import run_memshift
from tests.conftest import ROOT

CONVERSATION = str(ROOT / "examples" / "conversations" / "lance_49ers.jsonl")


def _seed(url: str, policy: MemoryPolicy) -> None:
    with SummaryMemory(store=url, policy=policy) as memory:
        for i in range(8):
            memory.save("u1", *filler_turn("u1", i, 12))


def _stock_policy() -> MemoryPolicy:
    return MemoryPolicy.stock(max_token_limit=200)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_replay_follows_the_recorded_stock_prompt(fresh_store, kind: str,
                                                  tmp_path: Path) -> None:
    url = fresh_store(kind)
    recorded = _stock_policy()
    _seed(url, recorded)
    html = tmp_path / "r.html"
    done = run_memshift("replay", CONVERSATION, "--store", url, "--json", "--report", str(html))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    result = json.loads(done.stdout)
    proof = result["proved_with"]
    assert proof["prompt"].startswith(recorded.prompt_version)  # stock's prompt, as recorded
    assert "stock" in proof["prompt"]
    assert proof["substitutions"] == []
    assert proof["summarizer"] and proof["token_counter"] and proof["policy"]
    page = html.read_text()
    head = page[:page.index("</header>")]
    for value in (recorded.prompt_version, proof["summarizer"], proof["token_counter"]):
        assert value in head  # stated at the top of the report
    text = run_memshift("replay", CONVERSATION, "--store", url).stdout
    top = "\n".join(text.splitlines()[:12])
    assert "proved with" in top and recorded.prompt_version in top


def test_a_recorded_counter_this_command_cannot_load_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"

    def app_counter(messages: list) -> int:  # the app's own function: not loadable by name
        return sum(len(str(m.content)) // 3 for m in messages)

    _seed(url, MemoryPolicy(max_tokens=200, keep_tokens=100, token_counter=app_counter))
    refused = run_memshift("replay", CONVERSATION, "--store", url)
    assert refused.returncode == 2
    assert "app_counter" in refused.stderr and "--token-counter" in refused.stderr
    # supplied explicitly: it runs, and says what it substituted, at the top
    done = run_memshift("replay", CONVERSATION, "--store", url, "--token-counter",
                        "approximate", "--policy-override", "--json")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    proof = json.loads(done.stdout)["proved_with"]
    assert any("app_counter" in s for s in proof["substitutions"])


def test_an_unknown_recorded_prompt_is_refused_unless_supplied(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    custom = ("Summarize for the support desk.\n\nCurrent summary:\n{summary}\n\n"
              "New lines of conversation:\n{new_lines}\n\nNew summary:")
    policy = MemoryPolicy(max_tokens=200, keep_tokens=100, summary_prompt=custom)
    _seed(url, policy)
    refused = run_memshift("replay", CONVERSATION, "--store", url)
    assert refused.returncode == 2 and "--summary-prompt" in refused.stderr
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(custom)
    done = run_memshift("replay", CONVERSATION, "--store", url, "--summary-prompt", str(prompt),
                        "--json")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    proof = json.loads(done.stdout)["proved_with"]
    assert proof["prompt"].startswith(policy.prompt_version) and proof["substitutions"] == []
