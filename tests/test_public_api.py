"""The public surface, and the guard against the unrelated PyPI ``adapters`` package."""

from __future__ import annotations

from importlib import metadata

import pytest

import adapters
import compat
from compat._guard import AdaptersConflictError, check_adapters_package


def test_public_names_are_listed_and_importable() -> None:
    for module in (compat, adapters):
        assert sorted(module.__all__) == sorted(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} listed but missing"
    for name in ("SummaryMemory", "MemoryPolicy", "MemoryView", "MemshiftError", "ThreadIdRequired",
                 "migrate", "MigrationReport", "Mismatch", "GraphSource", "ClassicHistorySource"):
        assert name in compat.__all__
    assert callable(compat.migrate) and not isinstance(compat.migrate, type(compat))


def test_error_hierarchy() -> None:
    for name in ("ConfigError", "ThreadIdRequired", "InputKeyError", "ContentError",
                 "SummarizerError", "StoreError", "UnknownArgumentError", "InvalidThreadId"):
        assert issubclass(getattr(compat, name), compat.MemshiftError)
    for name in ("ConfigError", "ThreadIdRequired", "InputKeyError", "ContentError"):
        assert issubclass(getattr(compat, name), ValueError)


def test_our_adapters_package_passes_the_guard() -> None:
    check_adapters_package()
    assert adapters.__memshift__ is True


def test_conflicting_adapters_distribution_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    class Other:
        version = "1.2.0"

    real = metadata.distribution

    def fake(name: str) -> object:
        return Other() if name == "adapters" else real(name)

    monkeypatch.setattr(metadata, "distribution", fake)
    with pytest.raises(AdaptersConflictError, match="pip uninstall adapters memshift"):
        check_adapters_package()


def test_foreign_adapters_directory_fails_loudly(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    foreign = tmp_path / "adapters"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("")
    import importlib.util

    class Spec:
        submodule_search_locations = [str(foreign)]

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: Spec())
    with pytest.raises(AdaptersConflictError, match="not memshift's"):
        check_adapters_package()
