"""``memshift doctor``: where threads live, and every thread a path would read wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters import MemoryPolicy
from compat import SummaryMemory, cli
from compat.testing import filler_turn
from compat import admin
from tests.test_adopt import _stock_store

POLICY = MemoryPolicy(max_tokens=150, keep_tokens=80)


def _doctor(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = cli.main(["doctor", "--store", url, "--json", "--quiet"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_doctor_finds_the_thread_a_path_would_guess_and_the_fix_clears_it(
        kind: str, fresh_store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_store(kind)
    _stock_store(url, users=3, turns=2)
    with SummaryMemory(backend="classic", store=url, policy=POLICY) as memory:
        for t in ("a", "b"):
            for i in range(3):
                memory.save(t, *filler_turn(t, i, 8))
        admin.pin(memory, "b", "middleware")
        memory.load("user-0")  # one stock session adopted
        classic, middleware = memory.backend_impl.leaves()[:2]
        for leaf in (classic, middleware):  # a store written before placements existed:
            leaf.save("old", [*map(_msg, filler_turn("old", 0, 8))])  # both sides, no record
        memory.clear("a")
    code, found = _doctor(url, capsys)
    assert code == 1 and not found["ok"]
    assert found["ambiguous"] == ["old"] and found["problems"][0]["thread"] == "old"
    assert "rollout move --to <backend> --thread 'old'" in found["problems"][0]["fix"]
    assert found["placements"] == {"classic": 2, "middleware": 1}  # a, user-0 / b
    assert found["pinned"] == {"middleware": 1}
    assert found["legacy"]["message_store"] == {"sessions": 3, "adopted": 1, "not_yet": 2}
    assert found["empty"] == ["a"]
    assert found["versions"]["langgraph"] and not found["schema_problems"]
    fixed = cli.main(["rollout", "move", "--to", "middleware", "--thread", "old", "--store", url,
                      "--quiet"])
    capsys.readouterr()
    assert fixed == 0
    code, found = _doctor(url, capsys)
    assert code == 0 and found["ok"] and found["ambiguous"] == []
    assert found["placements"]["middleware"] == 2


def test_doctor_on_a_store_memshift_never_opened(tmp_path: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/stock.db"
    _stock_store(url, users=2, turns=1)
    code, found = _doctor(url, capsys)
    assert code == 1 and "no memshift tables" in found["schema_problems"][0]
    assert not (tmp_path / "stock.db.memshift-lock").exists()  # read-only: nothing created


def _msg(text: str) -> Any:
    from langchain_core.messages import HumanMessage

    return HumanMessage(text)
