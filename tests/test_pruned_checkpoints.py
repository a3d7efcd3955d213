"""Time travel that never lies: a checkpoint a listing handed out and retention pruned since
is refused with ``CheckpointPruned`` — naming retention and ``keep_checkpoints`` — on
``get_tuple``, ``invoke(None, config)`` and ``update_state``, never ``None`` and never a fork
that starts an empty conversation; ids the saver never wrote still read as ``None`` (what
LangGraph's conformance suite asks)."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import HumanMessage

from compat import CheckpointPruned, MemoryPolicy, SummaryMemory
from tests.test_checkpointer_ops import _agent, _model, cfg


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, fresh_store) -> str:
    return fresh_store(request.param)


def test_a_pruned_checkpoint_is_refused_by_name(url: str) -> None:
    memory = SummaryMemory(llm=_model(), store=url, backend="middleware",
                           policy=MemoryPolicy(max_tokens=200, keep_tokens=80))
    agent, tid = _agent(memory), "tt"
    agent.invoke({"messages": [HumanMessage("question 0")]}, cfg(tid))
    old = list(agent.get_state_history(cfg(tid)))[-1].config  # the oldest listed
    for i in range(1, 12):  # later turns: retention prunes the first turn
        agent.invoke({"messages": [HumanMessage(f"question {i} " + "x " * 20)]}, cfg(tid))
    with pytest.raises(CheckpointPruned) as caught:
        memory.checkpointer.get_tuple(old)
    assert "keep_checkpoints" in str(caught.value) and "retention" in str(caught.value)
    with pytest.raises(CheckpointPruned):
        agent.invoke(None, old)
    with pytest.raises(CheckpointPruned):
        agent.update_state(old, {"messages": [HumanMessage("fork")]})
    live = agent.get_state(cfg(tid)).values["messages"]
    assert any("question 11" in m.text for m in live)  # the thread itself is untouched
    # never written: None, as every saver answers
    unknown = cfg(tid, checkpoint_ns="", checkpoint_id=str(uuid.uuid4()))
    assert memory.checkpointer.get_tuple(unknown) is None
    assert memory.checkpointer.get_tuple(cfg("nobody", checkpoint_ns="",
                                             checkpoint_id=old["configurable"]["checkpoint_id"])) is None
    memory.close()
