"""What a LangGraph run carries in its config that memshift reads: the run's checkpointer.

Part of ``adapters._upstream`` (every private upstream detail in one package): read it when
LangGraph releases. ``CONFIG_KEY_CHECKPOINTER`` is listed in ``langgraph.constants.__all__``,
but the value under it is Pregel's own wiring (``__pregel_checkpointer``), not a documented
part of the run config: ``tests/test_upstream.py`` checks a run still carries its saver there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_checkpointer"]


def run_checkpointer() -> Any:
    """The checkpointer of the LangGraph run we are called from; ``None`` outside a run or
    where LangGraph stops naming it (callers then act as if it were another saver)."""
    from langgraph.config import get_config

    try:
        from langgraph.constants import CONFIG_KEY_CHECKPOINTER
    except ImportError:
        return None
    try:
        return get_config().get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    except RuntimeError:  # not inside a graph run
        return None
