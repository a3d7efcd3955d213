"""A turn the facade builds (``as_turn``, ``as_messages``) is new objects nobody else holds:
the store keeps them without copying again, and nothing else ever gets them. Anything else
handed to the engine is still copied. ``new_message`` equals LangChain's constructor."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

import adapters.view
import adapters.stores.memory
import compat._turns
from adapters import DeterministicSummarizer, MemoryPolicy
from adapters.errors import SummarizerError
from adapters.view import OwnedTurn, new_message
from compat import SummaryMemory
from compat._turns import as_messages, as_turn
from compat.testing.conversations import FlakySummarizer, filler_turn

TEXTS = ["", "hi", "  spaced  ", "naïve café", "中文消息", "emoji 🎉", "line\nbreak", "x" * 5000]


@pytest.mark.parametrize("cls", [HumanMessage, AIMessage, SystemMessage])
@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_new_message_equals_the_constructor(cls: type[BaseMessage], text: str) -> None:
    made, real = new_message(cls, text), cls(content=text)
    assert type(made) is cls and made == real
    assert made.__dict__ == real.__dict__
    assert made.model_fields_set == real.model_fields_set
    assert made.__pydantic_extra__ == real.__pydantic_extra__
    assert made.__pydantic_private__ == real.__pydantic_private__
    assert made.model_dump() == real.model_dump()
    assert cls.model_validate(made.model_dump()) == made


def test_new_messages_share_no_container_with_each_other_or_the_prototype() -> None:
    first, second = new_message(AIMessage, "a"), new_message(AIMessage, "b")
    for key, value in first.__dict__.items():
        if isinstance(value, (list, dict)):
            assert value is not second.__dict__[key]
            value.append("x") if isinstance(value, list) else value.update(x=1)
    assert new_message(AIMessage, "c") == AIMessage(content="c")  # prototype untouched
    assert second == AIMessage(content="b")


def test_as_turn_and_as_messages_are_owned_copies() -> None:
    human, ai = HumanMessage("q", id="h"), AIMessage("a", additional_kwargs={"k": [1]})
    turn = as_turn(human, ai)
    assert type(turn) is OwnedTurn and turn == [human, ai]
    assert all(a is not b for a, b in zip(turn, (human, ai), strict=True))
    turn[1].additional_kwargs["k"].append(2)
    assert ai.additional_kwargs == {"k": [1]}
    listed = as_messages([human, ai])
    assert type(listed) is OwnedTurn and listed[0] is not human


def _count(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every message copy the save path can make: the facade's, the engine's, the store's."""
    calls: list[str] = []

    def spy(module: Any, name: str) -> None:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a: (calls.append(name), real(*a))[1])
    spy(compat._turns, "detach")
    spy(adapters.view, "with_id")  # the engine's fresh ids (adapters.view.fresh_ids)
    spy(adapters.stores.memory, "_copy")
    return calls


def test_a_text_turn_is_stored_without_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    calls = _count(monkeypatch)
    memory.save_context({"input": "q", "thread_id": "t"}, {"output": "a"})
    memory.save("t", "q2", "a2")
    assert calls == []
    store = memory._rt.store
    window, log = store.classic._windows["t"].messages, store._transcripts["t"]
    assert all(w is t for w, t in zip(window, log, strict=True))
    ids = [m.id for m in window]
    assert len(set(ids)) == 4 and all(uuid.UUID(i).version == 4 for i in ids)
    loaded = memory.load("t").messages
    loaded[0].content = "tampered"  # a loaded view is still the caller's own copy
    assert [m.content for m in memory.load("t").messages] == ["q", "a", "q2", "a2"]


def test_a_message_turn_is_copied_once_and_the_callers_messages_stay_theirs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    human, ai = HumanMessage("q"), AIMessage("a", id="a-1")
    calls = _count(monkeypatch)
    memory.save("t", human, ai)
    assert calls == ["detach", "detach"]  # the facade's copies; no second copy in the store
    assert human.id is None and ai.id == "a-1"  # the id was set on memshift's copy only
    window = memory._rt.store.classic._windows["t"].messages
    assert window[0] is not human and window[1] is not ai and window[1].id == "a-1"
    human.content = "edited by the caller"
    assert memory.load("t").messages[0].content == "q"
    memory.save("t", HumanMessage("q3"), AIMessage("again", id="a-1"))  # a reused id: renewed
    ids = [m.id for m in memory.load("t").messages]
    assert len(set(ids)) == 4 and ids[1] == "a-1"


def test_a_plain_list_handed_to_the_engine_is_copied() -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    human = HumanMessage("q")
    stored = memory.backend_impl.save("t", [human])
    assert human.id is None and stored[0].id is not None and stored[0] is not human
    held = memory._rt.store.classic._windows["t"].messages[0]
    assert held is not human and held is not stored[0]


def test_a_retried_owned_turn_is_still_a_no_op() -> None:
    memory = SummaryMemory(backend="classic", store="memory")
    turn = [HumanMessage("q", id="q-1"), AIMessage("a", id="a-1")]
    memory.save_messages("t", turn)
    memory.save_messages("t", turn)
    assert [m.id for m in memory.transcript("t")] == ["q-1", "a-1"]


def test_the_legacy_history_and_the_shadow_candidate_get_plain_lists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.chat_history import InMemoryChatMessageHistory

    history = InMemoryChatMessageHistory()
    memory = SummaryMemory(backend="classic", chat_memory=history, legacy_write=True)
    memory.save_context({"input": "q"}, {"output": "a"})
    held = memory._rt.store.classic._windows[memory.thread_id or memory._rt.private_thread].messages
    assert [m.content for m in history.messages] == ["q", "a"]
    assert all(h is not w for h, w in zip(history.messages, held, strict=True))
    history.messages[0].content = "edited in the legacy history"
    assert memory.load().messages[0].content == "q"

    # the primary stores the turn, then its fold raises: the candidate still gets the turn
    policy = MemoryPolicy(max_tokens=60, keep_tokens=30, on_summary_error="raise",
                          summary_retries=0)
    shadow = SummaryMemory(backend="shadow", policy=policy)
    shadow.backend_impl.primary.summarizer = FlakySummarizer(DeterministicSummarizer())
    seen: list[type] = []
    candidate = shadow.backend_impl.candidate_backend
    real = candidate.save
    monkeypatch.setattr(candidate, "save", lambda tid, turn, fold=True: (
        seen.append(type(turn)), real(tid, turn, fold))[1])
    with pytest.raises(SummarizerError):
        for i in range(6):
            shadow.save("t", *filler_turn("t", i, 8))
    shadow.backend_impl.drain(10)
    assert len(seen) == i + 1 and set(seen) == {list}


def test_a_class_that_needs_more_than_content_takes_its_constructor() -> None:
    from langchain_core.messages import ToolMessage

    from adapters.view import _PROTOTYPES

    with pytest.raises(Exception) as ours:  # ToolMessage needs a tool_call_id
        new_message(ToolMessage, "result")
    with pytest.raises(type(ours.value)):  # the constructor's own error, not a new one
        ToolMessage(content="result")
    assert _PROTOTYPES[ToolMessage] is None

    class Tagged(HumanMessage):
        tags: list[str] = ["default"]
    made = new_message(Tagged, "hi")
    assert made == Tagged(content="hi") and made.tags == ["default"]
    made.tags.append("x")
    assert new_message(Tagged, "again").tags == ["default"]  # never a shared default
