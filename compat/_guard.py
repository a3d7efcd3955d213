"""Fail loudly when the import name ``adapters`` belongs to another distribution.

PyPI has an unrelated ``adapters`` package (parameter-efficient fine-tuning). Installed
beside memshift, one overwrites the other's ``adapters/__init__.py`` and imports fail in
confusing ways; this check names the problem and the fix before anything is imported.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from pathlib import Path

__all__ = ["AdaptersConflictError", "check_adapters_package"]

_FIX = (
    "memshift's backends are imported as 'adapters', and so is the unrelated PyPI "
    "distribution 'adapters' (fine-tuning). They cannot share one environment: run "
    "'pip uninstall adapters memshift' and then 'pip install memshift' in a separate "
    "virtual environment from the one that needs the other package."
)


class AdaptersConflictError(ImportError):
    """The ``adapters`` package on the path is not memshift's (see the message for the fix)."""


def check_adapters_package() -> None:
    try:
        other = metadata.distribution("adapters")
    except metadata.PackageNotFoundError:
        other = None
    if other is not None:
        raise AdaptersConflictError(f"{_FIX} (found adapters {other.version})")
    spec = importlib.util.find_spec("adapters")
    if spec is None or not spec.submodule_search_locations:
        raise AdaptersConflictError(f"memshift's 'adapters' package is missing. {_FIX}")
    ours = any((Path(p) / "policy.py").is_file() and (Path(p) / "engine.py").is_file()
               for p in spec.submodule_search_locations)
    if not ours:
        raise AdaptersConflictError(f"'adapters' at {list(spec.submodule_search_locations)} is not memshift's. {_FIX}")
