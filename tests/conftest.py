"""Shared fixtures: the backend x store matrix the contract suite runs over."""

from __future__ import annotations

import os

import pytest

BACKENDS = ["classic", "middleware"]


def store_params() -> list:
    return ["memory"]


@pytest.fixture(params=store_params())
def store_url(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMSHIFT_BACKEND", "MEMSHIFT_STORE", "MEMSHIFT_SHADOW_SAMPLE", "MEMSHIFT_SHADOW_LOG"):
        monkeypatch.delenv(name, raising=False)
    os.environ.setdefault("MEMSHIFT_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".cache"))
