"""The guard that keeps a contract suite from being thinned in silence (after
langchain-tests' ``test_no_overrides_DO_NOT_OVERRIDE``)."""

from __future__ import annotations

__all__ = ["assert_no_silent_overrides"]


def assert_no_silent_overrides(subclass: type, contract: type) -> None:
    """Every ``test_*`` of ``contract`` must reach ``subclass`` unchanged, or be replaced by a
    test marked ``pytest.mark.xfail(reason=...)``. Setting one to ``None`` or to a plain
    override fails."""
    for name in dir(contract):
        if not name.startswith("test_"):
            continue
        base, member = getattr(contract, name), getattr(subclass, name, None)
        if member is base:
            continue
        marks = getattr(member, "pytestmark", []) if member is not None else []
        assert any(m.name == "xfail" and m.kwargs.get("reason") for m in marks), (
            f"{subclass.__name__}.{name} overrides or removes the standard test "
            f"{contract.__name__}.{name}; opt out with pytest.mark.xfail(reason=...) instead")
