"""``MemoryPolicy(keep_specifics=True)``: the numbers, ids, paths, URLs and e-mails a summarizer
dropped are carried verbatim after the summary (``adapters.ledger``), corrected by the user's
later messages, bounded, erased with what they came from — on both backends alike."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from adapters import ledger
from adapters.errors import ConfigError
from adapters.specifics import specifics
from compat import MemoryPolicy, SummaryMemory
from compat.fidelity import run_fidelity

POLICY = dict(max_tokens=120, keep_tokens=60)


class Vague:
    """A summarizer that keeps the gist and drops every specific (a small model's habit);
    records what it was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def summarize(self, summary: str, messages: Sequence[BaseMessage]) -> str:
        self.sent.append(summary)
        words = [w for m in messages for w in str(m.content).split() if not specifics(w)
                 and not re.search(r"\d", w)]
        return ("The conversation covered: " + " ".join(words[:40]) + ".")


def _memory(backend: str, summarizer: object, **policy: object) -> SummaryMemory:
    return SummaryMemory(backend=backend, policy=MemoryPolicy(**{**POLICY, **policy}),
                         summarizer=summarizer)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_with_a_summarizer_that_drops_every_specific_the_ledger_keeps_them_all(
        language: str) -> None:
    """The fidelity set through both backends: every planted number, date, identifier, path,
    URL and e-mail is kept at every fold depth; without the ledger the same summarizer's
    folds keep fewer."""
    with_ledger = run_fidelity(summarizer=Vague(), languages=(language,),
                               keep_specifics=True)[0]
    assert with_ledger.backends_agree
    # names and decisions are not specifics: this summarizer's gist keeps what it keeps
    lost = [m for m in with_ledger.missing if m.split("@")[0] not in ("name", "decision")]
    assert lost == [], with_ledger.missing
    assert with_ledger.prompt_tokens <= 0.5 * with_ledger.full_tokens
    assert max(with_ledger.folds.values()) >= 8
    bare = run_fidelity(summarizer=Vague(), languages=(language,))[0]
    assert bare.facts_kept["classic"] < with_ledger.facts_kept["classic"]


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_the_summarizer_never_sees_the_ledger_and_a_lost_specific_is_carried(
        backend: str) -> None:
    vague = Vague()
    with _memory(backend, vague, keep_specifics=True) as memory:
        memory.save("t", "The config lives at /etc/ledgerd/shards.toml and the ticket is "
                         "INC-70412.", "Noted.")
        for i in range(8):
            memory.save("t", f"Let us talk about the weather, part {i}, for a while longer.",
                        "Sure, the weather is pleasant today and tomorrow too.")
        view = memory.load("t")
        assert view.folds >= 2
        assert "/etc/ledgerd/shards.toml" in view.summary and "INC-70412" in view.summary
        assert ledger.HEADER in view.summary
        assert not any(ledger.HEADER in sent for sent in vague.sent)


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_a_later_correction_by_the_user_corrects_the_ledger_and_the_models_does_not(
        backend: str) -> None:
    with _memory(backend, Vague(), keep_specifics=True) as memory:
        memory.save("t", "The budget is 42000 euros for the migration.", "Noted.")
        memory.save("t", "The replica is db-07.", "Noted, db-07.")
        for i in range(3):
            memory.save("t", f"Some chatter about lunch plans, round {i} of it.", "Fine.")
        memory.save("t", "Actually the budget is 48500 euros, not 42000.", "Understood.")
        memory.save("t", "What a nice day.", "Not db-07, I think it was something else.")
        for i in range(6):
            memory.save("t", f"More chatter about the weekend, round {i} of it.", "Fine.")
        summary = memory.load("t").summary
        _, lines = ledger.split(summary)
        assert any("48500" in line for line in lines), summary
        assert not any("42000" in line for line in lines), summary
        assert any("db-07" in line for line in lines), summary  # the model's "not" is not the user's


def test_the_ledger_stays_within_its_bound_dropping_the_oldest_first() -> None:
    with _memory("classic", Vague(), keep_specifics=True, max_specifics_tokens=60) as memory:
        for i in range(30):
            memory.save("t", f"Host number {i} is at 10.0.{i}.{i * 3} with id HOST-{1000 + i}.",
                        "Noted.")
        summary = memory.load("t").summary
        _, lines = ledger.split(summary)
        policy = memory.active_policy
        assert lines and policy.count([HumanMessage(summary[summary.index(ledger.HEADER):])]) <= 70
        assert any("HOST-10" in line for line in lines)  # the newest folded host is there
        assert not any("HOST-1000" in line for line in lines)  # the oldest is gone


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_keep_specifics_takes_a_bool_only(value: object) -> None:
    with pytest.raises(ConfigError, match="keep_specifics"):
        MemoryPolicy(**POLICY, keep_specifics=value)  # type: ignore[arg-type]


def test_the_bound_is_checked_and_recorded_with_the_switch() -> None:
    with pytest.raises(ConfigError, match="max_specifics_tokens"):
        MemoryPolicy(**POLICY, keep_specifics=True, max_specifics_tokens=0)
    assert "keep_specifics" not in MemoryPolicy(**POLICY).recorded()
    recorded = MemoryPolicy(**POLICY, keep_specifics=True, max_specifics_tokens=99).recorded()
    assert recorded["keep_specifics"] is True and recorded["max_specifics_tokens"] == 99


@pytest.mark.parametrize("backend", ["classic", "middleware"])
def test_forget_match_erases_a_ledger_line_from_every_byte_of_the_store(
        backend: str, tmp_path) -> None:
    from compat import admin
    from tests.test_forget import _found

    url = f"sqlite:///{tmp_path / 'm.db'}"
    secret = "ZEBRA-7731-PASSPORT"
    with SummaryMemory(backend=backend, store=url, summarizer=Vague(),
                       policy=MemoryPolicy(**POLICY, keep_specifics=True)) as memory:
        memory.save("alice", f"My passport number is {secret}.", "Noted.")
        memory.save("alice", "The ticket is INC-70412.", "Noted.")
        for i in range(6):
            memory.save("alice", f"Chatter about the weather, round {i} of it.", "Fine.")
        assert secret in memory.load("alice").summary  # carried by the ledger
        admin.forget(memory, "alice", secret)
        summary = memory.load("alice").summary
        assert secret not in summary and "INC-70412" in summary
    assert not _found(url, secret)
