"""Fail-closed folds (``MemoryPolicy.check_summaries``, ``adapters.fold_check``): a reply that is
no summary — empty, blank, the prompt or the previous summary echoed, a refusal, over the output
cap, too short, or dropping the folded text's numbers, ids, paths, URLs and e-mails — replaces
nothing on either backend or inside ``create_agent``: the window stays verbatim, the fold
record names the reason, the metrics and the log say "rejected" without the text, the fold is
retried after its backoff, and ``doctor`` reports the thread. ``check_summaries=False`` stores
what the summarizer returns, as before."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from adapters import MemoryPolicy
from adapters.extractive import ExtractiveSummarizer
from adapters.fold_check import REJECTED, specifics, verdict
from adapters.policy_prompt import DEFAULT_SUMMARY_PROMPT
from langchain_classic.memory.prompt import SUMMARY_PROMPT as STOCK_PROMPT
from compat import SummaryMemory, admin

TURNS = 6
STORES = ["memory", "sqlite"]


def turn(i: int) -> tuple[str, str]:
    """A turn full of specifics: an id, numbers, a path, a URL and an e-mail."""
    return (f"Ticket INV-{1000 + i}: order {5000 + i} failed, the log is /srv/app/logs/run{i}.log "
            f"and the page https://shop.example.com/orders/{5000 + i}; write to ops{i}@example.com.",
            f"Noted INV-{1000 + i}: order {5000 + i} ships in {10 + i} days once the retry of "
            f"job_{i}_sync passes.")


def _policy(**kw: Any) -> MemoryPolicy:
    """Folds every few turns; no fallback (the window is what is looked at)."""
    base: dict[str, Any] = {"max_tokens": 200, "keep_tokens": 80, "summary_retries": 0,
                            "retry_backoff": 0, "max_failed_folds": None}
    return MemoryPolicy(**{**base, **kw})


def _echo_prompt(summary: str, messages: Any) -> str:
    lines = "\n".join(f"{m.type}: {m.text}" for m in messages)
    return DEFAULT_SUMMARY_PROMPT.replace("{summary}", summary).replace("{new_lines}", lines)


def _one_line_echoed(summary: str, messages: Any) -> str:
    """What SmolLM2-135M replied to memshift's prompt: one instruction line, then the
    conversation copied (every specific kept, so only the echo rule catches it)."""
    return ("Keep names, numbers, decisions, constraints, corrections (the later statement "
            "wins) and open tasks.\n" + "\n".join(f"{m.type}: {m.text}" for m in messages))


VAGUE = "The user and the assistant went over some tickets, orders, log files, links and mail."
BAD: dict[str, Any] = {  # reason -> the reply (summary, messages) -> str
    "empty": lambda s, m: "",
    "blank": lambda s, m: "  \n\t ",
    "prompt echoed": _echo_prompt,
    "one prompt line echoed": _one_line_echoed,
    "refusal": lambda s, m: "I'm sorry, I can't help with that.",
    "over cap": lambda s, m: "ramble " * 2000,
    "specifics dropped": lambda s, m: VAGUE,
}
REASON = {"blank": "empty", "one prompt line echoed": "prompt echoed"}


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield "memory" if request.param == "memory" else f"sqlite:///{tmp_path}/m.db"


def _fill(memory: SummaryMemory, tid: str = "t", turns: int = TURNS, start: int = 0) -> None:
    for i in range(start, start + turns):
        memory.save(tid, *turn(i))


def _texts(memory: SummaryMemory, tid: str = "t") -> list[str]:
    return [m.text for m in memory.load(tid).messages]


def _said(turns: int, start: int = 0) -> list[str]:
    return [text for i in range(start, start + turns) for text in turn(i)]


@pytest.mark.parametrize("store_url", STORES, indirect=True)
@pytest.mark.parametrize("backend", ["classic", "middleware"])
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_summary_replaces_nothing(case: str, backend: str, store_url: str) -> None:
    with SummaryMemory(backend=backend, store=store_url, summarizer=BAD[case],
                       policy=_policy(max_summary_tokens=600)) as memory:
        _fill(memory)
        view = memory.load("t")
        assert view.summary == "" and view.folds == 0, "a rejected summary was stored"
        assert _texts(memory) == _said(TURNS), "the window is not verbatim"
        records = admin.summary_history(memory, "t")
        assert records, "a rejected fold leaves no record"
        reason = REASON.get(case, case)
        assert all(r["error"].startswith(f"{REJECTED} ({reason})") for r in records), \
            [r["error"] for r in records]
        assert all(r["summary_tokens"] == 0 for r in records)


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_async_saves_run_the_same_checks(backend: str) -> None:
    async def run() -> None:
        memory = SummaryMemory(backend=backend, summarizer=BAD["refusal"], policy=_policy())
        for i in range(TURNS):
            await memory.asave("t", *turn(i))
        view = await memory.aload("t")
        assert view.summary == "" and [m.text for m in view.messages] == _said(TURNS)
        assert admin.summary_history(memory, "t")[-1]["error"].startswith(
            f"{REJECTED} (refusal)")
        memory.close()
    asyncio.run(run())


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_the_previous_summary_handed_back_is_rejected(backend: str) -> None:
    class Stuck:
        """A good first summary; then the previous one unchanged."""

        def summarize(self, summary: str, messages: Any) -> str:
            return summary or ExtractiveSummarizer().summarize(summary, messages)

    with SummaryMemory(backend=backend, summarizer=Stuck(), policy=_policy()) as memory:
        _fill(memory, turns=3)
        first = memory.load("t")
        assert first.folds == 1 and "INV-1000" in first.summary
        kept = _texts(memory)
        _fill(memory, turns=3, start=3)
        view = memory.load("t")
        assert (view.summary, view.folds) == (first.summary, 1)
        assert _texts(memory) == kept + _said(3, start=3)
        errors = [r["error"] for r in admin.summary_history(memory, "t")]
        assert errors[0] is None and errors[-1].startswith(f"{REJECTED} (previous echoed)")


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_a_reply_too_short_for_its_input_is_rejected(backend: str) -> None:
    long_turn = ("word " * 300, "more " * 300)
    with SummaryMemory(backend=backend, summarizer=lambda s, m: "OK",
                       policy=_policy(max_tokens=800, keep_tokens=400)) as memory:
        for _ in range(3):
            memory.save("t", *long_turn)
        assert memory.load("t").summary == ""
        assert admin.summary_history(memory, "t")[-1]["error"].startswith(
            f"{REJECTED} (too short)")


@pytest.mark.parametrize("store_url", STORES, indirect=True)
@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_a_good_summary_is_accepted(backend: str, store_url: str) -> None:
    with SummaryMemory(backend=backend, store=store_url, summarizer=ExtractiveSummarizer(),
                       policy=_policy()) as memory:
        _fill(memory)
        view = memory.load("t")
        assert view.folds >= 1 and "INV-1000" in view.summary
        assert all(r["error"] is None for r in admin.summary_history(memory, "t"))


@pytest.mark.parametrize("backend", ["classic", "middleware"])
@pytest.mark.parametrize("case", ["prompt echoed", "refusal", "specifics dropped"])
def test_check_summaries_off_stores_what_the_summarizer_returns(case: str, backend: str) -> None:
    with SummaryMemory(backend=backend, summarizer=BAD[case],
                       policy=_policy(check_summaries=False)) as memory:
        _fill(memory)
        view = memory.load("t")
        assert view.folds >= 1
        if case == "prompt echoed":
            assert "Progressively summarize" in view.summary
        else:
            assert view.summary == BAD[case]("", [])
        assert all(r["error"] is None for r in admin.summary_history(memory, "t"))
        assert admin.summary_history(memory, "t")[-1]["policy"]["check_summaries"] is False


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_empty_and_over_cap_were_failures_before_and_still_are(backend: str) -> None:
    for case in ("empty", "over cap"):
        with SummaryMemory(backend=backend, summarizer=BAD[case],
                           policy=_policy(check_summaries=False, max_summary_tokens=600)) as memory:
            _fill(memory)
            assert memory.load("t").summary == ""
            assert admin.summary_history(memory, "t")[-1]["error"].startswith(
                f"{REJECTED} ({case})")


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_the_fold_is_retried_after_its_backoff_and_then_lands(backend: str) -> None:
    class Recovering:
        def __init__(self) -> None:
            self.refuse, self.calls = True, 0

        def summarize(self, summary: str, messages: Any) -> str:
            self.calls += 1
            if self.refuse:
                return "I am sorry, but I cannot summarize this conversation."
            return ExtractiveSummarizer().summarize(summary, messages)

    summarizer = Recovering()
    with SummaryMemory(backend=backend, summarizer=summarizer,
                       policy=_policy(retry_backoff=2.0)) as memory:
        now = [1000.0]
        memory.backend_impl.clock = lambda: now[0]
        _fill(memory, turns=4)
        assert summarizer.calls == 1, "a rejected fold was retried before its backoff"
        summarizer.refuse = False
        _fill(memory, turns=1, start=4)
        assert summarizer.calls == 1 and memory.load("t").summary == ""
        now[0] += 60.0  # the backoff has passed
        _fill(memory, turns=1, start=5)
        view = memory.load("t")
        assert summarizer.calls == 2 and view.folds == 1 and "INV-1000" in view.summary
        records = admin.summary_history(memory, "t")
        assert records[0]["error"].startswith(f"{REJECTED} (refusal)")
        assert records[-1]["error"] is None
        assert len(memory.transcript("t")) == 12  # nothing lost on the way


def test_the_agent_path_rejects_too(tmp_path: Path) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage(turn(i)[1]) for i in range(50)]))
    memory = SummaryMemory(backend="middleware", store=f"sqlite:///{tmp_path}/a.db",
                           summarizer=BAD["refusal"], policy=_policy())
    agent = create_agent(model, middleware=[memory.middleware], checkpointer=memory.checkpointer)
    config = {"configurable": {"thread_id": "agent"}}
    for i in range(TURNS):
        agent.invoke({"messages": [HumanMessage(turn(i)[0])]}, config)
    state = agent.get_state(config).values
    assert [m.text for m in state["messages"]] == _said(TURNS)
    errors = [r["error"] for r in admin.summary_history(memory, "agent")]
    assert errors and all(e.startswith(f"{REJECTED} (refusal)") for e in errors)
    memory.close()


def test_postgres_keeps_the_window_and_the_reason(fresh_store: Any) -> None:
    with SummaryMemory(backend="classic", store=fresh_store("postgres"),
                       summarizer=BAD["specifics dropped"], policy=_policy()) as memory:
        _fill(memory)
        assert memory.load("t").summary == "" and _texts(memory) == _said(TURNS)
        assert admin.summary_history(memory, "t")[-1]["error"].startswith(
            f"{REJECTED} (specifics dropped)")


def test_the_log_and_the_metrics_name_the_reason_never_the_text(
        caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from adapters import telemetry

    reader = InMemoryMetricReader()
    telemetry.configure(MeterProvider(metric_readers=[reader]))
    caplog.set_level(logging.INFO, logger="memshift")
    try:
        with SummaryMemory(summarizer=lambda s, m: "Sorry, I won't do that: ZEBRA-SECRET",
                           policy=_policy()) as memory:
            _fill(memory, turns=4)
        data = reader.get_metrics_data()
    finally:
        telemetry.configure()
    failures = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                if m.name == "memshift.fold.failures" for p in m.data.data_points]
    assert failures and {p.attributes["error.type"] for p in failures} == \
        {f"{REJECTED} (refusal)"}
    said = [r.getMessage() for r in caplog.records]
    assert any(f"error={REJECTED} (refusal)" in line for line in said)
    assert not any("ZEBRA" in line for line in said)


def test_doctor_reports_a_thread_whose_folds_are_rejected(tmp_path: Path) -> None:
    from compat.doctor import diagnose

    url = f"sqlite:///{tmp_path}/d.db"
    with SummaryMemory(store=url, summarizer=BAD["refusal"], policy=_policy()) as memory:
        _fill(memory, "stuck")
    with SummaryMemory(store=url, summarizer=ExtractiveSummarizer(), policy=_policy()) as memory:
        _fill(memory, "fine")
    found = diagnose(url)
    assert found.rejected == ["stuck"] and not found.ok
    problem = next(p for p in found.problems if p["thread"] == "stuck")
    assert "rejected" in problem["what"] and "check_summaries" in problem["fix"]


def test_doctor_reports_a_window_past_the_lag_bound() -> None:
    from compat.doctor import Diagnosis, _unfolded

    found = Diagnosis(store="x")
    landed = {"error": None, "trigger": "tokens=9>8", "lag": {"landed": True}}
    late = {"error": "lag bound exceeded: ...", "trigger": "lag", "lag": {"landed": False}}
    _unfolded([landed], "fine", found)
    _unfolded([landed, late], "late", found)
    _unfolded([landed, {"error": f"{REJECTED} (refusal): x", "trigger": "t"}, late], "both",
              found)
    assert (found.lagging, found.rejected) == (["late"], ["both"])
    assert [p["thread"] for p in found.problems] == ["late", "both"]


# -- the rules on their own -------------------------------------------------------------------
def test_specifics_are_found_and_normalized() -> None:
    found = specifics("Order 1,200 for INV-7 at /srv/a/b.log, https://x.org/p/ and a@b.io; "
                      "user_id set; step 1 of src/app.py")
    assert found == {"1200", "inv-7", "/srv/a/b.log", "https://x.org/p", "a@b.io", "user_id",
                     "src/app.py"}


def test_a_summary_keeping_some_specifics_passes_and_a_full_cap_excuses_it() -> None:
    policy = _policy()
    folded = [HumanMessage(turn(i)[0]) for i in range(3)]
    assert verdict("Tickets INV-1000 and INV-1001 are open; orders wait for retries.", policy,
                   "", folded, []) is None
    rejected = verdict(VAGUE, policy, "", folded, [])
    assert rejected is not None and rejected.reason == "specifics dropped"
    assert verdict(VAGUE, policy, "", folded, folded) is None  # all still in the window
    tight = _policy(max_summary_tokens=30)  # no room left for a specific: not second-guessed
    assert verdict(VAGUE, tight, "", folded, []) is None


def test_a_summary_that_quotes_a_refusal_is_not_a_refusal() -> None:
    policy = _policy()
    folded = [AIMessage("I'm sorry, I can't share the key.")]
    assert verdict("ai: I'm sorry, I can't share the key.", policy, "", folded, []) is None
    assert verdict("The assistant said sorry and did not share the key.", policy, "",
                   folded, []) is None


def test_a_prompt_line_the_conversation_itself_holds_is_not_an_echo() -> None:
    policy = _policy()
    line = ("Leave out greetings and small talk. Do not state guesses as facts. Reply with the "
            "new summary only.")
    folded = [HumanMessage(f"Our style guide says: {line} Tickets INV-1 and INV-2.")]
    assert verdict(f"The style guide says: {line} Tickets INV-1, INV-2.", policy, "",
                   folded, []) is None
    rejected = verdict(f"{line} Tickets INV-1, INV-2.", policy, "",
                       [HumanMessage("Tickets INV-1 and INV-2.")], [])
    assert rejected is not None and rejected.reason == "prompt echoed"
    stock = _policy(summary_prompt=STOCK_PROMPT)  # stock's few-shot example copied back
    copied = ("The human asks what the AI thinks of artificial intelligence. The AI thinks "
              "artificial intelligence is a force for good. Tickets INV-1, INV-2.")
    rejected = verdict(copied, stock, "", [HumanMessage("Tickets INV-1 and INV-2.")], [])
    assert rejected is not None and rejected.reason == "prompt echoed"
