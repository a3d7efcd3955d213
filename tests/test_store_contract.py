"""The store conformance suite over memshift's stores and one written outside the package."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapters import open_store
from adapters.stores.base import CAPABILITIES, Store
from compat.testing import StoreContract
from tests.shelf_store import ShelfStore


class TestMemshiftStores(StoreContract):
    @pytest.fixture(params=["memory", "sqlite", "postgres"])
    def store(self, request: pytest.FixtureRequest, fresh_store: Any) -> Iterator[Store]:
        store = open_store(fresh_store(request.param))
        yield store
        store.close()


class TestAThirdPartyStore(StoreContract):
    """A ``shelve`` store with no checkpoints: the classic backend only, reported as such."""

    @pytest.fixture
    def store(self, tmp_path: Any) -> Iterator[Store]:
        store = ShelfStore(str(tmp_path / "memory.shelf"))
        yield store
        store.close()

    @pytest.fixture
    def capabilities(self) -> set[str]:
        return set(CAPABILITIES) - {"checkpoints"}


def test_a_store_without_checkpoints_refuses_the_middleware_backend_by_name(tmp_path: Any) -> None:
    from compat import ConfigError, MemoryPolicy, SummaryMemory

    policy = MemoryPolicy(max_tokens=150, keep_tokens=80)

    store = ShelfStore(str(tmp_path / "m.shelf"))
    with pytest.raises(ConfigError, match="cannot host the middleware backend"):
        SummaryMemory(backend="middleware", store=store)
    memory = SummaryMemory(backend="classic", store=store, thread_id="t", policy=policy)
    for i in range(12):  # folds and survives a reopen of the file
        memory.save_context({"input": f"question {i} " + "w " * 40}, {"output": "a " * 40})
    with pytest.raises(ConfigError, match="middleware"):
        memory.checkpointer  # noqa: B018
    folds = memory.load().folds
    store.close()
    again = SummaryMemory(backend="classic", store=ShelfStore(str(tmp_path / "m.shelf")),
                          thread_id="t", policy=policy)
    assert folds >= 1 and again.load().folds == folds and len(again.transcript("t")) == 24
